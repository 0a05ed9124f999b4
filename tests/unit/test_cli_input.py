"""Newcomer mistakes on the command line: each is one line on stderr and exit code 2,
before any model is loaded or any search is spent."""

from __future__ import annotations

import pytest

from traversals.cli import main


@pytest.mark.parametrize("question", ["", "   "])
def test_an_empty_question_is_refused_before_a_search(question, capsys):
    assert main(["ask", question, "--llm", "local:/nonexistent.gguf"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("traversals: error: the question is empty") and err.count("\n") == 1


@pytest.mark.parametrize("command", ["serve", "mcp"])
@pytest.mark.parametrize("port", ["99999", "-1", "http"])
def test_a_port_out_of_range_is_refused_by_the_parser(command, port, capsys):
    with pytest.raises(SystemExit) as done:
        main([command, "--port", port])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "argument --port:" in err and "Traceback" not in err


def test_ask_help_states_the_search_defaults_the_readme_gives(capsys):
    with pytest.raises(SystemExit):
        main(["ask", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for flag, default in (("--max-depth N", "default 7"), ("--max-expansions N", "default 20"),
                          ("--threshold X", "default 0.8"), ("--simulations N", "default 16"), ("--seed", "default 0")):
        assert f"{flag} " in out and default in out.split(f"{flag} ", 2)[-1][:120], flag


def test_an_llm_url_without_an_openai_llm_is_refused_rather_than_ignored(capsys):
    """`--llm-url` alone would run the local model in silence, not the server meant."""
    assert main(["ask", "who directed [X]", "--llm-url", "http://127.0.0.1:9/v1", "--kg", "demo"]) == 2
    err = capsys.readouterr().err
    assert "--llm-url" in err and "--llm openai:MODEL" in err and err.count("\n") == 1


def test_an_llm_url_that_serves_the_embedder_is_accepted():
    import argparse

    from traversals.options import open_llm_from_args

    args = argparse.Namespace(llm="local:/nonexistent.gguf", llm_url="http://127.0.0.1:9/v1",
                              embedder="openai:emb", embedder_url=None)
    with pytest.raises(Exception, match="model file not found"):  # past the URL check, to the model
        open_llm_from_args(args, environ={})


@pytest.mark.parametrize("flags", [["--max-queue", "-1"], ["--timeout", "0"]])
def test_mcp_limits_out_of_range_are_one_line_before_a_model_loads(flags, capsys):
    assert main(["mcp", "--llm", "local:/nonexistent.gguf", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("traversals: error:") and flags[0] in err and err.count("\n") == 1


def test_an_rwt_answer_rated_low_without_a_value_model_is_flagged():
    """mcts/beam always answer their best path; without a trained value it is rated by the
    LLM stand-in, and a low rating is said as the tree's is."""
    import argparse

    from traversals.cli import answer_notes
    from traversals.kg.base import Entity
    from traversals.search.result import Answer

    e = Entity("E1", "Charles Bail")
    args = argparse.Namespace(threshold=0.8, max_expansions=20, value_model=None)

    def notes(**kw):
        return answer_notes(Answer(question="q", text="1976", linked_entities=[e], **kw), args)

    low = notes(value=0.17, strategy="beam")
    assert len(low) == 2 and low[0].startswith("beam without --value-model") and "rated 0.17" in low[0]
    assert "no supporting KG edge" in low[1]
    assert not any("value-model" in n for n in notes(value=0.9, strategy="mcts"))
    args.value_model = "models/x.json"
    assert not any("value-model" in n for n in notes(value=0.17, strategy="beam"))
    # the tree's own note is unchanged
    args.value_model = None
    tree = notes(value=0.4, strategy="tree", stopped="max_expansions")
    assert tree[0].startswith("no answer was rated over the threshold 0.8 before the search used its 20 expansions")


ASK = ["ask", "who directed [X]", "--kg", "demo", "--llm", "local:/nonexistent.gguf"]
EVAL = ["eval", "metaqa-1hop", "--data", "/nonexistent", "--out", "/nonexistent/run", "--llm", "local:/nonexistent.gguf"]
#: where each command fails once its flags are accepted: no model is loaded, no data read
PAST_THE_FLAGS = {"ask": "model file not found", "eval": "--data /nonexistent"}


def run(command: list[str], strategy: str, flags: list[str], capsys) -> str:
    """``main`` on ``command --strategy strategy *flags``: exit code 2 and one line, returned."""
    assert main([*command, "--strategy", strategy, *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("traversals: error:") and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize("command", [ASK, EVAL], ids=["ask", "eval"])
@pytest.mark.parametrize("strategy, flags, readers", [
    ("mcts", ["--calibrate"], "tree/chain"),
    ("mcts", ["--calibrate-weight", "0.5"], "tree/chain"),
    ("mcts", ["--threshold", "0.5"], "tree/chain"),
    ("mcts", ["--k", "3"], "tree/chain"),
    ("beam", ["--group-selection"], "tree/chain"),
    ("beam", ["--max-depth", "12"], "tree/chain"),
    ("beam", ["--simulations", "64"], "mcts"),
    ("cot", ["--max-expansions", "5"], "tree/chain"),
    ("cot", ["--decoding", "sampled"], "tree/chain/mcts/beam"),
    ("cot", ["--value-model", "m.json"], "tree/chain/mcts/beam"),
    ("tree", ["--simulations", "64"], "mcts"),
    ("tree", ["--embedder-url", "http://127.0.0.1:9/v1"], "mcts/beam"),
    ("chain", ["--embedder", "lexical"], "mcts/beam"),
])
def test_a_flag_the_strategy_does_not_read_is_refused_before_anything_runs(command, strategy, flags, readers, capsys):
    """Ignored, it would change nothing while eval's run.json records it as used."""
    err = run(command, strategy, flags, capsys)
    assert f"{flags[0]}" in err and f"used by --strategy {readers} only" in err, err
    assert f"({strategy} " in err and "drop it" in err


def test_ask_refuses_a_seed_rwt_does_not_read_and_names_every_unused_flag(capsys):
    err = run(ASK, "mcts", ["--seed", "3", "--answers", "2", "--embedder", "lexical"], capsys)
    assert "--seed and --answers are used by --strategy tree/chain only" in err and "drop them" in err
    err = run(ASK, "cot", ["--seed", "3", "--value-model", "m.json"], capsys)
    assert "--seed is used by --strategy tree/chain only, --value-model by --strategy tree/chain/mcts/beam only" in err


@pytest.mark.parametrize("command", [ASK, EVAL], ids=["ask", "eval"])
@pytest.mark.parametrize("strategy, flags", [
    ("tree", ["--calibrate", "--max-depth", "5", "--threshold", "0.5", "--prior-weight", "1", "--value-model", "m.json"]),
    ("chain", ["--k", "1", "--group-selection", "--answers", "3", "--both-orders", "--decoding", "sampled"]),
    ("mcts", ["--simulations", "4", "--embedder", "lexical", "--decoding", "constrained", "--value-model", "m.json"]),
    ("beam", ["--embedder", "lexical", "--embedder-url", "http://127.0.0.1:9/v1"]),
])
def test_flags_the_strategy_reads_are_accepted(command, strategy, flags, capsys):
    assert PAST_THE_FLAGS[command[0]] in run(command, strategy, flags, capsys)


@pytest.mark.parametrize("command", [ASK, EVAL], ids=["ask", "eval"])
@pytest.mark.parametrize("strategy", ["cot", "mcts"])
def test_a_default_typed_out_is_accepted(command, strategy, capsys):
    """``--threshold 0.8`` changes nothing, whichever strategy runs."""
    flags = ["--threshold", "0.8", "--max-depth", "7", "--max-expansions", "20", "--decoding", "auto",
             "--calibrate-weight", "0", "--answer-choice", "value", "--no-group-selection",
             *(["--embedder", "lexical"] if strategy == "mcts" else ["--simulations", "16"]),
             *(["--seed", "0"] if command[0] == "ask" else [])]
    assert PAST_THE_FLAGS[command[0]] in run(command, strategy, flags, capsys)


def test_an_unknown_eval_strategy_is_refused_before_anything_runs(capsys):
    assert "unknown strategy 'foo'; choose one of tree, chain, cot, mcts, beam" in run(EVAL, "foo", [], capsys)


#: flags of ask and eval that every strategy reads, or that are no search setting
NOT_SEARCH_FLAGS = {
    "--help", "--kg", "--no-cache", "--user-agent", "--kg-timeout", "--llm", "--llm-url", "--llm-template",
    "--llm-timeout", "--strategy", "--trace", "--json", "--verbose", "--data", "--split", "--answerable-only",
    "--sample-seed", "--limit", "--out", "--concurrency", "--resume", "--retry-errors", "--max-consecutive-errors",
    "--no-progress",
}


@pytest.mark.parametrize("command", ["ask", "eval"])
def test_every_search_flag_says_which_strategies_read_it_and_defaults_to_not_given(command):
    """A new flag of ask or eval gets its line in SEARCH_FLAG_STRATEGIES (or is listed here
    as no search setting); a flag left out never counts as given."""
    import argparse

    from traversals.cli import build_parser
    from traversals.options import SEARCH_FLAG_STRATEGIES, flag_dest, flag_given

    parser = build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    p = sub.choices[command]
    dests = {flag_dest(f) for f in SEARCH_FLAG_STRATEGIES}
    flags = {s for a in p._actions for s in a.option_strings if s.startswith("--") and a.dest not in dests}
    assert flags <= NOT_SEARCH_FLAGS, f"say which strategies read {sorted(flags - NOT_SEARCH_FLAGS)}"
    args = p.parse_args(["q"] if command == "ask" else ["metaqa-1hop", "--data", "d", "--strategy", "cot", "--out", "o"])
    assert [f for f in SEARCH_FLAG_STRATEGIES if flag_given(args, f)] == []


@pytest.mark.parametrize("command", [["ask", "who directed [X]", "--kg", "demo"],
                                     ["eval", "metaqa-1hop", "--data", "/nonexistent", "--out", "/nonexistent/run"]])
def test_a_value_model_with_cot_is_refused_before_anything_runs(command, capsys):
    """cot rates nothing: a run must not be recorded as using a value model it did not use."""
    says = "--value-model is used by --strategy tree/chain/mcts/beam only (cot asks the LLM alone"
    assert main([*command, "--llm", "local:/nonexistent.gguf", "--strategy", "cot", "--value-model", "m.json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("traversals: error:") and says in err and err.count("\n") == 1
