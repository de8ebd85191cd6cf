"""Interrupts and concurrent runs against real processes (docs/reliability.md, "Outputs").

A real ``phexplore run topdown`` subprocess (tests/hostile/slow_cli.py: the real CLI with the writer
paused after writing its files) is sent SIGINT or SIGTERM mid-write, or raced by a second real
process aimed at the same ``--out``. The earlier output must survive intact and verified, nothing
complete-looking may be left behind, and the second run must be refused with a clear message.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.core.manifest import read_output_folder

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("slow_cli.py")
RI = (ROOT / "data" / "samples" / "ri2010" / "ri2010_blocks.csv").read_text().splitlines()[:6]


def _argv(data: Path, out: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        str(DRIVER),
        "run",
        "topdown",
        "--data",
        str(data),
        "--preset",
        "ri2010-production-like",
        "--quiet",
        "--out",
        str(out),
        *extra,
    ]


def _env(pause: float, release: Path | None = None) -> dict[str, str]:
    env = dict(os.environ)
    if release is not None:
        env["PHEXPLORE_TEST_RELEASE"] = str(release)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["PHEXPLORE_TEST_PAUSE"] = str(pause)
    return env


def _start(argv: list[str], pause: float, release: Path | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(pause, release),
        cwd=ROOT,
    )


def _wait_for_writing(proc: subprocess.Popen[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if line.strip() == "WRITING":
            return
        if not line and proc.poll() is not None:
            raise AssertionError(f"the run ended before writing: {proc.stderr.read()}")  # type: ignore[union-attr]
    raise AssertionError("the run never reached the writing stage")


@pytest.fixture()
def earlier(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """Blocks data and an earlier, complete output at tmp/out (its manifest's file hashes)."""
    data = tmp_path / "blocks.csv"
    data.write_text("\n".join(RI) + "\n")
    out = tmp_path / "out"
    done = subprocess.run(
        _argv(data, out, "--no-microdata"), env=_env(0), cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    files = {k: v["sha256"] for k, v in read_output_folder(out).files.items()}
    return data, out, files


def _leftovers(folder: Path) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.startswith("."))


@pytest.mark.slow
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_mid_write_keeps_the_earlier_output(earlier, sig: int, code: int) -> None:
    data, out, before = earlier
    proc = _start(_argv(data, out, "--overwrite", "--seed", "5"), pause=30)
    _wait_for_writing(proc)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == code, err
    assert "Traceback" not in err and "earlier output is unchanged" in err
    after = {k: v["sha256"] for k, v in read_output_folder(out).files.items()}
    assert after == before  # the earlier output, verified against its manifest
    assert "microdata.csv" not in os.listdir(out)  # nothing of the interrupted run mixed in
    assert _leftovers(out.parent) == []  # no staging folder, no lock file


@pytest.mark.slow
def test_signal_on_a_first_run_leaves_nothing_complete_looking(tmp_path: Path) -> None:
    data = tmp_path / "blocks.csv"
    data.write_text("\n".join(RI) + "\n")
    out = tmp_path / "fresh"
    proc = _start(_argv(data, out), pause=30)
    _wait_for_writing(proc)
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 143
    assert not out.exists()
    assert sorted(os.listdir(tmp_path)) == ["blocks.csv"]


@pytest.mark.slow
def test_two_runs_on_one_out_cannot_interleave(earlier) -> None:
    data, out, _ = earlier
    release = out.parent / "release-first-run"
    first = _start(_argv(data, out, "--overwrite", "--seed", "1"), pause=600, release=release)
    _wait_for_writing(first)
    second = subprocess.run(
        _argv(data, out, "--overwrite", "--seed", "2"),
        env=_env(0),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert second.returncode == 1
    assert "another PHExplore run" in second.stderr and str(first.pid) in second.stderr
    release.touch()
    _, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    manifest = read_output_folder(out)
    assert manifest.data["seed"] == 1 and "microdata.csv" in manifest.files
    assert json.loads((out / "metrics.json").read_text())["seed"] == 1
    release.unlink()
    assert _leftovers(out.parent) == []
