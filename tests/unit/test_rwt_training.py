"""RwT's trained roll-out model: features, fitting, training from search trees, and its use
in the searches (a small dict KG and a scripted LLM; the real KG path is in
tests/integration/test_train_value.py)."""

from __future__ import annotations

import math
import random
import types

import pytest

from traversals.api import SearchConfig, build_solver
from traversals.errors import BadInput
from traversals.kg.base import Entity
from traversals.eval.training import gold_reward
from traversals.llm.scripted import ScriptedLLM
from traversals.llm.base import Usage
from traversals.search.cot import ChainOfThought
from traversals.search.kgset import KGSet
from traversals.search.machine import Action, ActionType, Machine
from traversals.search.provenance import answer_paths, reaching_paths, supporting_edges
from traversals.search.subgraph import Subgraph
from traversals.search.trained_value import TrainedValue, latest_paths
from traversals.search.tree import TreeConfig, TreeOfTraversals, frontier_key
from traversals.search.rwt import (CriticalModel, HopBeamSearch, LexicalEmbedder, MonteCarloTreeSearch, RwTConfig,
                                   TrainedRollout, ValueModel)
from traversals.search.rwt.state import PathNode
from traversals.search.rwt.train import TrainConfig, Trainer, TrainingQuestion, Tree
from traversals.search.rwt.valuemodel import (
    ENT, FEATURES, Example, ListedWords, features, fit, names, normalise, question_words, relation_lexicon, singular,
    synonym_lexicon,
)

from .kgdouble import DictKG


def movie_kg() -> DictKG:
    triples = []
    for d in range(8):
        for f in range(2):
            film = f"Film {d}-{f}"
            triples += [(film, "directed_by", f"Director {d}"), (film, "release_year", str(1990 + d)),
                        (film, "starred_actors", f"Actor {d}-{f}"), (film, "has_genre", "Drama")]
    return DictKG(triples)


def films(d: int) -> list[str]:
    return [f"Film {d}-0", f"Film {d}-1"]


def actors(d: int) -> list[str]:
    return [f"Actor {d}-0", f"Actor {d}-1"]


async def questions(kgs: KGSet, directors: range) -> list[TrainingQuestion]:
    out = []
    for d in directors:
        (ent,) = [e for e in await kgs.search(f"Director {d}", _usage(), limit=5) if e.label == f"Director {d}"]
        out.append(TrainingQuestion(f"f{d}", f"what films did [Director {d}] direct", (ent,), gold_reward(films(d))))
        out.append(TrainingQuestion(f"a{d}", f"who starred in the films directed by [Director {d}]", (ent,),
                                    gold_reward(actors(d))))
    return out


def _usage():
    return Usage()


class RecordingValue(TrainedValue):
    """A trained value that keeps every node it rated, in order."""

    def __init__(self, model):
        super().__init__(model)
        self.nodes = []

    async def evaluate(self, query, node, usage):
        self.nodes.append(node)
        return await super().evaluate(query, node, usage)


def test_question_words_mask_the_question_entities():
    words = question_words("Which films did [Eytan Fox] direct?", [])
    assert words[:4] == ["which", "films", "did", "qentity"] and "qentity_direct" in words
    assert question_words("Who is Bob Dylan's mother", ["Bob Dylan"])[:3] == ["who", "is", "qentity"]


def test_fit_learns_which_relation_a_wording_asks_for():
    w_dir, w_act = question_words("what films did [X] direct"), question_words("who acted in [X]")
    data = [Example(features(w_dir, ["~directed_by"], "stop"), 1.0), Example(features(w_dir, ["starred_actors"], "stop"), 0.0),
            Example(features(w_act, ["starred_actors"], "stop"), 1.0), Example(features(w_act, ["~directed_by"], "stop"), 0.0)]
    model = fit(data * 5, epochs=20)
    assert model.predict(w_dir, ["~directed_by"])["stop"] > 0.8 > 0.2 > model.predict(w_dir, ["starred_actors"])["stop"]
    assert model.predict(w_act, ["starred_actors"])["stop"] > model.predict(w_act, ["~directed_by"])["stop"]


def test_singular_reads_plurals_and_leaves_other_words():
    assert [singular(w) for w in ["genres", "movies", "stories", "actresses", "watches", "films"]] == [
        "genre", "movie", "story", "actress", "watch", "film"]
    assert [singular(w) for w in ["is", "was", "has", "series", "news", "boss", "status", "genre"]] == [
        "is", "was", "has", "series", "news", "boss", "status", "genre"]


def test_a_model_trained_on_singular_words_reads_plural_questions():
    singular_q, plural_q = question_words("what genre is [X]"), question_words("what genres are [X] in")
    data = [Example(features(singular_q, ["has_genre"], "stop"), 1.0), Example(features(singular_q, ["in_language"], "stop"), 0.0)]
    model = fit(data * 5, epochs=20)
    assert model.meta["features"] == FEATURES == 7
    assert model.predict(plural_q, ["has_genre"])["stop"] > 0.8 > 0.2 > model.predict(plural_q, ["in_language"])["stop"]


def test_the_kind_a_question_gives_its_entity_is_not_read_as_what_it_asks():
    """Feature set 3: "the film [X]" says what X is; "film" there is not a word of the ask."""
    asks_director, asks_films = question_words("who directed [X]"), question_words("what films did [X] direct")
    data = [Example(features(asks_director, ["directed_by"], "stop"), 1.0),
            Example(features(asks_director, ["directed_by", "~directed_by"], "stop"), 0.0),
            Example(features(asks_films, ["~directed_by"], "stop"), 1.0),
            Example(features(asks_films, ["~directed_by", "directed_by"], "stop"), 0.0)]
    model = fit(data * 5, epochs=20)
    typed = question_words("who directed the film [X]")
    read = features(typed, ["directed_by"], "stop")
    assert "stop|len=1|w=kind=film" in read and "stop|len=1|w=film" not in read
    assert model.predict(typed, ["directed_by"]) == model.predict(asks_director, ["directed_by"])
    assert model.predict(typed, ["directed_by"])["stop"] > 0.8
    # two hops in a row are read together with the words ("share directors with": there and back)
    words = question_words("the films that share directors with [X] were in which genres")
    assert "stop|pair=directed_by>~directed_by|w=share" in features(words, ["directed_by", "~directed_by", "has_genre"],
                                                                     "stop")
    assert not any("pair=" in f for f in features(words, ["directed_by"], "stop") + features(words, ["x", "y"], "stop", 2))


METAQA_LABELS = {"directed_by": "directed by", "written_by": "written by", "starred_actors": "starred actors",
                 "release_year": "release year", "in_language": "in language", "has_tags": "has tags",
                 "has_genre": "has genre", "has_imdb_votes": "has imdb votes", "has_imdb_rating": "has imdb rating"}


def test_the_relations_a_question_names_are_read_from_their_labels_words():
    """Feature set 4: a word sharing its stem with a word only one relation's label has."""
    lexicon = relation_lexicon(METAQA_LABELS)
    assert lexicon["release_year"] == ["release", "year"] and lexicon["has_imdb_votes"] == ["vote"]  # not "imdb"

    def named(question: str) -> list[str]:
        return [w for w in normalise(question_words(question), 4, lexicon) if w.startswith("named=")]

    assert named("what are the main languages in [A] written movies") == ["named=in_language", "named=written_by"]
    assert named("who is listed as screenwriter of [C] acted films") == ["named=starred_actors", "named=written_by"]
    assert named("the films directed by [P] were released in which years") == ["named=directed_by",
                                                                              "named=release_year"]
    assert named("[Written Nightmare] appears in which movies") == []  # the entity's own words are not read
    assert named("the director [X] was in which movies") == []  # … nor the kind it is given
    assert not names("rather", "rating") and not names("the", "tag") and names("ratings", "rating")
    # the path is read against them: what the question names and the path lacks, and back
    words = question_words("the films written by [X] were in which languages")
    one_hop = features(words, ["~written_by"], "stop", lexicon=lexicon)
    assert {"stop|uncovered=in_language", "stop|uncovered>0"} <= set(one_hop)
    two_hops = features(words, ["~written_by", "in_language"], "stop", lexicon=lexicon)
    assert not any("uncovered" in f or "unnamed" in f for f in two_hops)
    assert "stop|unnamed=starred_actors" in features(words, ["~written_by", "starred_actors"], "stop", lexicon=lexicon)
    # a model trained on one relation's questions reads the next one's: "uncovered" is learnt
    data = []
    for ask, rel in (("what genres are the films written by [X]", "has_genre"),
                     ("what years were the films directed by [X] released", "release_year")):
        first = "~written_by" if "written" in ask else "~directed_by"
        data += [Example(features(question_words(ask), [first], "stop", lexicon=lexicon), 0.0),
                 Example(features(question_words(ask), [first, rel], "stop", lexicon=lexicon), 1.0)]
    model = fit(data * 10, epochs=20)
    model.meta["lexicon"] = lexicon
    unseen = question_words("the movies starred by [X] were in which languages")
    assert model.predict(unseen, ["~starred_actors"])["stop"] < 0.5 < model.predict(
        unseen, ["~starred_actors", "in_language"])["stop"]


