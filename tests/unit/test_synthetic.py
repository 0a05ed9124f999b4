"""Synthetic training questions (traversals.eval.synthetic): random walks on the real MetaQA
KB, phrasings from a scripted LLM (the real model's phrasings: tests/integration/test_train_value.py)."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from traversals.errors import BadInput
from traversals.eval.synthetic import (
    PHRASE_QUESTIONS,
    Phrasing,
    SyntheticConfig,
    SyntheticQuestions,
    compose,
    head_noun,
    join_round_trips,
    listed_words,
    read_phrasings,
    reads_as_question,
    entity_kinds,
    parse_phrasing,
    plural,
    role_questions,
    side_kinds,
)
from traversals.kg.base import Relation
from traversals.kg.factory import open_kgs
from traversals.llm.base import Usage
from traversals.llm.scripted import ScriptedLLM
from traversals.search.kgset import KGSet

from .kgdouble import DictKG


@pytest.fixture
async def kb(SHARED):
    path = SHARED / "data" / "metaqa" / "kb.txt"
    if not path.exists():
        pytest.skip(f"{path} is not there")
    kgs = KGSet(open_kgs([str(path)]))
    yield kgs
    await kgs.close()


async def test_entities_are_drawn_the_same_for_a_seed(kb):
    usage = Usage()
    first = await kb.sample_entities(50, usage, seed=3)
    assert len({e.id for e in first}) == 50 and all(e.label and e.kg for e in first)
    assert [e.id for e in await kb.sample_entities(50, usage, seed=3)] == [e.id for e in first]
    assert [e.id for e in await kb.sample_entities(50, usage, seed=4)] != [e.id for e in first]


async def test_a_kg_that_cannot_draw_entities_says_so():
    kgs = KGSet([DictKG([("a", "r", "b")], name="mine")])
    with pytest.raises(BadInput, match="cannot draw entities at random from mine"):
        await kgs.sample_entities(5, Usage())


def test_a_phrasing_needs_exactly_one_slot():
    reply = " Who directed {}?\nPhrase: the director of {}\nReverse question: What films did {} direct?\nReverse phrase: x"
    assert parse_phrasing(reply) == {"question": "Who directed {}?", "phrase": "the director of {}",
                                     "reverse question": "What films did {} direct?"}
    assert parse_phrasing("Who directed the film?\nPhrase: the director of {} and {}") == {}
    assert parse_phrasing("") == {}


def test_a_question_line_must_read_as_a_question():
    # what the 1.5B model wrote for PathQuestion's "parents": a statement, dropped
    reply = " {} and his parents are related to each other.\nPhrase: the parents of {}\nReverse question: Who died from {}"
    assert parse_phrasing(reply) == {"phrase": "the parents of {}", "reverse question": "Who died from {}"}
    assert reads_as_question("{} was directed by whom?") and reads_as_question("Name the films of {}.")
    assert not reads_as_question("the director of {}") and not reads_as_question("")


def test_a_question_wraps_the_earlier_hops_phrases_innermost_first():
    starred = Phrasing(questions=["What films did {} star in?"], phrases=["the films {} starred in"])
    director = Phrasing(questions=["Who directed {}?"], phrases=[])
    year = Phrasing(questions=["When was {} released?"], phrases=["the release year of {}"])
    assert compose([director], "Man of Aran", random.Random(0)) == "Who directed [Man of Aran]?"
    assert compose([starred, director], "Jon Hamm", random.Random(0)) == "Who directed the films [Jon Hamm] starred in?"
    # the last hop is asked with its question or, half the time, its noun phrase
    asked = {compose([starred, year], "Jon Hamm", random.Random(i)) for i in range(40)}
    assert "When was the films [Jon Hamm] starred in released?" in asked
    assert {f.replace("{}", "the release year of the films [Jon Hamm] starred in") for f in PHRASE_QUESTIONS} & asked


def test_an_entity_is_named_with_the_kind_most_of_its_relations_give_it():
    films = Phrasing(questions=["Which films did {} direct?"],
                     phrases=["what {} directed", "the films directed by {}", "the movies directed by {}"])
    assert side_kinds(films) == ["film", "movie"] and side_kinds(Phrasing(phrases=["the release years of {}"])) == [
        "release year"]
    assert side_kinds(Phrasing(questions=["Who directed {}?"])) == []
    assert entity_kinds([["film", "movie"], [], ["show"], ["film"], ["image"], ["movie"]]) == ["film", "movie"]
    assert entity_kinds([["actor", "star"], ["director"]]) == ["actor", "star"] and entity_kinds([[]]) == []
    director = Phrasing(questions=["Who directed {}?"], phrases=["the director of {}"])
    assert compose([director], "Heat", random.Random(0), "film") == "Who directed the film [Heat]?"
    assert compose([films, director], "Mann", random.Random(0), "director") == (
        "Who directed the films directed by the director [Mann]?")


def test_a_hop_against_the_edges_is_also_asked_by_role():
    director = Phrasing(questions=["Who directed {}?"], phrases=["the director of {}"])
    films = Phrasing(questions=["Which films did {} direct?"], phrases=["the films directed by {}"])
    assert role_questions(director, films) == ["{} is the director of which films?",
                                               "{} was the director of which films?"]
    year = Phrasing(phrases=["the release years of {}"])
    assert role_questions(year, Phrasing(phrases=["the movie released in {}"]))[0] == (
        "{} is the release year of which movies?")
    assert role_questions(Phrasing(questions=["Who directed {}?"]), films) == []


def test_head_nouns_of_the_llms_noun_phrases():
    assert [head_noun(p) for p in ("the films directed by {}", "the release year of {}", "the actors who starred in {}",
                                   "the IMDb rating of {}", "the people speaking {}?", "the films {} starred in")] == [
        "films", "release year", "actors", "IMDb rating", "people", "films"]
    assert head_noun("what {} directed") is None and head_noun("the {}") is None
    assert [plural(n) for n in ("director", "story", "actress", "release year", "films", "people")] == [
        "directors", "stories", "actresses", "release years", "films", "people"]


def test_a_round_trip_is_said_as_one_unit_half_the_time():
    directed = Relation(id="directed_by", label="directed by", kg="kb")
    director = Phrasing(questions=["Who directed {}?"], phrases=["the director of {}"])
    films = Phrasing(questions=["Which films did {} direct?"], phrases=["the films directed by {}?"])
    year = Phrasing(questions=["When was {} released?"], phrases=["the release year of {}"])
    rels, phr = [directed, directed.reversed(), Relation(id="release_year", label="release year", kg="kb")], [director, films, year]
    asked = {compose(join_round_trips(rels, phr, random.Random(i)), "Heat", random.Random(i)) for i in range(60)}
    assert "When was the films directed by the director of [Heat] released?" in asked  # hop by hop
    assert "When was the films that share directors with [Heat] released?" in asked
    assert "When was the films with the same director as [Heat] released?" in asked
    assert not any("?" in q[:-1] for q in asked)  # the phrase's own "?" is dropped inside the question
    assert not any("co-" in q for q in asked)  # "co-" only when the trip starts against the edges
    back = {compose(join_round_trips([directed.reversed(), directed], [films, director], random.Random(i)), "Mann",
                    random.Random(i)) for i in range(60)}
    assert {"What are the co-directors of [Mann]?", "Which are the directors that share films with [Mann]?"} & back
    # no round trip: two different relations are composed hop by hop, always
    assert join_round_trips([directed, rels[2]], [director, year], random.Random(0)) == [director, year]


async def test_a_small_kg_is_walked_again_for_more_questions(tmp_path):
    """PathQuestion's PQ-2H KB has 1,056 entities: one walk from each gave 539 questions of
    the 1,500 asked. The draw is walked again, with other seeds, and a walk already made
    (same start, same relations) is not kept twice."""
    people = [f"p{i}" for i in range(6)]
    lines = [f"{a}|knows|{b}" for a in people for b in people if a != b][:20]
    lines += [f"{a}|likes|{c}" for a, c in zip(people, ["tea", "jazz", "chess", "tea", "jazz", "chess"])]
    (tmp_path / "small.txt").write_text("\n".join(lines) + "\n")
    kgs = KGSet(open_kgs([str(tmp_path / "small.txt")]))
    try:
        llm = ScriptedLLM(lambda *a: "", score=lambda prompt, options, prefix: [0.0] * len(options))
        once = await SyntheticQuestions(kgs, llm, SyntheticConfig(questions=60, max_hops=2, passes=1)).walks()
        again = await SyntheticQuestions(kgs, llm, SyntheticConfig(questions=60, max_hops=2, passes=3)).walks()
    finally:
        await kgs.close()
    def made(walks):
        return [(end.path()[0].entities[0].id, tuple(n.relation.key for n in end.path()[1:])) for _, end in walks]
    assert len(once) <= 9 < len(again)  # 9 entities to start from
    assert len(set(made(again))) == len(again) and made(again)[: len(once)] == made(once)
    assert len({i for i, _ in again}) == len(again)  # indices stay unique: they seed each question


async def test_walks_and_questions_on_the_kb(kb, tmp_path):
    def reply(prompt, prefix, n, temperature):  # one phrasing per relation and direction, named after it
        if prefix.startswith("\nRelation: "):  # the other words a question may use for it
            return f" {prefix.split(': ')[1].split()[0]}ish, Other words. , other words"
        r = prompt.rsplit("Relation: ", 1)[1].split(" (")[0]
        return (f" What is the {r} of {{}}?\nPhrase: the {r} of {{}}\n"
                f"Reverse question: What has {r} {{}}?\nReverse phrase: the things with {r} {{}}")

    llm = ScriptedLLM(reply, score=lambda prompt, options, prefix: [0.0] * len(options))
    config = SyntheticConfig(questions=9, seed=1, variants=1, typed_mentions=0.5, paraphrases=0)
    made = await SyntheticQuestions(kb, llm, config).run(tmp_path / "p.json", tmp_path / "q.jsonl")
    assert sorted(len(q.path) for q in made) == [1, 1, 1, 2, 2, 2, 3, 3, 3]  # hop counts in turn
    lines = [json.loads(line) for line in (tmp_path / "q.jsonl").read_text().splitlines()]
    assert [line["question"] for line in lines] == [q.question for q in made]
    assert 0 < sum("the thing [" in q.question for q in made) < len(made)
    usage = Usage()
    for q in made:
        assert f"[{q.start['label']}]" in q.question and q.answers and q.start["label"] not in q.answers
        # some questions name their entity with its kind, read from the phrases that lead to it
        assert q.question.count("the thing [") <= 1 and "the the" not in q.question
        assert 1 <= len(q.answers) <= 20
        # the gold answers are what the KG reaches along the walk's relations
        entities = [q.entity()]
        seen = {q.entity().id}
        for key in q.path:
            relation = next(r for r in (await kb.get_relations(entities, usage)).items if r.key == key)
            got = await kb.get_edges(entities, relation, usage)
            entities = list({x.id: x for e in got.edges for x in (e.subject, e.object) if x.id not in seen}.values())
            seen |= {e.id for e in entities}
        assert sorted(e.label for e in entities) == sorted(q.answers)
    one_hop = next(q for q in made if len(q.path) == 1)
    written = json.loads((tmp_path / "p.json").read_text())  # relation key -> phrasing, and who wrote them
    assert written["llm"] == "scripted" and one_hop.path[0] in written["relations"]
    # the other words for each relation walked, asked once (forward), deduplicated
    forward = {k.lstrip("~") for q in made for k in q.path}
    for key in forward:
        assert written["relations"][key]["synonyms"][1:] == ["other words"], written["relations"][key]
        assert written["relations"]["~" + key]["synonyms"] is None
    listed = listed_words(read_phrasings(tmp_path / "p.json", "scripted"))
    assert set(listed.synonyms) == forward and "thing" in {w for ws in listed.called.values() for w in ws}
    # a rerun reads the phrasings back: the LLM is not asked again
    asked = len(llm.generate_calls)
    again = await SyntheticQuestions(kb, llm, config).run(tmp_path / "p.json", tmp_path / "q2.jsonl")
    assert [q.question for q in again] == [q.question for q in made] and len(llm.generate_calls) == asked
    # … but another LLM's rerun does not silently take them as its own
    other = ScriptedLLM(reply, score=lambda prompt, options, prefix: [0.0] * len(options), name="local:other.gguf")
    with pytest.raises(BadInput, match=r"p.json holds phrasings written by scripted, not by local:other.gguf: move"):
        await SyntheticQuestions(kb, other, config).run(tmp_path / "p.json", tmp_path / "q3.jsonl")
    assert not other.generate_calls
    # a file of the first format (relation keys at the top, no LLM recorded) is read as before
    (tmp_path / "old.json").write_text(json.dumps(written["relations"]))
    old = await SyntheticQuestions(kb, other, config).run(tmp_path / "old.json", tmp_path / "q4.jsonl")
    assert [q.question for q in old] == [q.question for q in made] and not other.generate_calls
    (tmp_path / "bad.json").write_text(json.dumps({"format": "something/9", "relations": {}}))
    with pytest.raises(BadInput, match="bad.json is not a phrasings file .*something/9.*move it away"):
        await SyntheticQuestions(kb, llm, config).run(tmp_path / "bad.json", tmp_path / "q5.jsonl")


async def test_a_phrasing_the_llm_does_not_read_back_as_its_relation_is_dropped(kb):
    right = (" Who directed {}?\nPhrase: the director of {}\n"
             "Reverse question: What films did {} direct?\nReverse phrase: the films directed by {}")
    wrong = (" When was {} released?\nPhrase: the year of {}\n"
             "Reverse question: What films did {} write?\nReverse phrase: the films written by {}")

    def reply(prompt, prefix, n, temperature):
        if prefix.startswith("Question: "):  # the first question said in other words
            assert prefix.endswith("\nIn other words:") and "Man of Aran" not in prompt
            if temperature > 0 and "What films" in prefix:  # turned around: asks for a person
                return [" Who starred in the films of {}?"] * n
            other = {"Who directed {}?": " Who made {}?", "What films did {} direct?": " What did {} write?"}
            return [other.get(prefix.split("\n")[0].removeprefix("Question: "), " no slot")] * n
        assert "Man of Aran -> directed by -> Robert J. Flaherty" in prompt  # the KG's own edge, forward
        return [right] * n if temperature == 0 else [wrong] * n

    def score(prompt, options, prefix):  # the check: the LLM picks the relation the question's words name
        q = prompt.split("Question: ")[1].split("\n")[0]
        if q == "N/A":  # the calibration's neutral prompt: no preference
            return [0.0] * len(options)
        named = ("release_year" if "released" in q or "year of" in q else "~written_by" if "writ" in q
                 else "~directed_by" if "films" in q else "directed_by")
        return [0.0 if o.split(" ")[0] == named else -5.0 for o in options]

    maker = SyntheticQuestions(kb, ScriptedLLM(reply, score=score), SyntheticConfig(questions=3, variants=2))
    film = next(e for e in await kb.search("Man of Aran", Usage()) if e.label == "Man of Aran")
    relation = next(r for r in (await kb.get_relations([film], Usage())).items if r.key == "directed_by")
    forward, reverse = await maker.phrase(relation, [await _walk_along(maker, film, relation)])
    # the first question in other words is checked and kept like the others ("What did {} write?"
    # reads as "wrote": dropped)
    assert forward.questions == ["Who directed {}?", "Who made {}?"] and forward.phrases == ["the director of {}"]
    assert reverse.questions == ["What films did {} direct?"] and reverse.phrases == ["the films directed by {}"]
    assert reverse.checked["What did {} write?"] < 0.5
    # a paraphrase asking for a person where the question does not is not even checked
    assert "Who starred in the films of {}?" not in reverse.checked
    assert forward.checked["When was {} released?"] < 0.5 < forward.checked["Who directed {}?"]
    assert reverse.checked["What films did {} write?"] < 0.5 < reverse.checked["What films did {} direct?"]


async def test_the_check_discounts_a_relation_the_llm_prefers_whatever_is_asked(kb):
    """The 1.5B model gave PathQuestion's *gender* 0.82 for "Who are the parents of [Ludwig
    II of Bavaria]?" and for every other question about him; the check divides by what it
    gives each relation when nothing is asked."""
    def score(prompt, options, prefix):
        q = prompt.split("Question: ")[1].split("\n")[0]
        bias = [3.0 if o.startswith("release_year") else 0.0 for o in options]
        named = "directed_by" if "direct" in q else None
        return [b + (2.0 if o.split(" ")[0] == named else 0.0) for b, o in zip(bias, options)]

    film = next(e for e in await kb.search("Man of Aran", Usage()) if e.label == "Man of Aran")
    directed = next(r for r in (await kb.get_relations([film], Usage())).items if r.key == "directed_by")
    llm = ScriptedLLM(lambda *a: "", score=score)
    calibrated = SyntheticQuestions(kb, llm, SyntheticConfig())
    p, top = await calibrated.check(directed, film, "Who directed {}?", as_question=True)
    assert top and p > 0.5
    neutral_calls = sum("Question: N/A" in c.prompt for c in llm.score_calls)
    await calibrated.check(directed, film, "{} was directed by whom?", as_question=True)
    assert sum("Question: N/A" in c.prompt for c in llm.score_calls) == neutral_calls == 1  # once per entity
    raw = SyntheticQuestions(kb, llm, SyntheticConfig(calibrated_check=False))
    p, top = await raw.check(directed, film, "Who directed {}?", as_question=True)
    assert not top and p < 0.5


async def _walk_along(maker: SyntheticQuestions, start, relation):
    from traversals.search.rwt.state import PathNode, step

    root = PathNode(id=0, entities=(start,))
    reached, edges, _ = await step(maker.kgs, root, relation, maker.usage)
    return PathNode(id=1, entities=reached, parent=root, relation=relation, edges=edges, depth=1)


async def test_a_walk_goes_on_only_by_relations_usual_at_the_ends_of_its_last_relation(kb):
    """MetaQA's year "1984" is also a film's title, so the node has "directed by": a walk
    that reached it by "release year" must not go on by that (no one asks for the director
    of a release year), while "is release year of" stays open."""
    llm = ScriptedLLM(lambda *a: "", score=lambda prompt, options, prefix: [0.0] * len(options))
    maker = SyntheticQuestions(kb, llm, SyntheticConfig(usual_after=5))
    usage = Usage()
    allen = next(e for e in await kb.search("Woody Allen", usage) if e.label == "Woody Allen")
    directed = next(r for r in (await kb.get_relations([allen], usage)).items if r.key == "~directed_by")
    films = await _walk_along(maker, allen, directed)
    release = next(r for r in (await kb.get_relations(list(films.entities), usage)).items if r.key == "release_year")
    years = await _walk_along(maker, films.entities[0], release)
    year_1984 = next(e for e in await kb.search("1984", usage) if e.label == "1984")
    assert "directed_by" in {r.key for r in (await kb.get_relations([year_1984], usage)).items}
    # too few of the relation's ends looked at yet: no judgement
    assert await maker.usual_next(release, [year_1984, *years.entities]) is None
    more = await step_all(maker, films.entities, release)  # the years of his 40 films, ten a walk
    for i in range(0, len(more), 10):
        usual = await maker.usual_next(release, more[i:i + 10])
    assert len(maker._ends[("kb", "release_year")]) > 20
    assert ("kb", "~release_year") in usual and ("kb", "directed_by") not in usual
    # … and the walks take that rule: after a release year only its films follow
    made = await maker.walks()
    paths = [[n.relation.key for n in end.path() if n.relation is not None] for _, end in made]
    assert any("release_year" in p[:-1] for p in paths)
    assert all(b == "~release_year" for p in paths for a, b in zip(p, p[1:]) if a == "release_year")


async def step_all(maker: SyntheticQuestions, starts, relation):
    reached = []
    for start in starts:
        reached += (await _walk_along(maker, start, relation)).entities
    return reached


def test_the_committed_metaqa_phrasings_cover_every_relation_both_ways(SHARED):
    # `make metaqa-value` rebuilds the value trained without labels from this file: the
    # default local model's phrasings, read back instead of asking it again
    path = Path(__file__).resolve().parents[2] / "bench" / "phrasings" / "metaqa-kb.phrasings.json"
    phrasings = read_phrasings(path, "local:qwen2.5-coder-1.5b")
    kb = SHARED / "data" / "metaqa" / "kb.txt"
    if not kb.exists():
        pytest.skip(f"{kb} is not there")
    with kb.open(encoding="utf-8") as f:
        relations = {line.split("|")[1] for line in f if line.count("|") == 2}
    rare = {"has_imdb_votes", "~has_imdb_votes"}  # 116 of the 128,185 edges: no walk took them
    assert set(phrasings) >= (relations | {"~" + r for r in relations}) - rare
    assert all(ph.questions and "{}" in ph.questions[0] for ph in phrasings.values())
    with pytest.raises(BadInput, match="not by"):  # another LLM must not reuse them silently
        read_phrasings(path, "openai:gpt-4o")


async def test_the_check_asks_about_the_example_entity_with_the_most_relations(tmp_path):
    """A place of death with no other relation passes every reverse phrasing ("Who was born
    in {}?" included): the check asks about the example city that also has people born in it."""
    lines = ["ann|place_of_death|graz", "bob|place_of_death|vienna", "cy|place_of_birth|vienna",
             "ann|place_of_birth|vienna"]
    (tmp_path / "places.txt").write_text("\n".join(lines) + "\n")
    kgs = KGSet(open_kgs([str(tmp_path / "places.txt")]))
    reply = (" Where did {} die?\nPhrase: the place of death of {}\n"
             "Reverse question: Who was born in {}?\nReverse phrase: the people who died in {}")

    def score(prompt, options, prefix):
        q = prompt.split("Question: ")[1].split("\n")[0]
        if q == "N/A":
            return [0.0] * len(options)
        named = "~place_of_birth" if "born" in q else "~place_of_death" if "died" in q else "place_of_death"
        return [0.0 if o.split(" ")[0] == named else -5.0 for o in options]

    try:
        maker = SyntheticQuestions(kgs, ScriptedLLM(lambda *a: reply, score=score),
                                   SyntheticConfig(variants=1, paraphrases=0))
        ann = next(e for e in await kgs.search("ann", Usage()) if e.label == "ann")
        bob = next(e for e in await kgs.search("bob", Usage()) if e.label == "bob")
        died = next(r for r in (await kgs.get_relations([ann], Usage())).items if r.key == "place_of_death")
        ends = [await _walk_along(maker, ann, died), await _walk_along(maker, bob, died)]
        assert [e.object.label for e in maker.examples(died, ends)] == ["graz", "vienna"]
        assert (await maker.check_source(maker.examples(died, ends), reverse=True)).label == "vienna"
        forward, reverse = await maker.phrase(died, ends)
    finally:
        await kgs.close()
    assert forward.questions == ["Where did {} die?"]
    assert reverse.checked["Who was born in {}?"] < 0.5 < reverse.checked["the people who died in {}"]
    assert reverse.phrases == ["the people who died in {}"]
