"""``phexplore generate households|population``: synthetic input data for the engines.

``households``: a synthetic PHSafe CEF extract (persons/units/geo). ``population``: one population
for both engines (:mod:`engine.data.population`: PPMF + CEF extract + block frame).

Wraps :func:`engine.data.synthetic.generate_households` (ACS 2019-calibrated, deterministic for a
seed) and :func:`engine.data.cef_writer.write_cef_extract` (official PHSafe CEF-extract layout). See
``docs/synthetic.md``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from engine.core.errors import ValidationError
from engine.core.numbers import RANGES, option_type
from phexplore.cli._options import add_seed_option
from phexplore.cli._output import (
    add_format_option,
    add_output_folder_options,
    end_progress_line,
    open_output,
    print_rows,
    progress_line,
)

_households_persons = option_type("whole", "persons", "--persons")
_population_persons = option_type("whole", "population_persons", "--persons")
_chunk_persons = option_type("whole", "chunk_persons", "--chunk-persons")
GENERATE_OUT_HELP = "output folder (written atomically, with manifest)"


def register(subparsers: Any) -> None:
    """Add ``generate`` with its ``households`` sub-subcommand."""
    parser = subparsers.add_parser(
        "generate",
        help="generate synthetic input data (households: a PHSafe CEF extract; population: both)",
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
        type=_households_persons,
        required=True,
        help=f"number of persons, {RANGES['persons']}",
    )
    add_seed_option(households, "random seed, 0 – 2^63-1 (same seed → same files)", required=True)
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
    add_output_folder_options(households, GENERATE_OUT_HELP, type=Path)
    add_format_option(households)
    households.set_defaults(func=run_households)
    population = kinds.add_parser(
        "population",
        help="one synthetic population for both engines (PPMF + CEF extract + block frame)",
        description=(
            "Generate a synthetic population with realistic geography (block sizes, empty blocks, "
            "tracts of ~4,000 persons, counties per state, clustered race/ethnicity) and write, "
            "from the same persons, ppmf.csv (TopDown), persons.csv/units.csv/geo.csv (PHSafe) "
            "and blocks.csv (housing units and GQ facilities per block). Large populations are "
            "generated in chunks with bounded memory."
        ),
    )
    population.add_argument(
        "--persons",
        type=_population_persons,
        required=True,
        help=f"number of persons, {RANGES['population_persons']}",
    )
    add_seed_option(population, "random seed, ≥ 0 (same seed → same files)", required=True)
    population.add_argument(
        "--states",
        nargs="+",
        metavar="STATE",
        help="states (postal codes or FIPS, e.g. RI 44; PR allowed); default: 50 states + DC",
    )
    population.add_argument(
        "--chunk-persons",
        type=_chunk_persons,
        default=None,
        help=f"persons generated at once, {RANGES['chunk_persons']} (default 2,000,000): bounds "
        "memory",
    )
    population.add_argument("--compress", action="store_true", help="write .csv.gz files")
    add_output_folder_options(population, GENERATE_OUT_HELP, type=Path)
    add_format_option(population)
    population.set_defaults(func=run_population)
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


def run_population(args: argparse.Namespace) -> int:
    """Generate the population folder (atomically, with manifest) and print a summary."""
    from engine.data.population import DEFAULT_CHUNK_PERSONS, generate_population

    progress = progress_line(args.format == "table", width=50)

    with open_output(args, "generate population", {}, seed=args.seed) as staging:
        staging.settings.update({"persons": args.persons, "states": args.states})
        summary = generate_population(
            args.persons,
            seed=args.seed,
            out_dir=staging.path,
            states=args.states,
            compress=args.compress,
            chunk_persons=args.chunk_persons or DEFAULT_CHUNK_PERSONS,
            progress=progress,
            atomic=False,
        )
    end_progress_line(args.format == "table")
    rows = [{"file": str(staging.final / name)} for name in summary.files]
    info = {
        k: v
        for k, v in vars(summary).items()
        if k not in ("files", "kind") and not isinstance(v, list)
    }
    info["states"] = " ".join(summary.states)
    print_rows(rows, info, args.format)
    return 0
