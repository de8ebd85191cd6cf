"""Conformance with the official PHSafe 3.0.0 end-to-end fixtures (tests/fixtures/phsafe_official).

e2e_test1 is a non-private run, e2e_test2 a private pure-DP run with Infinity budgets (no noise,
VARIANCE 0, every key-set group listed). Our outputs must equal the expected outputs: same header
and column order, same rows ignoring row order.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from engine.data.cef import load_cef_extract
from engine.phsafe.config import PHSafeConfig
from engine.phsafe.outputs import write_official
from engine.phsafe.release import run_phsafe

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "phsafe_official"
CASES = {"e2e_test1": True, "e2e_test2": False}  # case → non_private


def _rows(path: Path) -> tuple[list[str], list[str]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return lines[0].split("|"), sorted(lines[1:])


@pytest.mark.parametrize("case", sorted(CASES))
def test_outputs_match_expected(case: str, tmp_path: Path) -> None:
    directory = FIXTURES / case
    config = PHSafeConfig.from_json(directory / "config.json")
    extract = load_cef_extract(directory, state_filter=config.state_filter)
    result = run_phsafe(extract, config, seed=0, non_private=CASES[case])
    write_official(result.official, tmp_path, private=not CASES[case])
    expected_files = sorted(p.name for p in (directory / "expected_outputs").iterdir())
    assert sorted(p.name for p in tmp_path.glob("*.csv")) == expected_files
    for name in expected_files:
        exp_header, exp_rows = _rows(directory / "expected_outputs" / name)
        got_header, got_rows = _rows(tmp_path / name)
        assert got_header == exp_header, name
        assert got_rows == exp_rows, name


def test_private_fixture_has_zero_variance_and_full_key_set(tmp_path: Path) -> None:
    directory = FIXTURES / "e2e_test2"
    config = PHSafeConfig.from_json(directory / "config.json")
    result = run_phsafe(
        load_cef_extract(directory, state_filter=config.state_filter), config, seed=5
    )
    write_official(result.official, tmp_path, private=True)
    ph3 = pd.read_csv(tmp_path / "PH3.csv", sep="|", dtype=str, keep_default_na=False)
    assert set(ph3["VARIANCE"]) == {"0"}
    assert set(ph3["NOISE_DISTRIBUTION"]) == {"Two-Sided Geometric"}
    # 2 regions × 10 iteration codes × 7 basis cells, zeros included
    assert len(ph3) == 2 * 10 * 7
    assert (ph3["COUNT"] == "0").all()


def test_official_reader_layout_accepts_gzip(tmp_path: Path) -> None:
    import gzip
    import shutil

    src = FIXTURES / "e2e_test1"
    for name in ("persons.csv", "units.csv", "geo.csv"):
        with (src / name).open("rb") as fin, gzip.open(tmp_path / f"{name}.gz", "wb") as fout:
            shutil.copyfileobj(fin, fout)
    config = PHSafeConfig.from_json(src / "config.json")
    plain = load_cef_extract(src, state_filter=config.state_filter)
    zipped = load_cef_extract(tmp_path, state_filter=config.state_filter)
    assert plain.persons.equals(zipped.persons)
    assert plain.units.equals(zipped.units)
