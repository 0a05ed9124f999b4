"""Flags of the command line: ``--n-ctx`` (the local model's context size), ``--c-puct``
(MCTS's exploration weight), and a malformed ``--kg`` refused with cot too, which opens no KG."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from traversals.cli import main
from traversals.errors import BadInput

NO_MODEL = ["--llm", "local:/nonexistent/model.gguf"]  # refused after the flags and KGs: their errors come first
ENDPOINT = ["--llm", "openai:m", "--llm-url", "http://127.0.0.1:9/v1"]


def one_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """``main(argv)``: exit code 2 and one line on stderr, returned."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("traversals: error: ") and err.count("\n") == 1, err
    return err


def ask_error(strategy: str, kg: str, capsys: pytest.CaptureFixture[str]) -> str:
    return one_error(["ask", "who directed [Alpha]", "--strategy", strategy, "--kg", kg, *NO_MODEL], capsys)


def questions_file(tmp_path: Path) -> Path:
    data = tmp_path / "q.jsonl"
    data.write_text('{"question": "who directed [Alpha]", "answers": ["Ann Lee"]}\n')
    return data


def scripted_llm(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """``open_llm`` replaced by a scripted LLM; the keyword arguments of each call, returned."""
    import traversals.llm.factory
    from traversals.llm.scripted import ScriptedLLM

    calls: list[dict[str, Any]] = []

    def fake(spec: str = "local", **kw: Any) -> ScriptedLLM:
        calls.append({"spec": spec, **kw})
        return ScriptedLLM(["ANSWER: Ann Lee"] * 9)

    monkeypatch.setattr(traversals.llm.factory, "open_llm", fake)
    return calls


# ---------------------------------------------------------------- --kg with cot


@pytest.mark.parametrize("kg, says", [
    ("films.nt", "no such file: films.nt"),  # a triple file that is not there
    ("kb.txtt", "unknown KG 'kb.txtt': no such file or directory"),  # a typo in the extension
    ("movies=kb.tsv", "no such file: kb.tsv"),  # named
    ("sparql:ftp://example.org/sparql", "sparql:URL needs an http(s) URL"),
    ("  ", "empty KG spec"),
])
def test_a_malformed_kg_with_cot_gets_the_error_the_other_strategies_give(kg: str, says: str, capsys) -> None:
    cot = ask_error("cot", kg, capsys)
    assert says in cot
    assert cot == ask_error("chain", kg, capsys)


@pytest.mark.parametrize("kg", ["demo", "wikidata", "http://127.0.0.1:9/sparql", "kb.nt", "store", "m=kb.nt"])
def test_a_well_formed_kg_with_cot_is_still_not_opened(kg: str, tmp_path: Path, monkeypatch, capsys) -> None:
    """Nothing is read or contacted: past the KG check, the missing model is the error."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kb.nt").write_text("not even N-Triples")  # not parsed: cot does not load it
    (tmp_path / "store").mkdir()
    assert "model file not found" in ask_error("cot", kg, capsys)


def test_an_unreadable_file_type_with_cot_is_refused(tmp_path: Path, capsys) -> None:
    (tmp_path / "kb.bz2").write_text("x")
    (tmp_path / "kb.xls").write_text("x")
    assert "kb.bz2: .bz2 files are not read" in ask_error("cot", str(tmp_path / "kb.bz2"), capsys)
    assert "kb.xls: unknown triple file type" in ask_error("cot", str(tmp_path / "kb.xls"), capsys)


def test_eval_with_cot_refuses_a_malformed_kg_before_the_run_directory_is_made(tmp_path: Path, capsys) -> None:
    out = tmp_path / "run"
    err = one_error(["eval", "questions", "--data", str(questions_file(tmp_path)), "--strategy", "cot",
                     "--kg", "films.ntt", "--out", str(out), "--no-progress", *NO_MODEL], capsys)
    assert "traversals: error: unknown KG 'films.ntt': no such file or directory" in err
    assert not out.exists()


# ---------------------------------------------------------------- --n-ctx


def test_n_ctx_reaches_the_local_model_and_is_left_out_without_it(monkeypatch, capsys) -> None:
    calls = scripted_llm(monkeypatch)
    question = ["ask", "who directed [Alpha]", "--strategy", "cot", "--llm", "local:qwen2.5-coder-0.5b"]
    assert main([*question, "--n-ctx", "4096"]) == 0
    assert main(question) == 0
    assert calls[0]["n_ctx"] == 4096 and "n_ctx" not in calls[1]  # the backend's default (8192)
    capsys.readouterr()


@pytest.mark.parametrize("bad", ["0", "-5", "4k", "1.5"])
def test_n_ctx_that_is_no_number_of_tokens_is_a_flag_error(bad: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["ask", "q", "--n-ctx", bad, *NO_MODEL])
    assert exit.value.code == 2 and "--n-ctx" in capsys.readouterr().err


@pytest.mark.parametrize("command", [
    ["ask", "who directed [Alpha]", "--strategy", "chain", "--kg", "/no/such/kb.nt"],  # before the KG loads
    ["eval", "questions", "--data", "/no/such/q.jsonl", "--strategy", "cot", "--out", "/no/such/run"],
    ["serve", "--kg", "/no/such/kb.nt"],
    ["mcp", "--kg", "/no/such/kb.nt"],
], ids=["ask", "eval", "serve", "mcp"])
def test_n_ctx_with_an_endpoint_is_refused_before_anything_loads(command: list[str], capsys) -> None:
    """As --llm-url with a local model: the flag would change nothing, so it is refused, not ignored."""
    err = one_error([*command, *ENDPOINT, "--n-ctx", "4096"], capsys)
    assert "--n-ctx sets the context size of a model run in this process" in err
    assert "the server behind --llm openai:m sets its own: drop --n-ctx" in err


def test_the_library_refuses_n_ctx_with_an_endpoint_and_a_context_of_no_tokens(tmp_path: Path) -> None:
    from traversals.llm.factory import open_llm
    from traversals.llm.local import DEFAULT_N_CTX, LlamaCppLLM

    with pytest.raises(BadInput, match=r"n_ctx \(--n-ctx\) sets the context of a model run in this process"):
        open_llm("openai:m", url="http://127.0.0.1:9/v1", n_ctx=4096)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")  # loaded on first use only
    assert LlamaCppLLM(model).n_ctx == DEFAULT_N_CTX == 8192 and LlamaCppLLM(model, n_ctx=2048).n_ctx == 2048
    for bad in (0, -1, 1.5, "4096", True):
        with pytest.raises(BadInput, match="at least 1"):
            LlamaCppLLM(model, n_ctx=bad)  # type: ignore[arg-type]


def test_eval_records_n_ctx_of_a_local_model_and_none_for_an_endpoint(tmp_path: Path, monkeypatch, capsys) -> None:
    scripted_llm(monkeypatch)
    base = ["eval", "questions", "--data", str(questions_file(tmp_path)), "--strategy", "cot", "--no-progress"]
    assert main([*base, "--out", str(tmp_path / "a"), "--llm", "local:qwen2.5-coder-0.5b", "--n-ctx", "2048"]) == 0
    assert main([*base, "--out", str(tmp_path / "b"), "--llm", "local:qwen2.5-coder-0.5b"]) == 0
    assert main([*base, "--out", str(tmp_path / "c"), *ENDPOINT]) == 0
    runs = [json.loads((tmp_path / d / "run.json").read_text()) for d in "abc"]
    assert [r["n_ctx"] for r in runs] == [2048, 8192, None]
    capsys.readouterr()


# ---------------------------------------------------------------- --c-puct


def test_c_puct_reaches_mcts_and_its_default_is_rwts() -> None:
    from traversals.api import SearchConfig, build_solver
    from traversals.embed import open_embedder
    from traversals.kg.factory import open_kgs
    from traversals.llm.scripted import ScriptedLLM
    from traversals.search.rwt import RwTConfig

    assert SearchConfig().c_puct == RwTConfig().c_puct
    kgs = open_kgs(["demo"])
    for c in (0.0, 2.5):
        solver = build_solver("mcts", ScriptedLLM([]), kgs, SearchConfig(c_puct=c), embedder=open_embedder("lexical"))
        assert getattr(solver, "config").c_puct == c
    for bad in (-0.5, math.nan, math.inf):
        with pytest.raises(BadInput, match="--c-puct is a weight of 0 or more"):
            build_solver("mcts", ScriptedLLM([]), kgs, SearchConfig(c_puct=bad), embedder=open_embedder("lexical"))


@pytest.mark.parametrize("command", ["ask", "serve", "mcp"])
def test_c_puct_flag_sets_the_search_config(command: str) -> None:
    from traversals.cli import _search_config, build_parser

    parser = build_parser()
    head = ["ask", "q"] if command == "ask" else [command]
    assert _search_config(parser.parse_args([*head, "--c-puct", "3"]), k=None).c_puct == 3.0
    assert _search_config(parser.parse_args(head), k=None).c_puct == 1.25


@pytest.mark.parametrize("command", ["ask", "serve", "mcp"])
@pytest.mark.parametrize("flags,field,value", [
    (["--seed", "7"], "seed", 7),
    (["--simulations", "5"], "simulations", 5),
    (["--beam-branch", "5"], "beam_branch", 5),
    (["--beam-width", "2"], "beam_width", 2),
    (["--screen-dead-ends", "2"], "screen_dead_ends", 2),
    (["--answer-choice", "support"], "answer_choice", "support"),
    (["--group-selection"], "group_selection", True),
    (["--answers", "3"], "answers", 3),
    (["--value-examples"], "value_examples", True),
    (["--max-depth", "4"], "max_depth", 4),
    (["--max-expansions", "9"], "max_expansions", 9),
    (["--threshold", "0.6"], "threshold", 0.6),
    (["--max-hops", "2"], "max_hops", 2),
    (["--top-facts", "7"], "top_facts", 7),
])
def test_every_search_flag_reaches_the_search_config(command: str, flags: list[str], field: str, value) -> None:
    """A flag dropped on its way to SearchConfig would be accepted and silently ignored."""
    from traversals.cli import _search_config, build_parser

    head = ["ask", "q"] if command == "ask" else [command]
    assert getattr(_search_config(build_parser().parse_args([*head, *flags]), k=None), field) == value


@pytest.mark.parametrize("strategy", ["tree", "chain", "beam", "cot"])
def test_c_puct_with_a_strategy_other_than_mcts_is_refused(strategy: str, capsys) -> None:
    ask = ["ask", "who directed [Alpha]", "--kg", "demo", *NO_MODEL, "--strategy", strategy, "--c-puct", "2"]
    assert "--c-puct is used by --strategy mcts only" in one_error(ask, capsys)
    ev = ["eval", "questions", "--data", "/no/such/q.jsonl", "--out", "/no/such/run", *NO_MODEL,
          "--strategy", strategy, "--c-puct", "2"]
    assert "--c-puct is used by --strategy mcts only" in one_error(ev, capsys)
    # the default typed out changes nothing: accepted
    assert "model file not found" in one_error([*ask[:-1], "1.25"], capsys)


def test_eval_records_c_puct_for_mcts_only() -> None:
    from traversals.eval.commands import unread_settings

    assert "c_puct" not in unread_settings("mcts")
    assert all("c_puct" in unread_settings(s) for s in ("tree", "chain", "beam", "cot"))


def test_llm_template_with_a_local_model_is_refused_before_anything_loads(capsys) -> None:
    """The GGUF brings its own chat template: the flag would change nothing, so it is refused."""
    err = one_error(["ask", "who directed [Alpha]", "--strategy", "chain", "--kg", "/no/such/kb.nt",
                     "--llm", "local", "--llm-template", "chatml"], capsys)
    assert "--llm-template is the chat template for scoring through an OpenAI-compatible server" in err
    assert "drop --llm-template" in err


# ---------------------------------------------------------------- an LLM that cannot score


@pytest.mark.parametrize("flags, named", [
    (["--calibrate", "--both-orders"], "--calibrate (or --calibrate-weight), --both-orders"),
    (["--answers", "3"], "--answers"),
])
def test_flags_of_constrained_decoding_with_an_llm_that_cannot_score_are_refused(
        flags: list[str], named: str, tmp_path: Path, monkeypatch, capsys) -> None:
    """--decoding auto with an LLM without log-probabilities samples: the flags were ignored in
    silence (and eval's run.json recorded calibrate 1.0 for a run that never calibrated)."""
    scripted_llm(monkeypatch)  # a scripted LLM without scores: can_score is false
    kg = str(tmp_path / "films.txt")
    Path(kg).write_text("Alpha|directed_by|Ann Lee\n")
    err = one_error(["ask", "who directed [Alpha]", "--kg", kg, *ENDPOINT, *flags], capsys)
    assert f"{named}: the LLM scripted cannot score options, so the search uses sampled decoding" in err
    assert main(["eval", "questions", "--data", str(questions_file(tmp_path)), "--kg", kg, "--no-progress", "--strategy", "tree",
                 "--out", str(tmp_path / "run"), *ENDPOINT, *flags]) == 2
    assert "cannot score options" in capsys.readouterr().err
    # serve and mcp refuse them as well, before the server starts (port 0: none is listened on)
    monkeypatch.setattr("uvicorn.run", lambda *a, **k: pytest.fail("the server started"))
    for command in (["serve", "--port", "0"], ["mcp"]):
        assert main([*command, "--kg", kg, *ENDPOINT, *flags]) == 2, command
        assert f"{named}: the LLM scripted cannot score options" in capsys.readouterr().err
    # --answers 1 asks for what sampling does anyway; without such flags the search samples
    assert main(["ask", "who directed [Alpha]", "--kg", kg, *ENDPOINT, "--answers", "1"]) == 0
    assert "sampled decoding" in capsys.readouterr().out


def test_mcp_probes_an_endpoints_scoring_before_it_serves(tmp_path: Path, monkeypatch) -> None:
    """`traversals mcp` never probed the endpoint: with --llm-template every call sampled, and
    --decoding constrained was refused as "not probed" though the server could score."""
    import traversals.llm.factory
    import traversals.mcp_server
    from traversals.llm.scripted import ScriptedLLM

    class Probed(ScriptedLLM):
        completion_template = "chatml"
        probes = 0

        async def probe_scoring(self) -> bool:
            Probed.probes += 1
            self.can_score = True
            return True

    monkeypatch.setattr(traversals.llm.factory, "open_llm", lambda spec="local", **kw: Probed([]))
    served: list[Any] = []

    class Server:
        def run(self, transport: str) -> None:
            served.append(transport)

    def create(llm: Any, kgs: Any, **kw: Any) -> Server:
        assert llm.can_score, "the server was built before the LLM was probed"
        return Server()

    monkeypatch.setattr(traversals.mcp_server, "create_mcp_server", create)
    kg = tmp_path / "films.txt"
    kg.write_text("Alpha|directed_by|Ann Lee\n")
    assert main(["mcp", "--kg", str(kg), *ENDPOINT, "--llm-template", "chatml", "--decoding", "constrained"]) == 0
    assert served == ["stdio"] and Probed.probes == 1
