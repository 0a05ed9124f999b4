"""What ``run.json`` records so that a resume is safe, and how a resume is checked against it.

Besides the settings, a run records the code that ran (:func:`code_revision`), the SHA-256
of each question file read (:func:`dataset_digests`), of each KG file
(:func:`kg_digests`; where each was, :func:`kg_paths`) and which model answers
(:func:`llm_identity`). A resume (:func:`~.runner.run_eval` with ``resume=True``) is
refused when a setting of :data:`RESUME_MUST_MATCH` differs (:func:`check_resume`; two
local specs of one model file are one model, :func:`_same_llm`; a KG file moved with the
same content is the same KG if it keeps its name, and one edited in place is another,
:func:`kg_changes`), when
``--limit`` or ``--skip`` would draw another sample (:func:`_resampled`), or when an answered question
is gone or reads differently now (:func:`check_questions`). :func:`resume_hint` says how
to continue an interrupted run.

The model cache that ``--llm local`` names is found through the ``environ`` mapping the
caller passes (:func:`check_resume`): the environment is read at the edge of the program
(the CLI, or :func:`~.runner.run_eval`'s entry), never here.
"""

from __future__ import annotations

import hashlib
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Sequence

from ..errors import BadInput
from ..kg.factory import check_kg_spec
from ..kg.specs import file_kg_name, is_kg_name, split_name
from ..kg.iris import DEFAULT_LABEL_PREDICATES
from ..llm.models import file_sha256, recorded_sha256
from .datasets.base import Question
from .runfiles import RESULTS, read_results

#: run.json keys that must agree when resuming (when both runs record them).
RESUME_MUST_MATCH = (
    "dataset", "split", "answerable_only", "seed", "strategy", "llm",
    "k", "max_depth", "max_expansions", "threshold", "decoding", "search_seed", "calibrate",
    "simulations", "value_model", "screen_dead_ends", "prior_weight",
    "answer_choice", "group_selection", "answers", "calibrate_answers", "both_orders", "embedder",
    "compare_answers", "value_examples", "value_reasoning", "kg", "llm_template", "value_model_sha256",
    # the predicates the KGs' entities are labelled with (--label-predicate): other labels
    # link other entities and show other names
    "label_predicates",
    "max_hops", "beam_width", "beam_branch", "c_puct",
    # local: the llama.cpp context size (--n-ctx): a prompt that fits in a larger one is an
    # error in a smaller one, and a completion may be cut shorter
    "n_ctx",
    # the model that answers: a GGUF replaced in place, or another default model of a newer
    # version under the same --llm local, is another model (--llm-url is not compared: a
    # server moved to another port serves the same model)
    "llm_sha256",
    # no flag sets these, but a library caller can and a newer version may change their
    # defaults: the KG's cuts the LLM sees, the sampling temperature, intermediate values
    "max_relations", "max_edges", "diverse_temperature", "evaluate_intermediate",
    # retrieve: the facts its prompt lists
    "top_facts",
    # the prompts' templates (--prompts), and their words: a template edited in place is another run
    "prompts", "prompts_sha256",
)  # fmt: skip
#: settings of :data:`RESUME_MUST_MATCH` that runs of older versions did not record, and what
#: such a run used: a run recorded without one is compared as if it had recorded this, when
#: the run resumed records the setting (before ``--label-predicate``, every KG but Wikidata
#: was read with the default label predicates)
RECORDED_SINCE: dict[str, Any] = {"label_predicates": list(DEFAULT_LABEL_PREDICATES), "prompts": "default"}


def package_version() -> str:
    """The installed version of ``traversals`` (``unknown`` when it is not installed)."""
    try:
        from importlib.metadata import version

        return version("traversals")
    except Exception:  # pragma: no cover - not installed
        return "unknown"


def code_revision(source: Path | None = None) -> dict[str, Any] | None:
    """The git commit of the code that runs (``{"commit": sha, "dirty": bool}``, dirty when
    the package's files differ from it), or None when the package is not in a git checkout
    (an installed wheel, even inside the user's own repository: ``version`` says what ran)
    or git is missing. Recorded in ``run.json`` so that a
    published figure names the code behind it."""
    src = source or Path(__file__).resolve().parents[1]
    try:
        commit = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True,
                                text=True, timeout=10)  # fmt: skip
        if commit.returncode != 0:  # not a checkout
            return None
        tracked = subprocess.run(["git", "-C", str(src), "ls-files", "--", "."], capture_output=True, text=True,
                                 timeout=10)  # fmt: skip
        if not tracked.stdout.strip():  # a checkout the package is not part of
            return None
        status = subprocess.run(["git", "-C", str(src), "status", "--porcelain", "--untracked-files=no", "--", "."],
                                capture_output=True, text=True, timeout=10)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit.stdout.strip(), "dirty": bool(status.stdout.strip()) if status.returncode == 0 else None}


