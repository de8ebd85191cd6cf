"""Run the hostile-input corpus (tests/hostile/corpus.py) through the real CLI entry point."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location(
    "hostile_corpus", Path(__file__).with_name("corpus.py")
)
corpus = importlib.util.module_from_spec(_spec)
sys.modules["hostile_corpus"] = corpus
_spec.loader.exec_module(corpus)


def test_corpus_is_large_and_covers_every_group() -> None:
    groups = Counter(c.group for c in corpus.CASES)
    assert len(corpus.CASES) >= 60
    assert set(groups) == {
        "number", "json", "file", "output", "run-folder", "report", "spreadsheet", "message",
        "replay",
    }  # fmt: skip
    assert len({c.id for c in corpus.CASES}) == len(corpus.CASES)


@pytest.mark.parametrize("case", corpus.CASES, ids=[c.id for c in corpus.CASES])
def test_hostile_case(case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PHEXPLORE_LOG", str(tmp_path / "errors.log"))
    folder = tmp_path / "case"
    folder.mkdir()
    result = corpus.run_case(case, folder)
    problem = corpus.verdict(case, result, folder)
    assert problem is None, problem
