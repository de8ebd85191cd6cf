"""Write a :class:`~engine.data.cef_types.CefExtract` in the official PHSafe CEF-extract layout.

Layout (PHSafe 3.0.0 ``e2e_test1/{persons,units,geo}.csv`` and ``phsafe/resources/schema``): one
comma-delimited file per table with a header row, the columns of
:data:`~engine.data.cef_types.PERSON_COLUMNS` / ``UNIT_COLUMNS`` / ``GEO_COLUMNS`` in that order, codes
written verbatim (zero-padded strings such as ``CENRACE`` ``01``), no quoting and ``\\n`` line ends.
With ``compress=True`` the files are gzip-compressed (``persons.csv.gz`` …) with a zero timestamp,
so the same extract always gives the same bytes.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from engine.core.errors import ValidationError
from engine.data.cef_types import (
    CEF_FILE_NAMES,
    GEO_COLUMNS,
    PERSON_COLUMNS,
    UNIT_COLUMNS,
    CefExtract,
)

_COLUMNS = {"persons": PERSON_COLUMNS, "units": UNIT_COLUMNS, "geo": GEO_COLUMNS}


def _check_table(name: str, frame: pd.DataFrame) -> None:
    expected = list(_COLUMNS[name])
    if list(frame.columns) != expected:
        raise ValidationError(
            f"CEF {name} table has columns {list(frame.columns)}; expected exactly {expected}"
        )
    for column in expected:
        values = frame[column]
        if values.isna().any():
            raise ValidationError(f"CEF {name} table: column {column!r} has missing values")
        if not (pd.api.types.is_string_dtype(values) or pd.api.types.is_object_dtype(values)):
            raise ValidationError(
                f"CEF {name} table: column {column!r} must hold code strings exactly as written "
                f"(e.g. '01'), got dtype {values.dtype}"
            )
        if values.astype(str).str.contains(r"[,\n\r\"]", regex=True).any():
            raise ValidationError(
                f"CEF {name} table: column {column!r} has values containing a comma, quote or newline"
            )


def write_cef_extract(
    extract: CefExtract, out_dir: Path | str, *, compress: bool = False
) -> dict[str, Path]:
    """Write ``persons.csv``, ``units.csv`` and ``geo.csv`` (``.gz`` if ``compress``) to ``out_dir``.

    Returns the written paths keyed by table name. Raises :class:`ValidationError` if a table does not
    have exactly the official columns or holds values that cannot be written verbatim.
    """
    tables = {"persons": extract.persons, "units": extract.units, "geo": extract.geo}
    for name, frame in tables.items():
        _check_table(name, frame)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValidationError(f"output path {out} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    written: dict[str, Path] = {}
    for name, frame in tables.items():
        path = out / (CEF_FILE_NAMES[name] + (".gz" if compress else ""))
        compression: dict[str, object] | None = (
            {"method": "gzip", "mtime": 0, "compresslevel": 9} if compress else None
        )
        frame.to_csv(path, index=False, lineterminator="\n", compression=compression)
        written[name] = path
    return written
