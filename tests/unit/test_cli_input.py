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


@pytest.mark.parametrize("flags", [["--max-queue", "-1"], ["--timeout", "0"], ["--concurrency", "0"]])
def test_mcp_limits_out_of_range_are_one_line_before_a_model_loads(flags, capsys):
    assert main(["mcp", "--llm", "local:/nonexistent.gguf", *flags]) == 2
    err = capsys.readouterr().err
    assert err.startswith("traversals: error:") and flags[0] in err and err.count("\n") == 1


@pytest.mark.parametrize("flags, named", [
    (["--port", "18777"], "--port sets"), (["--host", "0.0.0.0"], "--host sets"),
    (["--port", "8001", "--host", "127.0.0.1"], "--host and --port set"),  # the defaults typed out, too
])
def test_mcp_refuses_host_and_port_without_streamable_http(flags, named, capsys):
    """`mcp --port N` without --transport silently ran a stdio server, listening nowhere."""
    assert main(["mcp", "--llm", "local:/nonexistent.gguf", *flags]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"error: {named} where the streamable-http transport listens" in err
    assert "add --transport streamable-http or drop" in err


@pytest.mark.parametrize("flags, where", [([], ("127.0.0.1", 8001)), (["--port", "0", "--host", "localhost"],
                                                                       ("localhost", 0))])
def test_mcp_over_streamable_http_listens_where_told_or_at_the_documented_defaults(flags, where, monkeypatch):
    import traversals.cli
    import traversals.llm.factory
    import traversals.mcp_server
    from traversals.llm.scripted import ScriptedLLM

    listened: list[tuple[str, int]] = []

    class Server:
        def streamable_http_app(self, host: str):
            return object()

    monkeypatch.setattr(traversals.llm.factory, "open_llm", lambda spec="local", **kw: ScriptedLLM([]))
    monkeypatch.setattr(traversals.mcp_server, "create_mcp_server", lambda *a, **kw: Server())
    monkeypatch.setattr(traversals.cli, "_check_listen", lambda host, port: listened.append((host, port)))
    monkeypatch.setattr("uvicorn.run", lambda app, host, port, **kw: listened.append((host, port)))
    assert main(["mcp", "--kg", "demo", "--embedder", "lexical", "--transport", "streamable-http", *flags]) == 0
    assert listened == [where, where]


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
    ("tree", ["--embedder-url", "http://127.0.0.1:9/v1"], "mcts/beam/retrieve"),
    ("chain", ["--embedder", "lexical"], "mcts/beam/retrieve"),
    ("tree", ["--max-hops", "2"], "mcts/beam/retrieve"),
    ("retrieve", ["--k", "3"], "tree/chain"),
    ("retrieve", ["--threshold", "0.5"], "tree/chain"),
    ("mcts", ["--beam-width", "5"], "beam"),
    ("chain", ["--beam-branch", "5"], "beam"),
])
def test_a_flag_the_strategy_does_not_read_is_refused_before_anything_runs(command, strategy, flags, readers, capsys):
    """Ignored, it would change nothing while eval's run.json records it as used."""
    err = run(command, strategy, flags, capsys)
    assert f"{flags[0]}" in err and f"used by --strategy {readers} only" in err, err
    assert f"({strategy} " in err and "drop it" in err


@pytest.mark.parametrize("command", [ASK, EVAL], ids=["ask", "eval"])
def test_a_seed_rwt_does_not_read_is_refused_and_every_unused_flag_named(command, capsys):
    err = run(command, "mcts", ["--seed", "3", "--answers", "2", "--embedder", "lexical"], capsys)
    assert "--seed and --answers are used by --strategy tree/chain only" in err and "drop them" in err
    err = run(command, "cot", ["--seed", "3", "--value-model", "m.json"], capsys)
    assert "--seed is used by --strategy tree/chain only, --value-model by --strategy tree/chain/mcts/beam only" in err


