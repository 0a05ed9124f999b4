"""Training RwT's roll-out model from its own search trees (§3.3, Eq. 6-7; Appendix B.3).

Round ``k`` grows search trees on questions with known answers, guided by the model of
round ``k - 1`` (round 0: no model, relations picked at random — the "random strategy"
row of the paper's Table 3), takes solution paths from them (up to 5 correct and 5
incorrect per question, as the paper does) and fits the model to the values they
reveal; the next round searches with the new model. What differs from the paper, and why
(details in ``docs/rwt.md``):

- the model is a logistic model over sparse features (:mod:`.valuemodel`), not LLaMA3-8B:
  this has to train on 2 CPU cores in minutes;
- trees are grown by a hop-level beam over the KG (``width`` states per hop, ``branch``
  relations per state, a share ``epsilon`` of them random) with no LLM call: the fixed
  LLM policy is not what is trained, and the KG walk is what produces the rewards;
- the outcome reward ``r`` of a state is a caller's function of its entities (the CLI
  uses F1 against the gold answers); a path's end is valued by ``r`` (μ = 1 on terminal
  states), every state above it by the best reward found below it in the tree (the
  "go" head) and by its own ``r`` (the "stop" head);
- the critical model is left out of training targets (λ·V_critical needs the LLM's
  guesses); at inference Eq. 4 mixes it in as before;
- the model reads which relations a question names by the words of their labels
  (:func:`.valuemodel.relation_lexicon`): the lexicon is made from the labels of the
  relations the first round's trees walked and kept for every round (a relation first
  walked later is not in it), stored with the model; with ``synonyms`` (the other words
  the LLM gave for each relation when the questions were made, :class:`.valuemodel.ListedWords`)
  it also reads the telling ones among them (:func:`.valuemodel.synonym_lexicon`, feature set 6).

A training goes on after an interruption from its :class:`TrainState` (``train(resume=…)``):
the examples of the rounds done, kept compactly as (question, head, path, target) and
featurised again, the state of the random draws of trees and paths, and the rounds'
figures. Round ``k + 1`` fits afresh on all rounds' examples with the seed ``seed + k``,
so the model of the last round done is fitted again from them, bit for bit, and the
rounds after it are those of an uninterrupted training (given a KG that answers alike).
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Sequence

from ...errors import BadInput
from ...kg.base import Entity, Relation
from ...llm.base import Usage
from ..kgset import KGSet
from .state import MemoEdges, PathNode, offered_relations, step
from .valuemodel import (HEADS, Example, ListedWords, ValueModel, features, fit, path_keys, question_words,
                         relation_lexicon, synonym_lexicon)

Reward = Callable[[Sequence[Entity]], float]
#: a tree's path to a state: the (KG, relation key) of each hop. Two KGs can both have a
#: relation keyed ``genre``: each is its own state (the model reads them alike, by key)
TreePath = tuple[tuple[str, str], ...]
#: one training target: the head, the relation path and the value to predict
Target = tuple[str, tuple[str, ...], float]


@dataclass
class TrainConfig:
    rounds: int = 3  # R (the paper: 4, "until the improvement between rounds becomes minimal")
    trees: int = 2  # trees per question and round (the paper: 8)
    max_hops: int = 3
    width: int = 4  # states kept per hop
    branch: int = 4  # relations walked per state
    epsilon: float = 0.25  # share of walked relations picked at random once a model guides
    max_actions: int = 30  # relations considered per state
    positives: int = 5  # correct paths per question (the paper: up to 5 …)
    negatives: int = 5  # … and 5 incorrect ones
    correct: float = 0.5  # a path is correct when its end's reward is at least this
    epochs: int = 8
    seed: int = 0


@dataclass
class TrainingQuestion:
    id: str
    text: str
    entities: tuple[Entity, ...]  # the linked question entities (the root state)
    reward: Reward
    gold: object = None  # what ``reward`` compares with, for :func:`fingerprint` (not read otherwise)


def fingerprint(questions: Sequence[TrainingQuestion]) -> str:
    """SHA-256 of the questions in order — id, text, linked entities and ``gold`` — for a
    resumed training to check it trains on the questions it trained on."""
    rows = [[q.id, q.text, [[e.kg, e.id] for e in q.entities], q.gold] for q in questions]
    return hashlib.sha256(json.dumps(rows, ensure_ascii=False, default=repr).encode()).hexdigest()


@dataclass
class TrainState:
    """What a training needs to go on after round ``rounds`` (:meth:`Trainer.train`'s
    ``resume``): every example so far as (index of its question, head, path, target), in
    the order fitted; the state of the random draws of the trees and solution paths; each
    round's figures (:class:`RoundReport`); and the lexicons fixed in round 1."""

    rounds: int
    targets: list[tuple[int, str, tuple[str, ...], float]]
    rng: tuple
    history: list[dict]
    lexicon: dict[str, list[str]]
    synonyms: dict[str, list[str]]

    def to_json(self) -> dict[str, Any]:
        version, internal, gauss = self.rng
        return {"rounds": self.rounds, "rng": [version, list(internal), gauss], "history": self.history,
                "lexicon": self.lexicon, "synonyms": self.synonyms,
                "examples": [[i, head, list(path), target] for i, head, path, target in self.targets]}

    @classmethod
    def from_json(cls, data: Any, where: str = "the training state") -> "TrainState":
        """The state :meth:`to_json` gave, or :class:`BadInput` naming what is wrong."""
        try:
            version, internal, gauss = data["rng"]
            targets = [(int(i), str(head), tuple(str(r) for r in path), float(target))
                       for i, head, path, target in data["examples"]]
            state = cls(int(data["rounds"]), targets, (version, tuple(internal), gauss), list(data["history"]),
                        dict(data["lexicon"]), dict(data["synonyms"]))
            random.Random().setstate(state.rng)
        except (KeyError, TypeError, ValueError) as e:
            raise BadInput(f"{where} is damaged ({type(e).__name__}: {e})") from None
        if bad := next((t for t in state.targets if t[1] not in HEADS or t[0] < 0), None):
            raise BadInput(f"{where} is damaged (example {list(bad)!r})")
        if state.rounds < 1 or len(state.history) != state.rounds:
            raise BadInput(f"{where} is damaged ({state.rounds} rounds, the figures of {len(state.history)})")
        return state


