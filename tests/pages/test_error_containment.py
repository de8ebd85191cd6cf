"""App callbacks and pages never show a traceback: one line on the page, the traceback in the log."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest


def _app() -> None:
    import streamlit as st

    from phexplore.app import state as S

    def boom() -> None:
        raise ZeroDivisionError("division by zero")

    def bad_input() -> None:
        from engine.core.errors import ValidationError

        raise ValidationError("--rho: 'abc' is not a number")

    st.button("Crash", on_click=S.guarded(boom, "test page: crash"))
    st.button("Bad", on_click=S.guarded(bad_input, "test page: bad input"))


def test_guarded_callbacks_show_one_line_and_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "errors.log"
    monkeypatch.setenv("PHEXPLORE_LOG", str(log))
    # AppTest waits 3 s by default: too short for a loaded 2-core machine running two workers
    at = AppTest.from_function(_app, default_timeout=60).run()
    at.button[0].click().run()
    assert not at.exception
    (error,) = at.error
    assert error.value.startswith("test page: crash failed: a division by zero")
    assert str(log) in error.value and "Traceback" not in error.value
    assert "ZeroDivisionError" in log.read_text()
    at.button[1].click().run()
    assert not at.exception
    assert [e.value for e in at.error] == ["--rho: 'abc' is not a number"]
