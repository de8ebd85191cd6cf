"""``phexplore run topdown`` writes estimates, microdata and metrics.json (RI and PPMF inputs)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from engine.data.samples import get_sample
from engine.metrics.metrics_json import validate_metrics_json
from phexplore.cli import main


def test_ri_county_run_writes_outputs(tmp_path, capsys):
    out = tmp_path / "out"
    code = main(
        [
            "run", "topdown", "--data", "ri2010", "--filter", "Tract=44001030100,44001030200",
            "--preset", "ri2010-production-like", "--rho", "2.56", "--seed", "5", "--out", str(out),
            "--quiet",
        ]
    )  # fmt: skip
    assert code == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["rho"] == pytest.approx(2.56) and metrics["seed"] == 5
    # Tied to its exact budget (budget_fingerprint): the fingerprint of the preset at ρ = 2.56.
    from engine.dp.budget.fingerprint import budget_fingerprint
    from engine.dp.presets import load_topdown_preset

    used = load_topdown_preset("ri2010-production-like")["persons"].with_rho("2.56")
    assert metrics["budget_fingerprint"] == budget_fingerprint(used)
    # ... and its origin by the planners' rule: the preset, or "modified from" it after --rho.
    from engine.dp.origin import budget_origin

    assert metrics["budget_origin"] == budget_origin(used, "ri2010-production-like")
    preset_rho = float(load_topdown_preset("ri2010-production-like")["persons"].rho)
    assert metrics["budget_origin"] == (
        "ri2010-production-like" if preset_rho == 2.56 else "modified from ri2010-production-like"
    )
    # TDA §5.2: the State TOTAL share buys no measurement; rho_spent sits beside rho
    keys = list(metrics)
    assert keys.index("rho_spent") == keys.index("rho") + 1
    assert metrics["rho_spent"] == pytest.approx(1.72832, abs=1e-5)
    assert metrics["held_exact"] == ["State TOTAL"] and metrics["spread_invariant_share"] is False
    assert metrics["runtime_s"] > 0 and metrics["allocation"] == "ri2010-production-like"
    assert set(metrics["mae"]) == {"State", "County", "Tract", "Block_Group", "Block"}
    assert metrics["mae"]["State"]["TOTAL"] == 0.0
    # The same sections as the app's metrics.json: EPL with a bootstrap interval, Blau bias.
    epl = metrics["epl"]["Block"]["TOTAL"]
    assert epl["n_boot"] == 200 and epl["epl_low"] <= epl["epl"] <= epl["epl_high"]
    assert set(metrics["blau_bias"]) >= {"Tract", "Block_Group", "Block"}
    # EPL with Petti & Flaxman's published settings by default, recorded and printed.
    assert metrics["epl_settings"]["percentile"] == 95.0
    assert metrics["epl_settings"]["multiplier"] == 1.0
    assert metrics["epl_settings"]["pf_published"] is True
    validate_metrics_json(metrics)
    tidy = pd.read_csv(out / "estimates.csv", dtype={"geounit": str})
    assert list(tidy.columns) == ["geolevel", "geounit", "query", "cell", "true", "estimate"]
    micro = pd.read_csv(out / "microdata.csv", dtype=str)
    state_total = tidy[(tidy.geolevel == "State") & (tidy["query"] == "TOTAL")]["true"].iloc[0]
    assert len(micro) == state_total
    assert set(micro["VOTING_AGE"]) <= {"1", "2"}
    assert (micro["TABBLKST"] == "44").all() and (micro["TABBLKCOU"] == "001").all()
    printed = capsys.readouterr().out
    assert "Per-cell MAE" in printed and "Petti & Flaxman's published settings" in printed
    # TDA's definition (summed over a query's cells per geounit) is printed first, named plainly
    assert printed.index("TDA's definition") < printed.index("Per-cell MAE")
    assert "TDA Tables 9–10 not shown beside this run" in printed  # RI's folded allocation
    # RI's folded schema is said next to its results, with production's σ for comparison.
    assert "overstates production's for multi-race" in printed
    assert "Two or more races (57 cells)" in printed
    note = metrics["schema_note"]
    assert note["schema"] == "ri2010" and note["sigma_comparison"]
    assert "ρ spent on noisy measurements = 1.728" in printed and "held exact" in printed


def test_epl_settings_options(tmp_path, capsys):
    out = tmp_path / "out"
    args = [
        "run", "topdown", "--data", "ri2010", "--filter", "Tract=44001030100",
        "--preset", "ri2010-production-like", "--seed", "5", "--no-microdata", "--quiet",
    ]  # fmt: skip
    assert (
        main([*args, "--epl-percentile", "99", "--epl-multiplier", "1.5", "--out", str(out)]) == 0
    )
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["epl_settings"]["percentile"] == 99.0
    assert metrics["epl_settings"]["pf_published"] is False
    assert "not their published settings" in capsys.readouterr().out
    for flag, value in (("--epl-percentile", "40"), ("--epl-multiplier", "0")):
        code = main([*args, flag, value, "--out", str(tmp_path / "bad")])
        err = capsys.readouterr().err
        assert code == 1 and f"{flag}: {value} is out of range" in err and "Traceback" not in err


def test_spread_invariant_share_spends_the_nominal_budget(tmp_path, capsys):
    out = tmp_path / "spread"
    argv = ["run", "topdown", "--data", "ri2010", "--filter", "Tract=44001030100"]
    argv += ["--preset", "ri2010-production-like", "--rho", "2.56", "--seed", "5"]
    code = main([*argv, "--spread-invariant-share", "--no-microdata", "--out", str(out), "--quiet"])
    assert code == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["rho_spent"] == pytest.approx(2.56)
    assert metrics["spread_invariant_share"] is True
    assert metrics["mae"]["State"]["TOTAL"] == 0.0  # still invariant, just not paid for
    assert "departure from production" in capsys.readouterr().out
    bad = [*argv, "--spread-invariant-share", "--spine", "aian", "--special-areas"]
    code = main([*bad, "providence-wards", "--out", str(tmp_path / "x"), "--quiet"])
    assert code == 1
    assert "--spread-invariant-share: cannot be combined with --special-areas" in (
        capsys.readouterr().err
    )


def test_ppmf_file_with_2016_cell_schema(tmp_path):
    persons = get_sample("ppmf_perry_al").path / "ppmf_perry_al_persons.csv"
    frame = pd.read_csv(persons, dtype=str)
    small = frame[
        frame["TABBLK"].isin(["1000", "1001", "1002"]) & (frame["TABTRACTCE"] == "686800")
    ]
    path = tmp_path / "ppmf.csv"
    small.to_csv(path, index=False)
    out = tmp_path / "out"
    code = main(
        [
            "run", "topdown", "--data", str(path), "--preset", "topdown-2021-04", "--seed", "1",
            "--out", str(out), "--quiet",
        ]
    )  # fmt: skip
    assert code == 0
    micro = pd.read_csv(out / "microdata.csv", dtype=str)
    assert len(micro) == len(small)  # the state total is invariant
    assert list(micro.columns[-5:]) == ["RTYPE", "GQTYPE_PL", "VOTING_AGE", "CENHISP", "CENRACE"]
    metrics = json.loads((out / "metrics.json").read_text())
    assert "VOTINGAGE*HISPANIC*CENRACE" in metrics["mae"]["Block"]
    assert np.isfinite(metrics["mae"]["Block"]["DETAILED"])


def test_bad_arguments_are_errors_in_words(tmp_path, capsys):
    code = main(
        [
            "run",
            "topdown",
            "--data",
            "nope",
            "--preset",
            "ri2010-production-like",
            "--out",
            str(tmp_path),
        ]
    )
    assert code == 1 and "neither a file, a folder nor a TopDown sample" in capsys.readouterr().err
    code = main(
        [
            "run", "topdown", "--data", "ri2010", "--filter", "Tract=0", "--preset",
            "ri2010-production-like", "--out", str(tmp_path),
        ]
    )  # fmt: skip
    assert code == 1 and "no block of the data is inside them" in capsys.readouterr().err


def test_bad_out_fails_before_loading_or_running(tmp_path, capsys, monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("the engine ran before --out was checked")

    monkeypatch.setattr("engine.runs.pipeline.execute", boom)
    out = tmp_path / "taken"
    out.write_text("x")
    argv = ["run", "topdown", "--data", "ri2010", "--preset", "ri2010-production-like"]
    assert main([*argv, "--out", str(out)]) == 1
    assert f"--out {out}: a file is in the way" in capsys.readouterr().err
    assert main([*argv, "--out", "/proc/phexplore-no-such/x"]) == 1
    assert "--out /proc/phexplore-no-such/x: cannot write there" in capsys.readouterr().err


def test_workers_and_noise_method_through_the_cli(tmp_path):
    """--workers 2 writes the same files as --workers 1; --noise-method exact is recorded."""
    base = [
        "run", "topdown", "--data", "ri2010", "--filter", "Tract=44001030100",
        "--preset", "ri2010-production-like", "--seed", "8", "--no-microdata", "--quiet",
    ]  # fmt: skip
    for workers in ("1", "2"):
        assert main([*base, "--workers", workers, "--out", str(tmp_path / workers)]) == 0
    for name in ("estimates.csv", "measurements.csv"):
        assert (tmp_path / "1" / name).read_bytes() == (tmp_path / "2" / name).read_bytes()
    keyed = json.loads((tmp_path / "1" / "metrics.json").read_text())
    assert keyed["noise"]["method"] == "fast" and keyed["run"]["seed"] == 8
    assert main([*base, "--noise-method", "exact", "--out", str(tmp_path / "exact")]) == 0
    exact = json.loads((tmp_path / "exact" / "metrics.json").read_text())
    assert exact["noise"]["method"] == "exact" and "OpenDP" in exact["noise"]["sampler"]


def test_solver_option_through_the_cli(tmp_path, capsys):
    """--solver names a least-squares route: recorded in the run description (only when not
    auto, so default runs keep their fingerprints) and in metrics.json diagnostics.routes."""
    base = [
        "run", "topdown", "--data", "ri2010", "--filter", "Tract=44001030100",
        "--preset", "ri2010-production-like", "--seed", "8", "--no-microdata", "--quiet",
    ]  # fmt: skip
    assert main([*base, "--out", str(tmp_path / "auto")]) == 0
    assert main([*base, "--solver", "clarabel", "--out", str(tmp_path / "clarabel")]) == 0
    auto = json.loads((tmp_path / "auto" / "metrics.json").read_text())
    named = json.loads((tmp_path / "clarabel" / "metrics.json").read_text())
    assert "solver" not in auto["run"]["options"] and auto["diagnostics"]["solver"] == "auto"
    assert named["run"]["options"]["solver"] == "clarabel"
    routes = named["diagnostics"]["routes"]
    assert routes and all(set(r) == {"clarabel"} for r in routes.values())
    assert auto["diagnostics"]["routes"]["Block"] == {"admm": routes["Block"]["clarabel"]}
    with pytest.raises(SystemExit) as bad:
        main([*base, "--solver", "fastest", "--out", str(tmp_path / "bad")])
    assert bad.value.code == 2 and "invalid choice: 'fastest'" in capsys.readouterr().err
