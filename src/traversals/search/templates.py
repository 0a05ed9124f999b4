"""Prompt templates: one file per prompt under ``prompts/``, grouped into prompt sets.

Templates use ``string.Template`` placeholders (``$query``). Substituted values are never
re-interpreted, so labels with ``$``, braces or quotes are safe.

A :class:`PromptSet` is what a search renders its prompts from (``--prompts``):

- ``default``: ``prompts/*.txt``. Ordered from most to least shared, so a model that caches
  prompt prefixes (llama.cpp's KV cache) computes each part once: the static preamble
  (instructions and action list, identical in every ASM prompt), then the node's context
  (query, subgraph, previous actions — shared by a node's policy and value prompts, and
  largely by siblings), then the short state-specific task.
- ``paper``: the Tree-of-Traversals prompts as Appendix F prints them (``prompts/paper/``;
  the instructions after the context, F's wording), for reproducing the paper. The prompts
  F has none for (CoT, entity linking, RwT's) are the default ones.
- a directory of ``NAME.txt`` files: each replaces the default prompt of that name, and may
  use the placeholders :data:`VARIABLES` lists for it (checked when the set is loaded).
"""

from __future__ import annotations

import hashlib
import warnings
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from importlib import resources
from pathlib import Path
from string import Template
from typing import Mapping

from ..errors import BadInput, TraversalsWarning

#: what every Action State Machine prompt may show: the node's own parts
_NODE = frozenset({"preamble", "query", "subgraph", "history", "context"})
#: every prompt a search renders, with the placeholders it is given. ``context`` is the
#: rendered ``context`` template; ``preamble`` the ``preamble`` template's text (in
#: ``evaluate_answer`` followed by ``answer_value_examples`` with ``--value-examples``).
VARIABLES: dict[str, frozenset[str]] = {
    # Tree-of-Traversals (Appendix F)
    "preamble": frozenset(),
    "context": _NODE - {"context"},
    "default": _NODE | {"actions"},
    "selecting_entities": _NODE | {"intent", "options"},
    "selecting_relation": _NODE | {"intent", "selected", "options"},
    "answer_only": _NODE,
    "evaluate": _NODE,
    "evaluate_answer": _NODE | {"answer", "path", "instruction"},
    "answer_value_examples": frozenset(),
    "compare_answers": frozenset({"query", "options"}),
    # entity linking (initialize), the baselines, Reasoning with Trees
    "extract_entities": frozenset({"query"}),
    "link_entity": frozenset({"query", "mention", "options"}),
    "cot": frozenset({"query"}),
    "retrieve": frozenset({"facts", "query"}),
    "rwt_guess": frozenset({"question"}),
    "rwt_relations": frozenset({"question", "entities", "past", "relations"}),
    "rwt_value": frozenset({"question", "path", "entities", "hops_left"}),
}
#: what a prompt must show to do its task: each set, one of its placeholders at least (a
#: selection without ``$options`` never shows the model its choices; a search prompt
#: without the question or ``$context`` leaves it blind)
NEEDED: dict[str, tuple[frozenset[str], ...]] = {
    "default": (frozenset({"context", "query"}),),
    "answer_only": (frozenset({"context", "query"}),),
    "evaluate": (frozenset({"context", "query"}),),
    "evaluate_answer": (frozenset({"context", "query"}), frozenset({"answer"})),
    "selecting_entities": (frozenset({"options"}),),
    "selecting_relation": (frozenset({"options"}),),
    "compare_answers": (frozenset({"options"}),),
    "extract_entities": (frozenset({"query"}),),
    "link_entity": (frozenset({"options"}), frozenset({"mention"})),
    "cot": (frozenset({"query"}),),
    "retrieve": (frozenset({"facts"}), frozenset({"query"})),
    "rwt_guess": (frozenset({"question"}),),
    "rwt_relations": (frozenset({"relations"}),),
    "rwt_value": (frozenset({"path", "entities"}),),
}
#: the prompt sets the package ships (a ``--prompts`` value that is not one is a directory)
BUILT_IN = ("default", "paper")


@lru_cache(maxsize=None)
def template(name: str) -> Template:
    """A default prompt by name (also the ones ``train-value --synthetic`` uses, which no set replaces)."""
    return Template(_packaged(name))


def render(name: str, **values: object) -> str:
    """A default prompt by name, filled in."""
    return template(name).substitute({k: str(v) for k, v in values.items()})


def _packaged(name: str, folder: str = "") -> str:
    where = resources.files(__package__).joinpath("prompts", *([folder] if folder else []), f"{name}.txt")
    return where.read_text("utf-8").rstrip("\n")


@dataclass(frozen=True)
class PromptSet:
    """The prompts a search renders: ``name`` (``default``, ``paper`` or a directory) and
    every prompt of :data:`VARIABLES` by name. Load one with :func:`load_prompts`."""

    name: str
    texts: Mapping[str, str]
    #: the prompts this set takes from its own files rather than the default ones
    replaced: tuple[str, ...] = ()
    _compiled: dict[str, Template] = field(default_factory=dict, repr=False, compare=False)

    def fixed(self, name: str) -> str:
        """The text of a prompt given no placeholder (``preamble``, ``answer_value_examples``),
        ``$$`` read as a dollar sign, as in every other prompt."""
        return Template(self.texts[name]).substitute({})

    def text(self, name: str) -> str:
        return self.texts[name]

    def render(self, name: str, **values: object) -> str:
        if name not in self._compiled:
            self._compiled[name] = Template(self.texts[name])
        return self._compiled[name].substitute({k: str(v) for k, v in values.items()})

    def identity(self) -> dict[str, str]:
        """What a trace records of the set: its name and :attr:`sha256`."""
        return {"name": self.name, "sha256": self.sha256}

    @cached_property
    def sha256(self) -> str:
        """A digest of every prompt's text: two runs with the same digest sent the same words."""
        h = hashlib.sha256()
        for name in sorted(self.texts):
            h.update(f"{name}\0{self.texts[name]}\0".encode())
        return h.hexdigest()


