"""The shipped Petti & Flaxman reference tables load and match numbers quoted in the paper."""

from __future__ import annotations

import math

import pytest

from engine.core.errors import ValidationError
from engine.metrics.reference import (
    load_petti_flaxman_homogeneity_bias,
    load_petti_flaxman_tradeoff,
    reference_dir,
)


def test_licence_ships_with_the_data() -> None:
    assert "MIT License" in (reference_dir() / "LICENSE").read_text()


def test_tradeoff_matches_paper_text() -> None:
    table = load_petti_flaxman_tradeoff()
    td = table[table["design"] == "topdown"].set_index(["geolevel", "count_type", "epsilon"])
    # PF Results: "for ε = 1.0, the EPL for TC at the enumeration district level was 0.064".
    assert td.loc[("Enumeration district", "tc", 1.0), "epl"] == pytest.approx(0.064)
    assert math.isnan(td.loc[("State", "tc", 1.0), "epl"])
    assert td.loc[("State", "tc", 1.0), "epl_note"].startswith("undefined")
    srs = table[table["design"] == "srs"].set_index(["geolevel", "count_type", "fraction"])
    # "For a 5% sample … median absolute error in TC of 74 at the enumeration district level".
    assert srs.loc[("Enumeration district", "tc", 0.05), "median_ae"] == 74
    assert srs.loc[("State", "tc", 0.5), "median_ae"] == 932
    assert set(table["design"]) == {"topdown", "srs"}


def test_homogeneity_bias_matches_paper_text() -> None:
    bias = load_petti_flaxman_homogeneity_bias().set_index(
        ["count_type", "geolevel", "epsilon", "homogeneity_index"]
    )
    # "Homogeneity index 0 had bias of -31.7 people for ε = 0.5" (enumeration districts).
    assert bias.loc[("tc", "Enumeration district", 0.5, 0), "mean_signed_error"] == -31.7
    assert bias.loc[("tc", "County", 1.0, 0), "mean_signed_error"] == -33.9


def test_missing_folder_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(ValidationError, match="missing"):
        load_petti_flaxman_tradeoff(tmp_path)