def test_a_question_asking_for_a_person_in_other_words_is_read_as_who():
    """Feature set 5: training questions say "who"; "which person" and "this person" ask the same."""
    ask = question_words("who wrote [X]")
    data = [Example(features(ask, ["written_by"], "stop"), 1.0), Example(features(ask, ["written_by", "~written_by"], "stop"), 0.0)]
    model = fit(data * 10, epochs=20)
    for question in ("which person wrote [X]", "[X] is a film written by this person", "what people wrote [X]"):
        words = question_words(question)
        assert "w=who" in " ".join(features(words, ["written_by"], "stop")), question
        assert model.predict(words, ["written_by"])["stop"] > 0.8 > 0.2 > model.predict(
            words, ["written_by", "~written_by"])["stop"], question
    # "the person who …" already says "who"; earlier feature sets read words as they were trained
    assert normalise(["the", "person", "who", "wrote", ENT], 5) == normalise(["the", "person", "who", "wrote", ENT], 4)
    assert "who" not in normalise(question_words("which person wrote [X]"), 4)


def test_the_llms_other_words_for_a_relation_name_it_only_when_they_can_mean_nothing_else():
    """Feature set 6: words the LLM listed for a relation, filtered, and matched whole."""
    lexicon = relation_lexicon(METAQA_LABELS)
    listed = ListedWords(
        synonyms={"has_genre": ["type", "category", "classification", "Genres"],
                  "has_tags": ["tags", "labels", "categories", "meta-data"],
                  "written_by": ["author", "penned", "wrote", "penned by"],
                  "starred_actors": ["star", "actors", "film", "screen"],
                  "release_year": ["released", "premiere", "debut", "rating"]},
        called={"directed_by": ["director", "film"], "starred_actors": ["actor", "film"]})
    synonyms = synonym_lexicon(lexicon, listed)
    assert synonyms["has_genre"] == ["type", "classification"]  # "category" (also tags'), "genre" (its label's)
    assert synonyms["has_tags"] == ["label"]  # in the singular; not "meta-data" (not one word)
    assert synonyms["written_by"] == ["author", "penned", "wrote"]  # not "penned by"
    assert synonyms["starred_actors"] == ["screen"]  # "star" is its label word; "film" directed_by's ends
    assert synonyms["release_year"] == ["premiere", "debut"]  # "rating" names has_imdb_rating's label

    def named(question: str, version: int = 6) -> list[str]:
        return [w for w in normalise(question_words(question), version, lexicon, synonyms) if w.startswith("named=")]

    assert named("what types are the films penned by [X]") == ["named=has_genre", "named=written_by"]
    assert named("what types are the films penned by [X]", 5) == []  # read as feature set 5 was trained
    # whole words only: "screen" does not name what "screenwriter" or "screenplay" says
    assert named("which screenwriter wrote the screenplay for [X]") == ["named=written_by"]
    assert named("who was on screen in [X]") == ["named=starred_actors"]
    # a model reads its synonyms from its meta, and keeps them through save and load
    ask = question_words("what genre are the films written by [X]")
    data = [Example(features(ask, ["~written_by"], "stop", lexicon=lexicon, synonyms=synonyms), 0.0),
            Example(features(ask, ["~written_by", "has_genre"], "stop", lexicon=lexicon, synonyms=synonyms), 1.0)]
    model = fit(data * 10, epochs=20)
    model.meta.update(lexicon=lexicon, synonyms=synonyms)
    unseen = question_words("what types are the films written by [X]")
    assert model.predict(unseen, ["~written_by"])["stop"] < 0.5 < model.predict(unseen, ["~written_by", "has_genre"])["stop"]
    assert "stop|uncovered=has_genre" in features(unseen, ["~written_by"], "stop", 6, lexicon, model.synonyms)
    assert "stop|uncovered=has_genre" not in features(unseen, ["~written_by"], "stop", 6, lexicon)  # "types" alone


def test_an_entity_followed_by_a_participle_and_by_is_read_as_a_passive():
    """Feature set 7: "who was [X] directed by" asks for the director, though "[X] directed"
    is the start of active questions ("[X] directed which films")."""
    active, passive = question_words("[X] directed which films"), question_words("who was [X] directed by")
    data = [Example(features(active, ["~directed_by"], "stop"), 1.0), Example(features(active, ["directed_by"], "stop"), 0.0),
            Example(features(question_words("who directed [X]"), ["directed_by"], "stop"), 1.0),
            Example(features(question_words("who directed [X]"), ["~directed_by"], "stop"), 0.0)]
    model = fit(data * 10, epochs=20)
    assert "stop|last=directed_by|w=qentity_directed" not in features(passive, ["directed_by"], "stop")
    assert "w=qentity_directed" in " ".join(features(active, ["directed_by"], "stop"))  # the active keeps it
    assert "w=qentity_directed" in " ".join(features(passive, ["directed_by"], "stop", 6))  # as feature set 6 read it
    read_as_passive = model.predict(passive, ["directed_by"])["stop"]
    assert read_as_passive > model.predict(passive, ["~directed_by"])["stop"]
    model.meta["features"] = 6  # the active bigram pulls the director down
    assert model.predict(passive, ["directed_by"])["stop"] < read_as_passive - 0.05


def test_a_model_without_a_feature_version_reads_words_as_it_was_trained():
    """Version 1 (models saved before versioning) kept plurals as they were."""
    words = question_words("what genres are [X] in")
    old = ValueModel({"stop|last=has_genre|w=genres": 3.0})
    assert old.version == 1 and old.predict(words, ["has_genre"])["stop"] > 0.9
    new = ValueModel({"stop|last=has_genre|w=genres": 3.0}, {"features": 2})
    assert new.predict(words, ["has_genre"])["stop"] == 0.5  # "genres" is read as "genre": no weight
    typed = question_words("what genre is the film [X]")
    two = ValueModel({"stop|last=has_genre|w=film": 3.0}, {"features": 2})
    assert two.predict(typed, ["has_genre"])["stop"] > 0.9  # version 2 reads the kind as a word
    assert ValueModel(two.weights, {"features": 3}).predict(typed, ["has_genre"])["stop"] == 0.5


def test_a_model_file_round_trips_and_bad_files_are_named(tmp_path):
    model = ValueModel({"stop|bias": 0.5, "go|len=1": -1.25}, {"datasets": ["x"]})
    path = model.save(tmp_path / "m.json")
    back = ValueModel.load(path)
    assert back.weights == model.weights and back.meta == {"datasets": ["x"]}
    with pytest.raises(BadInput, match="not found"):
        ValueModel.load(tmp_path / "missing.json")
    (tmp_path / "other.json").write_text('{"weights": {}}')
    with pytest.raises(BadInput, match="is not a value model"):
        ValueModel.load(tmp_path / "other.json")
    ValueModel({}, {"features": FEATURES + 1}).save(tmp_path / "newer.json")
    with pytest.raises(BadInput, match=f"feature set {FEATURES + 1}; this traversals reads up to {FEATURES}"):
        ValueModel.load(tmp_path / "newer.json")


def test_a_models_digest_is_what_it_predicts_with_not_what_its_meta_records(tmp_path):
    """``digest`` names the model, not the run that wrote it: the same weights saved with
    other seconds and paths in ``meta`` (a training repeated) and read back share it, where the
    file's ``sha256`` differs; other weights, another feature set or lexicon change it."""
    weights = {"stop|bias": 0.123456789, "go|len=1": -1.25, "stop|tiny": 1e-7}
    meta = {"features": 7, "lexicon": {"directed_by": ["directed"]}}
    one = ValueModel.load(ValueModel(weights, {**meta, "rounds": [{"seconds": 278.7}]}).save(tmp_path / "a.json"))
    two = ValueModel.load(ValueModel(weights, {**meta, "rounds": [{"seconds": 257.8}]}).save(tmp_path / "b.json"))
    assert one.sha256 != two.sha256
    assert one.digest == two.digest == ValueModel(weights, meta).digest  # as trained, before the file rounds it
    assert ValueModel({**weights, "go|len=1": -1.3}, meta).digest != one.digest
    assert ValueModel(weights, {**meta, "features": 6}).digest != one.digest
    assert ValueModel(weights, {**meta, "lexicon": {"directed_by": ["director"]}}).digest != one.digest


async def test_training_from_trees_learns_the_path_and_where_to_stop():
    kgs = KGSet([movie_kg()])
    train, held = await questions(kgs, range(6)), await questions(kgs, range(6, 8))
    reports = []
    model = await Trainer(kgs, TrainConfig(rounds=2, trees=2, width=3, branch=3, max_hops=2, seed=1)).train(
        train, held, on_round=lambda r, m: reports.append(r))
    assert [r.round for r in reports] == [1, 2] and len(model.meta["rounds"]) == 2
    # the relations' label words, from what the trees walked, go with the model
    assert model.meta["lexicon"]["directed_by"] == ["directed"] and "starred_actors" in model.meta["lexicon"]
    assert reports[-1].heldout_hits == 1.0  # both held-out directors, both question shapes
    words = question_words("what films did [Director 7] direct")
    heads = model.predict(words, ["~directed_by"])
    # a 1-hop question: the first hop is the answer, going further is worse
    assert heads["stop"] > 0.5 > model.predict(words, ["~directed_by", "starred_actors"])["stop"]
    words2 = question_words("who starred in the films directed by [Director 7]")
    assert model.predict(words2, ["~directed_by"])["go"] > 0.5 > model.predict(words2, ["~directed_by"])["stop"]
    assert model.predict(words2, ["~directed_by", "starred_actors"])["stop"] > 0.5


