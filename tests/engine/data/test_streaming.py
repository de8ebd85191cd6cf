"""Large files are read block by block: same table as the whole-file reader."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import engine.data.validate as validate
from engine.core.errors import DataValidationError
from engine.data.block_csv import load_block_csv
from engine.data.geography import ID_LENGTHS, geography_from_block_ids
from engine.data.ppmf import load_ppmf
from engine.data.ri2010 import load_ri2010

SAMPLES = Path(__file__).resolve().parents[3] / "data" / "samples"


@pytest.mark.parametrize(
    ("loader", "path"),
    [
        (load_ri2010, SAMPLES / "ri2010" / "ri2010_blocks.csv"),
        (load_ppmf, SAMPLES / "ppmf_perry_al" / "ppmf_perry_al_persons.csv"),
    ],
)
def test_streamed_and_whole_file_readers_agree(loader, path: Path, monkeypatch) -> None:
    whole = loader(path)
    calls: list[int] = []
    real = validate._stream_table

    def spy(*args, **kwargs):
        out = real(*args, **kwargs)
        calls.append(out is not None)
        return out

    monkeypatch.setattr(validate, "STREAM_BYTES", 0)
    monkeypatch.setattr(validate, "STREAM_BLOCK", 64 * 1024)  # several blocks even for samples
    monkeypatch.setattr(validate, "_stream_table", spy)
    streamed = loader(path)
    assert calls and all(calls)
    assert np.array_equal(whole.counts, streamed.counts)
    assert whole.geography.equals(streamed.geography)


def test_irregular_large_file_falls_back_to_located_problems(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(validate, "STREAM_BYTES", 0)
    lines = (SAMPLES / "ri2010" / "ri2010_blocks.csv").read_text().splitlines()[:5]
    lines.insert(3, lines[2] + ",1")  # a row with one field too many
    path = tmp_path / "blocks.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataValidationError) as caught:
        load_ri2010(path)
    assert caught.value.problems[0].row == 3
    del lines[3]
    path.write_text("\n".join([*lines[:3], lines[0], *lines[3:]]) + "\n")  # two exports joined
    with pytest.raises(DataValidationError, match="header line appears again"):
        load_ri2010(path)


def _streamed(monkeypatch) -> None:
    monkeypatch.setattr(validate, "STREAM_BYTES", 0)
    monkeypatch.setattr(validate, "STREAM_BLOCK", 64 * 1024)


def test_streamed_columns_are_compact_arrays(monkeypatch) -> None:
    _streamed(monkeypatch)
    path = SAMPLES / "ri2010" / "ri2010_blocks.csv"
    table = validate.read_csv_table(path, ["GEOID", "pop", "vap"], integers=["pop"])
    whole = validate.read_csv_table(path.read_bytes(), ["GEOID", "pop", "vap"])
    assert table.columns["pop"].dtype == np.int64
    assert table.columns["GEOID"].dtype == np.dtype("U15")
    assert table.columns["vap"].dtype.kind == "U"
    assert table.columns["pop"].tolist() == [int(v) for v in whole.columns["pop"]]
    assert table.columns["GEOID"].tolist() == whole.columns["GEOID"].tolist()
    assert np.array_equal(table.rows, whole.rows)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("-3", "negative count -3"),
        ("00", None),  # leading zeros: not streamed as int64, read as text and accepted
        ("99999999999999999999", "too large"),
        ("١٢", "not ASCII"),
        ("1.5e3", "scientific notation"),
    ],
)
def test_streamed_integers_keep_the_whole_file_messages(
    tmp_path: Path, monkeypatch, value: str, words: str | None
) -> None:
    lines = (SAMPLES / "ri2010" / "ri2010_blocks.csv").read_text().splitlines()[:40]
    fields = lines[5].split(",")
    header = lines[0].split(",")
    column = header.index("pop_other")
    fields[column] = value if words else value + fields[column]
    lines[5] = ",".join(fields)
    path = tmp_path / "blocks.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    outcomes = []
    for stream in (False, True):
        if stream:
            _streamed(monkeypatch)
        try:
            outcomes.append(load_ri2010(path))
        except DataValidationError as exc:
            outcomes.append([(p.row, p.column, p.message) for p in exc.problems])
    whole, streamed = outcomes
    if words is None:
        assert np.array_equal(whole.counts, streamed.counts)
    else:
        assert whole == streamed
        assert whole[0][:2] == (5, "pop_other") and words in whole[0][2]


def test_geography_from_fixed_width_ids_matches_slicing() -> None:
    ids = np.array(["440070001001000", "440070001001001", "440090002002000"], dtype="U15")
    geo = geography_from_block_ids(ids)
    for level, width in ID_LENGTHS.items():
        assert geo[level].tolist() == [i[:width] for i in ids.tolist()]
    short = geography_from_block_ids(np.array(["4400", "x"], dtype=object))
    assert short["Tract"].tolist() == ["4400", "x"]


def test_streamed_block_csv_agrees_with_whole_file(tmp_path: Path, monkeypatch) -> None:
    lines = (SAMPLES / "ri2010" / "ri2010_blocks.csv").read_text().splitlines()
    lines[1:] = [f"1000000US{line}" if k % 2 else line for k, line in enumerate(lines[1:])]
    path = tmp_path / "blocks.csv"
    path.write_text("\n".join(lines) + "\n")
    cells = {f"vap_{g}": {"VOTINGAGE": "18_plus", "RACEETH": g} for g in ("hisp", "white")}
    mapping = {"schema": "ri2010", "geography": {"geoid": "GEOID"}, "cells": cells}
    mapping["allow_unmapped"] = True
    whole = load_block_csv(path, mapping)
    _streamed(monkeypatch)
    streamed = load_block_csv(path, mapping)
    assert np.array_equal(whole.counts, streamed.counts)
    assert whole.geography.equals(streamed.geography)
    assert whole.geography["Block"].iloc[1] == lines[2].split(",")[0][len("1000000US") :]


@pytest.mark.parametrize("change", ["repeat", "short", "long", "sci"])
def test_streamed_block_ids_keep_the_whole_file_messages(
    tmp_path: Path, monkeypatch, change: str
) -> None:
    lines = (SAMPLES / "ri2010" / "ri2010_blocks.csv").read_text().splitlines()[:40]
    geoid, rest = lines[7].split(",", 1)
    new = {
        "repeat": lines[3].split(",", 1)[0],
        "short": geoid[:14],
        "long": geoid + "0",
        "sci": "4.40010301001E+14",
    }[change]
    lines[7] = f"{new},{rest}"
    path = tmp_path / "blocks.csv"
    path.write_text("\n".join(lines) + "\n")
    outcomes = []
    for stream in (False, True):
        if stream:
            _streamed(monkeypatch)
        with pytest.raises(DataValidationError) as caught:
            load_ri2010(path)
        outcomes.append([(p.row, p.column, p.message) for p in caught.value.problems])
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0][:2] == (7, "GEOID")
