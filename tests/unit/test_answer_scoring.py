"""Answer candidates are scored as the prompt shows them (one line, clipped), and answer as
the whole label of the entity chosen (constrained decoding, :mod:`traversals.search.policy`)."""

from traversals.api import SearchConfig, build_solver
from traversals.kg.base import Entity, Relation
from traversals.llm.base import Usage
from traversals.llm.scripted import ScriptedLLM
from traversals.search.kgset import KGSet
from traversals.search.machine import Action, ActionType, Machine, Node, State
from traversals.search.policy import ANSWER_PREFIX, Policy, shown_answer
from traversals.search.subgraph import MAX_SHOWN, Fact, Subgraph
from traversals.search.value import ANSWER_SCORE_PREFIX

from .kgdouble import DictKG, dylan_kg

LONG = "The " + "very " * 2000 + "long film"  # 10,013 characters
CLIPPED = f"{LONG[:MAX_SHOWN]}… [{len(LONG) - MAX_SHOWN} more characters]"


async def test_a_long_label_is_scored_clipped_and_is_still_the_answer():
    kg = DictKG([("s", "r", "t"), ("s", "r", "u")], labels={"s": "Start", "t": LONG, "u": "Paris"},
                relation_labels={"r": ("shown in", "")})

    def score(prompt, options, prefix):
        if prefix == ANSWER_PREFIX:  # the answer choice: the long film is the model's favourite
            return [-0.1 if o == CLIPPED else -50.0 for o in options]
        if prefix.startswith(ANSWER_SCORE_PREFIX):  # the answer's rating
            return [0.0 if o == "1.0" else -5.0 for o in options]
        answering = "SELECT RELATION" in prompt  # the action type: expand first, then answer
        return [-0.1 if o == ("ANSWER" if answering else "EXPAND_KG") else -5.0 for o in options]

    llm = ScriptedLLM(rules=[(lambda text: text.endswith("ANSWER:"), " Paris"),
                             (lambda text: text.endswith("EXPAND_KG:"), " what was shown")], score=score)
    solver = build_solver("chain", llm, [kg], SearchConfig(decoding="constrained"))
    answer = await solver.ask("which film was shown?", topic_entities=["Start"])

    asked = [c for c in llm.score_calls if c.prefix == ANSWER_PREFIX]
    assert len(asked) == 1
    options = asked[0].options
    # the free text, the list of both and each label, the long one clipped with its marker
    assert options == ["Paris", f"[{CLIPPED}, Paris]", CLIPPED]
    assert all(len(o) < 2 * MAX_SHOWN for o in options)
    # no call carried the whole label, not the answer's rating either
    assert not any(LONG in c.prompt or LONG in "".join(c.options or []) for c in llm.calls)
    rated = [c for c in llm.score_calls if c.prefix.startswith(ANSWER_SCORE_PREFIX)]
    assert rated and all(f"Provided answer: {CLIPPED}\n" in c.prompt for c in rated)
    # the answer is the entity's whole label, supported by its edge
    assert answer.text == LONG
    assert [(e.subject.label, e.object.label) for e in answer.supporting_edges] == [("Start", LONG)]


def answering(labels: list[str]) -> tuple[Node, Subgraph]:
    """A node that has walked ``Start --rel--> label`` for each of ``labels``."""
    src = Entity("Q1", "Start")
    root = Node(0, State.DEFAULT, Subgraph().with_entities([src]))
    sg = root.subgraph.extend([Fact(src, Relation("P1", "rel"), Entity(f"Q{i + 10}", s)) for i, s in enumerate(labels)])
    node = Node(1, State.DEFAULT, sg, parent=root)
    node.new_facts = sg.facts
    return node, sg


async def choose(labels: list[str], free: str, score, query: str = "which?") -> tuple[str, list[str]]:
    """The answer a constrained policy proposes at :func:`answering`'s node, and the options it scored."""
    node, _ = answering(labels)
    llm = ScriptedLLM(rules=[("", free)], score=score)
    policy = Policy(llm, Machine(KGSet([DictKG([])])), constrained=True)
    (action,) = (await policy.propose(query, node, 1, Usage(), force_answer=True)).actions
    assert action.type is ActionType.ANSWER
    return action.text, llm.score_calls[0].options


async def test_candidates_that_show_alike_are_scored_with_their_handles_and_answer_as_the_one_chosen():
    labels = ["Paris", "Par\u200bis"]  # tell apart only by a zero-width space
    favour = lambda name: lambda prompt, options, prefix: [-0.1 if o == name else -9.0 for o in options]  # noqa: E731
    text, options = await choose(labels, " Paris", favour("Paris [Q11]"))
    # the list shows the pair as the prompt does; each label is followed by its handle
    assert options == ["Paris [Q10]", "[Paris, Paris]", "Paris [Q11]"]
    assert text == "Par\u200bis"
    text, _ = await choose(labels, " Paris", favour("Paris [Q10]"))
    assert text == "Paris"
    # a free text that copies a candidate as shown is that candidate, not the label it holds
    text, options = await choose(labels, " Paris [Q11]", favour("Paris [Q11]"))
    assert options == ["Paris [Q11]", "[Paris, Paris]", "Paris [Q10]"] and text == "Par\u200bis"


