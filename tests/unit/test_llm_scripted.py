import re

import pytest

from traversals.errors import LLMError, ScoringNotSupported
from traversals.llm.base import LLM, Usage
from traversals.llm.chat import apply_stop, prefix_instruction, strip_prefix
from traversals.llm.scripted import ScriptedLLM


async def test_list_of_responses_in_order_and_recorded():
    llm = ScriptedLLM(["first", ["a", "b", "c"]])
    assert isinstance(llm, LLM)
    g1 = await llm.generate("question one", prefix="THOUGHT:", n=1)
    g2 = await llm.generate("question two", n=3, temperature=0.7, seed=5)
    assert g1.texts == ["first"]
    assert g2.texts == ["a", "b", "c"]
    assert [(c.prompt, c.prefix, c.n, c.temperature) for c in llm.calls] == [
        ("question one", "THOUGHT:", 1, 0.0),
        ("question two", "", 3, 0.7),
    ]
    assert llm.calls[1].seed == 5
    assert llm.calls[1].result == ["a", "b", "c"]
    with pytest.raises(LLMError, match="no scripted response left"):
        await llm.generate("question three")


async def test_string_response_is_repeated_n_times():
    llm = ScriptedLLM(["same"])
    g = await llm.generate("q", n=3, temperature=1.0)
    assert g.texts == ["same", "same", "same"]


async def test_callable_script_gets_prompt_prefix_n_temperature():
    seen = []

    def fn(prompt, prefix, n, temperature):
        seen.append((prompt, prefix, n, temperature))
        return [f"{prefix}-{i}" for i in range(n)]

    llm = ScriptedLLM(fn)
    g = await llm.generate("p", prefix="X", n=2, temperature=0.5)
    assert g.texts == ["X-0", "X-1"]
    assert seen == [("p", "X", 2, 0.5)]


async def test_rules_first_match_wins_substring_regex_predicate():
    llm = ScriptedLLM(
        rules=[
            ("SELECT ENTITIES:", " Q1, Q2"),
            (re.compile(r"capital of (\w+)"), lambda p, pre, n, t: ["Paris"] * n),
            (lambda text: text.endswith("ANSWER:"), [" yes", " no"]),
            ("SELECT", "never reached for SELECT ENTITIES"),
        ]
    )
    g = await llm.generate("Pick some.", prefix="SELECT ENTITIES:")
    assert g.texts == [" Q1, Q2"]
    assert llm.calls[-1].rule == 0
    g = await llm.generate("What is the capital of France?", n=2)
    assert g.texts == ["Paris", "Paris"]
    assert llm.calls[-1].rule == 1
    g = await llm.generate("Is it?", prefix="ANSWER:", n=2)
    assert g.texts == [" yes", " no"]


async def test_rules_match_against_prompt_plus_prefix():
    llm = ScriptedLLM(rules=[("endTHOUGHT", "ok")])
    assert (await llm.generate("the end", prefix="THOUGHT")).texts == ["ok"]


async def test_no_rule_matches_names_prefix_and_prompt_tail():
    llm = ScriptedLLM(rules=[("nothing like this", "x")])
    prompt = "A" * 500 + "TAIL-OF-PROMPT"
    with pytest.raises(LLMError) as ei:
        await llm.generate(prompt, prefix="ACTION:")
    msg = str(ei.value)
    assert "no rule matches" in msg
    assert "'ACTION:'" in msg
    assert "TAIL-OF-PROMPT" in msg
    assert "A" * 301 not in msg  # only the last 300 characters


async def test_rules_fall_back_to_queue():
    llm = ScriptedLLM(["queued"], rules=[("special", "ruled")])
    assert (await llm.generate("special case")).texts == ["ruled"]
    assert (await llm.generate("other")).texts == ["queued"]


async def test_stop_sequences_cut_replies_and_tokens_are_counted():
    llm = ScriptedLLM(["one two\nthree four"])
    g = await llm.generate("a b c", prefix="d", stop=["\n"])
    assert g.texts == ["one two"]
    assert g.prompt_tokens == 4
    assert g.completion_tokens == 2
    assert g.computed_prompt_tokens == 4
    u = Usage()
    u.add_generation(g)
    assert u.llm_calls == 1 and u.prompt_tokens == 4


async def test_scoring_with_callable_and_mapping():
    llm = ScriptedLLM(["x"], score=lambda prompt, options, prefix: [-float(len(o)) for o in options])
    assert llm.can_score
    s = await llm.score("q", ["a", "bbb"], prefix="P")
    assert s.logprobs == [-1.0, -3.0]
    assert llm.score_calls[0].options == ["a", "bbb"]
    assert llm.score_calls[0].prefix == "P"

    llm2 = ScriptedLLM(["x"], score={" Paris": -0.1}, default_logprob=-50)
    s = await llm2.score("q", [" Paris", " Rome"])
    assert s.logprobs == [-0.1, -50.0]


async def test_scoring_unsupported_without_score():
    llm = ScriptedLLM(["x"])
    assert not llm.can_score
    with pytest.raises(ScoringNotSupported):
        await llm.score("q", ["a"])


async def test_score_function_must_return_one_value_per_option():
    llm = ScriptedLLM(["x"], score=lambda p, o, pre: [0.0])
    with pytest.raises(LLMError, match="2 options"):
        await llm.score("q", ["a", "b"])


async def test_close_and_constructor_validation():
    llm = ScriptedLLM(["x"])
    await llm.close()
    with pytest.raises(LLMError, match="closed"):
        await llm.generate("q")
    with pytest.raises(ValueError):
        ScriptedLLM()


# --- chat helpers shared by the backends -------------------------------------------


def test_prefix_instruction():
    assert prefix_instruction("Q?", "") == "Q?"
    assert prefix_instruction("Q?\n", "ANSWER:") == 'Q?\n\nStart your reply with "ANSWER:".'


@pytest.mark.parametrize(
    "text,prefix,expected",
    [
        ("SELECT ENTITIES: Q1", "SELECT ENTITIES:", " Q1"),
        ("  SELECT ENTITIES: Q1", "SELECT ENTITIES:", " Q1"),
        ("Answer: Paris", "Answer: ", "Paris"),
        ("Paris", "Answer:", "Paris"),
        ("**Answer:** Paris", "Answer:", " Paris"),
        ("anything", "", "anything"),
        # in another case, or cut short by max_tokens: a rating read "0.0" from "[0.0-1.0]"
        ("Rating [0.0-1.0]: 0.9", "RATING [0.0-1.0]: ", "0.9"),
        ("RATING [0.0", "RATING [0.0-1.0]: ", ""),
        ("A", "Answer: ", "A"),  # too short to be the prefix's start: an answer
    ],
)
def test_strip_prefix(text, prefix, expected):
    assert strip_prefix(text, prefix) == expected


def test_apply_stop():
    assert apply_stop("a\nb END c", ["END", "\n"]) == "a"
    assert apply_stop("abc", None) == "abc"
    assert apply_stop("abc", [""]) == "abc"


async def test_replies_are_cut_at_max_tokens_when_asked_as_a_backend_cuts_them():
    llm = ScriptedLLM(["one two three", "one two three\nfour"], cut_at_max_tokens=True)
    cut = await llm.generate("q", max_tokens=2)
    assert cut.texts == ["one two"] and cut.finish_reasons == ["length"] and cut.completion_tokens == 2
    whole = await llm.generate("q", max_tokens=4, stop=["\n"])
    assert whole.texts == ["one two three"] and whole.finish_reasons == ["stop"]
    assert (await ScriptedLLM(["one two three"]).generate("q", max_tokens=1)).finish_reasons is None  # by default