async def test_training_trees_walk_a_relation_key_two_kgs_share_in_each():
    """Two KGs that both have a relation keyed ``genre``: each is a state of its own, walked
    and rewarded (the tree had keyed its states by relation key only, so the one drawn first
    stood for both and the right path got reward 0 by the draw); the model reads a path by
    its keys, so the two states give the path two targets, and the id's lexicon has the
    words of both labels whichever KG offered it last."""
    films = DictKG([("f-hz", "genre", "film music"), ("f-hz", "award", "Academy Award")],
                   labels={"f-hz": "Hans Zimmer"}, name="films")
    music = DictKG([("m-hz", "genre", "soundtrack"), ("m-hz", "genre", "electronic"), ("m-hz", "born", "Frankfurt")],
                   labels={"m-hz": "Hans Zimmer"}, relation_labels={"genre": ("musical genre", "")}, name="music")
    kgs = KGSet([films, music])
    q = TrainingQuestion("q", "what genre of film does [Hans Zimmer] score", (films.entities["f-hz"], music.entities["m-hz"]),
                         gold_reward(["film music"]))
    trainer = Trainer(kgs, TrainConfig(max_hops=1, branch=10, width=10))
    for seed in range(6):
        tree = Tree(q)
        await trainer.grow(q, None, random.Random(seed), tree)
        assert tree.rewards == {(("films", "genre"),): 1.0, (("music", "genre"),): 0.0, (("films", "award"),): 0.0,
                                (("music", "born"),): 0.0}
        assert [e.label for e in tree.nodes[(("films", "genre"),)].entities] == ["film music"]
        assert sorted(trainer.targets(tree, random.Random(0))) == [
            ("stop", ("award",), 0.0), ("stop", ("born",), 0.0), ("stop", ("genre",), 0.0), ("stop", ("genre",), 1.0)]
    assert trainer.lexicon()["genre"] == ["genre", "musical"]


async def test_beam_search_answers_from_the_trained_stop_head(tmp_path):
    kgs = KGSet([movie_kg()])
    model = await Trainer(kgs, TrainConfig(rounds=2, trees=2, width=3, branch=3, max_hops=2, seed=1)).train(
        await questions(kgs, range(6)))
    # the LLM policy prefers every relation equally; the trained value decides
    llm = ScriptedLLM(rules=[("three most likely answers", "x, B: y, C: z]")], score=lambda p, o, pre: [0.0] * len(o))
    beam = HopBeamSearch(llm, kgs, RwTConfig(beam_width=3, beam_branch=4, max_hops=2), rollout=TrainedRollout(model))
    one = await beam.ask("what films did [Director 7] direct")
    assert one.text == "Film 7-0, Film 7-1" and len(one.supporting_edges) == 2
    two = await beam.ask("who starred in the films directed by [Director 7]")
    assert two.text == "Actor 7-0, Actor 7-1"
    mcts = MonteCarloTreeSearch(llm, kgs, RwTConfig(simulations=12, max_hops=2), rollout=TrainedRollout(model))
    assert (await mcts.ask("what films did [Director 6] direct")).text == "Film 6-0, Film 6-1"
    nodes = two.trace["nodes"]
    assert all("answer_value" in n for n in nodes if n["parent"] is not None and n["entities"])
    # build_solver reads the file for the RwT strategies and for the tree
    path = model.save(tmp_path / "v.json")
    solver = build_solver("beam", llm, [movie_kg()], SearchConfig(value_model=str(path)))
    assert isinstance(solver.rollout, TrainedRollout)
    assert isinstance(build_solver("tree", llm, [movie_kg()], SearchConfig(value_model=str(path))).value, TrainedValue)
    # cot has no states to rate: a server's default value model does not stop a cot request
    assert isinstance(build_solver("cot", llm, [movie_kg()], SearchConfig(value_model=str(path))), ChainOfThought)


async def expand(machine: Machine, node, entities, key: str, usage: Usage):
    """EXPAND_KG, select ``entities``, select the relation whose key is ``key``."""
    node = await machine.transition(node, Action(ActionType.EXPAND_KG, "go"), usage)
    node = await machine.transition(node, Action(ActionType.SELECT_ENTITIES, entities=tuple(entities)), usage)
    i = next(i for i, r in enumerate(node.relation_options) if r.key == key)
    return await machine.transition(node, Action(ActionType.SELECT_RELATION, relation=node.relation_options[i],
                                                 relation_key=node.relation_keys[i]), usage)


async def _trained(kgs: KGSet) -> ValueModel:
    return await Trainer(kgs, TrainConfig(rounds=2, trees=2, width=3, branch=3, max_hops=2, seed=1)).train(
        await questions(kgs, range(6)))


async def _rated(kg: DictKG):
    """A value trained on ``kg``, a machine over it, a usage and the root at [Director 7]."""
    kgs = KGSet([kg])
    machine = Machine(kgs)
    root = machine.root(Subgraph().with_entities((await kg.search("Director 7"))[:1]))
    return TrainedValue(await _trained(kgs)), machine, Usage(), root


async def test_the_trained_value_rates_tree_nodes_by_the_path_they_walked():
    kg = movie_kg()
    values, machine, u, root = await _rated(kg)

    def walk(node, entities, key):
        return expand(machine, node, entities, key, u)

    async def answer(node, text):
        return await values.evaluate(query, await machine.transition(node, Action(ActionType.ANSWER, text), u), u)

    query = "what films did [Director 7] direct"
    hop1 = await walk(root, root.subgraph.entities, "~directed_by")
    films7 = [e for e in hop1.subgraph.entities if e.label.startswith("Film")]
    hop2 = await walk(hop1, films7, "release_year")
    assert latest_paths(root) == {()} and latest_paths(hop2) == {("~directed_by", "release_year")}
    # a 1-hop question: the films are the answer, the second hop's year is not
    film, year = await answer(hop2, "Film 7-0"), await answer(hop2, "1997")
    assert film > 0.8 > 0.5 > year
    # an answer that names nothing an expansion reached cannot be rated: 0, and the trace says why
    done = await machine.transition(hop1, Action(ActionType.ANSWER, "Steven Spielberg"), u)
    assert await values.evaluate(query, done, u) == 0.0 and "names no entity" in done.note
    # intermediate nodes: the search value of the latest expansion (the films' path beats the years')
    assert await values.evaluate(query, hop1, u) > await values.evaluate(query, hop2, u)
    two = "who starred in the films directed by [Director 7]"
    assert await values.evaluate(two, hop1, u) > 0.5  # the right way to go, though not the answer yet
    # ... but the state that answers it ranks above it, so best-first search goes there next
    actors = await walk(hop1, films7, "starred_actors")
    assert await values.evaluate(two, actors, u) > await values.evaluate(two, hop1, u)
    assert u.llm_calls == 0


async def test_the_trained_value_rates_a_list_by_the_worst_entity_it_names():
    kg = movie_kg()
    values, machine, u, root = await _rated(kg)
    hop1 = await expand(machine, root, root.subgraph.entities, "~directed_by", u)
    films7 = [e for e in hop1.subgraph.entities if e.label.startswith("Film")]
    hop2 = await expand(machine, hop1, films7, "release_year", u)

    async def answer(text):
        return await values.evaluate("what films did [Director 7] direct", await machine.transition(
            hop2, Action(ActionType.ANSWER, text), u), u)

    film, year, both = await answer("Film 7-0"), await answer("1997"), await answer("[Film 7-0, Film 7-1]")
    assert both == film > 0.8 > 0.5 > year  # one path, one value: the whole list is as good
    # a list that pads the films with what the next hop reached is as good as its worst entity
    assert await answer("[Film 7-0, 1997]") == year
    # an item that names no entity is left out; a sentence naming both is rated by the best
    assert await answer("[Film 7-0, Film 7-1, Steven Spielberg]") == film
    assert await answer("Film 7-0 (1997)") == film
    # the pure function: whole items only, so a label with ", " in it is one entity
    from traversals.search.trained_value import list_value
    rated = {"paris, texas": 0.9, "heat": 0.2}
    assert list_value("[Paris, Texas, Heat]", rated) == 0.2 and list_value("[Paris, Texas]", rated) == 0.9
    assert list_value("Paris, Texas and Heat", rated) == 0.9  # not a list: the best entity it names


async def test_an_entity_reached_twice_is_rated_by_the_better_walk():
    # Actor 7-0 is first reached as Director 7's protégé, then again as an actor of his films:
    # "who starred in the films directed by [Director 7]" is answered by the second walk
    kg = DictKG(movie_kg().triples + [("Director 7", "mentor_of", "Actor 7-0")])
    values, machine, u, root = await _rated(kg)
    protege = await expand(machine, root, root.subgraph.entities, "mentor_of", u)
    hop1 = await expand(machine, protege, root.subgraph.entities, "~directed_by", u)
    films7 = [e for e in hop1.subgraph.entities if e.label.startswith("Film")]
    hop2 = await expand(machine, hop1, films7, "starred_actors", u)
    question = "who starred in the films directed by [Director 7]"

    async def answer(node, text):
        return await values.evaluate(question, await machine.transition(node, Action(ActionType.ANSWER, text), u), u)

    (actor,) = [e for e in hop2.subgraph.entities if e.label == "Actor 7-0"]
    assert [[f.relation.key for f in p] for p in reaching_paths(hop2.subgraph, [actor], root.subgraph.entities)] == [
        ["mentor_of"], ["~directed_by", "starred_actors"]]
    other = await answer(hop2, "Actor 7-1")
    assert other > 0.8 and await answer(hop2, "Actor 7-0") == other == await answer(hop2, "[Actor 7-0, Actor 7-1]")
    assert await answer(protege, "Actor 7-0") < 0.5  # before the films' actors were walked
    # the answer's provenance shows both walks, not only the first
    done = await machine.transition(hop2, Action(ActionType.ANSWER, "Actor 7-0"), u)
    assert [(e.subject.label, e.relation.id, e.object.label) for e in supporting_edges(done)] == [
        ("Director 7", "mentor_of", "Actor 7-0"), ("Film 7-0", "starred_actors", "Actor 7-0"),
        ("Film 7-0", "directed_by", "Director 7")]


