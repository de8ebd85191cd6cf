"""The Run page's "Least-squares solver" choice (TopDown's routing table, docs/topdown.md "The
least-squares routes"): offered with every route, carried into the typed run description the way the
noise method is, and recorded with the run (metrics.json ``run.options.solver``, only when not
automatic, and ``diagnostics.routes``)."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from engine.topdown.qp.settings import SOLVER_CHOICES
from phexplore import api as R
from phexplore.app import state as S
from tests.pages.conftest import wait_for_job

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def test_the_run_page_offers_every_route_and_the_run_records_the_choice() -> None:
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    at.switch_page("pages/run.py").run()
    assert not at.exception, [e.message for e in at.exception]
    box = at.selectbox(key="run_td_solver")
    assert box.value == "auto" and list(R.SOLVERS) == list(SOLVER_CHOICES)
    assert [o.split(" ")[0] for o in box.options][1:] == list(SOLVER_CHOICES[1:])
    box.set_value("clarabel").run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.session_state["run_td_solver"] == "clarabel"
    at.button(key="run_td_go").click().run()  # the smallest county of RI, the default subset
    wait_for_job(at, 150)
    assert not at.exception and not at.error, [e.value for e in at.error]
    (record,) = at.session_state[S.RUNS]
    assert record.settings["solver"] == "clarabel"
    assert record.metrics["run"]["options"]["solver"] == "clarabel"
    routes = record.metrics["diagnostics"]["routes"]
    assert routes and set().union(*routes.values()) == {"clarabel"}