@dataclass
class RoundReport:
    round: int
    questions: int
    examples: int  # training examples so far (all rounds)
    reached: float  # share of questions whose tree holds a correct state
    train_reward: float  # mean reward of the state the model would answer with (train)
    heldout_reward: float | None  # the same on held-out questions
    heldout_hits: float | None  # share of held-out questions whose chosen state is correct
    seconds: float

    def format(self) -> str:
        held = "" if self.heldout_reward is None else (
            f", held-out reward {self.heldout_reward:.3f} (correct {100 * (self.heldout_hits or 0):.1f} %)")
        return (f"round {self.round}: {self.questions} questions, {self.examples} examples, correct state reached "
                f"{100 * self.reached:.1f} %, train reward {self.train_reward:.3f}{held}, {self.seconds:.0f} s")


def tree_path(node: PathNode) -> TreePath:
    """The (KG, relation key) of each hop from the root to ``node``."""
    return tuple((n.relation.kg, n.relation.key) for n in node.path() if n.relation is not None)


def keys_of(path: TreePath) -> tuple[str, ...]:
    """The relation keys of a tree path: what the model reads (:func:`.valuemodel.path_keys`)."""
    return tuple(key for _, key in path)


@dataclass
class Tree:
    """One question's explored states (all trees of a round merged by path), keyed by their
    :data:`TreePath`: a relation key two KGs share is walked in each."""

    question: TrainingQuestion
    nodes: dict[TreePath, PathNode] = field(default_factory=dict)
    rewards: dict[TreePath, float] = field(default_factory=dict)

    def best_below(self, path: TreePath) -> float | None:
        """The best reward of a state strictly below ``path`` (None: nothing explored there)."""
        below = [r for p, r in self.rewards.items() if len(p) > len(path) and p[: len(path)] == path]
        return max(below) if below else None


