"""The shipped PHSafe sample data/samples/phsafe_synthetic_us: manifest, config and reproducibility."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from engine.data.synthetic import generate_households

SAMPLE = Path(__file__).resolve().parents[3] / "data" / "samples" / "phsafe_synthetic_us"


@pytest.fixture(scope="module")
def manifest() -> dict:
    return json.loads((SAMPLE / "sample.json").read_text())


@pytest.fixture(scope="module")
def tables() -> dict[str, pd.DataFrame]:
    return {
        name: pd.read_csv(SAMPLE / f"{name}.csv.gz", dtype=str, keep_default_na=False)
        for name in ("persons", "units", "geo")
    }


def test_manifest_fields(manifest: dict, tables: dict[str, pd.DataFrame]) -> None:
    assert manifest["name"] == "phsafe_synthetic_us"
    assert manifest["kind"] == "phsafe"
    assert manifest["loader"] == "cef"
    for field in ("title", "description", "geography", "source", "licence"):
        assert manifest[field]
    assert (SAMPLE / manifest["licence_file"]).is_file()
    for name in manifest["files"]:
        assert (SAMPLE / name).is_file(), name
    assert manifest["persons"] == manifest["rows"] == len(tables["persons"])
    assert manifest["units"] == len(tables["units"])
    assert manifest["gq_facilities"] == int((tables["units"]["RTYPE"] == "4").sum())
    assert sum(p.stat().st_size for p in SAMPLE.iterdir()) < 10_000_000


def test_about_one_thousandth_of_us(tables: dict[str, pd.DataFrame]) -> None:
    assert 300_000 <= len(tables["persons"]) <= 320_000
    assert tables["geo"]["TABBLKST"].nunique() == 51


def test_sample_is_reproducible_from_seed(manifest: dict, tables: dict[str, pd.DataFrame]) -> None:
    regenerated = generate_households(manifest["persons"], seed=20101)
    for name, frame in tables.items():
        pd.testing.assert_frame_equal(frame, getattr(regenerated, name), check_dtype=False)


def test_config_is_phsafe_table_10() -> None:
    config = json.loads((SAMPLE / "config.json").read_text())
    assert config["privacy_defn"] == "zcdp"
    assert config["tau"] == {"PH1_num": 10, "PH2": 10, "PH3": 6, "PH4": 10, "PH6": 6, "PH7": 10}
    budget = config["privacy_budget"]
    total = sum(value for table in budget.values() for value in table.values())
    assert total == pytest.approx(1.257281, abs=1e-9)
    assert budget["PH3"]["state_A-G"] == 0.662976
    assert set(budget["PH2"]) == set(budget["PH6"]) == {"usa_*", "state_*"}
    assert len(config["state_filter"]) == 51 and "72" not in config["state_filter"]
