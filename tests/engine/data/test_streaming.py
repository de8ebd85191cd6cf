"""Large files are read block by block (issue 14): same table as the whole-file reader."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import engine.data.validate as validate
from engine.data.errors import DataValidationError
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