class Trainer:
    def __init__(self, kgs: KGSet, config: TrainConfig | None = None, *, synonyms: ListedWords | None = None) -> None:
        self.kgs = kgs
        self.config = config or TrainConfig()
        self.listed = synonyms  # the LLM's words for the relations, filtered once the lexicon is known
        self._relations: dict[tuple[tuple[str, str], ...], list[Relation]] = {}
        self._edges = MemoEdges(kgs)  # every tree of every round walks the same relations again
        #: (KG, relation id) -> forward label, of every relation offered (:meth:`relation_labels`)
        self.labels: dict[tuple[str, str], str] = {}
        self.state: TrainState | None = None  # after each round, what a resumed training needs

    def _value(self, model: ValueModel | None, words: list[str], path: tuple[str, ...]) -> float:
        return 0.0 if model is None else model.search_value(words, path, final=len(path) >= self.config.max_hops)

    async def _relations_of(self, node: PathNode, usage: Usage) -> list[Relation]:
        key = tuple(sorted((e.kg, e.id) for e in node.entities))
        if key not in self._relations:
            self._relations[key] = list((await self.kgs.get_relations(list(node.entities), usage)).items)
            self.labels.update(((r.kg, r.id), r.label or r.id) for r in self._relations[key])
        return await offered_relations(self._edges, node, self._relations[key], usage, self.config.max_actions)

    def _labels_by_id(self) -> dict[str, list[str]]:
        merged: dict[str, list[str]] = {}
        for (_, rid), label in self.labels.items():
            if label not in merged.setdefault(rid, []):
                merged[rid].append(label)
        return merged

    def relation_labels(self) -> dict[str, str]:
        """Relation id -> forward label, of every relation offered: what the lexicon is made
        from. The model reads a relation by its id alone, so an id several KGs have stands
        for each of them: its label is their different labels joined (sorted, the same whichever
        KG offered it first)."""
        return {rid: " ".join(sorted(labels)) for rid, labels in self._labels_by_id().items()}

    def lexicon(self) -> dict[str, list[str]]:
        """:func:`.valuemodel.relation_lexicon` of :meth:`relation_labels`; a word the labels
        of one id in several KGs share is listed once."""
        joined = {rid for rid, labels in self._labels_by_id().items() if len(labels) > 1}
        return {rid: list(dict.fromkeys(words)) if rid in joined else words
                for rid, words in relation_lexicon(self.relation_labels()).items()}

    async def grow(self, q: TrainingQuestion, model: ValueModel | None, rng: random.Random, tree: Tree) -> None:
        """One tree: a hop-level beam over the KG, guided by ``model`` (random without one)."""
        cfg = self.config
        words = question_words(q.text, [e.label for e in q.entities])
        usage = Usage()
        root = PathNode(id=0, entities=q.entities)
        beam = [root]
        for _ in range(cfg.max_hops):
            children: list[tuple[float, float, PathNode]] = []
            for state in beam:
                rels = await self._relations_of(state, usage)
                base = tuple(path_keys(state))  # what the model reads
                where = tree_path(state)  # what tells the states apart
                if model is None:
                    chosen = rng.sample(rels, min(cfg.branch, len(rels)))
                else:
                    ranked = sorted(rels, key=lambda r: -self._value(model, words, base + (r.key,)))
                    n_random = sum(rng.random() < cfg.epsilon for _ in range(cfg.branch))
                    chosen = ranked[: cfg.branch - n_random]
                    rest = ranked[cfg.branch - n_random:]
                    chosen += rng.sample(rest, min(n_random, len(rest)))
                for rel in chosen:
                    path = where + ((rel.kg, rel.key),)
                    node = tree.nodes.get(path)
                    if node is None:
                        node = PathNode(id=len(tree.nodes) + 1, entities=(), parent=state, relation=rel,
                                        depth=state.depth + 1)
                        node.entities, node.edges, node.omitted = await step(self._edges, state, rel, usage)
                        tree.nodes[path] = node
                        tree.rewards[path] = q.reward(node.entities) if node.entities else 0.0
                    if node.entities:
                        children.append((self._value(model, words, base + (rel.key,)), rng.random(), node))
            children.sort(key=lambda c: (-c[0], c[1]))
            beam = [c[2] for c in children[: cfg.width]]
            if not beam:
                break

    def targets(self, tree: Tree, rng: random.Random) -> list[Target]:
        """Solution paths of a tree as training targets (deduplicated by head and tree path;
        a target's path is the relation keys the model reads: with several KGs, two states
        can give one path two targets)."""
        cfg = self.config
        good = [p for p, r in tree.rewards.items() if r >= cfg.correct]
        bad = [p for p, r in tree.rewards.items() if r < cfg.correct and tree.nodes[p].entities]
        ends = rng.sample(good, min(cfg.positives, len(good))) + rng.sample(bad, min(cfg.negatives, len(bad)))
        targets: dict[tuple[str, TreePath], float] = {}
        for end in ends:
            for t in range(1, len(end) + 1):
                path = end[:t]
                targets[("stop", path)] = tree.rewards[path]
                below = tree.best_below(path)
                if below is not None and t < cfg.max_hops:
                    targets[("go", path)] = below
        return [(head, keys_of(path), target) for (head, path), target in targets.items()]

    @staticmethod
    def featurise(question: TrainingQuestion, targets: Sequence[Target], lexicon: dict[str, list[str]] | None = None,
                  synonyms: dict[str, list[str]] | None = None) -> list[Example]:
        """A question's ``targets`` as examples, with the relations ``lexicon`` and ``synonyms``
        say the question names."""
        words = question_words(question.text, [e.label for e in question.entities])
        return [Example(features(words, list(path), head, lexicon=lexicon, synonyms=synonyms), target)
                for head, path, target in targets]

    def examples(self, tree: Tree, rng: random.Random, lexicon: dict[str, list[str]] | None = None,
                 synonyms: dict[str, list[str]] | None = None) -> list[Example]:
        """Solution paths of a tree as training targets (deduplicated by head and path),
        featurised with the relations ``lexicon`` and ``synonyms`` say the question names."""
        return self.featurise(tree.question, self.targets(tree, rng), lexicon, synonyms)

    @staticmethod
    def _chosen_path(tree: Tree, model: ValueModel) -> TreePath | None:
        words = question_words(tree.question.text, [e.label for e in tree.question.entities])
        reached = [p for p, node in tree.nodes.items() if node.entities]
        return max(reached, key=lambda p: (model.stop_value(words, keys_of(p)), -len(p)), default=None)

    def chosen(self, tree: Tree, model: ValueModel) -> PathNode | None:
        """The state the model would answer with among the tree's states (best *stop* value,
        ties to the shorter path), or None when no state has entities."""
        path = self._chosen_path(tree, model)
        return None if path is None else tree.nodes[path]

    def chosen_reward(self, tree: Tree, model: ValueModel) -> float:
        """The reward of the state the model would answer with among the tree's states."""
        path = self._chosen_path(tree, model)
        return 0.0 if path is None else tree.rewards[path]

    def _fitted(self, data: Sequence[Example], rnd: int, lexicon: dict[str, list[str]],
                synonyms: dict[str, list[str]], history: list[dict]) -> ValueModel:
        """The model of round ``rnd + 1``: fitted afresh on all rounds' examples."""
        model = fit(data, epochs=self.config.epochs, seed=self.config.seed + rnd)
        model.check_schema = False  # a relation first walked in a later round is expected
        model.meta["lexicon"] = lexicon
        if synonyms:
            model.meta["synonyms"] = synonyms
        if history:
            model.meta["rounds"] = list(history)
        return model

    def restore(self, questions: Sequence[TrainingQuestion], state: TrainState) -> tuple[ValueModel, list[Example]]:
        """The model of round ``state.rounds`` and the examples it was fitted on, from ``state``
        (the examples featurised again, the model fitted again: both as they were)."""
        if bad := next((t for t in state.targets if t[0] >= len(questions)), None):
            raise BadInput(f"the training state names question {bad[0] + 1}, of {len(questions)} training questions")
        data: list[Example] = []
        words: dict[int, list[str]] = {}
        for i, head, path, target in state.targets:
            if i not in words:
                q = questions[i]
                words[i] = question_words(q.text, [e.label for e in q.entities])
            data.append(Example(features(words[i], list(path), head, lexicon=state.lexicon, synonyms=state.synonyms),
                                target))
        if not data:
            raise BadInput("the training state holds no example")
        return self._fitted(data, state.rounds - 1, state.lexicon, state.synonyms, state.history), data

    async def train(
        self,
        questions: Sequence[TrainingQuestion],
        heldout: Sequence[TrainingQuestion] = (),
        *,
        on_round: Callable[[RoundReport, ValueModel], Awaitable[None] | None] | None = None,
        on_question: Callable[[int, int], None] | None = None,
        resume: TrainState | None = None,
    ) -> ValueModel:
        """Train ``config.rounds`` rounds; with ``resume``, those after ``resume.rounds`` (the
        same ``questions``, in the same order, as the training it is the state of)."""
        cfg = self.config
        rng = random.Random(cfg.seed)
        model: ValueModel | None = None
        data: list[Example] = []
        targets: list[tuple[int, str, tuple[str, ...], float]] = []
        history: list[dict] = []
        lexicon: dict[str, list[str]] | None = None
        synonyms: dict[str, list[str]] = {}
        first = 0
        if resume is not None:
            model, data = self.restore(questions, resume)
            rng.setstate(resume.rng)
            targets, history = list(resume.targets), list(resume.history)
            lexicon, synonyms, first = resume.lexicon, resume.synonyms, resume.rounds
            self.state = resume
        for rnd in range(first, cfg.rounds):
            started = time.perf_counter()
            trees = []
            for i, q in enumerate(questions):
                tree = Tree(q)
                for _ in range(cfg.trees):
                    await self.grow(q, model, rng, tree)
                trees.append(tree)
                if on_question:
                    on_question(i + 1, len(questions))
            if lexicon is None:  # the first round's relations; every round's data reads the same
                lexicon = self.lexicon()
                synonyms = synonym_lexicon(lexicon, self.listed) if self.listed else {}
            for i, tree in enumerate(trees):
                got = self.targets(tree, rng)
                targets += [(i, head, path, target) for head, path, target in got]
                data += self.featurise(tree.question, got, lexicon, synonyms)
            if not data:  # an empty model would rate every state 0.5, and be written as if trained
                raise BadInput(f"no training example: the trees of the {len(questions)} questions reached no entity "
                               "from the questions' entities: do those entities have relations in the KG?")
            model = self._fitted(data, rnd, lexicon, synonyms, [])
            held_trees = []
            for q in heldout:  # searched with the new model (a share epsilon of the relations still at
                # random, as in training: inference has none), then read by its stop head
                tree = Tree(q)
                await self.grow(q, model, random.Random(cfg.seed), tree)
                held_trees.append(tree)
            held = [self.chosen_reward(t, model) for t in held_trees]
            report = RoundReport(
                round=rnd + 1, questions=len(questions), examples=len(data),
                reached=sum(any(r >= cfg.correct for r in t.rewards.values()) for t in trees) / max(1, len(trees)),
                train_reward=sum(self.chosen_reward(t, model) for t in trees) / max(1, len(trees)),
                heldout_reward=sum(held) / len(held) if held else None,
                heldout_hits=sum(r >= cfg.correct for r in held) / len(held) if held else None,
                seconds=time.perf_counter() - started,
            )
            history.append(dict(report.__dict__))
            model.meta["rounds"] = list(history)
            self.state = TrainState(rnd + 1, list(targets), rng.getstate(), list(history), lexicon, synonyms)
            if on_round:
                maybe = on_round(report, model)
                if maybe is not None:
                    await maybe
        assert model is not None
        model.check_schema = True
        return model
