"""run_phsafe: levels, Puerto Rico, derived tables, determinism, progress/cancel, metrics."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from engine.core.errors import RunCancelled, ValidationError
from engine.metrics.metrics_json import validate_metrics_json
from engine.phsafe.config import PHSafeConfig, preset
from engine.phsafe.release import run_phsafe
from engine.runs.phsafe import error_analysis, metrics_payload
from phexplore.cli._output import dumps_json


def _small(cef, state: str = "44"):
    persons, units, geos = [], [], []
    sizes = [1, 2, 3, 4, 5, 7, 9, 12]
    for i, n in enumerate(sizes):
        ages = [45, 43, 16, 14, 12, 10, 8, 6, 4, 3, 2, 1][:n]
        p, u, g = cef.household(100_000_001 + i, ages, state=state, ten=1 + i % 4)
        persons += p
        units.append(u)
        geos.append(g)
    return cef.extract(persons, units, geos)


def _config(state: str = "44", **budgets: float) -> PHSafeConfig:
    cfg = preset("phsafe-2020").to_dict()
    cfg["state_filter"] = [state]
    for key, value in budgets.items():
        table, level = key.split("__")
        cfg["privacy_budget"][table][level.replace("ALL", "*").replace("AG", "A-G")] = value
    return PHSafeConfig.from_json(cfg)


def test_disabled_levels_and_unattributed_only_tables(cef) -> None:
    config = _config(PH1_num__usa_ALL=0.0, PH1_num__state_AG=0.0)
    result = run_phsafe(_small(cef), config, seed=1)
    levels = set(result.measurements.loc[result.measurements["table"] == "PH1_num", "level"])
    assert levels == {"usa_A-G", "usa_H,I", "state_*", "state_H,I"}
    ph2 = result.official["PH2"]
    assert list(ph2.columns) == [
        "REGION_ID",
        "REGION_TYPE",
        "PH2_DATA_CELL",
        "NOISE_DISTRIBUTION",
        "VARIANCE",
        "COUNT",
    ]


def test_derived_ph5_and_ph8_numerators(cef) -> None:
    result = run_phsafe(_small(cef), _config(), seed=2, trials=3)
    m = result.measurements.set_index(["table", "level", "region_id", "iteration_code", "cell"])
    ph4 = m.loc["PH4"]
    assert (m.loc["PH5_num"]["noisy"] == ph4["noisy"]).all()
    ph7, ph8 = m.loc["PH7"], m.loc["PH8_num"]
    key = ("state_*", "44", "*")
    assert ph8.loc[(*key, 2), "noisy"] == ph7.loc[(*key, 2), "noisy"] + ph7.loc[(*key, 3), "noisy"]
    assert ph8.loc[(*key, 2), "variance"] == pytest.approx(2 * ph7.loc[(*key, 2), "variance"])
    assert ph8.loc[(*key, 3), "noisy"] == ph7.loc[(*key, 4), "noisy"]


def test_same_seed_same_noise_and_trials_reuse_counts(cef) -> None:
    ex = _small(cef)
    a = run_phsafe(ex, _config(), seed=9, trials=4)
    b = run_phsafe(ex, _config(), seed=9, trials=4)
    c = run_phsafe(ex, _config(), seed=10, trials=4)
    assert all(np.array_equal(x.noise, y.noise) for x, y in zip(a.levels, b.levels, strict=True))
    assert any(
        not np.array_equal(x.noise, y.noise) for x, y in zip(a.levels, c.levels, strict=True)
    )
    for level in a.levels:
        assert level.noise.shape[0] == 4
        assert not np.array_equal(level.noise[0], level.noise[1]) or level.noise[0].size < 3


def test_truncation_error_and_noise_decomposition(cef) -> None:
    result = run_phsafe(_small(cef), _config(), seed=3)
    assert not hasattr(result, "cell_errors")  # the engine returns estimates and diagnostics
    e = error_analysis(result).cells
    assert (e["total_error"] == e["noise_error"] + e["truncation_error"]).all()
    ph1 = e[(e["table"] == "PH1_num") & (e["level"] == "usa_*")]
    # households of 12 persons lose 2 people at τ = 10
    assert int(ph1["truncation_error"].sum()) == -2
    assert result.truncation_stats["PH1_num"].persons_dropped == 2


def test_puerto_rico_run_has_no_nation_level(cef) -> None:
    result = run_phsafe(_small(cef, state="72"), preset("phsafe-2020-pr"), seed=4)
    assert set(result.measurements["region_type"]) == {"STATE"}
    assert result.states == ("72",)
    nonprivate = run_phsafe(
        _small(cef, state="72"), preset("phsafe-2020-pr"), seed=4, non_private=True
    )
    assert all(set(f["REGION_TYPE"]) <= {"STATE"} for f in nonprivate.official.values())


def test_progress_and_cancel(cef) -> None:
    seen: list[tuple[str, float]] = []
    run_phsafe(_small(cef), _config(), seed=1, progress=lambda label, f: seen.append((label, f)))
    fractions = [f for _, f in seen]
    assert fractions[0] == 0.0 and fractions[-1] == 1.0
    assert fractions == sorted(fractions)
    calls = {"n": 0}

    def cancel() -> bool:
        calls["n"] += 1
        return calls["n"] > 3

    with pytest.raises(RunCancelled):
        run_phsafe(_small(cef), _config(), seed=1, cancel=cancel)


@pytest.mark.parametrize("trials", [0, -1, 1.5, True])
def test_bad_trials_rejected(cef, trials) -> None:
    with pytest.raises(ValidationError, match="trials"):
        run_phsafe(_small(cef), _config(), seed=1, trials=trials)


def test_metrics_payload_is_strict_json(cef) -> None:
    result = run_phsafe(_small(cef), _config(), seed=5, trials=2)
    metrics = json.loads(dumps_json(metrics_payload(result)))
    for key in (
        "engine",
        "runtime_s",
        "seed",
        "trials",
        "rho",
        "rho_by_level",
        "rho_total_unbounded",
        "rho_total_bounded",
        "mae",
        "noise_variance",
        "empirical_moe",
        "analytic_moe",
        "truncation",
    ):
        assert key in metrics, key
    validate_metrics_json(metrics)  # the project-wide metrics.json schema (engine.metrics)
    assert metrics["engine"] == "phsafe"
    assert metrics["rho_by_level"]["PH3"]["state_A-G"] == pytest.approx(0.662976)
    assert math.isclose(metrics["rho_total_unbounded"], 1.257281, abs_tol=1e-9)
    assert metrics["rho"] == pytest.approx(1.257281)
    assert metrics["rho_total_bounded"] == pytest.approx(2 * 1.257281)
    assert metrics["truncation"]["PH1_num"]["persons_dropped"] == 2
    assert set(metrics["noise_variance"]["PH3"]["state_A-G"]) == {"analytic", "empirical"}


def test_published_tables_are_non_negative_and_add_up(cef) -> None:
    result = run_phsafe(_small(cef), _config(), seed=6)
    pub = result.published
    counts = pub[pub["kind"] == "count"]
    assert (counts["estimate"] >= 0).all()
    assert (counts["ci90_low"] <= counts["estimate"]).all()
    assert (counts["estimate"] <= counts["ci90_high"]).all()
    ph2 = counts[(counts["table"] == "PH2") & (counts["level"] == "state_*")]
    total = ph2.loc[ph2["cell"] == 1, "estimate"].item()
    assert total == ph2.loc[ph2["is_basis"], "estimate"].sum()
    averages = pub[pub["kind"] == "average"]
    assert set(averages["table"]) == {"PH1", "PH5", "PH8"}
    bad = averages["denominator"] <= 0
    assert averages.loc[bad, "estimate"].isna().all()
    assert (averages.loc[bad, "average_flag"] == "denominator is zero").all()
    assert (averages.loc[~bad, "estimate"] >= 0).all()


def test_state_filter_without_data_is_a_located_error(cef) -> None:
    from engine.core.errors import DataValidationError

    with pytest.raises(DataValidationError, match="no housing-unit geography") as info:
        run_phsafe(_small(cef, state="44"), _config(state="06"), seed=1)
    assert info.value.problems[0].column == "TABBLKST"


def test_puredp_run_reports_geometric_variance(cef) -> None:
    from engine.dp.distributions import geometric_variance

    raw = _config().to_dict()
    raw["privacy_defn"] = "puredp"
    config = PHSafeConfig.from_json(raw)
    result = run_phsafe(_small(cef), config, seed=8)
    ph7 = result.official["PH7"]
    assert set(ph7["NOISE_DISTRIBUTION"]) == {"Two-Sided Geometric"}
    expected = geometric_variance(config.budget("PH7", "state_*") / (2 * config.tau["PH7"] + 2))
    rows = result.measurements[
        (result.measurements["table"] == "PH7") & (result.measurements["level"] == "state_*")
    ]
    assert np.allclose(rows["variance"], expected)


def test_all_zero_budgets_are_rejected_but_non_private_needs_none(cef) -> None:
    raw = _config().to_dict()
    raw["privacy_budget"] = {}
    raw["tau"] = {}
    config = PHSafeConfig.from_json(raw)
    with pytest.raises(ValidationError, match="nothing to measure"):
        run_phsafe(_small(cef), config, seed=1)
    truth = run_phsafe(_small(cef), config, seed=1, non_private=True)
    assert truth.truncation_stats == {}
    total = truth.official["PH1_num"]
    assert (
        int(
            total.loc[
                (total["REGION_TYPE"] == "USA")
                & (total["ITERATION_CODE"] == "*")
                & (total["PH1_NUM_DATA_CELL"] == "1"),
                "COUNT",
            ].item()
        )
        == 43
    )


def test_derived_totals_use_the_same_moe_rule_as_cells(cef) -> None:
    from engine.dp.distributions import discrete_gaussian_moe

    result = run_phsafe(_small(cef), _config(), seed=3)
    pub = result.published
    counts = pub[pub["numerator"].isna() & pub["variance"].notna() & (pub["variance"] > 0)]
    totals = counts[~counts["is_basis"].astype(bool)]
    assert not totals.empty and counts["is_basis"].astype(bool).any()
    for frame in (totals, counts[counts["is_basis"].astype(bool)]):
        moe = (frame["ci90_high"] - frame["estimate"]).to_numpy()
        exact = [discrete_gaussian_moe(float(v)) for v in frame["variance"]]
        assert np.array_equal(moe, exact)
