"""``phexplore generate households``: write a synthetic PHSafe CEF extract (persons/units/geo).

Wraps :func:`engine.data.synthetic.generate_households` (ACS 2019-calibrated, deterministic for a
seed) and :func:`engine.data.cef_writer.write_cef_extract` (official PHSafe CEF-extract layout). See
``docs/synthetic.md``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from phexplore.cli._output import add_format_option, add_overwrite_option, open_output, print_rows
from phexplore.errors import ValidationError
from phexplore.parsing import option_type

_whole_number = option_type("whole", "persons", "--persons")


def register(subparsers: Any) -> None:
    """Add ``generate`` with its ``households`` sub-subcommand."""
    parser = subparsers.add_parser(
        "generate",
        help="generate synthetic input data (households: a PHSafe CEF extract)",
        description="Generate synthetic input data for the engines.",
    )
    kinds = parser.add_subparsers(dest="kind", metavar="KIND")
    households = kinds.add_parser(
        "households",
        help="synthetic households + GQ persons in the official PHSafe CEF-extract layout",
        description=(
            "Generate a synthetic US population of households and group-quarters persons, "
            "calibrated on the NIST ACS 2019 excerpts and spread over the states by 2010 "
            "populations, and write persons.csv, units.csv and geo.csv (official PHSafe layout)."
        ),
    )
    households.add_argument(
        "--persons",
        type=_whole_number,
        required=True,
        help="number of persons (1,000 – 50,000,000)",
    )
    households.add_argument(
        "--seed",
        type=option_type("whole", "seed", "--seed"),
        required=True,
        help="random seed, 0 – 2^63-1 (same seed → same files)",
    )
    households.add_argument(
        "--states",
        nargs="+",
        metavar="STATE",
        help="restrict to these states (postal codes or FIPS, e.g. RI 44); default: 50 states + DC",
    )
    households.add_argument("--include-pr", action="store_true", help="also generate Puerto Rico")
    households.add_argument(
        "--vacancy-rate",
        type=float,
        default=None,
        help="share of housing units that are vacant (default: 0.114, the 2010 Census rate)",
    )
    households.add_argument("--compress", action="store_true", help="write .csv.gz files")
    households.add_argument(
        "--out", type=Path, required=True, help="output folder (written atomically, with manifest)"
    )
    add_overwrite_option(households)
    add_format_option(households)
    households.set_defaults(func=run_households)
    parser.set_defaults(func=lambda args: _no_kind(parser))


def _no_kind(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def run_households(args: argparse.Namespace) -> int:
    """Generate the extract, write it, and print a summary of the files."""
    from engine.data.cef_writer import write_cef_extract
    from engine.data.synthetic import DEFAULT_VACANCY_RATE, generate_households

    if args.vacancy_rate is not None and not 0.0 <= args.vacancy_rate < 0.9:
        raise ValidationError(f"--vacancy-rate must be in [0, 0.9), got {args.vacancy_rate}")
    with open_output(args, "generate households", {}, seed=args.seed) as staging:
        staging.settings.update(
            {"persons": args.persons, "states": args.states, "include_pr": args.include_pr}
        )
        started = time.perf_counter()
        extract = generate_households(
            args.persons,
            seed=args.seed,
            states=args.states,
            include_pr=args.include_pr,
            vacancy_rate=DEFAULT_VACANCY_RATE if args.vacancy_rate is None else args.vacancy_rate,
        )
        staged = write_cef_extract(extract, staging.path, compress=args.compress)
    paths = {k: staging.final / p.relative_to(staging.path) for k, p in staged.items()}
    elapsed = time.perf_counter() - started
    frames = {"persons": extract.persons, "units": extract.units, "geo": extract.geo}
    rows = [
        {"table": name, "file": str(path), "rows": len(frames[name])}
        for name, path in paths.items()
    ]
    summary = {
        "persons": extract.n_persons,
        "housing_units": int((extract.units["RTYPE"] == "2").sum()),
        "gq_facilities": int((extract.units["RTYPE"] == "4").sum()),
        "states": int(extract.geo["TABBLKST"].nunique()),
        "seed": args.seed,
        "seconds": round(elapsed, 2),
    }
    print_rows(rows, summary, args.format)
    return 0