@pytest.mark.parametrize("command", [ASK, EVAL], ids=["ask", "eval"])
@pytest.mark.parametrize("strategy, flags", [
    ("tree", ["--calibrate", "--max-depth", "5", "--threshold", "0.5", "--prior-weight", "1", "--value-model", "m.json"]),
    ("chain", ["--k", "1", "--group-selection", "--answers", "3", "--both-orders", "--decoding", "constrained",
               "--seed", "5"]),
    ("mcts", ["--simulations", "4", "--embedder", "lexical", "--decoding", "constrained", "--value-model", "m.json"]),
    ("beam", ["--embedder", "openai:e", "--embedder-url", "http://127.0.0.1:9/v1", "--beam-width", "1",
              "--beam-branch", "5", "--max-hops", "2"]),
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
             "--seed", "0"]
    assert PAST_THE_FLAGS[command[0]] in run(command, strategy, flags, capsys)


def test_an_unknown_eval_strategy_is_refused_before_anything_runs(capsys):
    assert "unknown strategy 'foo'; choose one of tree, chain, cot, mcts, beam" in run(EVAL, "foo", [], capsys)


#: flags of ask and eval that every strategy reads, or that are no search setting
NOT_SEARCH_FLAGS = {
    "--help", "--kg", "--no-cache", "--user-agent", "--kg-timeout", "--llm", "--llm-url", "--llm-template", "--llm-header", "--llm-token-command", "--kg-token-command",
    "--llm-timeout", "--llm-cache", "--n-ctx", "--strategy", "--trace", "--json", "--verbose", "--data", "--split", "--answerable-only",
    "--sample-seed", "--limit", "--skip", "--out", "--concurrency", "--resume", "--retry-errors", "--max-consecutive-errors",
    "--no-progress", "--label-predicate", "--kg-header",
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


SAMPLED = ["--decoding", "sampled"]
WHY_SAMPLED = "--decoding sampled scores no option (the LLM writes its choices): drop one"
WHY_VALUE_MODEL = "--value-model replaces that value: drop one"


@pytest.mark.parametrize("command", [ASK, EVAL], ids=["ask", "eval"])
@pytest.mark.parametrize("strategy, flags, says", [
    # Policy reads these on its constrained path only
    ("tree", ["--calibrate", *SAMPLED], "--calibrate (or --calibrate-weight) divides constrained decoding's "
                                        "relation scores by a neutral prompt's; " + WHY_SAMPLED),
    ("chain", ["--calibrate-weight", "0.5", *SAMPLED], "--calibrate (or --calibrate-weight) divides"),
    ("tree", [*SAMPLED, "--both-orders"], "--both-orders scores constrained decoding's relation choices"),
    ("chain", [*SAMPLED, "--calibrate-answers"], "--calibrate-answers reranks the answer candidates"),
    ("tree", [*SAMPLED, "--compare-answers"], "--compare-answers has constrained decoding score the groups"),
    ("tree", [*SAMPLED, "--answers", "3"], "--answers sets how many of its scored answers constrained decoding"),
    ("chain", [*SAMPLED, "--value-reasoning"], "--value-reasoning makes the LLM value's scored answer rating "
                                               "reason first (a sampled rating always writes its reasoning); "
                                               + WHY_SAMPLED),
    ("tree", [*SAMPLED, "--prior-weight", "0.5"], "--prior-weight weighs the LLM's scored probability of each action"),
    # a trained value replaces the LLM value (TreeOfTraversals builds no ValueFunction)
    ("tree", ["--value-model", "m.json", "--value-examples"],
     "--value-examples shapes the LLM value's rating prompt; " + WHY_VALUE_MODEL),
    ("chain", ["--value-reasoning", "--value-model", "m.json"],
     "--value-reasoning makes the LLM value's answer rating reason first; " + WHY_VALUE_MODEL),
    # one setting, two flags: the later one would win in silence
    ("tree", ["--calibrate", "--calibrate-weight", "0"],
     "--calibrate is --calibrate-weight 1, and --calibrate-weight 0 sets another weight (the later flag would "
     "win in silence): give one"),
    ("chain", ["--calibrate-weight", "0.5", "--calibrate"], "and --calibrate-weight 0.5 sets another weight"),
    # chain is the k = 1 search: refused before a model loads, not by build_solver after it
    ("chain", ["--k", "3"], "--k 3 with --strategy chain, the k = 1 search (Chain-of-Traversals): drop --k or "
                            "use --strategy tree"),
])
def test_a_flag_another_flag_makes_pointless_is_refused_before_anything_runs(command, strategy, flags, says, capsys):
    """Both are read by the strategy, but one undoes the other: ignored in silence, the run
    would be recorded with a setting that did nothing."""
    assert says in run(command, strategy, flags, capsys)


def test_every_pointless_flag_is_named_in_the_one_line(capsys):
    err = run(ASK, "tree", [*SAMPLED, "--value-model", "m.json", "--value-reasoning", "--both-orders"], capsys)
    assert err.count("drop one") == 3 and err.count("--value-reasoning") == 2 and "--both-orders" in err


@pytest.mark.parametrize("command", [ASK, EVAL], ids=["ask", "eval"])
@pytest.mark.parametrize("strategy, flags", [
    # act with sampled decoding too: the sampled selection prompt lists the group, the sampled
    # rating's prompt shows the examples; a weight of 0 and one answer ask for nothing more
    ("tree", [*SAMPLED, "--group-selection", "--value-examples", "--prior-weight", "0", "--answers", "1",
              "--calibrate-weight", "0", "--answer-choice", "support", "--screen-dead-ends", "5"]),
    # act with a trained value: the frontier weighs the LLM's prior, ANSWER proposes 4 to rate
    ("chain", ["--value-model", "m.json", "--prior-weight", "2", "--answers", "4", "--calibrate", "--both-orders",
               "--compare-answers", "--calibrate-answers", "--decoding", "constrained", "--k", "1"]),
    # act with the LLM value under constrained (or auto) decoding
    ("tree", ["--prior-weight", "1", "--value-reasoning", "--value-examples", "--calibrate-weight", "0.5",
              "--answers", "2"]),
    ("tree", ["--calibrate", "--calibrate-weight", "1"]),  # the same weight twice
    # RwT reads --decoding sampled (its relation priors written, not scored)
    ("mcts", [*SAMPLED, "--value-model", "m.json"]),
])
def test_flags_that_act_together_are_accepted(command, strategy, flags, capsys):
    assert PAST_THE_FLAGS[command[0]] in run(command, strategy, flags, capsys)


def test_decoding_auto_is_not_refused_for_what_the_llm_decides_at_run_time(capsys):
    """auto samples with an LLM that cannot score, known only once it is opened: accepted."""
    assert PAST_THE_FLAGS["ask"] in run(ASK, "tree", ["--decoding", "auto", "--both-orders", "--answers", "3"], capsys)


def test_ask_with_cot_opens_no_kg_and_says_so(monkeypatch, tmp_path, capsys):
    """cot reads no KG: a --kg spec, even a file that would not parse, is not opened (a big file
    would be loaded for nothing) and a note says so; nor is the demo KG opened without one. (One
    that names no file is refused, as with the other strategies: test_cli_flag_checks.py.)"""
    import traversals.kg.factory
    import traversals.llm.factory
    from traversals.llm.scripted import ScriptedLLM

    opened: list = []
    monkeypatch.setattr(traversals.kg.factory, "open_kgs", lambda *a, **k: opened.append(a) or [])
    monkeypatch.setattr(traversals.llm.factory, "open_llm", lambda *a, **k: ScriptedLLM(["ANSWER: Bob"] * 2))
    question = ["ask", "who directed [X]", "--strategy", "cot"]
    (tmp_path / "kb.txt.gz").write_bytes(b"not gzip")
    assert main([*question, "--kg", str(tmp_path / "kb.txt.gz"), "--kg", "wikidata"]) == 0
    out = capsys.readouterr()
    assert opened == [] and out.out.splitlines()[0] == "Bob"
    assert out.err == (f"note: cot asks the LLM alone: --kg {tmp_path / 'kb.txt.gz'}, wikidata was not opened "
                       "(tree, chain, mcts, beam and retrieve search a KG)\n")
    assert main(question) == 0
    assert opened == [] and capsys.readouterr().err == ""
    assert main([*question, "--kg", "http://u:pw@127.0.0.1:9/q", "--kg-header", "X-Key: k"]) == 0
    assert capsys.readouterr().err == ("note: cot asks the LLM alone: --kg http://u:***@127.0.0.1:9/q was not opened, "
                                       "nor --kg-header sent (tree, chain, mcts, beam and retrieve search a KG)\n")
    # how a KG would be read, with none opened (they had passed in silence)
    assert main([*question, "--no-cache", "--kg-timeout", "5", "--user-agent", "x", "--label-predicate", "foaf:name"]) == 0
    assert capsys.readouterr().err == ("note: cot asks the LLM alone: --no-cache, --kg-timeout, --user-agent, "
                                       "--label-predicate were not used (tree, chain, mcts, beam and retrieve search "
                                       "a KG)\n")
    main(["ask", "who directed [X]", "--strategy", "chain", "--kg", "demo"])  # the KG strategies open theirs
    assert opened == [(["demo"],)]


def test_eval_with_cot_says_the_kg_given_is_not_opened(monkeypatch, tmp_path, capsys):
    """As ask does: an eval's cot run opens no --kg and sends no --kg-header, and says so once,
    before the run (with the endpoint's password hidden)."""
    import json

    import traversals.kg.factory
    import traversals.llm.factory
    from traversals.llm.scripted import ScriptedLLM

    opened: list = []
    monkeypatch.setattr(traversals.kg.factory, "open_kgs", lambda *a, **k: opened.append(a) or [])
    monkeypatch.setattr(traversals.llm.factory, "open_llm", lambda *a, **k: ScriptedLLM(["ANSWER: x"] * 3))
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"question": "q?", "answers": ["x"]}) + "\n")
    base = ["eval", "questions", "--data", str(questions), "--strategy", "cot", "--no-progress"]
    assert main([*base, "--out", str(tmp_path / "a"), "--kg", "http://u:pw@127.0.0.1:9/q",
                 "--kg-header", "X-Key: k"]) == 0
    err = capsys.readouterr().err
    assert opened == [] and err.count("note: cot asks the LLM alone") == 1
    assert ("--kg http://u:***@127.0.0.1:9/q was not opened, nor --kg-header sent" in err) and ":pw@" not in err
    assert main([*base, "--out", str(tmp_path / "b")]) == 0
    assert "cot asks the LLM alone" not in capsys.readouterr().err


