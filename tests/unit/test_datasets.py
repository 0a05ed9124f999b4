"""Every loader on the shared benchmark files (read in place from ../shared/data), and the
withheld / private layouts (PQL-3H, MusicBrainz-x-Wikidata) on tiny files of the same
format written here."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from traversals.errors import BadInput
from traversals.eval.datasets import DATASETS, Gold, load_dataset, sample_questions
from traversals.eval.datasets.tog import is_fragment
from traversals.eval.metrics import score
from traversals.eval.metrics import em_in

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
DATA = SHARED / "data"

needs_data = pytest.mark.skipif(not (DATA / "metaqa").is_dir(), reason="../shared/data not present")


def by_id(ds):
    return {q.id: q for q in ds.questions}


def alts(q):
    return [g.alternatives for g in q.gold]


# ---------------------------------------------------------------------------- MetaQA


@needs_data
@pytest.mark.parametrize(
    "hops,total,answerable",
    [(1, 9992, 9295), (2, 14872, 11723), (3, 14274, 8773)],
)
def test_metaqa_counts(hops, total, answerable):
    full = load_dataset(f"metaqa-{hops}hop", DATA / "metaqa", split="dev")
    sub = load_dataset(f"metaqa-{hops}hop", DATA / "metaqa", split="dev", answerable_only=True)
    assert len(full) == total
    assert len(sub) == answerable
    assert full.kg_spec == str((DATA / "metaqa" / "kb.txt").resolve())
    assert sub.answerable_only and not full.answerable_only
    assert len({q.id for q in full.questions}) == total
    assert all(q.topic_entities and q.gold for q in full.questions)


@needs_data
def test_metaqa_known_question():
    ds = load_dataset("metaqa-1hop", DATA / "metaqa")
    q = by_id(ds)["metaqa-1hop:dev:17"]
    assert q.text == "what movies did [Daniel Giménez Cacho] act in"  # brackets kept
    assert q.topic_entities == ["Daniel Giménez Cacho"]
    assert alts(q) == [("Bad Education",), ("Deep Crimson",)]
    assert q.meta["qtype"] == "actor_to_movie"
    first = ds.questions[0]
    assert first.id == "metaqa-1hop:dev:0"
    assert [g.answer for g in first.gold] == ["Once Were Warriors", "Tracker", "River Queen"]


@needs_data
def test_metaqa_answerable_subset_is_the_idx_lines():
    idx = [int(x) for x in (DATA / "metaqa" / "answerable_dev_2hop.idx").read_text().split()]
    sub = load_dataset("metaqa-2hop", DATA, answerable_only=True)  # the parent folder works too
    assert [q.meta["line"] for q in sub.questions] == sorted(idx)
    q = by_id(sub)["metaqa-2hop:dev:0"]
    assert q.topic_entities == ["Joel Zwick"] and alts(q) == [("Greek",)]
    assert q.meta["qtype"] == "director_to_movie_to_language"


def test_metaqa_missing_split_and_idx(tmp_path):
    (tmp_path / "qa_dev_1hop.txt").write_text("who directed [X]\tA|B|A\n\nwho wrote [Y]\tC\n")
    ds = load_dataset("metaqa-1hop", tmp_path)
    assert [q.id for q in ds.questions] == ["metaqa-1hop:dev:0", "metaqa-1hop:dev:2"]
    assert alts(ds.questions[0]) == [("A",), ("B",)]  # duplicates merged
    assert ds.kg_specs == []  # no kb.txt here
    with pytest.raises(BadInput, match="answerable"):
        load_dataset("metaqa-1hop", tmp_path, answerable_only=True)
    with pytest.raises(BadInput, match="qa_test_1hop"):
        load_dataset("metaqa-1hop", tmp_path, split="test")


def test_metaqa_original_layout(tmp_path):
    (tmp_path / "kb.txt").write_text("X|directed_by|A\n")
    (tmp_path / "1-hop" / "vanilla").mkdir(parents=True)
    (tmp_path / "1-hop" / "vanilla" / "qa_test.txt").write_text("who directed [X]\tA\n")
    (tmp_path / "1-hop" / "qa_test_qtype.txt").write_text("movie_to_director\n")
    ds = load_dataset("metaqa-1hop", tmp_path, split="test")
    assert ds.questions[0].id == "metaqa-1hop:test:0"
    assert ds.questions[0].meta["qtype"] == "movie_to_director"
    assert ds.kg_spec.endswith("kb.txt")


# ---------------------------------------------------------------------------- PathQuestion


@needs_data
@pytest.mark.parametrize(
    "name,count,kb",
    [("pq-2h", 1908, "2H-kb.txt"), ("pq-3h", 5198, "3H-kb.txt"), ("pql-2h", 1594, "PQL2-KB.txt")],
)
def test_pathquestion_counts(name, count, kb):
    ds = load_dataset(name, DATA / "pathquestion")
    assert len(ds) == count and ds.split == "all"
    assert Path(ds.kg_spec).name == kb
    assert all(len(q.topic_entities) == 1 and len(q.gold) == 1 for q in ds.questions)


@needs_data
def test_pathquestion_known_questions():
    pq = by_id(load_dataset("pq-2h", DATA))
    q = pq["pq-2h:0"]
    assert q.text == "which nationality is frederica_of_mecklenburg-strelitz 's couple ?"
    assert q.topic_entities == ["frederica_of_mecklenburg-strelitz"]
    assert alts(q) == [("united_kingdom",)]
    assert q.meta["relations"] == ["spouse", "nationality"]

    q3 = by_id(load_dataset("pq-3h", DATA))["pq-3h:12"]
    assert alts(q3) == [("gabriel_de_borbon", "charles_iv_of_spain")]  # the listed alternatives
    assert q3.meta["path"][-1] == "gabriel_de_borbon" and len(q3.meta["relations"]) == 3

    pql = by_id(load_dataset("pql-2h", DATA))
    assert pql["pql-2h:0"].text == "what is the notable_types of Kenneth_Peach 's film ?"  # leading space gone
    assert alts(pql["pql-2h:214"]) == [("PG_(USA)",)]  # parentheses inside an answer


def test_pql3h_reads_both_files(tmp_path):
    row = "{q}\t{a}({alts})\t{s}#__r1#m1#__r2#m2#__r3#{a}\n"
    (tmp_path / "PQL-3H.txt").write_text(
        row.format(q=" what is the x of Foo 's y 's z ?", a="Bar", alts="Bar/Baz_(band)/", s="Foo")
        + row.format(q=" what is Qux 's z ?", a="Baz_(band)", alts="Baz_(band)/", s="Qux")
    )
    (tmp_path / "PQL-3H_more.txt").write_text(
        row.format(q="what is Zed 's z ?", a="Zorro", alts="Zorro/", s="Zed")
    )
    (tmp_path / "PQL3-KB.txt").write_text("Foo\t__r1\tm1\n")
    ds = load_dataset("pql-3h", tmp_path)
    assert [q.id for q in ds.questions] == ["pql-3h:0", "pql-3h:1", "pql-3h:more:0"]
    q0, q1, q2 = ds.questions
    assert q0.text == "what is the x of Foo 's y 's z ?"
    assert alts(q0) == [("Bar", "Baz_(band)")]
    assert alts(q1) == [("Baz_(band)",)]
    assert q2.topic_entities == ["Zed"] and q2.meta["file"] == "PQL-3H_more.txt"
    assert q0.meta["relations"] == ["__r1", "__r2", "__r3"]
    assert Path(ds.kg_spec).name == "PQL3-KB.txt"
    assert len(ds.files) == 2


def test_pql3h_missing_is_clear(tmp_path):
    with pytest.raises(BadInput, match="PQL-3H.txt"):
        load_dataset("pql-3h", tmp_path)


# ---------------------------------------------------------------------------- QALD-10


@needs_data
def test_qald10():
    ds = load_dataset("qald10", DATA / "qald10")
    assert len(ds) == 394 and ds.kg_specs == ["wikidata"] and ds.split == "test"
    assert len(load_dataset("qald10", DATA, answerable_only=True)) == 393  # id 313 has no answer
    q = by_id(ds)
    assert q["qald10:test:0"].text == "After whom is the Riemannian geometry named?"
    assert alts(q["qald10:test:0"]) == [("Q42299",)]
    assert alts(q["qald10:test:7"]) == [("yes", "true")]  # ASK question
    assert alts(q["qald10:test:15"]) == [("no", "false")]
    assert alts(q["qald10:test:8"]) == [("100",)]  # "+100" decimal
    assert alts(q["qald10:test:240"]) == [("1997-04-05",)]  # xsd:dateTime
    assert alts(q["qald10:test:242"]) == [("1900", "1900-01-01")]  # 1 January -> year
    # a year before the common era (Athens founded; sperm whales first existed)
    assert alts(q["qald10:test:357"]) == [("7000 BC", "-7000-01-01T00:00:00Z")]
    assert alts(q["qald10:test:237"]) == [("3600000 BC", "-3600000-01-01T00:00:00Z")]
    assert score("Around 7000 BCE.", q["qald10:test:357"].gold)["em_in"] == 1.0
    assert score("7000", q["qald10:test:357"].gold)["em_in"] == 0.0  # not the same year
    assert q["qald10:test:313"].gold == []
    assert sum(len(x.gold) for x in ds.questions) > 394


def test_qald10_labels_file(tmp_path):
    (tmp_path / "qald_10.json").write_text(
        '{"questions": [{"id": 3, "question": [{"language": "de", "string": "Wer?"},'
        ' {"language": "en", "string": "Who?"}], "answers": [{"head": {"vars": ["r"]},'
        ' "results": {"bindings": [{"r": {"type": "uri", "value": "http://www.wikidata.org/entity/Q1"}},'
        ' {"r": {"type": "literal", "value": "x", "xml:lang": "en"}}]}}]}]}'
    )
    bare = load_dataset("qald10", tmp_path)
    assert alts(bare.questions[0]) == [("Q1",), ("x",)]
    assert len(bare.notes) == 1 and "no labels.json beside qald_10.json" in bare.notes[0]  # eval prints it
    (tmp_path / "labels.json").write_text('{"Q1": ["Universe", "cosmos"]}')
    assert load_dataset("qald10", tmp_path).notes == []
    q = load_dataset("qald10", tmp_path).questions[0]
    assert q.id == "qald10:test:3" and q.text == "Who?"
    assert alts(q) == [("Universe", "cosmos", "Q1"), ("x",)]


# ---------------------------------------------------------------------------- questions-only


@needs_data
def test_cwq():
    ds = load_dataset("cwq", DATA / "questions-only")
    assert len(ds) == 3531 and ds.kg_specs == ["freebase"]
    q = ds.questions[0]
    assert q.id == "cwq:0"
    assert q.text == "Lou Seal is the mascot for the team that last won the World Series when?"
    assert alts(q) == [("2014 World Series",)]
    assert q.topic_entities == ["Lou Seal"]
    assert q.meta["source_id"].startswith("WebQTest-832")


@needs_data
def test_webquestions():
    ds = load_dataset("webquestions", DATA)
    assert len(ds) == 2032 and ds.kg_specs == ["wikidata"]
    q = ds.questions[0]
    assert q.text == "what does jamaican people speak?"
    assert alts(q) == [("Jamaican Creole English Language",), ("Jamaican English",)]  # two labels
    assert q.topic_entities == ["Jamaica"] and q.meta["qid_topic_entity"] == {"Q766": "Jamaica"}


@needs_data
def test_2wikimultihopqa():
    ds = load_dataset("2wikimultihopqa", DATA / "questions-only")
    assert len(ds) == 1000 and ds.kg_specs == ["wikidata"]
    q = by_id(ds)
    assert alts(q["2wikimultihopqa:dev:1"]) == [("Mask of Fu Manchu", "The Mask of Fu Manchu")]  # one label + alias
    assert alts(q["2wikimultihopqa:dev:2"]) == [("12 June 1516",)]  # a plain string answer
    assert q["2wikimultihopqa:dev:0"].text == "Who is the mother of the director of film Polish-Russian War (Film)?"
    assert all(len(x.gold) == 1 for x in ds.questions)


# ---------------------------------------------------------------------------- MusicBrainz


def test_musicbrainz_csv(tmp_path):
    csv_path = tmp_path / "data" / "MusicbrainzxWikidata.csv"
    csv_path.parent.mkdir()
    csv_path.write_text(
        "\ufeffQuestion,Answer,Type,Notes\n"
        '"Which event was hosted in a venue with a larger maximum capacity, A or B?",Fearless Tour: Omaha,comparison,x\n'
        ",,,empty row\n"
        "How many albums did X release?,12,aggregation,\n"
        "\"Who played on both?\",\"['Ann', 'Bob']\",qualification,\n",
        encoding="utf-8",
    )
    for where in (tmp_path, csv_path):
        ds = load_dataset("musicbrainz-x-wikidata", where)
        assert [q.id for q in ds.questions] == [
            "musicbrainz-x-wikidata:0",
            "musicbrainz-x-wikidata:2",
            "musicbrainz-x-wikidata:3",
        ]
    q0, q2, q3 = ds.questions
    assert q0.text.startswith("Which event was hosted") and alts(q0) == [("Fearless Tour: Omaha",)]
    assert q0.meta["type"] == "comparison"
    assert alts(q2) == [("12",)]
    assert alts(q3) == [("Ann",), ("Bob",)]
    assert ds.kg_specs == ["wikidata", "musicbrainz"]


def test_musicbrainz_tolerant_headers(tmp_path):
    p = tmp_path / "mine.csv"
    p.write_text("id,the question text,Gold Answer\n1,Who?,Me\n")
    q = load_dataset("musicbrainz", p).questions[0]
    assert q.text == "Who?" and alts(q) == [("Me",)]
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    with pytest.raises(BadInput, match="question and an answer column"):
        load_dataset("musicbrainz-x-wikidata", tmp_path / "bad.csv")


# ---------------------------------------------------------------------------- registry, sampling


def test_registry_and_errors(tmp_path):
    assert set(DATASETS) >= {
        "metaqa-1hop", "metaqa-2hop", "metaqa-3hop", "pq-2h", "pq-3h", "pql-2h", "pql-3h",
        "qald10", "cwq", "webquestions", "2wikimultihopqa", "musicbrainz-x-wikidata",
    }  # fmt: skip
    with pytest.raises(BadInput, match="unknown dataset"):
        load_dataset("nope", tmp_path)
    with pytest.raises(BadInput, match="no such file"):
        load_dataset("pq-2h", tmp_path / "missing")


@needs_data
def test_sampling_is_react_shuffle_prefix():
    ds = load_dataset("metaqa-1hop", DATA / "metaqa", answerable_only=True)
    idxs = list(range(len(ds.questions)))
    random.Random(233).shuffle(idxs)
    six = sample_questions(ds.questions, 6, 233)
    assert [q.id for q in six] == [ds.questions[i].id for i in idxs[:6]]
    hundred = sample_questions(ds.questions, 100, 233)
    assert [q.id for q in hundred[:6]] == [q.id for q in six]  # a smaller limit is a prefix
    assert [q.id for q in sample_questions(ds.questions, 6, 1)] != [q.id for q in six]
    assert sample_questions(ds.questions, None) == ds.questions
    assert len(sample_questions(ds.questions[:3], 10)) == 3


def test_gold_json_roundtrip():
    g = Gold("a", ("b", "a"))
    assert g.alternatives == ("a", "b")
    assert Gold.from_json(g.to_json()) == Gold("a", ("b",))
    assert Gold.from_json("x") == Gold("x")
    assert Gold.from_json({"answer": "x", "aliases": ["y"]}) == Gold("x", ("y",))


# ---------------------------------------------------------------------------- wrong files


def test_another_benchmarks_file_is_refused_not_read_as_empty_gold(tmp_path):
    """Each loader names what is wrong with a file of another benchmark in one line,
    instead of loading questions without gold answers (all scored 0) or a traceback."""
    pq_line = "who is x 's y ?\tb(b/)\tx#r1#a#r2#b#<end>#b\n"
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "qa_dev_1hop.txt").write_text(pq_line)  # a PathQuestion line
    with pytest.raises(BadInput, match=r"qa_dev_1hop.txt:1: expected question<TAB>answers, found 3"):
        load_dataset("metaqa-1hop", tmp_path / "m")
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "PQ-2H.txt").write_text("what movies did [X] act in\tA|B\n")  # a MetaQA line
    with pytest.raises(BadInput, match=r"PQ-2H.txt:1: expected question<TAB>answer\(...\)<TAB>path"):
        load_dataset("pq-2h", tmp_path / "p")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "cwq.json").write_text('[{"question": "q?", "answers": ["A"], "topic_entity": {}}]')
    with pytest.raises(BadInput, match="no question has an 'answer' key: not the cwq file"):
        load_dataset("cwq", tmp_path / "c")
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "webquestions.json").write_text('[{"question": "q?", "answer": "A"}]')
    with pytest.raises(BadInput, match="not the webquestions file"):
        load_dataset("webquestions", tmp_path / "w")
    (tmp_path / "q").mkdir()
    (tmp_path / "q" / "qald_10.json").write_text('[{"question": "q?", "answer": "A"}]')
    with pytest.raises(BadInput, match="not QALD JSON"):
        load_dataset("qald10", tmp_path / "q")


def test_metaqa_file_of_another_hop_count_is_refused(tmp_path):
    (tmp_path / "qa_dev_1hop.txt").write_text("who directed [X]\tA\n")
    (tmp_path / "qa_dev_2hop.txt").write_text("who directed films of [X]\tB\n")
    assert len(load_dataset("metaqa-1hop", tmp_path / "qa_dev_1hop.txt")) == 1  # its own file
    with pytest.raises(BadInput, match="is not qa_dev_2hop.txt"):  # not the 2-hop file beside it
        load_dataset("metaqa-2hop", tmp_path / "qa_dev_1hop.txt")


def test_metaqa_answerable_index_of_another_file_is_refused(tmp_path):
    (tmp_path / "qa_dev_1hop.txt").write_text("who directed [X]\tA\nwho wrote [Y]\tB\n")
    (tmp_path / "answerable_dev_1hop.idx").write_text("0\n5\n")
    with pytest.raises(BadInput, match="line 5 is not a line of"):
        load_dataset("metaqa-1hop", tmp_path, answerable_only=True)


def test_a_file_without_questions_is_an_error_not_an_empty_run(tmp_path):
    (tmp_path / "qa_dev_1hop.txt").write_text("\n")
    with pytest.raises(BadInput, match="metaqa-1hop: no questions in .*qa_dev_1hop.txt"):
        load_dataset("metaqa-1hop", tmp_path)
    (tmp_path / "MusicbrainzxWikidata.csv").write_text("Question,Answer,Type\n")
    with pytest.raises(BadInput, match="no questions"):
        load_dataset("musicbrainz", tmp_path)


def test_qald10_bad_labels_file_is_clear(tmp_path):
    (tmp_path / "qald_10.json").write_text(
        '{"questions": [{"id": 1, "question": [{"language": "en", "string": "Is it?"}],'
        ' "answers": [{"boolean": true}]}]}'
    )
    assert alts(load_dataset("qald10", tmp_path).questions[0]) == [("yes", "true")]
    (tmp_path / "labels.json").write_text("{not json")
    with pytest.raises(BadInput, match="labels.json"):
        load_dataset("qald10", tmp_path)


@needs_data
def test_webquestions_debris_of_split_answers_is_no_gold_label():
    """Think-on-Graph's file has answers cut at an apostrophe, the tail kept as one more
    answer (``s Run" `` beside ``Battle of Hoke's Run``): 41 questions; a correct answer
    would otherwise lose EM-in for a label nothing can match."""
    raw = json.loads((DATA / "questions-only" / "webquestions.json").read_text(encoding="utf-8"))
    assert 's Run" ' in raw[72]["answers"] and ' Benci" ' in raw[76]["answers"]
    q = by_id(load_dataset("webquestions", DATA))
    labels = [g.answer for g in q["webquestions:72"].gold]
    assert "Battle of Hoke's Run" in labels and len(labels) == 9
    assert not any('"' in a for a in labels)
    assert [g.answer for g in q["webquestions:396"].gold] == ["The King's School, Grantham"]
    assert em_in("The King's School, Grantham", q["webquestions:396"].gold) == 1.0
    labels_1637 = [g.answer for g in q["webquestions:1637"].gold]  # 's Day" "Saint Joseph' too
    assert "Saint Joseph's Day" in labels_1637 and not any('"' in a for a in labels_1637)


def test_is_fragment_keeps_answers_with_quotes_of_their_own():
    answers = ['The "Hollywood" Sign', "Hollywood Sign", "The Beatles", "Battle of Hoke's Run", 's Run" ']
    assert not is_fragment('The "Hollywood" Sign', answers)
    assert not is_fragment("Hollywood Sign", answers)
    assert is_fragment('s Run" ', answers)
    assert not is_fragment('s Run" ', ['s Run" '])  # alone: nothing it was cut from


@pytest.mark.parametrize("header,row", [("Question;Answer;Type", "Who?;Me;x"), ("Question\tAnswer", "Who?\tMe"),
                                        ("question_and_answer,notes", "Who?,x")])
def test_musicbrainz_one_column_for_question_and_answer_is_refused(tmp_path, header, row):
    """A semicolon- or tab-separated file has one header holding both names: the question
    was read as its own gold answer, so echoing the question scored EM-in 1."""
    p = tmp_path / "MusicbrainzxWikidata.csv"
    p.write_text(f"{header}\n{row}\n")
    with pytest.raises(BadInput, match="need a question and an answer column"):
        load_dataset("musicbrainz-x-wikidata", p)