def dataset_digests(files: Sequence[str | Path]) -> list[str | None]:
    """The SHA-256 of each question file a loader read (``Dataset.files``), None for one that
    cannot be read any more. Recorded in ``run.json`` as ``dataset_sha256`` (beside
    ``dataset_files``), so that a resume notices edited questions or gold
    (:func:`check_questions`) while a file moved elsewhere with the same content is the
    same file."""
    out: list[str | None] = []
    for f in files:
        try:
            out.append(file_sha256(f))
        except OSError:
            out.append(None)
    return out


def _changed_data(old: Mapping, new: Mapping) -> list[str]:
    """How the question files of ``new`` differ in content from those ``old`` recorded (one
    phrase per file, naming it and both hashes); empty when the content is the same,
    whatever the paths, or when ``old`` recorded no hashes (a run of an older version)."""
    old_h, new_h = old.get("dataset_sha256"), new.get("dataset_sha256")
    if not isinstance(old_h, list) or not isinstance(new_h, list):
        return []

    def files(run: Mapping, hashes: list) -> list[tuple[str, str | None]]:
        names = run.get("dataset_files")
        if not isinstance(names, list) or len(names) != len(hashes):
            names = [f"file {i + 1}" for i in range(len(hashes))]
        return [(str(n), h if isinstance(h, str) else None) for n, h in zip(names, hashes)]

    before, now = files(old, old_h), files(new, new_h)
    # the same content (a moved or renamed file) is the same file
    for item in list(now):
        match = next((b for b in before if b[1] is not None and b[1] == item[1]), None)
        if match is not None:
            before.remove(match)
            now.remove(item)
    # the rest in the order read (a loader reads its files in a fixed order)
    pairs: list[tuple[tuple[str, str | None] | None, tuple[str, str | None] | None]] = list(zip(before, now))
    pairs += [(b, None) for b in before[len(now):]] + [(None, n) for n in now[len(before):]]
    out = []
    for was, is_ in pairs:
        if was is not None and is_ is not None:
            if was[1] is None or is_[1] is None:
                continue  # unreadable then or now: nothing to compare
            out.append(f"question file {is_[0]} changed: sha256 {was[1]} (recorded) vs {is_[1]} (now)")
        elif was is not None:
            out.append(f"question file {was[0]} (sha256 {was[1]}) was read then and is not now")
        elif is_ is not None:
            out.append(f"question file {is_[0]} (sha256 {is_[1]}) is read now and was not then")
    return out


def check_questions(old: Mapping, new: Mapping, rows: list[dict], questions: Sequence[Question], run_json: Path,
                    changed_data_ok: bool) -> int:
    """On a resume over question files whose content changed (:func:`_changed_data`):
    refuse when a question already answered is gone or reads differently now (its answer was
    to another question), unless ``changed_data_ok``; otherwise the run goes on — questions
    added to the file are answered, and an answered row whose gold was edited takes the new
    gold (scored again, no LLM call). Returns how many rows took new gold."""
    changed = _changed_data(old, new)
    if not changed:
        return 0
    by_id = {q.id: q for q in questions}
    regolded = 0
    for row in rows:
        q = by_id.get(row["id"])
        if q is None or ("question" in row and row["question"] != q.text):
            if changed_data_ok:
                continue
            why = (f"question {row['id']} was answered and is not in the files now" if q is None else
                   f"question {row['id']} was answered as {row['question']!r} and reads {q.text!r} now")
            raise BadInput(f"cannot resume: {run_json} was made over other questions -- {'; '.join(changed)}; "
                           f"{why} (use another --out for a new run; give your questions ids to edit the file "
                           "and resume)")
        if "gold" in row and row["gold"] != q.gold_json():
            row["gold"] = q.gold_json()
            regolded += 1
    return regolded


