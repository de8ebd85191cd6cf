"""AppTest of Replay on the Results page: a session run replayed through the same pipeline."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest

from phexplore.app import state as S
from tests.pages.conftest import wait_for_job

APP = str(Path(__file__).resolve().parents[2] / "app.py")
RUN_TIMEOUT_S = 150


def test_replay_a_session_run_from_the_results_page() -> None:
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    at.switch_page("pages/run.py").run()
    at.selectbox(key="run_td_subset_level_ri2010").set_value("Tract").run()
    at.number_input(key="run_td_seed").set_value(11)
    at.button(key="run_td_go").click().run()
    wait_for_job(at, RUN_TIMEOUT_S)
    at.switch_page("pages/results.py").run()
    assert not at.exception, [e.message for e in at.exception]
    # What a replay does is said beside the button, before it is pressed.
    assert any("with seed **11**" in c.value for c in at.caption)
    at.button(key="res_replay_go").click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    if at.session_state["run_job"] is not None:  # progress and Cancel as on the Run page
        assert at.button(key="run_cancel") is not None
    wait_for_job(at, RUN_TIMEOUT_S)
    assert not at.exception and not at.error, [e.value for e in at.error]
    first, again = at.session_state[S.RUNS]
    assert again.id == 2 and "replay of #1" in again.label
    assert at.selectbox(key="res_run").value == 2  # the new run is shown
    assert again.metrics["mae"] == first.metrics["mae"]
    assert again.metrics["budget_fingerprint"] == first.metrics["budget_fingerprint"]
    assert any("same seed, same numbers" in m.value for m in at.success)
    assert any("Finished #2" in m.value for m in at.success)