@lru_cache(maxsize=None)
def _built_in(name: str) -> PromptSet:
    texts = {n: _packaged(n) for n in VARIABLES}
    replaced: list[str] = []
    if name == "paper":
        for entry in sorted(resources.files(__package__).joinpath("prompts", "paper").iterdir(), key=lambda e: e.name):
            if entry.name.endswith(".txt"):
                texts[entry.name[:-4]] = _packaged(entry.name[:-4], "paper")
                replaced.append(entry.name[:-4])
    return PromptSet(name, texts, tuple(replaced))


def default_prompts() -> PromptSet:
    """The default prompt set (``--prompts default``)."""
    return _built_in("default")


def load_prompts(spec: str | Path | PromptSet | None) -> PromptSet:
    """The prompt set ``spec`` names: ``default`` (also None), ``paper``, a directory of
    ``NAME.txt`` files replacing default prompts, or a :class:`PromptSet` itself.
    :class:`~traversals.errors.BadInput` names what makes a directory unusable: a file
    named like no prompt, a placeholder the prompt is not given, a ``$`` that is none."""
    if isinstance(spec, PromptSet):
        return spec
    if spec is None or str(spec) in BUILT_IN:
        name = str(spec or "default")
        if Path(name).is_dir() and any(Path(name).glob("*.txt")):  # `prompts --export default` made one to edit
            warnings.warn(f"the prompt set {name!r} is the built-in one, not the folder of prompts here called "
                          f"{name!r}: pass --prompts ./{name} for the folder's", TraversalsWarning, stacklevel=2)
        return _built_in(name)
    folder = Path(spec).expanduser()
    if not folder.is_dir():
        raise BadInput(f"--prompts {spec}: not a prompt set ({', '.join(BUILT_IN)}) nor a directory of prompt "
                       f"files (NAME.txt; `traversals prompts --export DIR` writes one to edit)")
    texts = dict(default_prompts().texts)
    replaced = []
    files = sorted(p for p in folder.iterdir() if p.suffix == ".txt" and p.is_file())
    if not files:
        raise BadInput(f"--prompts {spec}: no prompt file (NAME.txt) in it; the prompts are {', '.join(VARIABLES)}")
    for path in files:
        name = path.stem
        if name not in VARIABLES:
            raise BadInput(f"--prompts {spec}: {path.name} names no prompt a search uses; the prompts are "
                           f"{', '.join(VARIABLES)}")
        try:
            text = path.read_text("utf-8-sig").rstrip("\n")  # a Windows editor's byte-order mark is no text
        except UnicodeDecodeError as e:
            raise BadInput(f"--prompts {spec}: {path.name} is not UTF-8 text ({e.reason} at byte {e.start})") from None
        check_template(text, name, where=str(path))
        texts[name] = text
        replaced.append(name)
    return PromptSet(str(folder.resolve()), texts, tuple(replaced))


def check_template(text: str, name: str, *, where: str) -> None:
    """Refuse (:class:`BadInput`) a text for prompt ``name`` that is empty, has a placeholder
    it is not given or a ``$`` that starts none (``$$`` writes a dollar sign), or lacks
    what the prompt must show (:data:`NEEDED`)."""
    allowed = VARIABLES[name]
    if not text.strip():
        raise BadInput(f"{where}: the {name} prompt is empty (delete the file to use the default one)")
    used = set()
    for match in Template.pattern.finditer(text):
        if match.group("invalid") is not None:
            line = text.count("\n", 0, match.start()) + 1
            raise BadInput(f"{where}, line {line}: a '$' that starts no placeholder; write $$ for a dollar sign")
        found = match.group("named") or match.group("braced")
        if found is not None and found not in allowed:
            line = text.count("\n", 0, match.start()) + 1
            given = ", ".join(f"${v}" for v in sorted(allowed)) or "no placeholder"
            raise BadInput(f"{where}, line {line}: ${found} is not given to the {name} prompt; it is given {given}")
        if found is not None:
            used.add(found)
    for needed in NEEDED.get(name, ()):
        if not used & needed:
            which = " or ".join(f"${v}" for v in sorted(needed))
            raise BadInput(f"{where}: the {name} prompt must show {which}; without it the model cannot do this "
                           "step (see the default one: traversals prompts " + name + ")")


def export_prompts(prompts: PromptSet, folder: Path) -> list[Path]:
    """Write every prompt of ``prompts`` to ``folder`` as ``NAME.txt`` (to edit and load
    back with ``--prompts DIR``); refuses to overwrite a file."""
    if folder.exists() and not folder.is_dir():
        raise BadInput(f"--export {folder} is a file: name a directory")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        paths = [folder / f"{name}.txt" for name in prompts.texts]
        if existing := [p.name for p in paths if p.exists()]:
            raise BadInput(f"{folder} already holds {', '.join(existing)}: export to a new directory")
        for path in paths:
            path.write_text(prompts.texts[path.stem] + "\n", encoding="utf-8")
    except OSError as e:  # a path through a file, no permission, a full disk
        raise BadInput(f"--export {folder}: cannot write there ({e.strerror or type(e).__name__})") from None
    return paths