def _gguf_sha256(path: Path, old: Mapping) -> str:
    """The SHA-256 of a GGUF file named by ``--llm local:PATH.gguf``, as cheaply as it is
    known: the ``FILE.sha256`` sidecar of a verified registry model
    (:mod:`traversals.llm.models`) when its size agrees, the hash ``old`` (the recorded
    run.json) holds for the same file, size and modification time, else read (about a second
    per GB, once per run)."""
    marked = recorded_sha256(path)
    if marked is not None:
        return marked
    st = path.stat()
    seen = old.get("llm_file")
    if (isinstance(seen, dict) and isinstance(old.get("llm_sha256"), str)
            and seen == {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}):
        return str(old["llm_sha256"])
    return file_sha256(path)


def llm_identity(spec: Any, old: Mapping | None = None) -> dict[str, Any]:
    """What names the model behind an ``--llm`` spec, without loading it or any network
    call: ``llm_model`` (the registry name, the GGUF's file name, the endpoint's model name)
    and, for a local model, ``llm_sha256`` (a registry model's pinned hash, which the file
    is verified against before use; a GGUF file's content hash, with ``llm_file`` saying
    which file it was). Empty for a spec that names no model this way (a library caller's
    own label). ``old``: the recorded run.json, whose hash of the same unchanged file is
    reused."""
    if not isinstance(spec, str):
        return {}
    kind, _, arg = spec.strip().partition(":")
    kind, arg = kind.strip().lower(), arg.strip()
    if kind == "openai":  # the endpoint's model name; what it serves under it is not known offline
        return {"llm_model": arg} if arg else {}
    if kind != "local":
        return {}
    from ..llm.models import DEFAULT_MODEL, MODELS

    name = arg or DEFAULT_MODEL
    if name in MODELS:
        return {"llm_model": name, "llm_sha256": MODELS[name].sha256} if MODELS[name].kind == "llm" else {}
    path = Path(name).expanduser()
    try:
        if not path.is_file():
            return {}  # opening the LLM says what is wrong
        path = path.resolve()
        st = path.stat()
        return {"llm_model": path.name, "llm_sha256": _gguf_sha256(path, old or {}),
                "llm_file": {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}}
    except OSError:
        return {}


def _local_model_file(spec: Any, environ: Mapping[str, str]) -> Path | None:
    """The model file a local ``--llm`` spec runs, resolved, whether it is there or not:
    ``local`` and ``local:NAME`` the registry model's file in the model cache (where
    :func:`~traversals.llm.factory.resolve_local_model` puts it), ``local:PATH`` that file;
    None for another spec."""
    if not isinstance(spec, str):
        return None
    kind, _, arg = spec.strip().partition(":")
    if kind.strip().lower() != "local":
        return None
    from ..llm.models import DEFAULT_MODEL, MODELS, default_cache_dir, model_path

    name = arg.strip() or DEFAULT_MODEL
    path = model_path(name, default_cache_dir(environ)) if name in MODELS else Path(name).expanduser()
    try:
        return path.resolve()
    except (OSError, RuntimeError):
        return path.absolute()


def _same_llm(old: Mapping, new: Mapping, environ: Mapping[str, str]) -> bool:
    """Whether the ``llm`` specs of the recorded run and this one name one model: the same
    text, or two local specs (``local``, ``local:NAME``, ``local:PATH.gguf``) that run one
    model file -- the same ``llm_sha256`` when both runs record it (a registry model's pinned
    hash is the hash of its file), else the same resolved path (a registry model's file in
    the model cache ``environ`` names). Another model under the same spec is refused by
    ``llm_sha256`` itself."""
    if old.get("llm") == new.get("llm"):
        return True
    was, now = _local_model_file(old.get("llm"), environ), _local_model_file(new.get("llm"), environ)
    if was is None or now is None:
        return False
    before, after = old.get("llm_sha256"), new.get("llm_sha256")
    if isinstance(before, str) and isinstance(after, str):
        return before == after
    return was == now


def kg_digests(specs: Sequence[Any]) -> list[str | None]:
    """The SHA-256 of each KG spec that is a triple file (kind ``file`` of
    :func:`~traversals.kg.factory.check_kg_spec`), None for the others (a store directory, an
    endpoint, ``wikidata``) and for a file that cannot be read. Recorded in ``run.json`` as
    ``kg_sha256`` beside ``kg``, so that a resume takes a KG file moved elsewhere with the same
    content as the same KG, and a file edited in place as another (:func:`kg_changes`)."""
    out: list[str | None] = []
    for spec in specs:
        try:
            kind, target, _ = check_kg_spec(str(spec))
            out.append(file_sha256(target) if kind == "file" else None)
        except (BadInput, OSError):
            out.append(None)
    return out


