"""``phexplore moe topdown --post-processed [--data]``: keys, the docs/science.md §7 reference
numbers, the shipped national profile and the per-row validity flag."""

from __future__ import annotations

import json

import pytest

from phexplore.cli import main


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def _row(out: dict, level: str, query: str) -> dict:
    return next(r for r in out["rows"] if r["geolevel"] == level and r["query"] == query)


def test_post_processed_keys_and_spec_reference(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(
        capsys, "moe", "topdown", "--preset", "ri2010-production-like", "--rho", "1",
        "--post-processed", "--format", "json",
    )  # fmt: skip
    for row in out["rows"]:
        assert {"sigma", "post_processed_rmse", "post_processed_moe"} <= set(row)
        assert row["post_processed_moe"] == pytest.approx(1.645 * row["post_processed_rmse"], 1e-3)
    # docs/science.md §7: on RI at ρ = 1 the published Block TOTAL has RMSE ≈ 9 against σ ≈ 82,
    # Tract VOTINGAGE ≈ 12 against σ ≈ 70, Block-group RACEETH ≈ 2.1 against 3.6.
    block = _row(out, "Block", "TOTAL")
    assert block["sigma"] == pytest.approx(82.4, abs=0.1)
    assert 8.0 < block["post_processed_rmse"] < 10.5
    tract = _row(out, "Tract", "VOTINGAGE")
    assert tract["sigma"] == pytest.approx(70.0, abs=0.1)
    assert 10.5 < tract["post_processed_rmse"] < 13.5
    bg = _row(out, "Block_Group", "RACEETH")
    assert 1.9 < bg["post_processed_rmse"] < 2.5 < bg["sigma"]
    assert _row(out, "State", "TOTAL")["post_processed_rmse"] == 0.0  # invariant
    assert out["summary"]["post_processed"]["profile"] == "ri2010"


def test_post_processed_without_flag_keeps_old_shape(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(capsys, "moe", "topdown", "--preset", "ri2010-production-like", "--format", "json")
    assert "post_processed_rmse" not in out["rows"][0]


def test_post_processed_production_units_run(capsys: pytest.CaptureFixture[str]) -> None:
    """Without --data the 2,016-cell schema is predicted on the generated national profile: US,
    State and County rows are those of 51 states and 206 counties (before: one Rhode Island
    county, County TOTAL ≈ 1e-6 where runs measure 2.4); every row says whether it lies in the
    validated range."""
    out = _json(
        capsys, "moe", "topdown", "--preset", "topdown-2020-production", "--post-processed",
        "--format", "json",
    )  # fmt: skip
    units = [r for r in out["rows"] if r["run"] == "units"]
    assert units and all(r["post_processed_rmse"] is None for r in units)
    persons = [r for r in out["rows"] if r["run"] == "persons"]
    assert all(r["post_processed_rmse"] is not None for r in persons)
    summary = out["summary"]["post_processed"]
    assert summary["profile"] == "generated-us-20m"
    assert summary["model"] == {"persons": "support"}
    assert not any("another schema" in n or "dense model" in n for n in summary["notes"])
    assert _row(out, "County", "TOTAL")["post_processed_rmse"] > 0.5
    state, us = _row(out, "State", "HHGQ"), _row(out, "US", "HHGQ")
    assert state["post_processed_rmse"] != us["post_processed_rmse"]
    block = _row(out, "Block", "TOTAL")
    assert block["post_processed_holds"] is True and block["post_processed_reason"] is None
    assert block["post_processed_rmse"] < block["sigma"]
    for r in persons:
        assert (r["post_processed_holds"] is False) == bool(r["post_processed_reason"]), r
    flagged = summary["rows_outside_validated_range"]["persons"]
    assert flagged == sum(r["post_processed_holds"] is False for r in persons)


def test_one_state_table_lists_the_reasons_as_footnotes(capsys: pytest.CaptureFixture[str]) -> None:
    """--states 1: one state of the national profile; in the table each row outside the
    validated range points to a numbered reason under the summary (here ρ = 50, beyond every
    validated ρ)."""
    assert main(["moe", "topdown", "--preset", "topdown-2020-production", "--post-processed",
                 "--states", "1", "--rho", "50", "--run", "persons"]) == 0  # fmt: skip
    text = capsys.readouterr().out
    assert "generated-us-20m: KY" in text
    assert "reasons:" in text and "[1]" in text and "outside the validated" in text


def test_the_help_says_what_the_prediction_uses(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["moe", "topdown", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "generated national population of 20,000,000 persons" in text
    assert "post_processed_holds" in text and "validated" in text
    assert "default: the shipped Rhode Island 2010 profile" not in text


def test_post_processed_with_data(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(
        capsys, "moe", "topdown", "--preset", "topdown-2020-production", "--post-processed",
        "--data", "ppmf_perry_al", "--format", "json",
    )  # fmt: skip
    assert out["summary"]["post_processed"]["profile"] == "ppmf_perry_al"
    # no fallback (schema, dense model); the one note says the root term is included
    notes = out["summary"]["post_processed"]["notes"]
    assert len(notes) == 1 and "empty cells" in notes[0] and "docs/prediction.md" in notes[0]
    row = _row(out, "Block", "TOTAL")
    assert 0 < row["post_processed_rmse"] < row["sigma"]


def test_data_without_post_processed_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["moe", "topdown", "--data", "ri2010"]) != 0
    assert "--post-processed" in capsys.readouterr().err


def test_plan_topdown_published(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(
        capsys, "plan", "topdown", "--published", "Block:TOTAL=9.2", "--shares",
        "ri2010-production-like", "--format", "json",
    )  # fmt: skip
    assert 0.7 < out["summary"]["rho"] < 1.3
    assert out["rows"][0]["predicted_rmse"] <= 9.2 * (1 + 1e-9)
    assert main(["plan", "topdown"]) != 0
    assert "--published" in capsys.readouterr().err


def test_post_processed_entities(capsys: pytest.CaptureFixture[str]) -> None:
    out = _json(
        capsys, "moe", "topdown", "--preset", "ri2010-production-like", "--rho", "1",
        "--post-processed", "--data", "ri2010", "--entities", "providence-wards",
        "--format", "json",
    )  # fmt: skip
    entities = out["summary"]["post_processed"]["entities"]
    wards = [e for e in entities if e["entity_set"] == "providence_wards" and e["query"] == "TOTAL"]
    assert len(wards) == 15 and all(e["post_processed_rmse"] > 0 for e in wards)
    assert all(e["post_processed_moe"] == pytest.approx(1.645 * e["post_processed_rmse"], 1e-3)
               for e in entities)  # fmt: skip
    assert main(["moe", "topdown", "--post-processed", "--entities", "providence-wards"]) != 0
