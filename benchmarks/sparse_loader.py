"""The sparse chunked loader of a generated population against the previous dense one (docs/data.md,
"Sparse block histograms").

For each population folder (written by ``phexplore generate population``), in a fresh subprocess
per load (so each peak is that load's own), ``--repeats`` times each, alternating:

* **sparse** — :func:`engine.data.generated.load_generated_population`: ``ppmf.csv`` read batch
  by batch into its non-zero (block, cell) counts (:func:`engine.data.ppmf.block_cell_counts`)
  summed into a CSR block histogram;
* **previous (dense)** — the loader before this change (main at 2b5abce), reproduced here: the
  whole ``ppmf.csv`` read by Arrow at once, then ``np.add.at`` into a dense
  ``(blocks, 2,016)`` int64 array.

It prints the median load seconds and peak resident memory (``ru_maxrss``, GiB) of each, and
checks both give the same histogram (SHA-256 of the dense bytes, hashed in row chunks). Usage::

    .venv/bin/python benchmarks/sparse_loader.py FOLDER [FOLDER ...] [--repeats 3] [--json]
    # a 10,000,000-person folder needs ~6 GB for the dense loader: hold the heavy lock
    flock /tmp/phexplore-heavy.lock .venv/bin/python benchmarks/sparse_loader.py /tmp/OH-1e7

Timings are wall-clock on whatever machine runs it; the docs quote medians.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

KINDS = ("sparse", "dense")


def _previous_dense_loader(folder: Path):
    """The generated-population loader of main at 2b5abce: whole-file read, dense histogram
    (its recode of codes to cells written out here, as it was)."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    from engine.data.generated import _block_frame, find_file
    from engine.data.histogram import BlockHistogram
    from engine.schema.attributes import REDISTRICTING_SCHEMA

    geo = ("TABBLKST", "TABBLKCOU", "TABTRACTCE", "TABBLK")
    codes_ = ("GQTYPE_PL", "VOTING_AGE", "CENHISP", "CENRACE")
    path = find_file(folder, "ppmf")
    table = pacsv.read_csv(
        path,
        convert_options=pacsv.ConvertOptions(
            include_columns=[*geo, *codes_],
            column_types={**{c: pa.string() for c in geo}, **{c: pa.int16() for c in codes_}},
        ),
    )
    block = pc.binary_join_element_wise(*(table.column(c) for c in geo), "")
    value = {c: table.column(c).to_numpy().astype(np.int64) for c in codes_}
    cell = np.ravel_multi_index(
        (value["GQTYPE_PL"], value["VOTING_AGE"] - 1, value["CENHISP"] - 1, value["CENRACE"] - 1),
        REDISTRICTING_SCHEMA.shape,
    )
    del table
    codes, uniques = pd.factorize(block.to_numpy())
    frame = _block_frame(folder)
    rows = frame.index.get_indexer(np.asarray(uniques, dtype=object))
    counts = np.zeros((len(frame.index), REDISTRICTING_SCHEMA.size), dtype=np.int64)
    np.add.at(counts, (rows[codes], cell), 1)
    return BlockHistogram(REDISTRICTING_SCHEMA, ("Block",), frame.geography, counts)


def one_load(folder: Path, kind: str) -> dict[str, object]:
    """Load ``folder`` with ``kind`` in this process: seconds, peak GiB, blocks, non-zero cells and
    the digest of the dense bytes."""
    from engine.data.generated import load_generated_population

    t0 = time.perf_counter()
    hist = load_generated_population(folder) if kind == "sparse" else _previous_dense_loader(folder)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    digest = hashlib.sha256()
    for chunk in hist.dense_row_chunks():
        digest.update(chunk.tobytes())
    return {
        "kind": kind,
        "seconds": seconds,
        "peak_gib": peak,
        "blocks": hist.n_blocks,
        "nonzero_cells": hist.nnz,
        "persons": hist.total,
        "digest": digest.hexdigest(),
    }


def compare(folder: Path, repeats: int) -> dict[str, object]:
    runs: dict[str, list[dict[str, object]]] = {k: [] for k in KINDS}
    for _ in range(repeats):
        for kind in KINDS:
            command = [sys.executable, __file__, "--one", kind, str(folder)]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            if done.returncode != 0:
                raise SystemExit(done.stderr)
            runs[kind].append(json.loads(done.stdout.strip().splitlines()[-1]))
    first = runs["sparse"][0]
    digests = {r["digest"] for rs in runs.values() for r in rs}
    return {
        "folder": str(folder),
        "persons": first["persons"],
        "blocks": first["blocks"],
        "nonzero_cells": first["nonzero_cells"],
        "dense_cells": int(first["blocks"]) * 2016,
        "same_histogram": len(digests) == 1,
        **{
            f"{kind}_{what}": statistics.median(float(r[key]) for r in runs[kind])
            for kind in KINDS
            for what, key in (("s", "seconds"), ("peak_gib", "peak_gib"))
        },
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", help="generated population folders")
    parser.add_argument("--repeats", type=int, default=3, help="loads of each kind (median)")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--one", choices=KINDS, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one_load(Path(args.folders[0]), args.one)))
        return 0
    rows = [compare(Path(f), args.repeats) for f in args.folders]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        "| persons | blocks | non-zero block cells | sparse load s | sparse peak GiB | "
        "previous dense load s | previous dense peak GiB | same histogram |"
    )
    print("|" + "---|" * 8)
    for r in rows:
        print(
            f"| {r['persons']:,} | {r['blocks']:,} | {r['nonzero_cells']:,} | {r['sparse_s']:.1f} "
            f"| {r['sparse_peak_gib']:.2f} | {r['dense_s']:.1f} | {r['dense_peak_gib']:.2f} | "
            f"{'yes' if r['same_histogram'] else 'NO'} |"
        )
    print(f"\nmedians of {args.repeats} loads each, alternating, one fresh process per load")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