def _per_kg(run: Mapping, key: str) -> list[str | None]:
    """What a run records one per ``kg`` spec under ``key`` (``kg_sha256``, ``kg_paths``);
    all None when it records none (a run of an older version)."""
    specs, values = run.get("kg"), run.get(key)
    n = len(specs) if isinstance(specs, list) else 0
    if not isinstance(values, list) or len(values) != n:
        return [None] * n
    return [v if isinstance(v, str) else None for v in values]


def _resolved(spec: Any) -> str | None:
    """The absolute, resolved path of the file or directory a KG spec names (after its
    ``NAME=``) from the current working directory, None when there is none."""
    path = Path(split_name(str(spec))[1]).expanduser()
    try:
        return str(path.resolve()) if path.exists() else None
    except (OSError, RuntimeError):
        return None


def kg_paths(specs: Sequence[Any]) -> list[str | None]:
    """Where each KG spec's file is: the absolute, resolved path of a spec (after its
    ``NAME=``) that names an existing file or directory, None for the others (an endpoint,
    ``wikidata``). Recorded in ``run.json`` as ``kg_paths`` beside ``kg`` (kept as typed), so
    that a resume from another working directory compares the file the run read, not what the
    same relative text names from there (:func:`kg_changes`)."""
    return [_resolved(spec) for spec in specs]


def _kg_where(spec: Any, recorded: str | None = None) -> str:
    """Where a KG spec (without its ``NAME=``) is: ``recorded`` (the absolute path a run
    recorded in ``kg_paths``) when given, else the file it names from the current working
    directory when that exists (any path to it), else its text."""
    if recorded is not None:
        return recorded
    return _resolved(spec) or split_name(str(spec))[1]


@dataclass(frozen=True)
class MovedKG:
    """A KG file this run reads at another path, or under another name, with the recorded
    content (:func:`kg_changes`). Shown as ``OLD -> NEW``."""

    old: str  #: where the recorded run read it (absolute when it recorded ``kg_paths``)
    new: str  #: where this run reads it
    old_name: str  #: the KG's name then: its ``NAME=``, else the file's (films.txt is "films")
    new_name: str  #: the KG's name now
    spec: str  #: this run's spec without its ``NAME=``: what ``--kg OLD_NAME=SPEC`` takes

    def __str__(self) -> str:
        return f"{self.old} -> {self.new}"

    @property
    def renamed(self) -> bool:
        """The KG has another name now: the entities it gives carry another ``kg``."""
        return self.old_name != self.new_name

    def option(self) -> str | None:
        """The ``--kg`` that reads this file under its recorded name (None when that name
        cannot be given as ``NAME=``)."""
        return f"--kg {shlex.quote(f'{self.old_name}={self.spec}')}" if is_kg_name(self.old_name) else None


def rename_advice(moved: MovedKG) -> str:
    """How to read a KG file renamed since a run (:attr:`MovedKG.renamed`) under its recorded
    name: its ``--kg OLD_NAME=PATH``, else (a name ``NAME=`` cannot give) the file's old name."""
    option = moved.option()
    if option:
        return f"give it its old name as {option} (or give the file its old name, in any directory)"
    return "give the file its old name (in any directory)"


class KGChanges(NamedTuple):
    """What :func:`kg_changes` found: whether the KGs differ, why (a phrase per KG), and the
    files moved or renamed with the same content."""

    differ: bool
    why: list[str]
    moved: list[MovedKG]


def _kg_name(name: str | None, path: str, digest: str | None) -> str | None:
    """A KG's name from its spec's parts: its ``NAME=``, else for a KG file (one with a
    recorded SHA-256) the file's name; None for another spec without ``NAME=``."""
    if name is not None:
        return name
    return file_kg_name(path) if digest is not None else None