@pytest.mark.parametrize("command", ["serve", "mcp"])
def test_serve_and_mcp_refuse_flags_one_another_makes_pointless_before_a_model_loads(command, capsys):
    """Their flags are every request's defaults: --calibrate with --decoding sampled did nothing
    on any request. A --k beside a chain default stays accepted (the k of tree requests)."""
    assert main([command, "--llm", "local:/nonexistent.gguf", "--decoding", "sampled", "--calibrate"]) == 2
    err = capsys.readouterr().err
    assert "--calibrate" in err and "--decoding sampled" in err and err.count("\n") == 1
    assert main([command, "--llm", "local:/nonexistent.gguf", "--strategy", "chain", "--k", "3"]) == 2
    assert "model file not found" in capsys.readouterr().err  # past the flag checks, to the model


def served_defaults(command: str, flags: list[str], monkeypatch) -> tuple[int | None, str]:
    """``traversals serve|mcp FLAGS`` with a scripted LLM and no server started: the k of its
    default SearchConfig and its default strategy."""
    import traversals.llm.factory
    import traversals.mcp_server
    import traversals.service
    from traversals.llm.scripted import ScriptedLLM

    built: list[tuple[int | None, str]] = []

    class Server:
        def run(self, transport: str) -> None:
            pass

    def create(llm, kgs, *, defaults, default_strategy, **kw):
        built.append((defaults.k, default_strategy))
        return Server()

    monkeypatch.setattr(traversals.llm.factory, "open_llm", lambda spec="local", **kw: ScriptedLLM([]))
    monkeypatch.setattr(traversals.service, "create_app", create)
    monkeypatch.setattr(traversals.mcp_server, "create_mcp_server", create)
    monkeypatch.setattr("uvicorn.run", lambda *a, **k: None)
    port = ["--port", "0"] if command == "serve" else []
    assert main([command, "--kg", "demo", "--embedder", "lexical", *port, *flags]) == 0
    return built[0]


