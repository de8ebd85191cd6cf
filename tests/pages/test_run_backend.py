"""The Run page offers "Where to run: local / Spark" only when pyspark is installed and a Spark
master (or Connect address) is configured for the app (docs/spark.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from engine.core.errors import ValidationError
from engine.runs.options import BackendOptions
from phexplore import api as R
from phexplore.api.run_choices import SPARK_MASTER_ENV, SPARK_REMOTE_ENV, app_backend

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def _run_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    at.switch_page("pages/run.py").run()
    assert not at.exception, [e.message for e in at.exception]
    return at


def test_no_spark_choice_without_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SPARK_MASTER_ENV, raising=False)
    monkeypatch.delenv(SPARK_REMOTE_ENV, raising=False)
    assert R.spark_backend_options() is None
    at = _run_page()
    assert not [r for r in at.radio if r.key in ("run_td_backend", "run_ph_backend")]
    assert app_backend("local") == {"backend": "local", "backend_options": BackendOptions()}
    with pytest.raises(ValidationError, match=SPARK_MASTER_ENV):
        app_backend("spark")


def test_spark_choice_when_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("pyspark")
    monkeypatch.setenv(SPARK_MASTER_ENV, "local[2]")
    monkeypatch.delenv(SPARK_REMOTE_ENV, raising=False)
    at = _run_page()
    assert at.radio(key="run_td_backend").options == ["This machine", "Spark (local[2])"]
    at.radio(key="run_engine").set_value("phsafe").run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.radio(key="run_ph_backend").options == ["This machine", "Spark (local[2])"]
    assert app_backend("spark") == {
        "backend": "spark",
        "backend_options": BackendOptions(master="local[2]"),
    }