def kg_changes(old: Mapping, new: Mapping) -> KGChanges:
    """How the KGs of this run (``new``) compare with the recorded ones (``old``): whether
    they differ, a phrase per KG file whose content differs (both paths, or the one path of
    a file edited in place, and both hashes), and each KG file found at another path, or
    under another name, with the same content (:class:`MovedKG`). A KG file's name is its
    ``NAME=``, else the file's: ``--kg films=/new/other.txt`` is the KG ``films.txt`` was,
    and ``movies.txt`` renamed from ``films.txt`` (no ``NAME=``) is another KG: its entities
    and edges carry another name (a row's ``supporting_edges[].kg``, a relation key two KGs
    share, so the prompts), and the refusal says which ``--kg OLD_NAME=PATH`` keeps the
    name (:func:`rename_advice`). The recorded side is where ``old`` says each file was
    (``kg_paths``, absolute), this run's side what each spec names from the current working
    directory: the same ``--kg kb.txt`` from another directory may name another file. A spec
    is the same KG when it names the same file by any path, or the same text, with the same
    ``NAME=``, unless both runs record its ``kg_sha256`` and the hashes differ (the file was
    edited in place); a file at another path is the same KG when both runs record its
    ``kg_sha256`` and the hashes (and the ``NAME=`` given) agree. A run recorded without
    ``kg_paths`` resolves its specs from the current directory too; one recorded without
    hashes compares paths only."""
    a, b = old.get("kg"), new.get("kg")
    if not isinstance(a, list) or not isinstance(b, list) or len(a) != len(b):
        return KGChanges(a != b, [], [])
    differ = False
    why: list[str] = []
    moved: list[MovedKG] = []
    for x, y, hx, hy, rx in zip(a, b, _per_kg(old, "kg_sha256"), _per_kg(new, "kg_sha256"), _per_kg(old, "kg_paths")):
        (nx, px), (ny, py) = split_name(str(x)), split_name(str(y))
        wx, wy = _kg_where(x, rx), _kg_where(y)
        kx, ky = _kg_name(nx, px, hx), _kg_name(ny, py, hy)
        # films.txt and films=other.txt are "films", movies.txt (renamed from films.txt) is "movies";
        # a name not known on one side (a run recorded without hashes) compares the NAME= given
        named_alike = kx == ky if kx is not None and ky is not None else nx == ny
        if named_alike and wx == wy:
            if hx is not None and hy is not None and hx != hy:
                differ = True
                why.append(f"KG file {wy} has sha256 {hx} (recorded), {hy} (now): the file was edited")
            continue
        if hx is not None and hx == hy:
            assert kx is not None and ky is not None  # a file's: named by NAME= or by the file
            found = MovedKG(wx, wy, kx, ky, py)
            moved.append(found)
            if named_alike:
                continue
            differ = True  # the same triples under another name than the run read them by
            if nx is None and ny is None:  # the file renamed: a KG without NAME= is named by its file
                why.append(f"the KG file was renamed ({found}): a KG is named by its file, so it is named {ky!r} "
                           f"where the run named it {kx!r}; {rename_advice(found)}")
                continue
            hint = f": give it as {found.option()}" if found.option() else ""
            where = f"KG file {wy} is" if wx == wy else f"KG file {wy} holds the triples of {wx}, but is"
            why.append(f"{where} named {ky!r} where the run named it {kx!r}{hint}")
            continue
        differ = True
        # the same text typed in another working directory: another file
        elsewhere = (f", --kg {py} names another file from this directory"
                     if px == py and wx != wy and Path(wy).exists() else "")
        if hx is not None and hy is not None and hx != hy:
            why.append(f"KG file {wx} has sha256 {hx} (recorded), {wy} has {hy} (now): other triples{elsewhere}")
        elif hx is not None and hy is None:  # recorded as a file, and no file can be read there now
            why.append(f"KG file {wy} does not exist or cannot be read")
        elif elsewhere:
            why.append(f"the run read {wx}{elsewhere} ({wy})")
    return KGChanges(differ, why, moved)


def _same_setting(key: str, old: Mapping, new: Mapping, environ: Mapping[str, str]) -> bool:
    """Whether setting ``key`` agrees between the recorded run (``old``) and this one."""
    if key == "llm":
        return _same_llm(old, new, environ)
    if key == "kg":
        return not kg_changes(old, new)[0]
    if key == "value_model_sha256" and old.get("value_model_digest") and new.get("value_model_digest"):
        # a model file written again (the same training repeated) records other seconds and
        # paths in its meta: it is the same model when it predicts with the same weights
        return bool(old["value_model_digest"] == new["value_model_digest"])
    return bool(old[key] == new[key])


def _setting_diff(key: str, old: Mapping, new: Mapping) -> str:
    if key == "llm_sha256":  # a hash alone does not say which model: its name too
        return (f"llm_sha256: {old[key]!r} (recorded, model {old.get('llm_model')!r}) vs {new[key]!r} "
                f"(now, model {new.get('llm_model')!r}): another model answers")
    if key == "prompts_sha256":
        return (f"prompts_sha256: {old[key][:12]}... (recorded) vs {new[key][:12]}... (now): the prompts' words "
                f"differ (a template of --prompts {new.get('prompts', 'default')} edited, or another version of "
                "traversals)")
    if key == "kg":
        return f"kg: {old[key]!r} (recorded) vs {new[key]!r} (now)" + "".join(
            f" ({why})" for why in kg_changes(old, new)[1])
    return f"{key}: {old[key]!r} (recorded) vs {new[key]!r} (now)"