async def test_tree_with_a_trained_value_answers_from_the_right_hop_and_stops_at_the_threshold():
    # An LLM that likes numbers: asked for an answer it prefers a year whenever the subgraph
    # offers one (the 1.5B model's "useless second hop" failure, docs/results.md), else the
    # newest entity group (every other option scores -1 per token; ties go to the first)
    def score(prompt, options, prefix):
        table = {"EXPAND_KG": -0.1, "THINK": -3.0, "ANSWER": -2.0, "x": -10.0}
        return [table.get(o, -0.01 if o[:1].isdigit() else -max(1, round(len(o) / 4))) for o in options]

    kg = movie_kg()
    model = await _trained(KGSet([kg]))
    llm = ScriptedLLM(rules=[(lambda text: text.endswith(("ANSWER:", "EXPAND_KG:", "THINK:")), " x")], score=score)
    tree = TreeOfTraversals(llm, KGSet([kg]), TreeConfig(k=3), value=TrainedValue(model))
    answer = await tree.ask("what films did [Director 7] direct")
    assert answer.text in ("Film 7-0", "Film 7-1", "[Film 7-0, Film 7-1]") and answer.value > 0.8
    assert answer.trace["stopped"] == "threshold" and answer.trace["value_function"] == "TrainedValue"
    # no LLM call rated a node; every node has a value (intermediate ones too) but the
    # duplicates of earlier nodes, which are neither rated nor expanded
    assert not [c for c in llm.score_calls if c.prefix.startswith(("RATING", "So the score"))]
    assert all(n["value"] is not None for n in answer.trace["nodes"][1:] if not n.get("duplicate"))
    two = await tree.ask("who starred in the films directed by [Director 7]")
    assert two.text.strip("[]").split(", ")[0] in ("Actor 7-0", "Actor 7-1")


async def test_with_a_trained_value_an_answer_action_proposes_k_answers_and_the_value_picks():
    # An LLM that answers with films whatever the question asks: its favourite answer to
    # "who starred in ..." is a film group; the actors come second.
    def score(prompt, options, prefix):
        table = {"EXPAND_KG": -0.1, "THINK": -3.0, "ANSWER": -2.0, "x": -10.0}
        return [table.get(o, -0.1 if o.lstrip("[").startswith("Film") else -max(1, round(len(o) / 4))) for o in options]

    kg = movie_kg()
    model = await _trained(KGSet([kg]))
    llm = ScriptedLLM(rules=[(lambda text: text.endswith(("ANSWER:", "EXPAND_KG:", "THINK:")), " x")], score=score)
    question = "who starred in the films directed by [Director 7]"
    tree = TreeOfTraversals(llm, KGSet([kg]), TreeConfig(k=3), value=TrainedValue(model))
    answer = await tree.ask(question)
    assert answer.text.strip("[]").split(", ")[0] in ("Actor 7-0", "Actor 7-1") and answer.trace["stopped"] == "threshold"
    answered = [n for n in answer.trace["nodes"] if n["state"] == "done" and n["parent"] == answer.trace["nodes"][
        next(i for i, n in enumerate(answer.trace["nodes"]) if n["id"] == answer.trace["answer_node"])]["parent"]]
    assert len(answered) == 3 and answered[0]["action"]["text"].lstrip("[").startswith("Film")  # the LLM's order
    # one answer per ANSWER action: the LLM's favourite only, which the value rejects
    one = TreeOfTraversals(llm, KGSet([kg]), TreeConfig(k=3, answers=1), value=TrainedValue(model))
    assert (await one.ask(question)).trace["stopped"] != "threshold"
    # a chain (k = 1) walks one action per state, but its answer too is picked among three
    chain = await TreeOfTraversals(llm, KGSet([kg]), TreeConfig(k=1), value=TrainedValue(model)).ask(question)
    assert chain.text.strip("[]").split(", ")[0] in ("Actor 7-0", "Actor 7-1") and chain.trace["stopped"] == "threshold"
    nodes = {n["id"]: n for n in chain.trace["nodes"]}
    picked_from = [n for n in nodes.values() if n["state"] == "done"
                   and n["parent"] == nodes[chain.trace["answer_node"]]["parent"]]
    assert len(picked_from) == 3 and picked_from[0]["action"]["text"].lstrip("[").startswith("Film")


async def test_with_a_trained_value_the_answer_is_every_entity_the_path_reached_not_the_llms_favourite_alone():
    # The LLM's favourite answers are single films; the list of both is the least probable,
    # so no ANSWER proposes it. A trained value rates the path, so the list ties with each
    # film: proposed beside them (fuller_answers), it is returned.
    def score(prompt, options, prefix):
        table = {"EXPAND_KG": -0.1, "THINK": -3.0, "ANSWER": -2.0, "x": -10.0}
        return [table.get(o, -0.1 if o.startswith("Film") else -5.0) for o in options]

    kg = movie_kg()
    model = await _trained(KGSet([kg]))
    llm = ScriptedLLM(rules=[(lambda text: text.endswith(("ANSWER:", "EXPAND_KG:", "THINK:")), " x")], score=score)
    question = "what films did [Director 7] direct"
    full = await TreeOfTraversals(llm, KGSet([kg]), TreeConfig(k=3), value=TrainedValue(model)).ask(question)
    assert sorted(full.text.strip("[]").split(", ")) == films(7) and full.trace["stopped"] == "threshold"
    assert {e.subject.label for e in full.supporting_edges} == set(films(7))  # each with its edge
    nodes = {n["id"]: n for n in full.trace["nodes"]}
    siblings = [n for n in nodes.values() if n["state"] == "done" and n["parent"] == nodes[full.trace["answer_node"]]["parent"]]
    texts = [n["action"]["text"] for n in siblings]
    assert sorted(texts[:2]) == films(7) and texts[-1].startswith("[")  # the LLM's proposals, then the list
    assert len({n["value"] for n in siblings if n["action"]["text"] != "x"}) == 1  # one path, one value
    assert full.text.strip("[]").split(", ")[0] == texts[0]  # the LLM's favourite first: Hits@1 as before
    alone = await TreeOfTraversals(llm, KGSet([kg]), TreeConfig(k=3, fuller_answers=False), value=TrainedValue(model)).ask(question)
    assert alone.text in films(7)


async def test_the_trained_value_rates_no_answer_that_is_the_question_entity_reached_back():
    # "who co-wrote films with [W1]": films → their writers reaches W1 again. W1 is not an
    # answer (as in answer_candidates); a self-loop on the question's entity is (PathQuestion).
    kg = DictKG([("F1", "written_by", "W1"), ("F1", "written_by", "W2"), ("F2", "written_by", "W1"),
                 ("F2", "written_by", "W3"), ("W1", "alias", "W1")])
    machine = Machine(KGSet([kg]))
    values = TrainedValue(ValueModel({"stop|bias": 3.0}))  # every path a good answer
    u = Usage()
    root = machine.root(Subgraph().with_entities([kg.entities["W1"]]))

    def walk(node, entities, key):
        return expand(machine, node, entities, key, u)

    async def answer(node, text):
        return await values.evaluate("who co-wrote films with [W1]", await machine.transition(
            node, Action(ActionType.ANSWER, text), u), u)

    films = await walk(root, [kg.entities["W1"]], "~written_by")
    writers = await walk(films, [kg.entities["F1"], kg.entities["F2"]], "written_by")
    assert await answer(writers, "W2") > 0.9
    # the path to W2 starts at the question's entity, not at the edge that reached it back
    w2 = await machine.transition(writers, Action(ActionType.ANSWER, "W2"), u)
    assert [(f.source.id, f.relation.key, f.target.id) for f in answer_paths(w2)[0]] in (
        [("W1", "~written_by", "F1"), ("F1", "written_by", "W2")], [("W1", "~written_by", "F2"), ("F2", "written_by", "W2")])
    assert await answer(writers, "W1 co-wrote nothing") == 0.0
    assert await answer(await walk(root, [kg.entities["W1"]], "alias"), "W1") > 0.9


async def test_the_trained_value_rates_a_round_trip_back_to_the_question_entity():
    # "what is the heir of mother of frits_philips ?" → frits_philips: PathQuestion stores
    # parents and children both ways, and the step back reaches the question's entity alone.
    kg = DictKG([("frits", "parents", "anton"), ("anton", "children", "frits")])
    machine = Machine(KGSet([kg]))
    values = TrainedValue(ValueModel({"stop|bias": 3.0}))
    u = Usage()
    root = machine.root(Subgraph().with_entities([kg.entities["frits"]]))
    mother = await expand(machine, root, [kg.entities["frits"]], "parents", u)
    heirs = await expand(machine, mother, [kg.entities["anton"]], "children", u)
    done = await machine.transition(heirs, Action(ActionType.ANSWER, "frits"), u)
    assert await values.evaluate("what is the heir of mother of [frits]", done, u) > 0.9
    assert [f.relation.key for f in answer_paths(done)[0]] == ["parents", "children"]
    # a sentence naming the question's entity beside the mother answers with the mother,
    # which a model that rates only the round trip rejects
    restated = await machine.transition(heirs, Action(ActionType.ANSWER, "the mother of frits is anton"), u)
    round_trip = TrainedValue(ValueModel({"stop|bias": 3.0, "stop|path=parents": -9.0}))
    assert await round_trip.evaluate("q", done, u) > 0.9 and await round_trip.evaluate("q", restated, u) < 0.1


