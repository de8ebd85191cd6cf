"""The generated population: one set of persons for both engines, realistic geography (docs/synthetic.md)."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pytest

from engine.core.errors import ValidationError
from engine.data.cef import load_cef_extract
from engine.data.generated import load_generated_population
from engine.data.inputs import load_topdown_input
from engine.data.population import generate_population, read_manifest
from engine.data.population_chunk import all_two_or_more_races
from engine.data.population_geography import RI_EMPTY_BLOCK_SHARE, plan_chunks
from engine.data.samples import load_topdown_sample

# Tolerances of the realism checks (stated in docs/synthetic.md).
SIZE_QUANTILE_TOL = 0.20  # relative, at the 25/50/75/90th percentiles of populated block sizes
EMPTY_SHARE_TOL = 0.03  # absolute
BLAU_RATIO_TOL = 0.15  # absolute, medians of block/tract and tract/state Blau ratios


def _blau(counts: np.ndarray) -> np.ndarray:
    total = counts.sum(axis=1)
    p = counts / np.maximum(total, 1)[:, None]
    return 1.0 - (p**2).sum(axis=1)


def _raceeth_2016(counts: np.ndarray) -> np.ndarray:
    c = counts.reshape(-1, 8, 2, 2, 63).sum(axis=(1, 2))
    out = np.zeros((counts.shape[0], 8))
    out[:, 0] = c[:, 1].sum(axis=1)
    out[:, 1:7] = c[:, 0, :6]
    out[:, 7] = c[:, 0, 6:].sum(axis=1)
    return out


def _profile(groups: np.ndarray, tracts: np.ndarray) -> dict[str, float]:
    pop = groups.sum(axis=1)
    block = _blau(groups)
    tract_frame = pd.DataFrame(groups).groupby(tracts).sum()
    tract_blau = pd.Series(_blau(tract_frame.to_numpy()), index=tract_frame.index)
    state = _blau(groups.sum(axis=0)[None])[0]
    big = pop >= 10
    ratio = block[big] / np.maximum(tract_blau[tracts].to_numpy()[big], 1e-9)
    return {
        "empty": float(np.mean(pop == 0)),
        "sizes": np.quantile(pop[pop > 0], [0.25, 0.5, 0.75, 0.9]),
        "block_tract": float(np.median(ratio)),
        "tract_state": float(np.median(tract_blau.to_numpy() / state)),
    }


@pytest.fixture(scope="module")
def ri_population(tmp_path_factory):
    out = tmp_path_factory.mktemp("gen") / "ri"
    summary = generate_population(200_000, seed=4, states=["RI"], out_dir=out)
    return out, summary


def test_both_engines_read_the_same_persons(ri_population):
    out, summary = ri_population
    hist = load_generated_population(out)
    cef = load_cef_extract(out)
    assert hist.total == len(cef.persons) == summary.persons == 200_000
    assert (cef.units["RTYPE"] == "4").sum() == summary.gq_facilities
    assert hist.n_blocks == summary.blocks
    # persons per block agree between the PPMF and the CEF geography
    geo = cef.geo.set_index("MAFID")
    block = (geo["TABBLKST"] + geo["TABBLKCOU"] + geo["TABTRACTCE"] + geo["TABBLK"]).loc[
        cef.persons["MAFID"]
    ]
    per_block = block.value_counts()
    ids = hist.geography["Block"].to_numpy()
    totals = pd.Series(hist.counts.sum(axis=1), index=ids)
    assert per_block.sort_index().equals(totals[totals > 0].sort_index())
    assert load_topdown_input(out).total == hist.total


def test_every_cenrace_code_appears_at_scale(ri_population):
    hist = load_generated_population(ri_population[0])
    by_race = hist.counts.reshape(-1, 4, 63).sum(axis=(0, 1))
    assert np.count_nonzero(by_race) >= 55  # 200,000 persons: all but the rarest 4–6-race codes


def test_block_frame_has_structural_zeros_and_gq(ri_population):
    out, summary = ri_population
    hist = load_generated_population(out)
    hu, gq = hist.extra["housing_units"], hist.extra["gq_facilities"]
    pop = hist.counts.sum(axis=1)
    assert summary.structural_zero_blocks == int(np.sum((hu == 0) & (gq.sum(axis=1) == 0)))
    assert np.all(pop[(hu == 0) & (gq.sum(axis=1) == 0)] == 0)
    gq_pop = hist.counts.reshape(-1, 8, 252)[:, 1:].sum(axis=2)
    assert np.all(gq_pop >= gq) and np.all(gq_pop[gq == 0] == 0)
    assert set(np.flatnonzero(gq.sum(axis=0))) >= {0, 2, 4}  # correctional, nursing, college


def test_geography_resembles_rhode_island(ri_population):
    out, summary = ri_population
    ri = load_topdown_sample("ri2010")
    real = _profile(ri.counts.reshape(-1, 2, 8).sum(axis=1), ri.geography["Tract"].to_numpy())
    hist = load_generated_population(out)
    made = _profile(_raceeth_2016(hist.counts), hist.geography["Tract"].to_numpy())
    assert made["empty"] == pytest.approx(RI_EMPTY_BLOCK_SHARE, abs=EMPTY_SHARE_TOL)
    assert made["empty"] == pytest.approx(real["empty"], abs=EMPTY_SHARE_TOL)
    np.testing.assert_allclose(made["sizes"], real["sizes"], rtol=SIZE_QUANTILE_TOL)
    assert made["block_tract"] == pytest.approx(real["block_tract"], abs=BLAU_RATIO_TOL)
    assert made["tract_state"] == pytest.approx(real["tract_state"], abs=BLAU_RATIO_TOL)
    assert 3_000 <= summary.persons / summary.tracts <= 5_500
    assert summary.counties == 1  # RI's 5 counties scaled to 200,000 of 1,052,567 persons


def test_all_cenrace_codes_can_occur():
    codes, probs = all_two_or_more_races()
    assert sorted(codes.tolist()) == list(range(7, 64)) and np.all(probs > 0)
    assert probs.sum() == pytest.approx(1.0)


def test_same_seed_same_bytes_and_chunks_keep_ids_unique(tmp_path):
    digests = []
    for name in ("a", "b"):
        generate_population(
            30_000,
            seed=9,
            states=["RI", "DE"],
            out_dir=tmp_path / name,
            compress=True,
            chunk_persons=10_000,
        )
        digests.append(
            [
                hashlib.sha256((tmp_path / name / f).read_bytes()).hexdigest()
                for f in ("ppmf.csv.gz", "units.csv.gz", "blocks.csv.gz")
            ]
        )
    assert digests[0] == digests[1]
    assert len(plan_chunks(30_000, ["RI", "DE"], 10_000)) >= 2
    cef = load_cef_extract(tmp_path / "a")
    assert cef.units["MAFID"].is_unique
    hist = load_generated_population(tmp_path / "a")
    assert hist.geography["Block"].is_unique and hist.total == 30_000
    assert read_manifest(tmp_path / "a")["chunks"] >= 2


def test_bad_requests_are_refused_in_words(tmp_path):
    with pytest.raises(ValidationError, match="between 1,000"):
        generate_population(10, seed=1, out_dir=tmp_path / "x")
    with pytest.raises(ValidationError, match="unknown state"):
        generate_population(5_000, seed=1, states=["ZZ"], out_dir=tmp_path / "x")
    with pytest.raises(ValidationError, match="no population.json"):
        read_manifest(tmp_path)
