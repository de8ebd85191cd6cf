"""Hand-written malformed inputs for every loader: each must raise the typed, located error.

Every case names the file content, the expected message fragment and, where the problem has one,
the row (header = 0) and column. Property-based cases live in ``test_malformed_properties.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from engine.core.errors import DataValidationError
from engine.data.block_csv import load_block_csv
from engine.data.pl94171 import read_pl94171, read_pl94171_csv
from engine.data.ppmf import load_ppmf
from engine.data.ri2010 import COLUMNS, load_ri2010
from engine.data.samples import list_samples, samples_dir

RI_HEADER = ",".join(COLUMNS)
# pop 3 = 1 hisp + 2 white; vap 2 = 1 hisp + 1 white
RI_ROW = "440010301001000,3,2,0,1,0,0,0,0,0,2,1,0,1,0,0,0,0,0"
RI_ROW2 = "440010301001001,1,1,0,0,0,0,0,0,0,1,1,0,0,0,0,0,0,0"

PPMF_HEADER = (
    "TABBLKST,TABBLKCOU,TABTRACTCE,TABBLKGRPCE,TABBLK,RTYPE,GQTYPE_PL,VOTING_AGE,CENHISP,CENRACE"
)
PPMF_ROW = "01,105,686800,1,1000,3,0,2,1,01"
MDF_HEADER = "TABBLKST,TABBLKCOU,TABTRACTCE,TABBLKGRPCE,TABBLK,RTYPE,GQTYPE,QAGE,CENHISP,CENRACE"

PL = samples_dir() / "pl94171_ri2018"
PL_FILES = (
    "rigeo2018_2020Style.pl",
    "ri000012018_2020Style.pl",
    "ri000022018_2020Style.pl",
    "ri000032018_2020Style.pl",
)


def ri(*rows: str, header: str = RI_HEADER) -> bytes:
    return ("\n".join((header, *rows)) + "\n").encode()


def ppmf(*rows: str, header: str = PPMF_HEADER) -> bytes:
    return ("\n".join((header, *rows)) + "\n").encode()


def ri_row(**changes: str) -> str:
    values = dict(zip(COLUMNS, RI_ROW.split(","), strict=True))
    values.update(changes)
    return ",".join(values[c] for c in COLUMNS)


def ppmf_row(**changes: str) -> str:
    names = PPMF_HEADER.split(",")
    values = dict(zip(names, PPMF_ROW.split(","), strict=True))
    values.update(changes)
    return ",".join(values[c] for c in names)


def pl_files() -> list[bytes]:
    return [(PL / name).read_bytes() for name in PL_FILES]


def pl_edit(index: int, line: int, field: int, value: str) -> list[bytes]:
    """The PL file set with field ``field`` of line ``line`` (1-based) of file ``index`` replaced."""
    files = pl_files()
    lines = files[index].decode("latin-1").split("\n")
    parts = lines[line - 1].split("|")
    parts[field] = value
    lines[line - 1] = "|".join(parts)
    files[index] = "\n".join(lines).encode("latin-1")
    return files


def pl_drop_line(index: int, line: int) -> list[bytes]:
    files = pl_files()
    lines = files[index].split(b"\n")
    del lines[line - 1]
    files[index] = b"\n".join(lines)
    return files


def ri_age_mapping(**extra: object) -> dict:
    return {
        "schema": {"attributes": [{"name": "AGE", "levels": ["child", "adult"]}]},
        "geography": {"geoid": "GEOID"},
        "cells": {"kids": {"AGE": "child"}, "adults": {"AGE": "adult"}},
        **extra,
    }


@dataclass(frozen=True)
class Case:
    id: str
    load: Callable[[], object]
    message: str
    row: int | None = None
    column: str | None = None


CASES: list[Case] = [
    # --- whole-file problems (shared validation) ---
    Case("empty file", lambda: load_ri2010(b""), "the file is empty"),
    Case("blank lines only", lambda: load_ri2010(b"\n \r\n\n"), "the file is empty"),
    Case("header only", lambda: load_ri2010(ri()), "header but no data rows"),
    Case(
        "over the size limit",
        lambda: load_ri2010(ri(RI_ROW), max_bytes=100),
        "over the size limit of 100 bytes",
    ),
    Case(
        "binary (xlsx) upload",
        lambda: load_ri2010(b"PK\x03\x04\x14\x00\x06\x00\x08\x00\x00\x00!\x00" + b"x" * 50),
        "zip archive (or an Excel .xlsx workbook)",
    ),
    Case(
        "latin-1 bytes",
        lambda: load_ri2010(ri(RI_ROW).replace(b"\n4400", b"\n# caf\xe9\n4400", 1)),
        "byte 0xe9",
        row=1,
    ),
    Case(
        "unknown delimiter (colon)",
        lambda: load_ri2010(ri(RI_ROW.replace(",", ":"), header=RI_HEADER.replace(",", ":"))),
        "header has a single field",
        row=0,
        column="GEOID",
    ),
    Case(
        "mixed delimiters: one row uses semicolons",
        lambda: load_ri2010(ri(RI_ROW, RI_ROW2.replace(",", ";"))),
        "the row has 1 fields but the header has 19 (comma-separated)",
        row=2,
    ),
    Case(
        "missing column",
        lambda: load_ri2010(ri(RI_ROW, header=RI_HEADER.replace("vap_two", "vap_2plus"))),
        "missing column 'vap_two'",
        row=0,
        column="vap_two",
    ),
    Case(
        "duplicated header column",
        lambda: load_ri2010(ri(RI_ROW + ",5", header=RI_HEADER + ",pop")),
        "appears more than once in the header",
        row=0,
        column="pop",
    ),
    Case("ragged row", lambda: load_ri2010(ri(RI_ROW + ",9")), "the row has 20 fields", row=1),
    # --- RI 2010 block counts ---
    Case(
        "decimal count",
        lambda: load_ri2010(ri(ri_row(pop_white="2.5"))),
        "'2.5' is not a whole number",
        row=1,
        column="pop_white",
    ),
    Case(
        "empty count",
        lambda: load_ri2010(ri(RI_ROW, ri_row(GEOID="440010301001001", vap_black=""))),
        "(empty)",
        row=2,
        column="vap_black",
    ),
    Case(
        "negative count",
        lambda: load_ri2010(ri(ri_row(pop_asian="-3"))),
        "negative count -3",
        row=1,
        column="pop_asian",
    ),
    Case(
        "short GEOID (leading zero lost)",
        lambda: load_ri2010(ri(ri_row(GEOID="44010301001000"))),
        "is not a 15-digit block id",
        row=1,
        column="GEOID",
    ),
    Case(
        "duplicate block",
        lambda: load_ri2010(ri(RI_ROW, RI_ROW2, RI_ROW)),
        "appears more than once (first in row 1)",
        row=3,
        column="GEOID",
    ),
    Case(
        "voting age above total",
        lambda: load_ri2010(ri(ri_row(vap_white="5", vap="6"))),
        "exceeds the total",
        row=1,
        column="vap_white",
    ),
    Case(
        "groups do not sum to total",
        lambda: load_ri2010(ri(ri_row(pop="4"))),
        "pop is 4 but its eight groups sum to 3",
        row=1,
        column="pop",
    ),
    # --- PPMF / MDF person records ---
    Case(
        "unknown CENRACE",
        lambda: load_ppmf(ppmf(PPMF_ROW, ppmf_row(CENRACE="64"))),
        "unknown code '64'",
        row=2,
        column="CENRACE",
    ),
    Case(
        "unknown CENHISP",
        lambda: load_ppmf(ppmf(ppmf_row(CENHISP="3"))),
        "unknown code '3'",
        row=1,
        column="CENHISP",
    ),
    Case(
        "unknown RTYPE (a unit record among persons)",
        lambda: load_ppmf(ppmf(ppmf_row(RTYPE="2"))),
        "unknown code '2'",
        row=1,
        column="RTYPE",
    ),
    Case(
        "GQ person without a unit type",
        lambda: load_ppmf(ppmf(ppmf_row(RTYPE="5", GQTYPE_PL="0"))),
        "the person has no unit",
        row=1,
        column="GQTYPE_PL",
    ),
    Case(
        "household person with a GQ type",
        lambda: load_ppmf(ppmf(ppmf_row(GQTYPE_PL="5"))),
        "RTYPE and GQ type disagree",
        row=1,
        column="GQTYPE_PL",
    ),
    Case(
        "block outside its block group",
        lambda: load_ppmf(ppmf(ppmf_row(TABBLKGRPCE="2"))),
        "does not nest in block group 2",
        row=1,
        column="TABBLKGRPCE",
    ),
    Case(
        "malformed tract code",
        lambda: load_ppmf(ppmf(ppmf_row(TABTRACTCE="68680A"))),
        "'68680A' is not a Tract code",
        row=1,
        column="TABTRACTCE",
    ),
    Case(
        "neither GQTYPE_PL nor GQTYPE",
        lambda: load_ppmf(ppmf(PPMF_ROW, header=PPMF_HEADER.replace("GQTYPE_PL", "GQ"))),
        "missing column 'GQTYPE_PL' or 'GQTYPE'",
        row=0,
        column="GQTYPE_PL",
    ),
    Case(
        "non-integer age",
        lambda: load_ppmf(ppmf("01,105,686800,1,1000,3,000,forty,1,01", header=MDF_HEADER)),
        "'forty' is not a whole number",
        row=1,
        column="QAGE",
    ),
    Case(
        "age out of range",
        lambda: load_ppmf(ppmf("01,105,686800,1,1000,3,000,130,1,01", header=MDF_HEADER)),
        "age 130 is above 115",
        row=1,
        column="QAGE",
    ),
    Case(
        "unknown MDF GQTYPE",
        lambda: load_ppmf(ppmf("01,105,686800,1,1000,5,0A1,30,1,01", header=MDF_HEADER)),
        "unknown GQTYPE '0A1'",
        row=1,
        column="GQTYPE",
    ),
    # --- P.L. 94-171 ---
    Case(
        "segments passed in the wrong order",
        lambda: read_pl94171(*[pl_files()[i] for i in (0, 2, 1, 3)]),
        "this is not segment 1 (CIFSN '02')",
        row=1,
        column="CIFSN",
    ),
    Case(
        "segment record missing",
        lambda: read_pl94171(*pl_drop_line(2, 606)),
        "no record for LOGRECNO",
        column="LOGRECNO",
    ),
    Case(
        "geographic header with commas",
        lambda: read_pl94171(pl_files()[0].replace(b"|", b","), *pl_files()[1:]),
        "expected pipe-separated records (97 fields)",
        row=1,
    ),
    Case(
        "Hispanic total differs from P1 total",
        lambda: read_pl94171(*pl_edit(1, 606, 5 + 71, "999")),
        "differs from P0020001",
        row=606,
        column="P0010001",
    ),
    Case(
        "negative table cell",
        lambda: read_pl94171(*pl_edit(3, 40, 5, "-1")),
        "negative count -1",
        row=40,
        column="P0050001",
    ),
    Case(
        "duplicate LOGRECNO in the geographic header",
        lambda: read_pl94171(*pl_edit(0, 606, 7, "6727")),
        "LOGRECNO 6727 appears more than once",
        row=606,
        column="LOGRECNO",
    ),
    Case(
        "wide CSV with a block missing from its tract",
        lambda: read_pl94171_csv(_wide_without_a_populated_block()),
        "the blocks of Tract 44007000101 sum to 3,920 persons but its record says 3,970",
        row=3,
        column="P0010001",
    ),
    # --- block CSV and its mapping ---
    Case(
        "mapping is not JSON",
        lambda: load_block_csv(b"GEOID,kids\n440010301001000,1\n", b"{schema: ri2010}"),
        "not valid JSON",
    ),
    Case(
        "mapping names an unknown schema preset",
        lambda: load_block_csv(b"x\n1\n", {**ri_age_mapping(), "schema": "ri2020"}),
        "unknown schema preset 'ri2020'",
        column="schema",
    ),
    Case(
        "mapping names an unknown level",
        lambda: load_block_csv(
            b"x\n1\n",
            {**ri_age_mapping(), "cells": {"kids": {"AGE": "toddler"}, "adults": {"AGE": "adult"}}},
        ),
        "unknown level(s) AGE='toddler'",
        column="cells.kids",
    ),
    Case(
        "mapped column absent from the CSV",
        lambda: load_block_csv(b"GEOID,kids\n440010301001000,1\n", ri_age_mapping()),
        "missing column 'adults'",
        row=0,
        column="adults",
    ),
    Case(
        "full tract id outside its county",
        lambda: load_block_csv(
            b"s,c,t,g,b,n\n44,007,44009000100,1,1000,2\n",
            {
                "schema": {"attributes": [{"name": "ALL", "levels": ["all"]}]},
                "geography": {
                    "levels": {
                        "State": "s",
                        "County": "c",
                        "Tract": "t",
                        "Block_Group": "g",
                        "Block": "b",
                    }
                },
                "cells": {"n": {"ALL": "all"}},
            },
        ),
        "Tract 44009000100 does not nest in County 44007",
        row=1,
        column="t",
    ),
    Case(
        "block count with thousands separator",
        lambda: load_block_csv(b'GEOID,kids,adults\n440010301001000,"1,204",3\n', ri_age_mapping()),
        "'1,204' is not a whole number",
        row=1,
        column="kids",
    ),
]


def _wide_without_a_populated_block() -> bytes:
    lines = (PL / "ri_prototype_2018e2e_wide.csv").read_bytes().split(b"\n")
    header = lines[0].split(b",")
    pop = header.index(b"P0010001")
    sumlev = header.index(b"SUMLEV")
    for k, line in enumerate(lines[1:], start=1):
        fields = line.split(b",")
        if len(fields) == len(header) and fields[sumlev] == b"750" and int(fields[pop]) > 0:
            del lines[k]
            break
    return b"\n".join(lines)


def test_at_least_25_malformed_cases():
    assert len(CASES) >= 25


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_malformed_input_raises_located_typed_error(case: Case):
    with pytest.raises(DataValidationError) as caught:
        case.load()
    problems = caught.value.problems
    matching = [p for p in problems if case.message in p.message]
    assert matching, f"no problem mentions {case.message!r}: {[str(p) for p in problems]}"
    problem = matching[0]
    assert problem.file
    assert problem.row == case.row, str(problem)
    assert problem.column == case.column, str(problem)
    assert case.message in str(caught.value)


def test_many_bad_rows_are_capped_and_summarised():
    rows = [ri_row(GEOID=f"4400103010010{k:02d}", pop_white="x") for k in range(30)]
    with pytest.raises(DataValidationError) as caught:
        load_ri2010(ri(*rows))
    problems = caught.value.problems
    assert len(problems) == 11
    assert "… and 20 more row(s)" in problems[-1].message


def test_invalid_manifest_is_reported_by_field(tmp_path: Path):
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "sample.json").write_text(
        json.dumps({"name": "other", "kind": "census", "rows": "many"})
    )
    with pytest.raises(DataValidationError) as caught:
        list_samples(tmp_path)
    columns = {p.column for p in caught.value.problems}
    assert {"rows", "kind", "name", "files", "licence"} <= columns
