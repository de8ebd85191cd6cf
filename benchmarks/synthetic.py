"""Speed of the synthetic household generator (:mod:`engine.data.synthetic`, docs/synthetic.md), as a table.

For each size, times ``generate_households(n, seed=…)`` (best of ``--repeats`` runs) and, with
``--write``, ``write_cef_extract`` to a temporary directory; prints seconds and persons per second,
and the person-weighted gap to the ACS targets (``--acs`` = the NIST ACS excerpt, default the copy in
``tests/fixtures``). The acceptance bound is < 60 s at 10⁶ persons on a 2-core machine. Usage::

    python benchmarks/synthetic.py [--sizes 10000 100000 1000000] [--repeats 3] [--write] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from engine.data.cef_writer import write_cef_extract
from engine.data.synthetic import generate_households
from engine.data.synthetic_calibration import read_acs_records
from engine.data.synthetic_validation import (
    acs_person_profile,
    compare_profiles,
    extract_person_profile,
)

DEFAULT_ACS = (
    Path(__file__).resolve().parents[1] / "tests/fixtures/nist_acs2019/national2019_columns.csv"
)


def time_size(n: int, seed: int, repeats: int, write: bool) -> dict[str, float]:
    """Best-of-``repeats`` generation (and optionally write) time for ``n`` persons."""
    best_generate = float("inf")
    best_write = float("inf")
    extract = None
    for _ in range(repeats):
        start = time.perf_counter()
        extract = generate_households(n, seed=seed)
        best_generate = min(best_generate, time.perf_counter() - start)
        if write:
            with tempfile.TemporaryDirectory() as tmp:
                start = time.perf_counter()
                write_cef_extract(extract, tmp)
                best_write = min(best_write, time.perf_counter() - start)
    assert extract is not None
    row: dict[str, float] = {
        "persons": n,
        "units": extract.n_units,
        "generate_s": round(best_generate, 3),
        "persons_per_s": round(n / best_generate),
    }
    if write:
        row["write_csv_s"] = round(best_write, 3)
    return row


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--write", action="store_true", help="also time writing the CSV files")
    parser.add_argument("--acs", type=Path, default=DEFAULT_ACS, help="NIST ACS excerpt CSV")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    args = parser.parse_args(argv)

    rows = [time_size(n, args.seed, args.repeats, args.write) for n in args.sizes]
    largest = generate_households(max(args.sizes), seed=args.seed)
    comparison = compare_profiles(
        extract_person_profile(largest), acs_person_profile(read_acs_records(args.acs))
    )
    if args.json:
        print(json.dumps({"timings": rows, "comparison": comparison.to_dict("records")}, indent=2))
        return 0
    with pd.option_context("display.width", 200, "display.max_rows", None):
        print(pd.DataFrame(rows).to_string(index=False))
        print(f"\nGenerated ({max(args.sizes):,} persons) vs ACS 2019 national excerpt (PWGTP):")
        print(comparison.round(2).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
