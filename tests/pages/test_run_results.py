"""AppTest checks of the Run and Results pages: small engine runs complete and show their charts."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from engine.dp.accounting import epsilon_for_delta
from engine.metrics.srs import DEFAULT_FRACTIONS as SRS_FRACTIONS
from phexplore import api as R
from phexplore.app import state as S
from tests.pages.conftest import wait_for_job
from tests.phexplore.api.app_runs import topdown_app_work

APP = str(Path(__file__).resolve().parents[2] / "app.py")
RUN_TIMEOUT_S = 150


def _no_problems(at: AppTest) -> None:
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def _round_trips(record: R.RunRecord) -> None:
    """The deferred downloads (computed on click) produce readable CSV and Parquet."""
    back = pd.read_parquet(io.BytesIO(R.tidy_bytes(record.tidy, "parquet")))
    assert back.shape == record.tidy.shape
    csv = pd.read_csv(io.BytesIO(R.tidy_bytes(record.tidy, "csv")))
    assert list(csv.columns) == [str(c) for c in record.tidy.columns]


@pytest.fixture()
def run_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=90)
    at.run()
    at.switch_page("pages/run.py").run()
    _no_problems(at)
    return at


def test_topdown_run_on_one_county_and_results(run_page: AppTest) -> None:
    at = run_page
    assert at.selectbox(key="run_td_sample").value == "ri2010"
    assert at.selectbox(key="run_td_alloc").value == "ri2010-production-like"
    units = at.multiselect(key="run_td_units_ri2010_County").value
    assert units == ["44001"], "the default subset is the smallest county"
    at.number_input(key="run_td_seed").set_value(7)
    at.button(key="run_td_go").click().run()
    assert not at.exception
    wait_for_job(at, RUN_TIMEOUT_S)
    _no_problems(at)
    assert any("Finished #1" in m.value for m in at.success)
    runs = at.session_state[S.RUNS]
    assert len(runs) == 1 and runs[0].engine == "topdown"
    record = runs[0]
    assert set(record.tidy.columns) >= {"geolevel", "geounit", "query", "cell", "true", "estimate"}
    assert record.metrics["engine"] == "topdown" and record.metrics["seed"] == 7
    json.loads(R.metrics_bytes(record.metrics))  # downloadable as strict JSON
    _round_trips(record)
    labels = [d.label for d in at.get("download_button")]
    assert {"Tidy table (CSV)", "Tidy table (Parquet)", "metrics.json"} <= set(labels)
    # The headline is the TOTAL MAE of the finest level in spine order (Block), not the
    # alphabetically last level of the MAE table (Tract).
    mae = record.tables["mae"]
    block = mae[(mae["geolevel"] == "Block") & (mae["query"] == "TOTAL")]["mae"].iloc[0]
    shown = {m.label: m.value for m in at.metric}
    assert shown["MAE of TOTAL (Block)"] == f"{float(block):.2f}"
    # Every EPL carries its bootstrap interval and number of residuals, in the page's table and
    # in metrics.json alike.
    epl = record.tables["epl"]
    defined = epl[epl["reason"].isna()]
    assert not defined.empty and defined["epl_low"].notna().all()
    row = defined.iloc[0]
    section = record.metrics["epl"][row["geolevel"]][row["query"]]
    assert section["epl_low"] == pytest.approx(row["epl_low"])
    assert section["n_residuals"] == row["n_residuals"] > 0
    assert section["n_boot"] == R.EPL_BOOT
    # EPL uses Petti & Flaxman's published density range by default, recorded with the run.
    assert record.metrics["epl_settings"]["pf_published"] is True
    assert record.settings["epl_settings"]["percentile"] == 95.0

    at.switch_page("pages/results.py").run()
    _no_problems(at)
    assert any("non-confidential test data" in w.value for w in at.warning)
    charts = at.get("plotly_chart")
    assert len(charts) >= 3, "MAE heatmap, Blau bias and EPL charts"
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Residuals"] != "0"
    assert "EPL" in metrics
    assert any("P5|, |P95|" in c.value for c in at.caption)
    # RI results say that RACEETH folds production's 126 HISPANIC × CENRACE cells.
    assert record.metrics["schema_note"]["schema"] == "ri2010"
    assert any("overstates production" in i.value for i in at.info)
    # Predicted RMSE of the published counts beside the measured one (docs/science.md §7).
    pred = record.tables["prediction"]
    assert {"predicted_rmse", "measured_rmse", "ratio"} <= set(pred.columns)
    block = pred[(pred["geolevel"] == "Block") & (pred["query"] == "TOTAL")].iloc[0]
    assert 0.5 < block["ratio"] < 2.0
    assert any("Predicted before any run" in c.value for c in at.caption)
    # TDA's definition first, named plainly; RI's folded allocation is not drawn beside TDA's
    headers = [h.value for h in at.subheader]
    assert headers.index("Absolute error, TDA's definition") < headers.index("Per-cell error")
    assert any("not drawn beside this run" in c.value for c in at.caption)
    assert any("no housing-unit frame" in c.value for c in at.caption)  # RI: every block

    # The run is in the workspace: a new session (a reload) shows it with its tables read back;
    # deleting it is undoable.
    again = AppTest.from_file(APP, default_timeout=90)
    again.run()
    again.switch_page("pages/results.py").run()
    _no_problems(again)
    (kept,) = again.session_state[S.RUNS]
    assert kept.token == record.token
    pd.testing.assert_frame_equal(
        kept.tables["mae"].reset_index(drop=True), record.tables["mae"].reset_index(drop=True)
    )
    assert len(again.get("plotly_chart")) >= 3
    again.button(key="res_delete_go").click().run()
    _no_problems(again)
    assert again.session_state[S.RUNS] == []
    again.button(key="res_undo_go").click().run()
    assert [r.token for r in again.session_state[S.RUNS]] == [record.token]


def test_a_run_over_the_row_limit_keeps_its_smallest_queries(
    run_page: AppTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """County 44001 has 1,143 geounits: 4,000 rows hold TOTAL (1 cell) and VOTINGAGE (2 cells),
    not RACEETH (8) or DETAILED (16); the tables and metrics.json still cover every query."""
    monkeypatch.setattr("phexplore.api.limits.APP_MAX_ROWS", 4_000)
    at = run_page
    at.number_input(key="run_td_seed").set_value(7)
    at.button(key="run_td_go").click().run()
    wait_for_job(at, RUN_TIMEOUT_S)
    _no_problems(at)
    record = at.session_state[S.RUNS][0]
    assert len(record.tidy) <= 4_000
    assert list(dict.fromkeys(record.tidy["query"])) == ["TOTAL", "VOTINGAGE"]
    assert record.settings["queries_left_out"] == ["RACEETH", "DETAILED"]
    queries = {"TOTAL", "VOTINGAGE", "RACEETH", "DETAILED"}
    assert set(record.tables["mae"]["query"]) == set(record.tables["epl"]["query"]) == queries
    assert set(record.metrics["mae"]["Block"]) == queries
    _round_trips(record)
    assert any("leaves out RACEETH, DETAILED" in c.value for c in at.caption)  # Run page
    at.switch_page("pages/results.py").run()
    _no_problems(at)
    assert any("RACEETH, DETAILED" in c.value for c in at.caption)
    assert len(at.get("plotly_chart")) >= 3


def test_shared_sample_is_read_only() -> None:
    hist = R.topdown_sample("ri2010")
    assert not hist.counts.flags.writeable
    with pytest.raises(ValueError):
        hist.counts[0, 0] += 1


def test_bootstrap_seed_is_not_the_noise_seed() -> None:
    a = R.bootstrap_rng(7).integers(0, 2**31, 4)
    assert list(a) == list(np.random.default_rng([7, 1]).integers(0, 2**31, 4))
    assert list(a) != list(np.random.default_rng(7).integers(0, 2**31, 4))


def test_invalid_upload_lists_problems(run_page: AppTest) -> None:
    at = run_page
    at.radio(key="run_td_source").set_value("upload").run()
    at.selectbox(key="run_upload_kind").set_value("ri2010").run()
    bad = b"GEOID,pop,vap\n440010301001000,abc,1\n"
    at.file_uploader(key="run_upload_files").set_value([("blocks.csv", bad, "text/csv")]).run()
    next(b for b in at.button if b.label == "Validate upload").click().run()
    assert not at.exception
    messages = [e.value for e in at.error]
    assert any("did not pass validation" in m and "blocks.csv" in m for m in messages), messages


def test_phsafe_run_and_results(run_page: AppTest) -> None:
    at = run_page
    at.radio(key="run_engine").set_value("phsafe").run()
    _no_problems(at)
    at.number_input(key="run_ph_trials").set_value(5)
    at.text_input(key="run_ph_states").set_value("44")
    at.button(key="run_ph_go").click().run()
    wait_for_job(at, RUN_TIMEOUT_S)
    _no_problems(at)
    record = at.session_state[S.RUNS][-1]
    assert record.engine == "phsafe" and record.settings["states"] == ["44"]
    _round_trips(record)
    json.loads(R.metrics_bytes(record.metrics))
    at.switch_page("pages/results.py").run()
    _no_problems(at)
    assert len(at.get("plotly_chart")) == 2  # noise vs truncation, empirical vs analytic MOE
    # The 1/1000 sample declares its scale: truncation is compared with noise at full scale.
    assert record.settings["scale"] == 0.001
    assert "truncation_at_scale" in record.metrics
    fig = json.loads(at.get("plotly_chart")[0].proto.spec)
    assert any("PROJECTED to full scale (×1,000)" in t["name"] for t in fig["data"])
    assert any("one scale" in c.value for c in at.caption)


def test_cancel_flag_stops_a_run() -> None:
    from engine.data.samples import load_topdown_sample
    from engine.dp.presets import load_topdown_preset

    hist = R.subset(load_topdown_sample("ri2010"), "County", ["44001"])
    job = R.RunJob(engine="topdown", label="cancel test")
    job.cancel_event.set()
    work = topdown_app_work(
        hist, "ri2010", load_topdown_preset("ri2010-production-like")["persons"], seed=1
    )
    R.start_job(job, work)
    assert job.thread is not None
    job.thread.join(timeout=RUN_TIMEOUT_S)
    assert job.done and job.cancelled and job.record is None and job.error is None


def test_budget_sweep_gives_epl_vs_rho_and_srs_curves(run_page: AppTest) -> None:
    at = run_page
    at.checkbox(key="run_td_sweep").check().run()
    at.text_input(key="run_td_rhos").set_value("0.5, 4").run()
    at.button(key="run_td_go").click().run()
    wait_for_job(at, RUN_TIMEOUT_S)
    _no_problems(at)
    record = at.session_state[S.RUNS][-1]
    exp = record.experiment
    assert exp is not None
    assert set(exp.summary()["rho"]) == {0.5, 4.0}
    assert set(exp.srs["fraction"]) == set(SRS_FRACTIONS)  # the engine's default fractions
    at.switch_page("pages/results.py").run()
    _no_problems(at)
    # MAE, Blau, EPL, EPL vs budget and the SRS trade-off (all tabs render).
    charts = at.get("plotly_chart")
    assert len(charts) >= 5
    fig = next(
        json.loads(c.proto.spec)
        for c in charts
        if "EPL vs ρ" in json.loads(c.proto.spec)["layout"]["title"]["text"]
    )
    # A zCDP run: EPL is plotted against ε at the session's δ (never against ρ), with the
    # engine's intervals (ExperimentResult.tradeoff) as error bars.
    assert fig["layout"]["xaxis"]["title"]["text"].startswith("ε at δ = 1e-10")
    sweep = next(t for t in fig["data"] if t["name"] == "sweep (mean over seeds)")
    trade = exp.tradeoff(*_default_level_query(record), error="mae")
    part = trade[trade["design"] == "topdown"]
    expected_x = [epsilon_for_delta(float(r), 1e-10, "cks") for r in part["parameter"]]
    assert sweep["x"] == pytest.approx(expected_x)
    high = (part["epl_high"] - part["epl"]).to_numpy(float)
    assert _plotly_array(sweep["error_y"]["array"]) == pytest.approx(high, nan_ok=True)
    # PF's published EPLs are drawn beside EPLs computed with PF's settings (the default).
    names = [t["name"] for t in fig["data"]]
    assert any(n.startswith("PF 1940 published: County") for n in names)


def test_pf_reference_only_under_pf_settings() -> None:
    table, note = R.pf_reference_epl(R.epl_settings().as_dict())
    assert table is not None and set(table["geolevel"]) == {"County", "Enumeration district"}
    assert "same settings" in note
    table, note = R.pf_reference_epl(R.epl_settings(99, 1.5).as_dict())
    assert table is None and "not drawn" in note and "P1" in note


def _default_level_query(record: R.RunRecord) -> tuple[str, str]:
    total = record.tidy[record.tidy["query"] == "TOTAL"]
    return str(total.groupby("geolevel", sort=False).size().idxmax()), "TOTAL"


def _plotly_array(value: object) -> list[float]:
    """A Plotly JSON array (a list, or a typed-array dict {dtype, bdata})."""
    if isinstance(value, dict) and "bdata" in value:
        import base64

        raw = base64.b64decode(value["bdata"])
        return list(np.frombuffer(raw, dtype=np.dtype(value["dtype"])).astype(float))
    return [float("nan") if v is None else float(v) for v in value]  # type: ignore[union-attr]


def test_spine_run_with_providence_wards(run_page: AppTest) -> None:
    """Optimized spine around the Providence wards on three of their tracts: on/off-spine MAE."""
    at = run_page
    at.switch_page("pages/topdown_planner.py").run()
    at.radio(key="td_spine").set_value("optimized").run()
    at.switch_page("pages/run.py").run()
    _no_problems(at)
    assert at.checkbox(key="run_td_entities").value is True  # the spine needs its entities
    assert at.checkbox(key="run_td_branch").value is False  # no AIAN-style branch unless asked
    at.selectbox(key="run_td_subset_level_ri2010").set_value("Tract").run()
    tracts = ["44007000800", "44007003400", "44007000102"]
    at.multiselect(key="run_td_units_ri2010_Tract").set_value(tracts).run()
    at.button(key="run_td_go").click().run()
    wait_for_job(at, RUN_TIMEOUT_S)
    _no_problems(at)
    record = at.session_state[S.RUNS][-1]
    assert record.settings["spine"] == "optimized"
    assert record.settings["special_areas"] is None
    assert 0 < record.metrics["rho_spent"] < record.metrics["rho"]  # State TOTAL held exact
    assert any("spent on noisy measurements" in c.value for c in at.caption)
    assert not any("|inside" in str(g) for g in record.tidy["geounit"].unique())
    assert set(record.metrics["entity_mae"]) == {"providence_city", "providence_wards"}
    assert "Block_Group" in record.metrics["conventional_mae"]
    # Blau-index bias on the published block groups beside the optimized ones (TDA Table 13).
    bias = record.tables["blau_bias"]
    geography = dict(zip(bias["geolevel"], bias["geography"], strict=False))
    assert geography["Block_Group"] == "tabulation"
    assert geography["Optimized_Block_Group"] == "spine"
    assert set(record.metrics["blau_bias"]) >= {"Block_Group", "Optimized_Block_Group"}
    at.switch_page("pages/results.py").run()
    _no_problems(at)
    assert len(at.get("plotly_chart")) >= 4  # MAE, Blau, EPL and the on/off-spine bars


def test_block_csv_upload_with_mapping(run_page: AppTest) -> None:
    """A plain block CSV and its mapping JSON load through the data layer; a bad cell is located."""
    at = run_page
    at.radio(key="run_td_source").set_value("upload").run()
    at.selectbox(key="run_upload_kind").set_value("block_csv").run()
    mapping = json.dumps(
        {
            "schema": "ri2010",
            "geography": {"geoid": "GEOID"},
            "cells": {
                "adult_white": {"VOTINGAGE": "18_plus", "RACEETH": "white"},
                "child_white": {"VOTINGAGE": "under_18", "RACEETH": "white"},
            },
            "allow_unmapped": True,
        }
    ).encode()
    good = b"GEOID,adult_white,child_white\n440010301001000,5,2\n440010301001001,3,0\n"
    files = [("blocks.csv", good, "text/csv"), ("mapping.json", mapping, "application/json")]
    at.file_uploader(key="run_upload_files").set_value(files).run()
    next(b for b in at.button if b.label == "Validate upload").click().run()
    _no_problems(at)
    assert any("2 blocks, 10 persons" in m.value for m in at.success)
    bad = b"GEOID,adult_white,child_white\n440010301001000,5,x\n"
    files = [("blocks.csv", bad, "text/csv"), ("mapping.json", mapping, "application/json")]
    at.file_uploader(key="run_upload_files").set_value(files).run()
    next(b for b in at.button if b.label == "Validate upload").click().run()
    assert not at.exception
    messages = [e.value for e in at.error]
    assert any("blocks.csv, row 1, column 'child_white'" in m for m in messages), messages


def test_uploads_and_populations_are_found_again_after_a_reload(run_page: AppTest) -> None:
    """A validated upload is kept in the workspace by content hash and a generated population in
    its folder: a new session (a reload, another tab) uses them without uploading or generating."""
    at = run_page
    mapping = json.dumps(
        {
            "schema": "ri2010",
            "geography": {"geoid": "GEOID"},
            "cells": {"adult_white": {"VOTINGAGE": "18_plus", "RACEETH": "white"}},
            "allow_unmapped": True,
        }
    ).encode()
    good = b"GEOID,adult_white\n440010301001000,5\n440010301001001,3\n"
    at.radio(key="run_td_source").set_value("upload").run()
    at.selectbox(key="run_upload_kind").set_value("block_csv").run()
    files = [("blocks.csv", good, "text/csv"), ("mapping.json", mapping, "application/json")]
    at.file_uploader(key="run_upload_files").set_value(files).run()
    next(b for b in at.button if b.label == "Validate upload").click().run()
    _no_problems(at)
    at.radio(key="run_td_source").set_value("generated").run()
    at.number_input(key="run_td_gen_persons").set_value(2_000).run()
    at.button(key="run_td_gen_go").click().run()
    _no_problems(at)
    again = AppTest.from_file(APP, default_timeout=90)  # a reload: a new session
    again.run()
    again.switch_page("pages/run.py").run()
    again.radio(key="run_td_source").set_value("upload").run()
    kept = again.selectbox(key="run_kept_topdown")
    assert "blocks.csv, mapping.json (block_csv" in kept.options[0]
    again.button(key="run_use_kept_topdown").click().run()
    _no_problems(again)
    assert any(
        "Loaded blocks.csv, mapping.json: 2 blocks, 8 persons" in m.value for m in again.success
    )
    again.radio(key="run_td_source").set_value("generated").run()
    again.number_input(key="run_td_gen_persons").set_value(2_000).run()
    _no_problems(again)  # found without pressing Generate
    assert any("with housing units and GQ" in m.value for m in again.success)


def test_generated_population_runs_topdown_with_structural_zeros(run_page: AppTest) -> None:
    at = run_page
    at.radio(key="run_td_source").set_value("generated").run()
    at.number_input(key="run_td_gen_persons").set_value(3_000)
    at.button(key="run_td_gen_go").click().run()
    _no_problems(at)
    assert any("with housing units and GQ" in m.value for m in at.success)
    label = next(k for k in at.session_state if str(k).startswith("run_td_subset_level_generated"))
    at.selectbox(key=label).set_value("(all data)").run()  # every block: the places are in it
    assert any("Estimated time ≈" in c.value for c in at.caption), "estimate shown before Run"
    at.button(key="run_td_go").click().run()
    wait_for_job(at, RUN_TIMEOUT_S)
    _no_problems(at)
    record = at.session_state[S.RUNS][-1]
    assert record.metrics["structural_zeros"]["structural_zeros_held"] is True
    assert record.metrics["structural_zeros"]["bound_violations"] == 0
    # the same persons as a CEF extract for PHSafe
    (key, folder) = at.session_state["run_generated"]
    assert len(R.generated_cef(folder).persons) == key[0] == 3_000
    # production's spine (optimized block groups around the data's places), its block universe
    assert record.metrics["allocation"].startswith("topdown-2020-production")
    assert record.metrics["spine_used"]["kind"] == "optimized"
    assert record.metrics["error_universe"]["universe"] == "housed"
    assert record.settings["universe_left_out"]  # the EPL chart leaves those blocks out too
    at.switch_page("pages/results.py").run()
    _no_problems(at)
    headers = [h.value for h in at.subheader]
    assert headers.index("Absolute error, TDA's definition") < headers.index("Per-cell error")
    captions = [c.value for c in at.caption]
    assert any(c.startswith("Spine: optimized block groups") for c in captions)
    assert any("What differs" in c and "block universe" in c for c in captions)


def test_the_block_universe_is_a_run_page_choice(run_page: AppTest) -> None:
    """*Block figures average over* sets the run option ``error_universe``: every block here,
    although the generated population carries a unit frame (TDA's universe is the default)."""
    at = run_page
    assert at.radio(key="run_td_universe").value == "housed"
    at.radio(key="run_td_source").set_value("generated").run()
    at.number_input(key="run_td_gen_persons").set_value(3_000)
    at.button(key="run_td_gen_go").click().run()
    _no_problems(at)
    at.radio(key="run_td_universe").set_value("all").run()
    at.button(key="run_td_go").click().run()
    wait_for_job(at, RUN_TIMEOUT_S)
    _no_problems(at)
    record = at.session_state[S.RUNS][-1]
    assert record.metrics["run"]["options"]["error_universe"] == "all"
    universe = record.metrics["error_universe"]
    assert universe["universe"] == "all" and universe["requested"] == "all"
    assert universe["blocks_left_out"] == 0 and record.settings["universe_left_out"] == []
    assert record.settings["error_universe"] == "all"
    at.switch_page("pages/results.py").run()
    _no_problems(at)
    assert any("every block in the data, as asked" in c.value for c in at.caption)


def test_job_eta_extrapolates_the_elapsed_time() -> None:
    job = R.RunJob(engine="topdown", label="x")
    assert job.eta() is None
    job.started -= 10.0
    job.progress("Estimating Block", 0.25)
    assert job.eta() == pytest.approx(30.0, rel=0.05)