def check_resume(old: Mapping, new: Mapping, run_json: Path, *, environ: Mapping[str, str]) -> None:
    """Refuse (:class:`BadInput`, naming each difference) to resume the run recorded in
    ``run_json`` (its settings ``old``) with the settings ``new``: a setting of
    :data:`RESUME_MUST_MATCH` that both record and that differs, another ``--skip`` (a run
    recorded without one skipped none), or a ``--limit`` sample drawn from another number of
    questions. ``environ`` is where the model cache of a
    ``--llm local`` spec is found (``$TRAVERSALS_CACHE`` and the rest of
    :func:`~traversals.llm.models.default_cache_dir`): the caller reads the environment.
    A setting of :data:`RECORDED_SINCE` that ``old`` does not record is taken as its value there."""
    old = {**{k: v for k, v in RECORDED_SINCE.items() if k in new}, **old}
    diffs = [
        _setting_diff(k, old, new)
        for k in RESUME_MUST_MATCH
        if k in old and k in new and not _same_setting(k, old, new, environ)
    ]
    if old.get("skip", 0) != new.get("skip", 0):  # recorded since --skip exists; before, none was skipped
        diffs.append(f"skip: {old.get('skip', 0)!r} (recorded) vs {new.get('skip', 0)!r} (now), so other "
                     "questions are left out")
    if (resampled := _resampled(old, new)) is not None:
        diffs.append(resampled)
    if diffs:
        raise BadInput(
            f"cannot resume: {run_json} was made with different settings -- "
            + "; ".join(diffs)
            + " (resume with the recorded settings, or use another --out for a new run)"
        )


def _resampled(old: Mapping, new: Mapping) -> str | None:
    """Why a sample would not extend the recorded one, or None: ``--limit`` shuffles the
    indices of the questions, so a dataset with another number of questions (your own file,
    edited) gives another sample, and a resume would mix two samples under one run."""
    sampled = any(run.get("limit") is not None or run.get("skip") for run in (old, new))
    before, now = old.get("dataset_size"), new.get("dataset_size")
    if not sampled or before is None or now is None or before == now:
        return None
    return (f"dataset_size: {before!r} (recorded) vs {now!r} (now), and --limit and --skip sample from the "
            "shuffled indices of all of them, so another number of questions is another sample")


def selection_digest(ids: Sequence[str]) -> str:
    """The SHA-256 of question ids in order: what run.json records of a sampled selection."""
    return hashlib.sha256("\n".join(ids).encode("utf-8", "surrogatepass")).hexdigest()


def check_selection(old: Mapping, new: Mapping, selected_ids: Sequence[str], run_json: Path) -> None:
    """Refuse (:class:`BadInput`) a resume whose ``--limit``/``--skip`` sample does not begin
    with the recorded one: the questions file was reordered or others swapped in with the
    same count (``dataset_size`` alike), and the run would mix two samples. A resume with a
    smaller ``--limit`` is not checked (its sample is a part of the recorded one, or not:
    the rows outside it are left out as they are)."""
    # a resume without --limit answers every question: whatever the recorded sample was, it holds it;
    # a run recorded without one holds every question (in the file's order, not a sample's)
    sampled = (new.get("limit") is not None or bool(new.get("skip"))) and (
        old.get("limit") is not None or bool(old.get("skip")))
    recorded, n = old.get("selection_sha256"), old.get("selected")
    if not sampled or not isinstance(recorded, str) or not isinstance(n, int) or len(selected_ids) < n:
        return
    if selection_digest(selected_ids[:n]) != recorded:
        raise BadInput(f"cannot resume: {run_json} was made with another sample -- the {n} questions --limit and "
                       "--skip drew then are not the first ones they draw now (the questions file was reordered, "
                       "or questions swapped in or out), so the run would mix two samples (use another --out for "
                       "a new run)")


def resume_hint(out_dir: str | Path, argv: Sequence[str] | None = None) -> str:
    """How to continue an interrupted run."""
    n = len(read_results(Path(out_dir) / RESULTS))
    cmd = shlex.join(argv) if argv else "the same command"  # quoted: a path with a space pastes back whole
    if argv and "--resume" not in argv:
        cmd += " --resume"
    elif not argv:
        cmd += " with --resume"
    return f"{n} question(s) saved in {out_dir}; continue with: {cmd}"