async def test_with_a_trained_value_the_tree_never_expands_the_same_kg_state_twice():
    # A model that rates the first hop (0.24) below the empty path (0.45) and no answer
    # over τ: after the first hop the search backtracks to the root's THINK child. The
    # paper's tree then walks the same EXPAND_KG, the same selection and the same relation
    # again; with a trained value those children are duplicates, left unexpanded, so the
    # 12 expansions reach more distinct KG states.
    from traversals.search.tree import kg_state

    def score(prompt, options, prefix):
        table = {"THINK": -0.1, "EXPAND_KG": -0.5, "ANSWER": -2.0, "x": -10.0}
        return [table.get(o, -max(1, round(len(o) / 4))) for o in options]

    def expanded_states(value):
        return [kg_state(n) for n in value.nodes if n.expansion is not None and n.action.type is not ActionType.THINK]

    llm = ScriptedLLM(rules=[(lambda text: text.endswith(("ANSWER:", "EXPAND_KG:", "THINK:")), " x")], score=score)
    flat = ValueModel({"go|bias": 0.0, "go|len=1": -1.0, "stop|bias": -5.0})
    runs = {}
    for merge in (True, False):
        value = RecordingValue(flat)
        tree = TreeOfTraversals(llm, KGSet([movie_kg()]), TreeConfig(k=3, max_expansions=12, prior_weight=0.0,
                                merge_duplicates=None if merge else False, drop_detours=False), value=value)
        answer = await tree.ask("who starred in the films directed by [Director 7]")
        assert answer.trace["expansions"] == 12 and answer.trace["stopped"] == "max_expansions"
        runs[merge] = (answer, expanded_states(value))
    merged, states = runs[True]
    assert len(states) == len(set(states)) and merged.trace["duplicates"] > 0
    dups = [n for n in merged.trace["nodes"] if n.get("duplicate")]
    assert dups and all(n["expansion"] is None and "duplicate of node" in n["note"] for n in dups)
    paper, paper_states = runs[False]
    assert paper.trace["duplicates"] == 0 and len(paper_states) > len(set(paper_states))
    assert len(set(states)) > len(set(paper_states))


async def test_the_llms_relation_choice_breaks_the_ties_of_a_saturated_trained_value():
    # A model that rates every state and answer 0.993 cannot tell the relations of "who
    # directed [Film 7-0]" apart; the LLM can (directed_by first). With prior_weight 0 the
    # tree walks whichever relation ties break to and answers from it; by default (1 with
    # a trained value) it walks the LLM's first. Answers keep the model's value.
    def score(prompt, options, prefix):
        table = {"EXPAND_KG": -0.1, "THINK": -3.0, "ANSWER": -2.0, "x": -10.0}
        return [table.get(o, -0.01 if "directed_by" in o else -4.0 if " - " in o else -1.0) for o in options]

    llm = ScriptedLLM(rules=[(lambda text: text.endswith(("ANSWER:", "EXPAND_KG:", "THINK:")), " x")], score=score)
    saturated = ValueModel({"stop|bias": 5.0, "go|bias": 5.0})
    question = "who directed [Film 7-0]"
    answers = {}
    for w in (0.0, None):
        tree = TreeOfTraversals(llm, KGSet([movie_kg()]), TreeConfig(k=3, prior_weight=w), value=TrainedValue(saturated))
        answers[w] = await tree.ask(question)
        assert answers[w].trace["stopped"] == "threshold" and answers[w].trace["prior_weight"] == (w if w == 0.0 else 1.0)
    assert answers[0.0].text != "Director 7"
    assert answers[None].text == "Director 7" and answers[None].value > 0.8
    relations = {n["action"]["relation"]["key"]: n for n in answers[None].trace["nodes"]
                 if n["action"] and n["action"]["type"] == "SELECT_RELATION"}
    assert relations["directed_by"]["prior"] == max(n["prior"] for n in relations.values())
    assert all(n["value"] == relations["directed_by"]["value"] and n["expansion"] is None
               for key, n in relations.items() if key != "directed_by")
    assert answers[None].value == answers[0.0].value  # the model's stop value, untempered


async def test_with_a_trained_value_the_tree_answers_from_the_best_state_when_the_expansions_run_out():
    # The budget ends right after the walk to the actors: the state that answers the
    # question is on the frontier, rated above every answer found, but not expanded.
    def score(prompt, options, prefix):
        table = {"EXPAND_KG": -0.1, "THINK": -3.0, "ANSWER": -2.0, "x": -10.0}
        return [table.get(o, -0.1 if "starred" in o else -1.0) for o in options]

    llm = ScriptedLLM(rules=[(lambda text: text.endswith(("ANSWER:", "EXPAND_KG:", "THINK:")), " x")], score=score)
    model = ValueModel({"stop|path=~directed_by>starred_actors": 6.0, "stop|bias": -4.0, "go|bias": 2.0})
    question = "who starred in the films directed by [Director 7]"
    runs = {}
    for at_budget in (None, False):
        tree = TreeOfTraversals(llm, KGSet([movie_kg()]), TreeConfig(k=3, max_expansions=8, answer_at_budget=at_budget),
                                value=TrainedValue(model))
        runs[at_budget] = await tree.ask(question)
    # the answer made at the budget is rated over τ: it stops there as any such answer does
    assert (runs[None].trace["stopped"], runs[False].trace["stopped"]) == ("threshold", "max_expansions")
    answer = runs[None]
    assert answer.text.strip("[]").split(", ")[0] in ("Actor 7-0", "Actor 7-1") and answer.value > 0.8
    node = next(n for n in answer.trace["nodes"] if n["id"] == answer.trace["answer_node"])
    assert "answered when the expansions ran out" in node["note"]
    assert answer.usage.llm_calls > runs[False].usage.llm_calls  # the extra proposal is counted
    assert not runs[False].text.startswith(("Actor", "[Actor")) and (runs[False].value or 0.0) < 0.8


def _expanding_llm(option) -> ScriptedLLM:
    """A scripted LLM that prefers EXPAND_KG, writes " x" for free text, and scores every
    other option (entity, relation, answer) by ``option(text)``."""
    table = {"EXPAND_KG": -0.1, "THINK": -3.0, "ANSWER": -2.0, "x": -10.0}

    def score(prompt, options, prefix):
        return [table[o] if o in table else option(o) for o in options]

    return ScriptedLLM(rules=[(lambda text: text.endswith(("ANSWER:", "EXPAND_KG:", "THINK:")), " x")], score=score)


async def _with_and_without_lookahead(llm, kg, config: TreeConfig, question: str, weights: dict) -> dict:
    """The tree's answers with a trained value (a model of ``weights``) that looks ahead
    (key True) and one that does not (False)."""
    runs = {}
    for lookahead in (True, False):
        tree = TreeOfTraversals(llm, KGSet([kg]), config, value=TrainedValue(ValueModel(weights), lookahead=lookahead))
        runs[lookahead] = await tree.ask(question)
    return runs


async def test_with_a_trained_value_a_selection_is_rated_by_the_best_relation_it_offers():
    # "what other films did the director of [Film 7-0] direct": after the first hop the
    # LLM lists the director first and the question's film second. Without the look-ahead
    # both selections inherit the first hop's value and the tie goes to the newer one, the
    # film, whose relations (years, actors, genres) lead nowhere; with it the director's
    # selection is rated by the path it offers (directed_by > ~directed_by) and goes first.
    def option(o: str) -> float:
        if o.startswith("E") and o[1:2].isdigit():  # an entity
            return -0.2 if "Director" in o else -0.5
        return -0.2 if "directed" in o else -1.0

    runs = await _with_and_without_lookahead(
        _expanding_llm(option), movie_kg(), TreeConfig(k=3, prior_weight=0.0),  # the value's tie, not the LLM's
        "what other films did the director of [Film 7-0] direct",
        {"stop|path=directed_by>~directed_by": 6.0, "stop|bias": -4.0, "go|path=directed_by": 3.0, "go|bias": -2.0})
    for lookahead, answer in runs.items():
        assert answer.text == "Film 7-1" and answer.trace["stopped"] == "threshold"
        assert answer.trace["value_lookahead"] is lookahead

    def selections(answer):
        return {n["action"]["entities"][0]["label"]: n for n in answer.trace["nodes"]
                if n["action"] and n["action"]["type"] == "SELECT_ENTITIES" and n["depth"] > 2}

    ahead, behind = selections(runs[True]), selections(runs[False])
    assert ahead["Director 7"]["value"] > 0.8 > 0.2 > ahead["Film 7-0"]["value"]
    assert "look-ahead: best option ~directed_by" in ahead["Director 7"]["note"]
    assert ahead["Film 7-0"]["expansion"] is None and behind["Film 7-0"]["expansion"] is not None
    assert behind["Director 7"]["value"] == behind["Film 7-0"]["value"]
    assert runs[True].trace["expansions"] < runs[False].trace["expansions"]


