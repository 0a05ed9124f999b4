"""Where the model cache is: a relative $TRAVERSALS_CACHE is one absolute place, a relative
$XDG_CACHE_HOME is ignored (XDG spec), blank values count as unset."""

from __future__ import annotations

from pathlib import Path

from traversals.llm.models import default_cache_dir


def test_a_relative_traversals_cache_is_made_absolute_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert default_cache_dir({"TRAVERSALS_CACHE": "here"}) == tmp_path / "here" / "models"
    assert default_cache_dir({"TRAVERSALS_CACHE": "~/c", "HOME": "/h"}).is_absolute()


def test_a_relative_or_blank_xdg_cache_home_is_ignored():
    assert default_cache_dir({"XDG_CACHE_HOME": "rel", "HOME": "/h"}) == Path("/h/.cache/traversals/models")
    assert default_cache_dir({"TRAVERSALS_CACHE": " ", "XDG_CACHE_HOME": "/x"}) == Path("/x/traversals/models")
    assert default_cache_dir({"XDG_CACHE_HOME": "", "HOME": "/h"}) == Path("/h/.cache/traversals/models")
