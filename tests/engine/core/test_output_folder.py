"""Atomic output folders/files with a manifest: writing, refusing, verifying, locking."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from engine.core.errors import OutputError
from engine.core.manifest import MANIFEST_NAME, check_result_file, read_output_folder
from engine.core.output_folder import OutputFolder, atomic_file


def _write(target: Path, files: dict[str, str], **kw: object) -> None:
    with OutputFolder(target, command="test", **kw) as staging:  # type: ignore[arg-type]
        for name, text in files.items():
            (staging.path / name).parent.mkdir(parents=True, exist_ok=True)
            (staging.path / name).write_text(text)


def test_manifest_records_inputs_files_and_versions(tmp_path: Path) -> None:
    data = tmp_path / "in.csv"
    data.write_text("a,b\n1,2\n")
    _write(tmp_path / "out", {"x.csv": "1", "details/y.csv": "2"}, inputs={"data": data}, seed=7)
    manifest = json.loads((tmp_path / "out" / MANIFEST_NAME).read_text())
    assert manifest["complete"] is True and manifest["seed"] == 7
    assert set(manifest["files"]) == {"x.csv", "details/y.csv"}
    assert len(manifest["inputs"]["data"]["sha256"]) == 64
    assert {"python", "numpy", "phexplore"} <= set(manifest["versions"])
    assert read_output_folder(tmp_path / "out").command == "test"
    # nothing but the output is left beside it (no temp folder, no lock file)
    assert sorted(os.listdir(tmp_path)) == ["in.csv", "out"]


def test_existing_output_needs_overwrite_and_is_replaced_whole(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _write(out, {"microdata.csv": "old", "estimates.csv": "old"})
    with pytest.raises(OutputError, match="--overwrite"):
        _write(out, {"estimates.csv": "new"})
    _write(out, {"estimates.csv": "new"}, overwrite=True)
    assert sorted(os.listdir(out)) == ["estimates.csv", MANIFEST_NAME]
    assert (out / "estimates.csv").read_text() == "new"


def test_foreign_folder_is_never_replaced(tmp_path: Path) -> None:
    out = tmp_path / "thesis"
    out.mkdir()
    (out / "chapter1.tex").write_text("precious")
    with pytest.raises(OutputError, match="not a PHExplore output"):
        _write(out, {"a": "b"}, overwrite=True)
    assert (out / "chapter1.tex").read_text() == "precious"


def test_a_folder_with_only_hidden_files_is_not_empty(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    (out / ".git").mkdir(parents=True)
    with pytest.raises(OutputError, match="not a PHExplore output"):
        _write(out, {"a": "b"}, overwrite=True)
    assert (out / ".git").is_dir()
    empty = tmp_path / "empty"
    empty.mkdir()
    _write(empty, {"a": "b"})
    assert sorted(os.listdir(empty)) == ["a", MANIFEST_NAME]


def test_a_command_never_writes_over_its_input(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "persons.csv").write_text("x")
    with pytest.raises(OutputError, match="inputs"):
        _write(folder, {"a": "b"}, inputs={"data": folder / "persons.csv"}, overwrite=True)
    with pytest.raises(OutputError, match="inputs"):
        _write(folder, {"a": "b"}, inputs={"data": folder}, overwrite=True)


def test_failure_midway_keeps_previous_output(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _write(out, {"a.csv": "first"})
    with pytest.raises(RuntimeError), OutputFolder(out, command="t", overwrite=True) as s:
        (s.path / "a.csv").write_text("half")
        raise RuntimeError("engine failed")
    assert (out / "a.csv").read_text() == "first"
    assert sorted(os.listdir(tmp_path)) == ["out"]
    read_output_folder(out)


def test_second_writer_is_refused_while_first_holds_the_lock(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with OutputFolder(out, command="first") as first:
        with pytest.raises(OutputError, match="another PHExplore run"):
            _write(out, {"b": "2"})
        (first.path / "a").write_text("1")
    assert sorted(os.listdir(out)) == ["a", MANIFEST_NAME]


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (lambda d: (d / MANIFEST_NAME).unlink(), "no manifest.json"),
        (lambda d: (d / "a.csv").write_text("changed"), "does not match"),
        (lambda d: (d / "a.csv").unlink(), "missing"),
        (lambda d: (d / "stray.csv").write_text("x"), "does not list"),
        (
            lambda d: (d / MANIFEST_NAME).write_text(
                (d / MANIFEST_NAME).read_text().replace('"complete": true', '"complete": false')
            ),
            "incomplete",
        ),
    ],
)
def test_reader_refuses_damaged_output(tmp_path: Path, damage: object, message: str) -> None:
    out = tmp_path / "out"
    _write(out, {"a.csv": "1", "metrics.json": "{}"})
    damage(out)  # type: ignore[operator]
    with pytest.raises(OutputError, match=message):
        read_output_folder(out)


def test_result_file_checks(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _write(out, {"metrics.json": "{}"})
    assert check_result_file(out) == out / "metrics.json"
    assert check_result_file(out / "metrics.json") == out / "metrics.json"
    partial = tmp_path / "partial"
    partial.mkdir()
    (partial / "metrics.json").write_text("{}")
    (partial / "estimates.csv").write_text("x")
    with pytest.raises(OutputError, match="no manifest.json"):
        check_result_file(partial / "metrics.json")
    alone = tmp_path / "downloaded.json"
    alone.write_text("{}")
    assert check_result_file(alone) == alone


def test_atomic_file_refuses_foreign_file_and_needs_overwrite(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    target.write_text("my notes")
    with (
        pytest.raises(OutputError, match="not written by PHExplore"),
        atomic_file(target, overwrite=True) as tmp,
    ):
        tmp.write_text("x")
    assert target.read_text() == "my notes"
    target.unlink()
    page = '<html><head><meta name="generator" content="PHExplore 0.1"></head></html>'
    with atomic_file(target) as tmp:
        tmp.write_text(page)
    with pytest.raises(OutputError, match="--overwrite"), atomic_file(target) as tmp:
        tmp.write_text(page)
    with atomic_file(target, overwrite=True) as tmp:
        tmp.write_text(page + "2")
    assert target.read_text().endswith("2")
    assert sorted(os.listdir(tmp_path)) == ["report.html"]
