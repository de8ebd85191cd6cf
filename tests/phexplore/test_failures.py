"""Whatever escapes a command becomes one line naming what failed and where, plus a log file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from phexplore.cli import main
from phexplore.failures import describe_failure, explain


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (ZeroDivisionError("division by zero"), "division by zero"),
        (np.linalg.LinAlgError("Singular matrix"), "budget"),
        (MemoryError(), "ran out of memory"),
        (KeyError("x"), "unexpected internal error"),
    ],
)
def test_internal_errors_are_one_line_with_a_log(
    error: BaseException,
    words: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    log = tmp_path / "logs" / "errors.log"
    monkeypatch.setenv("PHEXPLORE_LOG", str(log))

    def boom(*args: object, **kwargs: object) -> None:
        raise error

    monkeypatch.setattr("engine.dp.accounting.conversions", boom)
    assert main(["privacy", "--rho", "1"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: phexplore privacy failed:")
    assert words in err and "Traceback" not in err
    if not isinstance(error, MemoryError):
        assert "cli/privacy.py" in err and str(log) in err
    assert "Traceback (most recent call last)" in log.read_text()


def test_numerical_failures_explain_themselves() -> None:
    text = explain(FloatingPointError("overflow encountered"))
    assert "budget" in text and "numerical" in text


def test_user_errors_pass_through_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.core.errors import ValidationError

    monkeypatch.setenv("PHEXPLORE_LOG", str(tmp_path / "e.log"))
    assert describe_failure(ValidationError("--rho: bad"), "x") == "--rho: bad"
    assert not (tmp_path / "e.log").exists()
