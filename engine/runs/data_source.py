"""Where a run's data come from: the typed ``data`` section of the run description.

:class:`DataSource` names the input — a shipped sample, a file or a folder — with how to read it
(``format``, ``mapping``, ``max_bytes``), the blocks kept (:class:`BlockFilter`), and what makes a
replay safe (docs/reliability.md "Replays"): ``inputs``, the SHA-256 of every file the run read, and
``sha256``, the content hash of a block histogram the app held. Both are checked when the run is
replayed, so a replay never reports "same seed, same numbers" on different data.

``upload`` marks data uploaded to the app: they exist only in the session that holds them, so no
other session and no command can read them again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.data.inputs import FORMATS
from engine.runs.typed import (
    FieldError,
    check_fields,
    choice,
    digests,
    flag,
    names,
    optional,
    record,
    record_from_json,
    record_to_json,
    sha256_hex,
    text,
    typed,
    whole,
)


@dataclass(frozen=True)
class BlockFilter:
    """Keep only the blocks inside ``units`` (geounit ids) of the geography level ``level``."""

    level: str = typed(text)
    units: tuple[str, ...] = typed(names)

    def __post_init__(self) -> None:
        check_fields(self)
        if not self.units:
            raise FieldError("units: name at least one geounit, e.g. County=44001")

    def __str__(self) -> str:
        return f"{self.level}={','.join(self.units)}"


@dataclass(frozen=True)
class DataSource:
    """The ``data`` of a run (every field but ``source`` optional; see the module docstring).

    ``source``: a sample name, a file or a folder. Paths are recorded as the face resolved them
    (absolute); a relative one in a file is read from that file's folder
    (:func:`engine.runs.inputs.resolve_paths`). ``format``: the TopDown input format when the
    file's header does not tell (``ri2010``, ``ppmf``, ``pl94171``, ``block_csv``). ``mapping``: the
    mapping JSON of a generic block CSV. ``max_bytes``: size limit per input file. ``filter``: the
    blocks kept. ``label``: how the app named the data. ``sha256``: content hash of the block
    histogram the app held (:func:`engine.runs.inputs.histogram_sha256`). ``upload``: the data were
    uploaded to the app. ``inputs``: ``{role/file: SHA-256}`` of every file read
    (:func:`engine.runs.inputs.hash_inputs`).
    """

    source: str = typed(text)
    format: str | None = typed(optional(choice(*FORMATS)), None)
    mapping: str | None = typed(optional(text), None)
    max_bytes: int | None = typed(optional(whole("max_bytes")), None)
    filter: BlockFilter | None = typed(optional(record(BlockFilter)), None)
    label: str | None = typed(optional(text), None)
    sha256: str | None = typed(optional(sha256_hex), None)
    upload: bool = typed(flag, False)
    inputs: Mapping[str, str] = typed(digests, factory=dict)

    def __post_init__(self) -> None:
        check_fields(self)

    @classmethod
    def from_json(cls, raw: Any, where: str = "data") -> DataSource:
        """The data source of a run description's ``data`` object (unknown keys refused)."""
        return record_from_json(cls, raw, where)

    def to_json(self) -> dict[str, Any]:
        """The ``data`` object: only the fields set (a missing key means "not given")."""
        return record_to_json(self, only_set=True)

    @property
    def name(self) -> str:
        """How the data are named to a user: the app's label, else the source with its filter."""
        if self.label:
            return self.label
        return self.source + (
            f" [{self.filter.level} {', '.join(self.filter.units)}]" if self.filter else ""
        )