async def test_two_long_labels_alike_up_to_the_clip_are_told_apart_and_each_distinct_text_is_scored_once():
    a, b = "x" * 5000 + "a", "x" * 5000 + "b"
    shown_a = f"{'x' * MAX_SHOWN}… [{5001 - MAX_SHOWN} more characters]"
    text, options = await choose([a, b], " nothing", lambda prompt, options, prefix: [
        -0.1 if o == f"{shown_a} [Q11]" else -9.0 for o in options])
    assert text == b
    assert options == ["nothing", f"[{shown_a}, {shown_a}]", f"{shown_a} [Q11]", f"{shown_a} [Q10]"]
    assert len(set(options)) == len(options)


def test_an_answer_is_shown_on_one_line_and_a_list_item_by_item():
    assert shown_answer("Paris") == "Paris"
    assert shown_answer("two\nlines\u202e") == "two lines"
    assert shown_answer(f"[{LONG}, Paris]") == f"[{CLIPPED}, Paris]"
    assert shown_answer("[brackets]") == "[brackets]"
    assert shown_answer(LONG, (LONG,)) == CLIPPED
    assert shown_answer("[A, B]", ("A, B",)) == "[A, B]"  # one label with a comma: not a list


async def test_a_free_text_that_says_yes_or_no_or_none_is_not_turned_into_the_entity_it_names():
    """The free text scored best: "Yes, Paris is ..." to a yes/no question was answered
    "Paris", and "Not in the graph: the mother of Paris" was "Paris"."""
    free_first = lambda prompt, options, prefix: [-0.1 if i == 0 else -9.0 for i, _ in enumerate(options)]  # noqa: E731
    text, _ = await choose(["Paris", "Rome"], " Yes, Paris is the capital.", free_first, query="Is Paris the capital?")
    assert text == "Yes"
    text, _ = await choose(["Paris", "Rome"], " Not in the graph: the mother of Paris", free_first)
    assert text == "Not in the graph: the mother of Paris"
    text, _ = await choose(["Paris", "Rome"], " The answer is Paris.", free_first)
    assert text == "Paris"  # a sentence naming one entity still is that entity



async def walked_mothers(machine: Machine, hops: int) -> Node:
    """Bob Dylan --P25--> Beatrice Stone (--P25--> Florence Stone): ``hops`` steps walked on
    the Dylan KG."""
    kg = machine.kgs.kgs[0]
    node, u = machine.root(Subgraph().with_entities([kg.entities["Q392"]])), Usage()
    for entity in (kg.entities["Q392"], kg.entities["Q62519478"])[:hops]:
        node = await machine.transition(node, Action(ActionType.EXPAND_KG, "go"), u)
        node = await machine.transition(node, Action(ActionType.SELECT_ENTITIES, entities=(entity,)), u)
        i = node.relation_keys.index("P25")
        node = await machine.transition(node, Action(ActionType.SELECT_RELATION, relation=node.relation_options[i],
                                                     relation_key="P25"), u)
    return node


async def test_a_bare_no_to_a_wh_question_leaves_the_lone_candidate_as_the_answer():
    # "No" is dropped (the small model copies the preamble's "ANSWER: No"); the one entity
    # reached is the only option left, and the answer
    machine = Machine(KGSet([dylan_kg()]))
    node = await walked_mothers(machine, 1)
    llm = ScriptedLLM(rules=[("", "No")], score=lambda prompt, options, prefix: [-1.0] * len(options))
    proposal = await Policy(llm, machine, constrained=True).propose("Who is Bob Dylan's mother?", node, 1, Usage(),
                                                                     force_answer=True)
    assert [(a.type, a.text) for a in proposal.actions] == [(ActionType.ANSWER, "Beatrice Stone")]


async def test_a_calibrated_favourite_free_text_that_names_two_entities_does_not_stay_first():
    """With ``calibrate_answers`` a free-text favourite keeps first place only when it names no
    entity of the subgraph (a count, a yes/no); "Florence Stone, the mother of Beatrice Stone"
    names two, and the candidates ranked by calibration come first."""
    machine = Machine(KGSet([dylan_kg()]))
    node = await walked_mothers(machine, 2)
    free = "Florence Stone, the mother of Beatrice Stone"
    table = {free: -0.1, "Florence Stone": -1.0, "Beatrice Stone": -2.0}
    llm = ScriptedLLM(rules=[("", free)], score=lambda prompt, options, prefix: [table.get(o, -3.0) for o in options])
    policy = Policy(llm, machine, constrained=True, calibrate_answers=True)
    proposal = await policy.propose("Who is Bob Dylan's maternal grandmother?", node, 1, Usage(), force_answer=True)
    assert [a.text for a in proposal.actions] == ["Florence Stone"]