def _languages_kg() -> DictKG:
    """Director 9's five films; only the last has a language in the KG (as in MetaQA,
    where most films have none)."""
    triples = [("Film 9-4", "in_language", "Hindi")]
    for f in range(5):
        film = f"Film 9-{f}"
        triples += [(film, "directed_by", "Director 9"), (film, "release_year", str(2000 + f)),
                    (film, "starred_actors", f"Actor 9-{f}")]
    return DictKG(triples)


async def test_with_the_look_ahead_the_tree_also_tries_what_the_trained_value_rates_best():
    # "what languages are the films directed by [Director 9] in": the LLM selects the
    # first films one at a time (none has a language) and proposes (k = 2) release_year
    # and starred_actors. The trained value adds two children of its own: all five films
    # at once (their relation options include in_language) and, at that selection, the
    # relation it rates best.
    def option(o: str) -> float:
        if any(f"Film 9-{f}" in o for f in range(3)):
            return -0.2
        return -0.1 if "release_year" in o else -0.5 if "starred" in o else -3.0

    runs = await _with_and_without_lookahead(
        _expanding_llm(option), _languages_kg(), TreeConfig(k=2, max_expansions=12),
        "what languages are the films directed by [Director 9] in",
        {"stop|path=~directed_by>in_language": 6.0, "stop|bias": -4.0, "go|path=~directed_by": 3.0, "go|bias": -2.0})
    answer = runs[True]
    assert answer.text == "Hindi" and answer.trace["stopped"] == "threshold"
    suggested = [n for n in answer.trace["nodes"] if "proposed by the trained value" in n.get("note", "")]
    group = next(n for n in suggested if n["action"]["type"] == "SELECT_ENTITIES")
    assert sorted(group["selected"]) == [f"Film 9-{f}" for f in range(5)] and group["expansion"] is not None
    assert "look-ahead: best option in_language" in group["note"]
    walked = next(n for n in suggested if n["action"]["type"] == "SELECT_RELATION")
    assert walked["parent"] == group["id"] and walked["action"]["relation"]["key"] == "in_language"
    assert 0.0 < walked["prior"] < 0.1  # the LLM's own probability of it, recorded
    assert runs[False].text != "Hindi" and not any(
        "proposed by the trained value" in n.get("note", "") for n in runs[False].trace["nodes"])


async def test_a_state_the_trained_value_rates_above_the_threshold_is_answered_at_once():
    # "what films did [Director 7] direct" with an LLM that always prefers EXPAND_KG (the
    # 1.5B model's useless second hop): once ~directed_by is walked the model's stop head
    # rates the state above τ, so the chain asks for the answer there instead of expanding.
    weights = {"stop|path=~directed_by": 6.0, "stop|bias": -4.0, "go|bias": -2.0}
    question = "what films did [Director 7] direct"

    def option(o: str) -> float:
        return -0.1 if "Film 7" in o or "~directed_by" in o else -1.0

    def chain(answer_when_rated: bool, llm, answers: int | None = None) -> TreeOfTraversals:
        config = TreeConfig(k=1, answer_when_rated=answer_when_rated, answers=answers)
        return TreeOfTraversals(llm, KGSet([movie_kg()]), config, value=TrainedValue(ValueModel(weights)))

    at_once = await chain(True, _expanding_llm(option)).ask(question)
    usual = await chain(False, _expanding_llm(option)).ask(question)
    for answer in (at_once, usual):
        assert answer.text.strip("[]").split(", ")[0] in films(7) and answer.trace["stopped"] == "threshold"
    nodes = {n["id"]: n for n in at_once.trace["nodes"]}
    state = nodes[nodes[at_once.trace["answer_node"]]["parent"]]
    assert nodes[state["id"]]["action"]["type"] == "SELECT_RELATION"  # answered right after the first hop
    assert "answer asked at once" in state["note"]
    assert at_once.usage.llm_calls < usual.usage.llm_calls
    assert not any(n["action"] and n["action"]["type"] == "SELECT_RELATION" and n["id"] != state["id"]
                   for n in at_once.trace["nodes"])

    # an answer the model cannot rate (free text, no entity; the only one proposed) does not
    # end the search: the state is queued again and expanded as usual
    def free_text_first(prompt, options, prefix):
        table = {"EXPAND_KG": -0.1, "THINK": -3.0, "ANSWER": -2.0, "x": -0.01}
        return [table[o] if o in table else option(o) for o in options]

    stubborn = ScriptedLLM(rules=[(lambda text: text.endswith(("ANSWER:", "EXPAND_KG:", "THINK:")), " x")],
                           score=free_text_first)
    answer = await chain(True, stubborn, answers=1).ask(question)
    nodes = answer.trace["nodes"]
    asked = [n for n in nodes if "answer asked at once" in n.get("note", "")]
    assert asked and asked[0]["action"]["type"] == "SELECT_RELATION"
    kids = [n for n in nodes if n["parent"] == asked[0]["id"]]
    assert [k["action"]["type"] for k in kids][:2] == ["ANSWER", "EXPAND_KG"] and kids[0]["value"] == 0.0


async def test_with_a_prior_weight_the_llms_choice_breaks_a_near_tie_of_the_trained_value():
    # "which movie did [Kenneth Johnson] write" (MetaQA dev 9132): the trained value rates
    # both walks above τ, ~directed_by a little higher; the LLM is sure of ~written_by.
    # By value alone the tree answers with the film he directed; with prior_weight = 1
    # (logit(value) + log(prior / best prior), the default with a trained value) it walks
    # ~written_by first and answers Steel.
    kg = DictKG([("Short Circuit 2", "directed_by", "Kenneth Johnson"), ("Steel", "directed_by", "Kenneth Johnson"),
                 ("Steel", "written_by", "Kenneth Johnson"), ("Steel", "release_year", "1997")])
    weights = {"stop|path=~directed_by": 6.2, "stop|path=~written_by": 6.0, "stop|bias": -4.0, "go|bias": -2.0}

    def option(o: str) -> float:
        return -0.1 if "~written_by" in o or "Kenneth" in o else -4.0 if "~directed_by" in o else -0.5

    async def ask(prior_weight: float | None):
        config = TreeConfig(k=2, prior_weight=prior_weight)
        tree = TreeOfTraversals(_expanding_llm(option), KGSet([kg]), config, value=TrainedValue(ValueModel(weights)))
        answer = await tree.ask("which movie did [Kenneth Johnson] write")
        walks = {n["action"]["relation"]["key"]: n for n in answer.trace["nodes"]
                 if n["action"] and n["action"]["type"] == "SELECT_RELATION"}
        return answer, walks

    by_value, walks = await ask(0.0)
    assert walks["~directed_by"]["value"] > walks["~written_by"]["value"] > 0.8
    assert walks["~written_by"]["prior"] > 0.9 > 0.1 > walks["~directed_by"]["prior"]
    assert walks["~directed_by"]["expansion"] is not None and walks["~written_by"]["expansion"] is None
    assert "Short Circuit 2" in by_value.text
    for weight in (1.0, None):  # None: 1 with a trained value
        with_prior, walks = await ask(weight)
        assert walks["~written_by"]["expansion"] is not None and walks["~directed_by"]["expansion"] is None
        assert with_prior.text.strip("[]") == "Steel" and with_prior.trace["prior_weight"] == 1.0


def test_the_frontier_key_adds_the_weighted_log_prior_relative_to_the_favourite_to_the_log_odds():
    parent = types.SimpleNamespace(priors={"a": 0.5, "b": 0.25, "c": 0.25})

    def node(value, prior, depth=1, id_=1, parent=parent):
        return types.SimpleNamespace(value=value, prior=prior, depth=depth, id=id_, parent=parent)

    assert frontier_key(node(0.9, 0.01)) == (0.9, 1, 1)  # weight 0: the value alone
    assert frontier_key(node(None, None)) == (1.0, 1, 1)
    assert frontier_key(node(0.9, 0.5), 1.0)[0] == pytest.approx(math.log(9))  # the favourite: no term
    assert frontier_key(node(0.9, 0.25), 2.0)[0] == pytest.approx(math.log(9) + 2 * math.log(0.5))
    assert frontier_key(node(0.9, None), 2.0)[0] == pytest.approx(math.log(9))  # no scored choice: no term
    assert frontier_key(node(0.9, 0.2, parent=None), 1.0)[0] == pytest.approx(math.log(9))
    assert frontier_key(node(1.0, 0.0), 1.0)[0] == pytest.approx(math.log(1e6 - 1) + math.log(1e-6 / 0.5))  # clipped


def test_a_negative_prior_weight_is_refused():
    with pytest.raises(BadInput, match="prior-weight"):
        build_solver("tree", ScriptedLLM(responses=["x"]), [movie_kg()], SearchConfig(prior_weight=-1.0))


