"""engine.data.inputs: one resolver for the CLI's --data and the app's uploads (docs/data.md)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from engine.core.errors import DataValidationError
from engine.data.inputs import load_topdown_files, load_topdown_input, sniff_format
from engine.data.samples import samples_dir

RI = samples_dir() / "ri2010" / "ri2010_blocks.csv"
PPMF = samples_dir() / "ppmf_perry_al" / "ppmf_perry_al_persons.csv"
PL = samples_dir() / "pl94171_ri2018"


def test_sample_name_file_and_folder(tmp_path: Path) -> None:
    assert load_topdown_input("pl94171_ri2018").total == 29_225
    small = tmp_path / "ri.csv"
    small.write_text("".join(RI.read_text(encoding="utf-8").splitlines(True)[:101]))
    hist = load_topdown_input(small)
    assert hist.n_blocks == 100 and hist.schema.name == "ri2010"
    assert load_topdown_input(PPMF).total == 10_588
    assert load_topdown_input(PL).total == 29_225


def test_sniffing_and_unknown_inputs(tmp_path: Path) -> None:
    assert sniff_format(RI) == "ri2010" and sniff_format(PPMF) == "ppmf"
    odd = tmp_path / "odd.csv"
    odd.write_text("a,b\n1,2\n")
    with pytest.raises(DataValidationError, match="cannot tell the file's format"):
        load_topdown_input(odd)
    with pytest.raises(DataValidationError, match="neither a file, a folder nor a TopDown sample"):
        load_topdown_input("no-such-sample")


class _Upload(io.BytesIO):
    def __init__(self, data: bytes, name: str) -> None:
        super().__init__(data)
        self.name = name


def test_uploads_by_format() -> None:
    lines = RI.read_bytes().splitlines(True)[:51]
    hist = load_topdown_files("ri2010", [_Upload(b"".join(lines), "mine.csv")])
    assert hist.n_blocks == 50
    with pytest.raises(DataValidationError, match="needs two files"):
        load_topdown_files("block_csv", [_Upload(b"GEOID\n", "x.csv")])
    with pytest.raises(DataValidationError, match="needs four files"):
        load_topdown_files("pl94171", [_Upload(b"", "rigeo.pl")])
    with pytest.raises(DataValidationError, match="unknown input format 'xlsx'"):
        load_topdown_files("xlsx", [_Upload(b"", "x.xlsx")])
    with pytest.raises(DataValidationError, match="no file given"):
        load_topdown_files("ri2010", [])
