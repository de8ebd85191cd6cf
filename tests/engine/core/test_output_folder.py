"""Atomic output folders/files with a manifest: writing, refusing, verifying, locking, and never
deleting or following what PHExplore did not write (docs/reliability.md, "Outputs")."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from engine.core.errors import OutputError
from engine.core.manifest import (
    MANIFEST_NAME,
    check_result_file,
    read_output_folder,
    read_verified,
)
from engine.core.output_folder import OutputFolder, _discard_replaced, atomic_file


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


def test_existing_output_needs_overwrite_and_its_listed_files_are_replaced(tmp_path: Path) -> None:
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


@pytest.mark.parametrize(
    ("extra", "shown"),
    [
        (lambda d: (d / "notes.md").write_text("mine"), "notes.md"),
        (lambda d: (d / ".git").mkdir(), ".git/"),
        (lambda d: os.symlink(d / "a.csv", d / "b.csv"), "b.csv (a symbolic link)"),
        (lambda d: (d / "details").mkdir(), "details/"),
    ],
)
def test_overwrite_refuses_a_folder_holding_anything_unlisted(
    tmp_path: Path, extra: object, shown: str
) -> None:
    out = tmp_path / "out"
    _write(out, {"a.csv": "old"})
    extra(out)  # type: ignore[operator]
    before = sorted(os.listdir(out))
    with pytest.raises(OutputError, match="did not write") as refused:
        _write(out, {"a.csv": "new"}, overwrite=True)
    assert shown in str(refused.value)
    assert sorted(os.listdir(out)) == before and (out / "a.csv").read_text() == "old"


def test_a_link_as_out_or_lock_is_refused_and_never_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    os.symlink(victim, tmp_path / ".out.phexplore-lock")
    with pytest.raises(OutputError, match="lock file .* symbolic link"):
        _write(tmp_path / "out", {"a": "1"})
    os.unlink(tmp_path / ".out.phexplore-lock")
    os.link(victim, tmp_path / ".out.phexplore-lock")
    with pytest.raises(OutputError, match="hard link"):
        _write(tmp_path / "out", {"a": "1"})
    assert victim.read_text() == "keep me" and not (tmp_path / "out").exists()
    os.unlink(tmp_path / ".out.phexplore-lock")
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "linked")
    with pytest.raises(OutputError, match="symbolic link"):
        _write(tmp_path / "linked", {"a": "1"})
    os.symlink(victim, tmp_path / "r.html")
    with pytest.raises(OutputError, match="symbolic link"), atomic_file(tmp_path / "r.html") as tmp:
        tmp.write_text("x")
    assert victim.read_text() == "keep me"


def test_discarding_an_old_output_deletes_only_its_listed_files(tmp_path: Path) -> None:
    """The last step of a replacement: a file added after the checks is kept, visibly; a manifest
    naming a file outside the folder makes nothing outside it go."""
    outside = tmp_path / "outside.txt"
    outside.write_text("mine")
    old = tmp_path / ".out.phexplore-tmp-x"
    _write(old, {"a.csv": "1", "details/b.csv": "2"})
    (old / "late.md").write_text("written during the swap")
    manifest = json.loads((old / MANIFEST_NAME).read_text())
    manifest["files"]["../outside.txt"] = {"bytes": 4, "sha256": "0" * 64}
    (old / MANIFEST_NAME).write_text(json.dumps(manifest))
    _discard_replaced(old, tmp_path / "out")
    assert outside.read_text() == "mine" and not old.exists()
    kept = [p for p in tmp_path.iterdir() if p.name.startswith("out.kept-")]
    assert len(kept) == 1 and sorted(os.listdir(kept[0])) == ["late.md"]


def test_reads_are_checked_against_the_manifest_read_at_open(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _write(out, {"a.csv": "first"})
    manifest = read_output_folder(out)
    assert manifest.read("a.csv") == b"first"
    _write(out, {"a.csv": "other"}, overwrite=True)  # replaced after it was opened
    with pytest.raises(OutputError, match="does not match the manifest"):
        manifest.read("a.csv")
    (out / "a.csv").unlink()
    os.symlink(tmp_path / "elsewhere", out / "a.csv")
    with pytest.raises(OutputError, match="symbolic link"):
        read_verified(out, "a.csv", manifest.entry("a.csv"))
    with pytest.raises(OutputError, match="symbolic link"):
        read_output_folder(out)
