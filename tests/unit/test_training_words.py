"""The value model reads the words of questions and relation labels in any script: it had read
only ``[a-z0-9]``, so "arbeitet für" was "arbeitet", "f", "r" and a Chinese question no word at
all — a model trained on a KG with Chinese labels could not tell its questions apart."""

from __future__ import annotations

import random
import re

from traversals.search.rwt.train import TrainConfig, Trainer, TrainingQuestion
from traversals.search.rwt.valuemodel import question_words, relation_lexicon, words_of


def test_words_of_other_scripts_are_read_whole():
    assert words_of("Wo wurde er geboren, für wen arbeitet er?") == \
        ["wo", "wurde", "er", "geboren", "für", "wen", "arbeitet", "er"]
    assert words_of("Где родился Пушкин") == ["где", "родился", "пушкин"]
    assert words_of("किसने लिखा") == ["किसने", "लिखा"]  # combining vowel signs stay inside the word
    assert words_of("Cafe\u0301") == ["café"]  # decomposed as composed
    assert words_of("出生地是") == ["出", "生", "地", "是"]  # no spaces: a character a word


def test_ascii_is_read_as_before():
    """The MetaQA model's words (and so its weights) do not change."""
    old = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
    rng = random.Random(0)
    for _ in range(20000):
        text = "".join(rng.choice("abcXYZ019 '_-?.,[]\"") for _ in range(rng.randrange(1, 25)))
        assert words_of(text) == old.findall(text.lower()), text
    assert words_of("Who directed the film [X]? don't rock'n9") == ["who", "directed", "the", "film", "x", "don't",
                                                                    "rock'n", "9"]


def test_question_words_and_the_lexicon_keep_non_ascii_words():
    assert question_words("Für wen arbeitet [Jürgen Müller]?")[:4] == ["für", "wen", "arbeitet", "qentity"]
    assert "出_生" in question_words("[张三]的出生地?")
    assert relation_lexicon({"arbeitet": "arbeitet für", "geboren": "geboren in"}) == \
        {"arbeitet": ["arbeitet", "für"], "geboren": ["geboren"]}


async def test_a_model_trained_on_chinese_questions_tells_them_apart(tmp_path):
    from traversals.kg.factory import open_kgs
    from traversals.search.kgset import KGSet

    rng = random.Random(1)
    lines = []
    for i in range(30):
        lines += [f"张三{i}|出生地|城市{rng.randrange(5)}", f"张三{i}|工作单位|公司{rng.randrange(6)}"]
    kb = tmp_path / "zh.txt"
    kb.write_text("\n".join(lines) + "\n")
    kgs = KGSet(open_kgs([str(kb)]))
    try:
        rows = [ln.split("|") for ln in lines]
        questions = []
        for n, (s, r, o) in enumerate(rows):
            text = f"[{s}]出生在哪个城市?" if r == "出生地" else f"[{s}]在哪个公司工作?"
            entity = (await kgs.search(s, _usage(), limit=1))[0]
            questions.append(TrainingQuestion(str(n), text, (entity,), _reward(o)))
        model = await Trainer(kgs, TrainConfig(rounds=2, max_hops=1)).train(questions)
    finally:
        await kgs.close()
    city, company = question_words("[张三0]出生在哪个城市?"), question_words("[张三0]在哪个公司工作?")
    assert model.stop_value(city, ["出生地"]) > model.stop_value(city, ["工作单位"])
    assert model.stop_value(company, ["工作单位"]) > model.stop_value(company, ["出生地"])


def _usage():
    from traversals.llm.base import Usage

    return Usage()


def _reward(gold: str):
    return lambda entities: float(any(e.label == gold for e in entities))


def test_a_phrasing_in_chinese_is_kept():
    """"{}的导演是谁？" is one word to ``split`` and ends with a full-width question mark: every
    line of a Chinese reply had been dropped, and no question made."""
    from traversals.eval.synthetic import compose, parse_phrasing, Phrasing

    got = parse_phrasing(" {}的导演是谁？\nPhrase: {}的导演\nReverse question: {}导演了哪些电影？\n"
                         "Reverse phrase: {}导演的电影")
    assert got == {"question": "{}的导演是谁？", "phrase": "{}的导演", "reverse question": "{}导演了哪些电影？",
                   "reverse phrase": "{}导演的电影"}
    assert parse_phrasing(" {}?\nPhrase: {}") == {}  # still no phrasing without another word
    two = [Phrasing(phrases=["{}导演的电影。"]), Phrasing(questions=["{}的导演是谁？"])]
    assert compose(two, "张三", random.Random(0)) == "[张三]导演的电影的导演是谁？"


def test_an_entity_name_is_masked_as_a_whole_word_only():
    """[M] and [It] are MetaQA films: their names matched inside "movie" and inside the
    mask's own token, and the features lost the question's words."""
    from traversals.search.rwt.valuemodel import ENT

    assert question_words("what language is the movie [M] in", ["M"])[:7] == [
        "what", "language", "is", "the", "movie", ENT, "in"]
    assert question_words("who wrote the films that [It] starred", ["It"])[:7] == [
        "who", "wrote", "the", "films", "that", ENT, "starred"]
    # a subgraph's entity named "Up" (another film) leaves "up" inside other words alone
    assert question_words("who set up the company", ["Up"])[:5] == ["who", "set", ENT, "the", "company"]
    assert "support" in question_words("what did support mean", ["Up"])