@pytest.mark.parametrize("command", ["serve", "mcp"])
@pytest.mark.parametrize("flags, k, strategy", [
    (["--k", "1"], None, "chain"),  # --k 1 picked chain: tree requests search with their own k (3)
    (["--strategy", "chain", "--k", "1"], None, "chain"),
    (["--strategy", "tree", "--k", "1"], 1, "tree"),  # was searched with k = 3 in silence
    (["--strategy", "mcts", "--k", "1"], 1, "mcts"),  # tree requests' k
    (["--k", "4"], 4, "tree"),
])
def test_serve_and_mcp_drop_k_1_only_where_it_picked_chain(command, flags, k, strategy, monkeypatch):
    """`serve --strategy tree --k 1` served tree requests with k = 3 (69 LLM calls where `ask
    --strategy tree --k 1` spends 12): a --k 1 beside an explicit tree is tree's k."""
    assert served_defaults(command, flags, monkeypatch) == (k, strategy)


def test_a_model_fetched_on_first_use_reports_on_stderr(monkeypatch, capsys):
    """On a fresh machine the first ask fetches 1.1 GB: the fetch's steps are printed on
    stderr (stdout stays the answer's, --json's or MCP's), not minutes of silence."""
    import argparse

    import traversals.embed as embed
    import traversals.llm.factory as llm_factory
    from traversals.options import open_embedder_from_args, open_llm_from_args

    def fake_open(spec="local", progress=None, **kw):
        progress(f"assembling {spec} ...")
        return spec

    monkeypatch.setattr(llm_factory, "open_llm", fake_open)
    monkeypatch.setattr(embed, "open_embedder", fake_open)
    assert open_llm_from_args(argparse.Namespace(llm="local", llm_url=None), environ={}) == "local"
    assert open_embedder_from_args(argparse.Namespace(embedder="sbert"), environ={}) == "sbert"
    out, err = capsys.readouterr()
    assert out == "" and err.splitlines() == ["assembling local ...", "assembling sbert ..."]
