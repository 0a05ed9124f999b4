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


@pytest.mark.parametrize("command", [["ask", "who directed [X]", "--kg", "demo"],
                                     ["eval", "metaqa-1hop", "--data", "/nonexistent", "--out", "/nonexistent/run"]])
def test_a_value_model_with_cot_is_refused_before_anything_runs(command, capsys):
    """cot rates nothing: a run must not be recorded as using a value model it did not use."""
    says = "--value-model is not used by --strategy cot"
    assert main([*command, "--llm", "local:/nonexistent.gguf", "--strategy", "cot", "--value-model", "m.json"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("traversals: error:") and says in err and err.count("\n") == 1