async def test_with_a_trained_value_a_side_walk_then_the_right_relation_is_a_detour_of_the_direct_branch():
    # The LLM's favourite relation for "who directed [Film 7-0]" is the release year, and
    # once that is walked the director becomes its favourite: walked after the year, the
    # director's state carries no prior penalty and outranks the direct branch, which the
    # model rates the same. With a trained value that state is a detour: not expanded.
    from traversals.search.tree import detour_of

    def score(prompt, options, prefix):
        table = {"EXPAND_KG": -0.1, "THINK": -3.0, "ANSWER": -2.0, "x": -10.0}
        return [table.get(o, -0.01 if "release_year" in o else -2.5 if "directed_by" in o else -6.0) for o in options]

    def walked(node) -> list[str]:
        out = []
        while node is not None:
            if node.action is not None and node.action.type is ActionType.SELECT_RELATION:
                out.append(node.action.relation.key)
            node = node.parent
        return out[::-1]

    llm = ScriptedLLM(rules=[(lambda text: text.endswith(("ANSWER:", "EXPAND_KG:", "THINK:")), " x")], score=score)
    model = ValueModel({"go|bias": -1.0, "go|path=directed_by": 3.0, "stop|bias": -6.0})
    expanded = {}
    for drop in (None, False):
        value = RecordingValue(model)
        tree = TreeOfTraversals(llm, KGSet([movie_kg()]), TreeConfig(k=3, max_expansions=12, drop_detours=drop),
                                value=value)
        await tree.ask("who directed [Film 7-0]")
        expanded[drop] = [walked(n) for n in value.nodes if n.expansion is not None]
        detours = [n for n in value.nodes if "a detour of node" in n.note]
        assert bool(detours) == (drop is None)
        for n in detours:
            first = detour_of(n, [m for m in value.nodes if m.id < n.id])
            # the detour is the earlier branch after a side walk; rated no higher, never expanded
            assert first is not None and walked(first) == walked(n)[1:] and first.value >= n.value
            assert n.expansion is None
    assert ["release_year", "directed_by"] in expanded[False]
    assert ["release_year", "directed_by"] not in expanded[None] and ["directed_by"] in expanded[None]


@pytest.mark.parametrize(
    "flags, says",
    [
        (["--rounds", "0"], "--rounds must be at least 1"),
        (["--max-hops", "0"], "--max-hops must be at least 1"),
        (["--trees", "0"], "--trees must be at least 1"),
        (["--heldout", "nan"], "--heldout is a share"),
        (["--heldout", "1.5"], "--heldout is a share"),
        (["--heldout", "-0.5"], "--heldout is a share"),
        (["--llm-url", "http://127.0.0.1:9/v1"], "only matter(s) with --synthetic"),
    ],
)
def test_train_value_refuses_flags_that_cannot_work_before_any_work(tmp_path, capsys, flags, says):
    from traversals.cli import main

    args = ["train-value", "metaqa-1hop", "--data", str(tmp_path), "--out", str(tmp_path / "m.json"), *flags]
    assert main(args) == 2
    assert says in capsys.readouterr().err
    assert not (tmp_path / "m.json").exists()


def test_train_value_refuses_an_out_it_cannot_write_and_a_dataset_named_twice(tmp_path, capsys):
    from traversals.cli import main

    (tmp_path / "dir.json").mkdir()
    (tmp_path / "file").write_text("x")
    for out, says in ((tmp_path / "dir.json", "is a directory"), (tmp_path / "file" / "m.json", "cannot write there")):
        assert main(["train-value", "pq-2h", "--data", str(tmp_path), "--out", str(out)]) == 2
        assert says in capsys.readouterr().err
    assert main(["train-value", "pq-2h", "pq-2h", "--data", str(tmp_path), "--out", str(tmp_path / "m.json")]) == 2
    assert "named twice" in capsys.readouterr().err


def test_synthetic_training_with_an_llm_that_cannot_score_says_what_to_use(tmp_path, capsys, monkeypatch):
    import traversals.eval.training as training
    from traversals.cli import main
    from traversals.errors import ScoringNotSupported

    kb = tmp_path / "kb.txt"
    kb.write_text("Alpha|directed_by|Ann Lee\n")
    monkeypatch.setattr(training, "open_llm_from_args", lambda args: ScriptedLLM([]))

    async def run(self, *a, **kw):
        raise ScoringNotSupported("no logprobs")

    monkeypatch.setattr(training.SyntheticQuestions, "run", run)
    assert main(["train-value", "--synthetic", "3", "--kg", str(kb), "--out", str(tmp_path / "m.json")]) == 2
    assert "--synthetic checks each phrasing by scoring options" in capsys.readouterr().err


@pytest.mark.parametrize(
    "data, says",
    [
        ({"weights": [1, 2]}, "'weights' is list"),
        ({"weights": {"q=who": "abc"}}, "not a finite number"),
        ({"weights": {"q=who": float("nan")}}, "not a finite number"),
        ({"weights": {}, "meta": [1]}, "'meta' is list"),
        ({"weights": {}, "meta": {"features": "abc"}}, "meta.features"),
        ({"weights": {}, "meta": {"features": -3}}, "meta.features"),
        ({"weights": {}, "meta": {"features": 6, "lexicon": ["a"]}}, "meta.lexicon"),
        ({"weights": {}, "meta": {"features": 6, "synonyms": {"has_genre": "type"}}}, "meta.synonyms"),
    ],
)
def test_a_value_model_file_of_the_wrong_shape_is_one_bad_input_line(tmp_path, data, says):
    import json

    from traversals.search.rwt.valuemodel import FORMAT

    path = tmp_path / "m.json"
    path.write_text(json.dumps({"format": FORMAT, **data}))
    with pytest.raises(BadInput, match=says):
        ValueModel.load(path)


