"""PHSafe with Spark's truncate-and-join and counts equals the local engine (PHS Algorithms 1–4):
the same counts at every level and byte-identical official output files for the same seed.

One shared ``local[2]`` session (tests/conftest.py). The official fixtures, the shipped synthetic
sample (read by Spark's own CSV reader from the gzip files) and a hand-made extract with identical
records and households over τ, written in shuffled order.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from engine.core.errors import DataValidationError
from engine.data.cef import load_cef_extract
from engine.data.cef_types import GEO_COLUMNS, PERSON_COLUMNS, UNIT_COLUMNS, CefExtract
from engine.data.samples import get_sample
from engine.phsafe.config import PHSafeConfig
from engine.phsafe.join import LevelCounts
from engine.phsafe.outputs import write_official
from engine.phsafe.release import run_phsafe
from engine.spark import phsafe as spark_phsafe

pytestmark = pytest.mark.spark

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "phsafe_official"


def assert_same_counts(got: LevelCounts, want: LevelCounts) -> None:
    assert (got.table, got.level, got.region_type, got.region_ids) == (
        want.table,
        want.level,
        want.region_type,
        want.region_ids,
    )
    assert (got.iteration_codes, got.basis) == (want.iteration_codes, want.basis)
    label = f"{want.table} {want.level}"
    np.testing.assert_array_equal(got.true_full, want.true_full, err_msg=label)
    np.testing.assert_array_equal(got.true_truncated, want.true_truncated, err_msg=label)
    if want.final_pop is None:
        assert got.final_pop is None
    else:
        np.testing.assert_array_equal(got.final_pop, want.final_pop, err_msg=label)


def _compare(
    spark,
    source,
    extract: CefExtract,
    config: PHSafeConfig,
    tmp_path: Path,
    *,
    non_private: bool,
    seed: int = 7,
) -> None:
    """Local and Spark runs: the same counts at every level and byte-identical official outputs."""
    local = run_phsafe(extract, config, seed=seed, non_private=non_private)
    prepared = spark_phsafe.prepare(
        spark, spark_phsafe.read_cef(spark, source), config.state_filter
    )
    remote = run_phsafe(
        None,
        config,
        seed=seed,
        non_private=non_private,
        prepared=prepared,
        tabulate=spark_phsafe.tabulate_all,
    )
    assert (remote.states, remote.n_persons, remote.n_units) == (
        local.states,
        local.n_persons,
        local.n_units,
    )
    assert remote.truncation_stats == local.truncation_stats
    assert remote.unmapped_records == local.unmapped_records
    assert [(m.counts.table, m.counts.level) for m in remote.levels] == [
        (m.counts.table, m.counts.level) for m in local.levels
    ]
    for r, w in zip(remote.levels, local.levels, strict=True):
        assert_same_counts(r.counts, w.counts)
    write_official(local.official, tmp_path / "local", private=not non_private)
    write_official(remote.official, tmp_path / "spark", private=not non_private)
    names = sorted(p.name for p in (tmp_path / "local").iterdir())
    assert names and names == sorted(p.name for p in (tmp_path / "spark").iterdir())
    for name in names:
        assert (tmp_path / "spark" / name).read_bytes() == (tmp_path / "local" / name).read_bytes()


def test_official_private_fixture_same_outputs_as_local(spark, tmp_path: Path) -> None:
    """e2e_test2: private, pure DP with infinite budgets (the CLI test runs e2e_test1)."""
    case = "e2e_test2"
    directory = FIXTURES / case
    config = PHSafeConfig.from_json(directory / "config.json")
    extract = load_cef_extract(directory, state_filter=config.state_filter)
    _compare(spark, directory, extract, config, tmp_path, non_private=case == "e2e_test1")


def test_synthetic_sample_same_outputs_as_local(spark, tmp_path: Path) -> None:
    """The shipped sample, read by Spark's CSV reader from the gzip files; private, seeded."""
    info = get_sample("phsafe_synthetic_us")
    config = PHSafeConfig.from_json(info.path / "config.json")
    # τ small enough that many households are truncated; three states keep the test short
    config = replace(config.with_tau({t: 2 for t in config.tau}), state_filter=["06", "11", "44"])
    extract = load_cef_extract(info.path, state_filter=config.state_filter)
    _compare(spark, info.path, extract, config, tmp_path, non_private=False, seed=11)


def _household(mafid: int, ages: list[int], state: str) -> tuple[list[dict], dict, dict]:
    """A married-couple owner household (householder, spouse, own children), official layout."""
    rels = [20, 21] + [25] * (len(ages) - 2)
    persons = [
        {"RTYPE": "3", "MAFID": str(mafid), "QAGE": str(a), "CENHISP": "1", "CENRACE": "01"}
        | {"RELSHIP": str(r)}
        for a, r in zip(ages, rels, strict=True)
    ]
    unit = {"RTYPE": "2", "MAFID": str(mafid), "FINAL_POP": str(len(ages)), "NPF": "0"}
    unit |= {"HHSPAN": "1", "HHRACE": "01", "TEN": "1", "HHT": "1", "HHT2": "01", "CPLT": "1"}
    geo = {"RTYPE": "2", "MAFID": str(mafid), "TABBLKST": state, "TABBLKCOU": "001"}
    geo |= {"TABTRACTCE": "000100", "TABBLK": "1001", "TABBLKGRPCE": "1", "REGIONCE": "1"}
    geo |= {"DIVISIONCE": "1", "PLACEFP": "99999", "AIANNHCE": "9999"}
    return persons, unit, geo


def test_identical_records_and_file_order(spark, tmp_path: Path) -> None:
    """Twins (identical records), households over τ and a second state, in shuffled file order."""
    persons, units, geos = [], [], []
    for h in range(30):
        ages = [40, 38, 9, 9, 9, 7, 5] if h % 2 else [35, 12, 12]
        p, u, g = _household(100_000_001 + h, ages, "44" if h % 3 else "09")
        persons += p
        units.append(u)
        geos.append(g)
    order = np.random.default_rng(3).permutation(len(persons))
    ex = CefExtract(
        persons=pd.DataFrame([persons[i] for i in order], columns=list(PERSON_COLUMNS)),
        units=pd.DataFrame(units, columns=list(UNIT_COLUMNS)),
        geo=pd.DataFrame(geos, columns=list(GEO_COLUMNS)),
    )
    config = PHSafeConfig.from_json(FIXTURES / "e2e_test1" / "config.json")
    config = replace(config.with_tau({t: 2 for t in config.tau}), state_filter=["44"])
    _compare(spark, ex, ex, config, tmp_path, non_private=True)


def test_non_numeric_code_is_located(spark, tmp_path: Path) -> None:
    directory = FIXTURES / "e2e_test1"
    for name in ("units.csv", "geo.csv"):
        (tmp_path / name).write_text((directory / name).read_text())
    lines = (directory / "persons.csv").read_text().splitlines()
    lines[3] = lines[3].replace(",01,", ",x1,", 1)
    (tmp_path / "persons.csv").write_text("\n".join(lines) + "\n")
    cef = spark_phsafe.read_cef(spark, tmp_path)
    with pytest.raises(DataValidationError, match="x1"):
        spark_phsafe.prepare(spark, cef, ["44"])
