"""``phexplore experiment``: run an engine over budgets × seeds and write tidy result tables.

``--engine phsafe`` runs PHSafe on a CEF extract (default the ``phsafe_synthetic_us`` sample) with
each budget as the total unbounded ρ; it writes the same tables without the SRS and Blau ones.

Example: ``phexplore experiment --engine topdown --data ri2010 --rho 0.1,1,10 --seeds 3 --out DIR``
runs TopDown at three ρ values with seeds 0, 1, 2, adds Petti & Flaxman's simple-random-sampling
baseline, and writes to ``DIR``: ``runs.csv`` (MAE, median AE, EPL with bootstrap interval and
number of residuals per ρ × seed × geolevel × query), ``summary.csv`` (across seeds), ``srs.csv`` and
``srs_summary.csv``, ``blau_bias.csv`` and ``blau_summary.csv`` (TDA Table 13), ``homogeneity_bias.csv``
(PF Fig. 3), ``error_quantiles.csv``, ``moe_coverage.csv``, ``runtime.csv``, ``tradeoff.csv`` (PF
Fig. 2 axes) and ``experiment.json`` (``.parquet`` instead of ``.csv`` with ``--output-format
parquet``, or with ``auto`` when a table has more than 1,000,000 rows). The printed summary shows the Blau-quintile bias of every
geolevel and the trade-off table. Metrics: :mod:`engine.metrics.experiments`.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from engine.core.errors import ValidationError
from engine.core.numbers import RANGES, option_type, parse_real, parse_whole
from engine.runs.output_options import AUTO_CSV_MAX_ROWS, FORMATS
from engine.schema.ri_fold import NOTE as FOLDED_NOTE
from phexplore.cli._backend import add_backend_arguments, backend_of
from phexplore.cli._epl_options import add_epl_arguments, epl_settings_from_args
from phexplore.cli._options import add_max_bytes_option, add_workers_option
from phexplore.cli._output import add_output_folder_options, dumps_json, input_location, open_output


def _float_list(text: str, option: str = "--rho", range_name: str | None = "rho") -> list[float]:
    """Comma-separated finite numbers, each checked against ``RANGES[range_name]``."""
    from engine.core.errors import ValidationError as _VE

    parts = [v.strip() for v in text.split(",") if v.strip()]
    if not parts:
        raise argparse.ArgumentTypeError("give at least one number")
    if len(parts) > 1000:
        raise argparse.ArgumentTypeError(f"at most 1,000 values; got {len(parts):,}")
    try:
        return [parse_real(v, where=option, range_name=range_name) for v in parts]
    except _VE as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{option}: ")) from None


def parse_seeds(text: str) -> list[int]:
    """``"3"`` → seeds 0, 1, 2; ``"4,9"`` → seeds 4 and 9."""
    try:
        if "," in text:
            seeds = [
                parse_whole(v, where="--seeds", range_name="seed")
                for v in text.split(",")
                if v.strip()
            ]
        else:
            count = parse_whole(text, where="--seeds", range_name="seeds")
            seeds = list(range(count))
    except ValidationError as exc:
        raise argparse.ArgumentTypeError(
            f"--seeds takes a count (3 → seeds 0,1,2; 1 – 10,000) or a comma-separated list of "
            f"seeds ≥ 0; {str(exc).removeprefix('--seeds: ')}"
        ) from None
    if not seeds:
        raise argparse.ArgumentTypeError(
            f"--seeds needs at least one non-negative seed; got {text!r}"
        )
    return seeds


def register(subparsers: Any) -> None:
    """Add the ``experiment`` subcommand."""
    parser = subparsers.add_parser(
        "experiment",
        help="run an engine over a grid of budgets × seeds and write tidy metrics tables",
        description=(
            "Run an engine at several privacy budgets and seeds on a shipped sample, with the "
            "simple-random-sampling baseline of Petti & Flaxman (2020), and write MAE, median "
            "error, EPL (with intervals), Blau-quintile bias, MOE coverage and trade-off tables."
        ),
    )
    parser.add_argument(
        "--engine", default="topdown", choices=("topdown", "phsafe"), help="engine to run"
    )
    parser.add_argument(
        "--data",
        default=None,
        help="shipped sample (default ri2010 for topdown, phsafe_synthetic_us for phsafe) or, for "
        "phsafe, a CEF-extract directory",
    )
    parser.add_argument(
        "--within",
        default=None,
        metavar="LEVEL:ID[,ID…]",
        help="topdown: restrict the data to some geounits for a quick run, e.g. County:44001",
    )
    # Let "--rho -1,2" reach the positivity check instead of being read as an unknown option.
    parser._negative_number_matcher = re.compile(r"^-\d*\.?\d+([eE][-+]?\d+)?(,.*)?$")
    parser.add_argument(
        "--rho",
        default=None,
        help="comma-separated budgets (default 0.1,1,10). TopDown: the PERSONS run's ρ (ε for a "
        "pure-DP preset) — the preset's units run is not run, so this is not a total to split "
        "(topdown-2021-04's 1.095 is persons 1.05 + units 0.045); PHSafe: the total unbounded ρ",
    )
    parser.add_argument(
        "--rho-persons",
        default=None,
        metavar="RHO[,RHO…]",
        help="topdown: the persons run's budgets, the same as --rho, named plainly",
    )
    parser.add_argument(
        "--seeds",
        type=parse_seeds,
        default=[0, 1, 2],
        help="number of seeds (3 → 0,1,2) or a comma-separated list (default 3)",
    )
    parser.add_argument(
        "--preset",
        default=None,
        help="topdown: allocation preset whose shares are rescaled to each budget (default "
        "ri2010-production-like; ri2010-e2e-1940-like = PF's pure-DP setting); phsafe: preset "
        "(phsafe-2020, phsafe-2020-pr) or config.json path (default: the data's config.json)",
    )
    parser.add_argument(
        "--srs",
        default="0.05,0.1,0.25,0.5,0.75,0.9,0.95",
        help="topdown: sampling fractions of the SRS baseline, or 'none' (default 0.05,…,0.95)",
    )
    parser.add_argument(
        "--n-boot",
        type=option_type("whole", "n_boot", "--n-boot"),
        default=100,
        help="bootstrap resamples per EPL interval, 0 – 100,000 (default 100)",
    )
    add_workers_option(parser, "engine worker processes, 1 – 256")
    add_backend_arguments(parser)
    parser.add_argument(
        "--tradeoff",
        default=None,
        help="geolevel:query of the printed and written MAE–EPL trade-off (default: the data's "
        "schema's — Tract:RACEETH on the RI schema, Tract:TOTAL on the 2,016-cell production "
        "schema, at the coarsest level with at least 30 geounits when Tract has fewer (Perry "
        "County: Block); state_*:PH1_num for phsafe)",
    )
    add_output_folder_options(parser)
    add_max_bytes_option(parser)
    parser.add_argument(
        "--format", choices=("table", "json"), default="table", help="printed summary format"
    )
    parser.add_argument(
        "--output-format",
        choices=FORMATS,
        default="auto",
        help="file format of the result tables: csv, parquet, or auto (default) = CSV unless a "
        f"table has more than {AUTO_CSV_MAX_ROWS:,} rows, then Parquet for every table "
        "(experiment.json lists the files)",
    )
    add_epl_arguments(parser)
    parser.set_defaults(func=run)


def _srs_fractions(text: str) -> list[float] | None:
    from engine.metrics.experiments import check_srs_fractions

    if text.strip().lower() == "none":
        return None
    try:
        values = _float_list(text, "--srs", None)
    except argparse.ArgumentTypeError as exc:
        raise ValidationError(f"--srs: {exc}") from None
    bad = [v for v in values if not 0.0 < v <= 1.0]
    if bad:
        raise ValidationError(f"--srs: sampling fractions must be in (0, 1]: {bad[0]:g}")
    return list(check_srs_fractions(values))


def parse_rhos(text: str) -> list[float]:
    """``"0.1,1,10"`` → [0.1, 1.0, 10.0]; every value finite and positive."""
    for part in text.split(","):
        if part.strip():
            try:
                value = parse_real(part.strip(), where="--rho")
            except ValidationError:
                break  # reported below with the list's message
            if value <= 0:
                raise ValidationError(f"--rho: ρ values must be positive: {value:g}")
    try:
        return _float_list(text)
    except argparse.ArgumentTypeError as exc:
        raise ValidationError(f"--rho: {exc}") from None


DEFAULT_DATA = {"topdown": "ri2010", "phsafe": "phsafe_synthetic_us"}


DEFAULT_RHOS = "0.1,1,10"


def budgets_of(args: argparse.Namespace) -> str:
    """The budgets given by ``--rho`` or ``--rho-persons`` (TopDown only), default 0.1,1,10."""
    persons = getattr(args, "rho_persons", None)
    if persons is not None:
        if args.rho is not None:
            raise ValidationError("give --rho or --rho-persons, not both (they are the same)")
        if args.engine != "topdown":
            raise ValidationError("--rho-persons is for --engine topdown; PHSafe takes --rho")
        return str(persons)
    if args.rho is None:
        return DEFAULT_RHOS
    return args.rho if isinstance(args.rho, str) else ",".join(map(str, args.rho))


def run(args: argparse.Namespace) -> int:
    """Check every option and --out before any work, then run and write atomically."""
    rhos = parse_rhos(budgets_of(args))
    if len(set(args.seeds)) != len(args.seeds):
        raise ValidationError(f"--seeds must be distinct; got {args.seeds}")
    RANGES["workers"].check(args.workers, "--workers")
    backend_of(args)  # a bad backend choice fails before any work
    tradeoff: tuple[str, str] | None = None  # default: the data's schema's (run_experiment)
    if args.tradeoff:
        level, sep, query = args.tradeoff.partition(":")
        if not sep or not level or not query:
            raise ValidationError(
                f"--tradeoff takes GEOLEVEL:QUERY such as Tract:RACEETH; got {args.tradeoff!r}"
            )
        tradeoff = (level, query)
    RANGES["n_boot"].check(args.n_boot, "--n-boot")
    epl_settings_from_args(args)  # fail before any output or engine work
    data_label = args.data or DEFAULT_DATA[args.engine]
    srs = _srs_fractions(args.srs) if args.engine == "topdown" else None
    preset_path = args.preset if args.preset and Path(args.preset).exists() else None
    inputs = {"data": input_location(data_label), "preset": preset_path or args.preset}
    with open_output(args, "experiment", inputs, seed=min(args.seeds)) as staging:
        staging.settings.update(
            {"engine": args.engine, "rho": rhos, "seeds": list(args.seeds), "within": args.within}
        )
        return _run(args, staging, rhos, data_label, srs, tradeoff)


def _run(
    args: argparse.Namespace,
    staging: Any,
    rhos: list[float],
    data_label: str,
    srs: list[float] | None,
    chosen: tuple[str, str] | None,
) -> int:
    from engine.runs.control import RunControl
    from engine.runs.experiments import run_experiment, write_experiment

    out = staging.path
    epl_settings = epl_settings_from_args(args)

    def progress(message: str, fraction: float) -> None:
        print(f"[{100 * fraction:5.1f}%] {message}", file=sys.stderr, flush=True)

    data: Any = data_label
    preset = args.preset
    if Path(data_label).exists() and not args.within:  # the user's own file(s): size-checked
        from engine.data.sources import DEFAULT_MAX_BYTES

        limit = args.max_bytes or DEFAULT_MAX_BYTES
        if args.engine == "topdown":
            from engine.data.inputs import load_topdown_input

            data = load_topdown_input(data_label, max_bytes=limit)
        else:
            from engine.phsafe.inputs import load_inputs

            data, _config = load_inputs(data_label, preset, max_bytes=limit)
            preset = preset or str(Path(data_label) / "config.json")
    if args.within:
        if args.engine != "topdown":
            raise ValidationError("--within restricts TopDown block data; PHSafe has no blocks")
        from engine.data.histogram import subset_histogram
        from engine.data.samples import load_topdown_sample

        within_level, sep, ids = args.within.partition(":")
        if not sep or not ids:
            raise ValidationError(
                f"--within takes LEVEL:ID[,ID…] such as County:44001; got {args.within!r}"
            )
        hist = load_topdown_sample(data_label)
        data = subset_histogram(hist, within_level, [i for i in ids.split(",") if i])
        data_label = f"{data_label} ({args.within})"
    backend, backend_options = backend_of(args)
    result = run_experiment(
        args.engine,
        data,
        rhos,
        args.seeds,
        preset=preset,
        srs_fractions=srs,
        n_boot=args.n_boot,
        workers=args.workers,
        control=RunControl(progress),
        data_name=data_label,
        tradeoff=chosen,
        epl_settings=epl_settings,
        backend=backend,
        backend_options=backend_options,
    )
    level, query = result.notes["tradeoff"]
    tradeoff = result.tradeoff(level, query)
    written = write_experiment(
        result, out, output_format=args.output_format, extra={"tradeoff": tradeoff}
    )
    blau = result.blau_summary()
    if args.format == "json":
        print(
            dumps_json(
                {
                    "out": str(staging.final),
                    "files": [p.name for p in written],
                    "budget_name": result.budget_name,
                    "epl_settings": epl_settings.as_dict(),
                    "blau_bias": blau.to_dict("records"),
                    "tradeoff": tradeoff.to_dict("records"),
                }
            )
        )
        return 0
    import pandas as pd

    with pd.option_context("display.max_rows", None, "display.width", 200):
        print(
            f"{result.engine} on {result.data}, preset {result.preset} ({result.mechanism}); "
            f"{result.budget_name} {list(result.rhos)}; seeds {list(result.seeds)}"
        )
        print()
        if not blau.empty:
            print(
                "Mean signed error of total population by Blau quintile (1 = most homogeneous; "
                "TDA Table 13), mean over seeds [min, max]:"
            )
            print(blau.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
            print()
        print(f"MAE–EPL trade-off at {level} / {query} (PF Fig. 2): error = median absolute error")
        print(f"EPL settings: {epl_settings.label()}")
        if "RACEETH" in (result.notes.get("queries") or []):
            print(f"Note: {FOLDED_NOTE}")
        print(tradeoff.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        print()
        print(f"wrote {len(written)} files and manifest.json to {staging.final}")
    return 0
