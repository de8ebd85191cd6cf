"""A synthetic population at any scale, one set of persons for both engines (docs/synthetic.md;
docs/science.md §6, §8).

:func:`generate_population` writes, from the same persons, into one folder:

* ``ppmf.csv`` — PPMF person records (the layout :mod:`engine.data.ppmf` reads for TopDown);
* ``persons.csv``, ``units.csv``, ``geo.csv`` — the PHSafe CEF extract (:mod:`engine.data.cef`);
* ``blocks.csv`` — the block frame: every block (empty ones too) with its housing units, occupied
  units and GQ facilities by type, which TopDown holds as structural zeros and bounds
  (:mod:`engine.topdown.constraints`);
* ``places.csv`` — every block's incorporated-place-like entity (``PLACEFP``, ``99999`` for none;
  also in ``geo.csv``), the targets of production's optimized spine (:mod:`engine.data.places`);
* ``population.json`` — what was generated, written last (readers refuse a folder without it).

Households, GQ persons, ages and race/ethnicity come from the ACS-calibrated household generator
(:mod:`engine.data.synthetic_households`); realistic geography is added (method in
``docs/synthetic.md``) by three modules, one job each:

* :mod:`engine.data.population_geography` — persons per state ∝ 2010 state populations, the
  chunks (at most ``chunk_persons`` persons, whole counties, each from its own seed ``(seed, state,
  chunk)``, so memory is bounded and the US can be written chunk by chunk), and the cut of a chunk's
  units into blocks (RI 2010 block sizes), block groups, tracts (log-normal sizes) and counties,
  with empty blocks added;
* :mod:`engine.data.population_chunk` — one chunk's persons placed in segregated neighbourhoods,
  its units, GQ facilities, vacant-only and structural-zero blocks, places, and the rows of every
  file;
* this module — the writer: the chunks in order, each file written chunk by chunk (gzip if asked)
  into a staging folder moved into place complete, ``population.json`` last.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from engine.core.errors import ValidationError
from engine.core.files import read_input_bytes
from engine.core.manifest import MANIFEST_NAME, read_output_folder
from engine.core.numbers import RANGES
from engine.core.strict_json import as_mapping, loads_strict_json
from engine.data.population_chunk import all_two_or_more_races, generate_chunk
from engine.data.population_geography import (
    EMPTY_BLOCK_SHARE,
    RI_EMPTY_BLOCK_SHARE,
    load_block_sizes,
    plan_chunks,
)
from engine.data.synthetic import DEFAULT_VACANCY_RATE
from engine.data.synthetic_calibration import load_calibration

MIN_PERSONS = int(RANGES["population_persons"].low or 0)
MAX_PERSONS = int(RANGES["population_persons"].high or 0)
"""Valid population sizes (``engine.core.numbers.RANGES["population_persons"]``: 1,000 – 400M)."""
MIN_CHUNK_PERSONS = int(RANGES["chunk_persons"].low or 0)
MAX_CHUNK_PERSONS = int(RANGES["chunk_persons"].high or 0)
"""Valid ``chunk_persons`` (``RANGES["chunk_persons"]``: 10,000 – 50,000,000)."""
DEFAULT_CHUNK_PERSONS = 2_000_000
FILES = ("ppmf.csv", "persons.csv", "units.csv", "geo.csv", "blocks.csv", "places.csv")
MANIFEST = "population.json"
KIND = "phexplore-generated-population"
Progress = Callable[[str, float], None]


@dataclass(frozen=True)
class PopulationSummary:
    """What :func:`generate_population` wrote (also the body of ``population.json``)."""

    kind: str
    persons: int
    seed: int
    states: list[str]
    housing_units: int
    occupied_units: int
    gq_facilities: int
    gq_persons: int
    blocks: int
    empty_blocks: int
    structural_zero_blocks: int
    block_groups: int
    tracts: int
    counties: int
    chunks: int
    compressed: bool
    files: list[str]
    seconds: float
    places: int = 0
    place_persons: int = 0


# ------------------------------------------------------------------------------ the writer
class _Sink:
    """One CSV file written chunk by chunk (gzip-compressed if asked), header once."""

    def __init__(self, path: Path, compress: bool) -> None:
        self.path = path
        raw = open(path, "wb")  # noqa: SIM115 - closed in close()
        self.handle = (
            gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=3, mtime=0) if compress else raw
        )
        self.raw = raw
        self.writer: pacsv.CSVWriter | None = None

    def write(self, table: pa.Table) -> None:
        if self.writer is None:
            self.handle.write((",".join(table.column_names) + "\n").encode())
            options = pacsv.WriteOptions(include_header=False, quoting_style="none")
            self.writer = pacsv.CSVWriter(self.handle, table.schema, write_options=options)
        self.writer.write_table(table)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.handle is not self.raw:
            self.handle.close()
        self.raw.close()


def generate_population(
    n_persons: int,
    *,
    seed: int,
    out_dir: str | os.PathLike[str],
    states: Sequence[str] | None = None,
    compress: bool = False,
    chunk_persons: int = DEFAULT_CHUNK_PERSONS,
    vacancy_rate: float = DEFAULT_VACANCY_RATE,
    progress: Progress | None = None,
    atomic: bool = True,
) -> PopulationSummary:
    """Write the population's files into ``out_dir`` (module docstring); deterministic in ``seed``.

    With ``atomic`` (default) the files are written into a temporary folder beside ``out_dir`` and
    moved into place only when complete; ``atomic=False`` writes straight into ``out_dir`` (the
    CLI's staging folder of :mod:`engine.core.output_folder`, which does the same). Either way
    ``population.json`` is written last.
    """
    if isinstance(n_persons, bool) or not isinstance(n_persons, int | np.integer):
        raise ValidationError(f"persons must be a whole number, got {n_persons!r}")
    if not MIN_PERSONS <= n_persons <= MAX_PERSONS:
        raise ValidationError(
            f"persons must be between {MIN_PERSONS:,} and {MAX_PERSONS:,}; got {n_persons:,}"
        )
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise ValidationError(f"seed must be a non-negative whole number, got {seed!r}")
    if not MIN_CHUNK_PERSONS <= chunk_persons <= MAX_CHUNK_PERSONS:
        raise ValidationError(
            f"chunk_persons must be between {MIN_CHUNK_PERSONS:,} and {MAX_CHUNK_PERSONS:,}"
        )
    report = progress or (lambda message, fraction: None)
    started = time.perf_counter()
    out = Path(out_dir)
    if out.exists() and any(out.iterdir()):
        raise ValidationError(f"{out} exists and is not empty; choose a new folder")
    plan = plan_chunks(int(n_persons), states, chunk_persons)
    cal = load_calibration()
    two = all_two_or_more_races()
    block_sizes = load_block_sizes()
    tmp = out.parent / f".{out.name}.partial-{os.getpid()}" if atomic else out
    if atomic and tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True, exist_ok=True)
    suffix = ".csv.gz" if compress else ".csv"
    names = [f.replace(".csv", suffix) for f in FILES]
    sinks = {f: _Sink(tmp / n, compress) for f, n in zip(FILES, names, strict=True)}
    totals: dict[str, int] = {}
    mafid = 100_000_001
    done = 0
    places_before: dict[str, int] = {}  # places written so far per state: PLACEFP offsets
    try:
        for postal, fips, region, division, n, k, offset, n_counties in plan:
            report(f"Generating {postal} ({n:,} persons)", done / n_persons)
            empty_share = RI_EMPTY_BLOCK_SHARE if postal == "RI" else EMPTY_BLOCK_SHARE
            chunk = generate_chunk(
                n,
                fips,
                region,
                division,
                offset,
                n_counties,
                mafid,
                empty_share,
                int(seed),
                k,
                cal,
                two,
                block_sizes,
                vacancy_rate,
                place_offset=places_before.get(fips, 0),
            )
            places_before[fips] = places_before.get(fips, 0) + chunk.counts["places"]
            mafid += chunk.counts["units"]
            if mafid > 999_999_999:
                raise ValidationError("too many units for nine-digit MAFIDs")
            sinks["ppmf.csv"].write(chunk.ppmf)
            sinks["persons.csv"].write(chunk.persons)
            sinks["units.csv"].write(chunk.units)
            sinks["geo.csv"].write(chunk.geo)
            sinks["blocks.csv"].write(chunk.blocks)
            sinks["places.csv"].write(chunk.places)
            for key, value in chunk.counts.items():
                totals[key] = totals.get(key, 0) + value
            done += n
            del chunk
    finally:
        for sink in sinks.values():
            sink.close()
    summary = PopulationSummary(
        kind=KIND,
        persons=totals["persons"],
        seed=int(seed),
        states=sorted({p[0] for p in plan}),
        housing_units=totals["housing_units"],
        occupied_units=totals["occupied_units"],
        gq_facilities=totals["gq_facilities"],
        gq_persons=totals["gq_persons"],
        blocks=totals["blocks"],
        empty_blocks=totals["empty_blocks"],
        structural_zero_blocks=totals["structural_zero_blocks"],
        block_groups=totals["block_groups"],
        tracts=totals["tracts"],
        counties=totals["counties"],
        chunks=len(plan),
        compressed=bool(compress),
        files=names,
        seconds=round(time.perf_counter() - started, 3),
        places=totals["places"],
        place_persons=totals["place_persons"],
    )
    (tmp / MANIFEST).write_text(json.dumps(asdict(summary), indent=2) + "\n", encoding="utf-8")
    if atomic:
        if out.exists():
            out.rmdir()
        out.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, out)
    report("Done", 1.0)
    return summary


def read_manifest(directory: str | os.PathLike[str]) -> dict[str, object]:
    """The ``population.json`` of a generated population folder; refuses a folder without one."""
    path = Path(directory) / MANIFEST
    if not path.is_file():
        raise ValidationError(
            f"{directory} has no {MANIFEST}: not a complete generated population (the generator "
            "writes the manifest last); generate it again"
        )

    if (Path(directory) / MANIFEST_NAME).exists():
        read_output_folder(directory)  # written by the CLI: complete and unaltered, or refused
    data = as_mapping(
        loads_strict_json(read_input_bytes(path, label=str(path)), label=str(path)),
        where=str(path),
    )
    if data.get("kind") != KIND:
        raise ValidationError(f"{path} is not a generated-population manifest")
    return data
