"""The Run page's "Least-squares solver" choice (TopDown's routing table, docs/topdown.md "The
least-squares routes"): offered with every route, and carried into the run description the way the
noise method is (only when not automatic)."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from engine.data.samples import load_topdown_sample
from engine.dp.presets import load_topdown_preset
from engine.topdown.qp.settings import SOLVER_CHOICES
from phexplore import api as R

APP = str(Path(__file__).resolve().parents[2] / "app.py")


def test_the_run_page_offers_every_route_and_the_spec_records_the_choice() -> None:
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
    hist = load_topdown_sample("ri2010")
    common = dict(
        data_label="ri2010",
        hist=hist,
        allocation=load_topdown_preset("ri2010-production-like")["persons"],
        seed=3,
        workers=1,
        spine="conventional",
        entities=[],
    )
    named = R.topdown_spec(**common, solver="clarabel")
    auto = R.topdown_spec(**common)
    assert named.solver == "clarabel" and named.options["solver"] == "clarabel"
    assert auto.solver == "auto" and "solver" not in auto.options