def test_a_value_model_of_another_kg_is_reported_once_while_searching(tmp_path):
    import warnings

    from traversals.errors import ValueModelMismatch

    path = ValueModel({"stop|path=directed_by": 2.0, "go|path=~starred_actors>directed_by": 1.0},
                      {"lexicon": {"has_genre": ["genre"]}, "kg": ["metaqa/kb.txt"]}).save(tmp_path / "m.json")
    model = ValueModel.load(path)
    assert model.relations == {"directed_by", "starred_actors", "has_genre"}
    # a KG that does not list its relations (an endpoint): the relations rated tell
    with pytest.warns(ValueModelMismatch) as seen:  # a PathQuestion KG
        for rel in ("spouse", "~children", "spouse", "parents", "profession"):
            model.predict(["who", "is", "the", "spouse"], [rel])
    assert len(seen) == 1  # once, after three relations it does not know
    message = str(seen[0].message)
    assert str(path) in message and "metaqa/kb.txt" in message and "directed_by" in message
    assert "children, parents, spouse, none of them" in message and "train-value" in message

    # one relation it knows settles it: a model need not have walked every relation of its KG
    own = ValueModel.load(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        own.predict(["who"], [])  # the empty path says nothing
        own.stop_value(["who"], ["~has_genre", "written_by"])
        for rel in ("spouse", "children", "parents", "profession"):
            own.predict(["who"], [rel])


def test_a_value_model_of_another_kg_is_reported_before_searching_an_embedded_kg(tmp_path):
    import warnings

    from traversals import open_kg
    from traversals.errors import ValueModelMismatch

    kb = tmp_path / "kb.txt"
    kb.write_text("Ann|spouse|Bob\nBob|children|Cy\n")
    kg = open_kg(str(kb))
    assert kg.relation_ids() == {"spouse", "children"}
    llm = ScriptedLLM(responses=["x"])
    with pytest.warns(ValueModelMismatch, match=r"the KG searched has children, spouse, none of them"):
        build_solver("tree", llm, [kg], value_model=ValueModel({"stop|path=directed_by": 1.0}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        known = ValueModel({"stop|path=directed_by": 1.0, "stop|path=spouse": 1.0})
        build_solver("beam", llm, [kg], SearchConfig(embedder="lexical"), value_model=known)
        known.predict(["who"], ["~nationality"])  # the KG's list settled it: no check while searching
        known.predict(["who"], ["gender"])
        known.predict(["who"], ["religion"])


def test_the_cli_prints_a_library_warning_as_one_line(capsys):
    import warnings

    from traversals.cli import _show_warning
    from traversals.errors import ValueModelMismatch

    _show_warning(ValueModelMismatch("value model m.json was trained on ..."), ValueModelMismatch, "x.py", 3)
    assert capsys.readouterr().err == "traversals: warning: value model m.json was trained on ...\n"
    _show_warning(UserWarning("other"), UserWarning, "x.py", 3)
    assert "x.py:3: UserWarning: other" in capsys.readouterr().err
    from traversals.cli import main

    before = warnings.showwarning
    assert main(["view", "/nonexistent/trace.json"]) == 2  # a command ran (and failed)
    assert warnings.showwarning is before  # main() installs its display only while a command runs


def test_a_server_reads_its_value_model_once_and_shares_it(tmp_path, monkeypatch):
    from traversals.service import create_app

    path = ValueModel({"stop|bias": 1.0}).save(tmp_path / "m.json")
    loaded = ValueModel.load(path)
    # a loaded model is used as given: the file named in the config is not read again
    solver = build_solver("tree", ScriptedLLM(responses=["x"]), [movie_kg()], SearchConfig(value_model=str(tmp_path / "gone.json")),
                          value_model=loaded)
    assert solver.value.model is loaded
    reads = []
    monkeypatch.setattr(ValueModel, "load", classmethod(lambda cls, p: reads.append(p) or loaded))
    create_app(ScriptedLLM(responses=["x"]), [movie_kg()], defaults=SearchConfig(value_model=str(path)))
    assert reads == [str(path)]  # once at start; requests get the same model


def _three_ways_kg() -> DictKG:
    return DictKG([("Q", "good", "A"), ("Q", "bad", "B"), ("Q", "meh", "C"), ("A", "next", "D"), ("B", "next2", "E")])


def _walked(tree: Tree) -> list[str]:
    return sorted(">".join(key for _, key in path) for path in tree.nodes)


async def _grow(kg: DictKG, model: ValueModel | None, config: TrainConfig, seed: int = 0) -> Tree:
    q = TrainingQuestion("q", "which?", (kg.entities["Q"],), lambda es: 0.0)
    tree = Tree(q)
    await Trainer(KGSet([kg]), config).grow(q, model, random.Random(seed), tree)
    return tree


def _model(weights: dict[str, float]) -> ValueModel:
    model = ValueModel(dict(weights), {"features": FEATURES})
    model.check_schema = False
    return model


async def test_a_model_guided_training_tree_walks_the_relations_and_keeps_the_states_the_model_rates_best():
    kg = _three_ways_kg()
    # the model rates 'good' best, 'meh' next and 'bad' worst, by either head
    model = _model({"stop|path=good": 3.0, "go|path=good": 3.0, "stop|path=meh": 0.0, "go|path=meh": 0.0,
                    "stop|path=bad": -3.0, "go|path=bad": -3.0})
    # one relation a state (no random share): the top-rated one
    assert _walked(await _grow(kg, model, TrainConfig(max_hops=1, branch=1, width=3, epsilon=0.0))) == ["good"]
    # all three walked, one state kept for the next hop: the top-rated one
    assert _walked(await _grow(kg, model, TrainConfig(max_hops=2, branch=3, width=1, epsilon=0.0))) == [
        "bad", "good", "good>next", "meh"]


async def test_a_training_tree_rates_a_state_at_the_last_hop_by_its_stop_head_alone():
    """Nothing lies below a state at ``max_hops``: its "go" head says nothing of it."""
    kg = _three_ways_kg()
    model = _model({"stop|path=good": 2.0, "go|path=good": -3.0, "stop|path=bad": -2.0, "go|path=bad": 4.0})
    assert _walked(await _grow(kg, model, TrainConfig(max_hops=1, branch=1, width=1, epsilon=0.0))) == ["good"]
    # a hop before the last, the better head of each counts: 'bad' goes on best
    assert _walked(await _grow(kg, model, TrainConfig(max_hops=2, branch=1, width=1, epsilon=0.0))) == [
        "bad", "bad>next2"]


def _flat_scorer(prompt: str, options: list[str], prefix: str) -> list[float]:
    """Every relation equally likely; every state rated 0.5."""
    if prefix.startswith("RATING"):
        return [0.0 if o == "0.5" else -6.0 for o in options]
    return [-1.0 for _ in options]


async def test_with_a_trained_value_the_search_rates_a_state_at_max_hops_by_its_stop_head_alone():
    kg = DictKG([("Q", "r1", "A"), ("Q", "r2", "B"), ("A", "r3", "C"), ("B", "r4", "D")])
    # C (r1 > r3, at max_hops) is no answer, but its "go" head says going on pays: nothing
    # lies below it, so that head is not read
    model = _model({"go|path=r1": 4.0, "go|path=r2": 2.2, "stop|bias": -2.0, "stop|path=r2": 3.0,
                    "go|path=r1>r3": 5.0})
    llm = ScriptedLLM(rules=[("three most likely answers", "X, B: Y, C: Z]")], score=_flat_scorer)
    search = MonteCarloTreeSearch(llm, KGSet([kg]), RwTConfig(max_hops=2, simulations=3), rollout=TrainedRollout(model),
                                  critical=CriticalModel(LexicalEmbedder()))
    answer = await search.ask("which?", topic_entities=["Q"])
    values = {n["action"]["relation"]["key"]: n["value"] for n in answer.trace["nodes"] if n["value"] is not None}
    assert list(values) == ["r1", "r2", "r3"] and answer.text == "B"
    stop = 1 / (1 + math.exp(2.0))  # C's stop head: the bias alone
    assert values["r3"] == pytest.approx(0.85 * stop, abs=1e-3)  # λ = 0.15 of a critical value of 0


async def test_with_a_trained_value_the_answers_value_mixes_the_stop_head_with_the_critical_model():
    kg = DictKG([("Q", "r1", "Alpha"), ("Q", "r2", "Bravo")])
    model = _model({"stop|bias": 0.0, "go|bias": 0.0})  # every state 0.5 as an answer
    llm = ScriptedLLM(rules=[("three most likely answers", "Bravo, B: Bravo, C: Bravo]")], score=_flat_scorer)
    search = HopBeamSearch(llm, KGSet([kg]), RwTConfig(max_hops=1), rollout=TrainedRollout(model),
                           critical=CriticalModel(LexicalEmbedder()))
    answer = await search.ask("which?", topic_entities=["Q"])
    # Eq. 4: (1 - λ)·0.5 + λ·1 (Bravo is each guess)
    assert answer.text == "Bravo" and answer.value == pytest.approx(0.85 * 0.5 + 0.15 * 1.0)


def _six_ways_kg() -> DictKG:
    return DictKG([("Q", f"r{i}", f"A{i}") for i in range(6)])


async def test_a_training_draws_its_trees_with_its_seed():
    kg = _six_ways_kg()
    q = TrainingQuestion("q", "which?", (kg.entities["Q"],), lambda es: float(any(e.label == "A5" for e in es)))
    walked = []
    for seed in (0, 1, 2):
        trainer = Trainer(KGSet([kg]), TrainConfig(rounds=1, trees=1, max_hops=1, branch=2, seed=seed))
        await trainer.train([q])
        assert trainer.state is not None
        paths = sorted(path for _, _, path, _ in trainer.state.targets)
        # round 1's tree is the one a tree grown with a generator of that seed walks
        alone = await _grow(kg, None, TrainConfig(max_hops=1, branch=2), seed=seed)
        assert paths == sorted((key,) for (_, key), in alone.nodes)
        walked.append(paths)
    assert len({tuple(p) for p in walked}) > 1  # the seeds draw different relations


async def test_without_a_model_a_training_tree_walks_relations_drawn_at_random():
    kg = _six_ways_kg()
    walked = [_walked(await _grow(kg, None, TrainConfig(max_hops=1, branch=1), seed=seed)) for seed in range(6)]
    assert all(len(w) == 1 for w in walked) and len({w[0] for w in walked}) > 2


async def test_a_model_guided_training_tree_walks_a_share_epsilon_of_its_relations_at_random():
    kg = _six_ways_kg()
    model = _model({"stop|path=r0": 3.0})  # r0 the best by far
    every = [_walked(await _grow(kg, model, TrainConfig(max_hops=1, branch=1, epsilon=1.0), seed=seed))[0]
             for seed in range(6)]
    assert len(set(every)) > 2 and every.count("r0") < 6  # each relation at random (r0 too, now and then)
    assert TrainConfig().epsilon == 0.25
    share = [_walked(await _grow(kg, model, TrainConfig(max_hops=1, branch=1), seed=seed))[0] for seed in range(20)]
    assert 0 < sum(w != "r0" for w in share) < 10  # by default a quarter, about


def _hand_made_tree(spec: dict[tuple[str, ...], tuple[float, str | None]]) -> Tree:
    """A tree of states keyed by relation path: (reward, the one entity reached or None)."""
    def ent(label: str) -> Entity:
        return Entity(kg="k", id=label, label=label)
    tree = Tree(TrainingQuestion("q", "?", (ent("Q"),), lambda es: 0.0))
    for keys, (reward, reached) in spec.items():
        path = tuple(("k", key) for key in keys)
        tree.nodes[path] = PathNode(id=len(tree.nodes) + 1, entities=(ent(reached),) if reached else ())
        tree.rewards[path] = reward
    return tree


def test_a_trees_targets_are_each_states_reward_and_the_best_reward_below_it():
    tree = _hand_made_tree({("a",): (0.0, "X"), ("a", "b"): (0.5, "Y"), ("a", "c"): (0.2, "Z"), ("d",): (0.0, None),
                            ("a", "b", "e"): (1.0, "W"), ("a", "b", "f"): (0.0, "V")})
    trainer = Trainer(KGSet([DictKG([("Q", "a", "X")])]), TrainConfig(max_hops=3))
    # every end but d, which reached nothing (no solution path ends there); no "go" at max_hops
    assert sorted(trainer.targets(tree, random.Random(0))) == [
        ("go", ("a",), 1.0), ("go", ("a", "b"), 1.0),
        ("stop", ("a",), 0.0), ("stop", ("a", "b"), 0.5), ("stop", ("a", "b", "e"), 1.0),
        ("stop", ("a", "b", "f"), 0.0), ("stop", ("a", "c"), 0.2)]


def test_a_tree_gives_at_most_five_correct_ends_and_a_reward_of_one_half_is_correct():
    trainer = Trainer(KGSet([DictKG([("Q", "a", "X")])]), TrainConfig(max_hops=1))
    eight = _hand_made_tree({(f"g{i}",): (1.0, f"G{i}") for i in range(8)})
    assert [len(trainer.targets(eight, random.Random(seed))) for seed in range(5)] == [5] * 5
    half = _hand_made_tree({("half",): (0.5, "H"), **{(f"b{i}",): (0.0, f"B{i}") for i in range(9)}})
    for seed in range(20):  # 'half' is one of the correct ends, all taken; 5 of the 9 others
        got = trainer.targets(half, random.Random(seed))
        assert ("stop", ("half",), 0.5) in got and len(got) == 6
