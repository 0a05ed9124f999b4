"""``traversals kg convert``: what its help promises is what it does."""

from __future__ import annotations

import gzip

import pyoxigraph as ox
import pytest

from traversals.cli import main


def convert_help(capsys) -> str:
    assert pytest.raises(SystemExit, main, ["kg", "convert", "--help"]).value.code == 0
    return " ".join(capsys.readouterr().out.split())


def test_gzipped_input_and_output_as_the_help_says(tmp_path, capsys):
    text = convert_help(capsys)
    assert "each also .gz" in text and ".nt.gz compressed" in text and "replaced if it exists" in text
    src = tmp_path / "kb.txt.gz"
    src.write_bytes(gzip.compress(b"Alice|knows|Bob\nBob|knows|Carol\n"))
    out = tmp_path / "kb.nt.gz"
    out.write_text("an older conversion")
    assert main(["kg", "convert", str(src), str(out)]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {out}: 2 triples, 3 entities, 1 relations")
    triples = list(ox.parse(gzip.decompress(out.read_bytes()), format=ox.RdfFormat.N_TRIPLES))
    assert len(triples) == 2 + 3 + 1  # the data, one label per entity and relation
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kb.nt.gz", "kb.txt.gz"]


@pytest.mark.parametrize("out_name, message", [
    ("kb.txt", "the output of kg convert must be an N-Triples file"),
    ("missing/kb.nt", "does not exist"),
    ("dir.nt", "cannot write the output (Is a directory)"),
])
def test_unusable_outputs_are_one_line_and_exit_2(tmp_path, capsys, out_name, message):
    src = tmp_path / "kb.txt"
    src.write_text("Alice|knows|Bob\n")
    (tmp_path / "dir.nt").mkdir()
    assert main(["kg", "convert", str(src), str(tmp_path / out_name)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and message in err
    assert src.read_text() == "Alice|knows|Bob\n"
