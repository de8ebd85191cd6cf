"""``phexplore run phsafe``: run PHSafe (PHS §3) on a CEF extract and write the official outputs.

Writes to ``--out``: the eleven official pipe-delimited files ``PH1_num.csv`` … ``PH8_denom.csv``
(private layout, or the non-private true tabulation with ``--non-private``), ``metrics.json``
(schema in docs/phsafe.md), ``summary.txt`` (what is printed), and ``details/`` with the tidy
frames (basis cells, published tables, error by level, truncation by τ). The arguments become a
:class:`~engine.runs.spec.RunSpec` run by the one run pipeline (:mod:`engine.runs`).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.core.numbers import RANGES, option_type, parse_whole
from engine.runs.options import PHSafeRunOptions
from phexplore.cli._backend import add_backend_arguments, backend_of
from phexplore.cli._options import add_max_bytes_option, add_noise_method_option, add_seed_option
from phexplore.cli._output import add_output_folder_options, input_location, open_output

if TYPE_CHECKING:
    import pandas as pd


def register(engines: Any) -> None:
    """Add ``phsafe`` under ``phexplore run``."""
    parser = engines.add_parser(
        "phsafe",
        help="run PHSafe (S-DHC tables PH1–PH8) on a CEF extract",
        description=(
            "Run the PHSafe algorithm on a shipped sample or a CEF-extract directory "
            "(persons.csv, units.csv, geo.csv) and write the official outputs, metrics.json and a "
            "summary. Repeated --trials reuse the join and only redraw the noise."
        ),
    )
    parser.add_argument(
        "--data",
        required=True,
        help="sample name (see 'phexplore samples list') or a directory with the three CEF files",
    )
    parser.add_argument(
        "--config",
        default=None,
        help="config.json path or preset (phsafe-2020, phsafe-2020-pr); default: the data "
        "directory's config.json",
    )
    parser.add_argument(
        "--tau",
        default=None,
        help="override truncation thresholds: N for every truncated table, or TABLE=N[,TABLE=N]",
    )
    parser.add_argument(
        "--trials",
        type=option_type("whole", "trials", "--trials"),
        default=1,
        help="noise trials, 1 – 10,000 (default 1)",
    )
    add_seed_option(parser, "noise seed, 0 – 2^63-1 (default: random, recorded)", default=None)
    add_backend_arguments(parser)
    add_noise_method_option(parser)
    parser.add_argument(
        "--non-private",
        action="store_true",
        help="write the true tabulation (no noise), labelled non-private",
    )
    add_output_folder_options(parser)
    parser.add_argument(
        "--scale",
        type=option_type("real", "scale", "--scale"),
        default=None,
        metavar="FRACTION",
        help="fraction of the full population the data hold, 0 < FRACTION ≤ 1 (default: the "
        "sample's declared scale, e.g. 0.001 for phsafe_synthetic_us; else 1). Truncation error "
        "is reported per 1,000 persons and projected to full scale (÷ FRACTION)",
    )
    add_max_bytes_option(parser, "size limit per input file in bytes, 1 – 2^40 (default 200 MB)")
    parser.set_defaults(func=run)


def parse_tau(spec: str) -> dict[str, int]:
    """``"6"`` → τ = 6 for every truncated table; ``"PH3=6,PH6=8"`` → those tables only."""
    from engine.core.errors import ValidationError
    from engine.phsafe.config import TRUNCATED_TABLES

    text = spec.strip()
    if text.isascii() and text.isdigit():
        value = parse_whole(text, where="--tau", range_name="tau")
        return {t: value for t in TRUNCATED_TABLES}
    out: dict[str, int] = {}
    for part in text.split(","):
        table, sep, value = part.partition("=")
        table, value = table.strip(), value.strip()
        if not sep or table not in TRUNCATED_TABLES:
            raise ValidationError(
                f"--tau {spec!r}: use N or TABLE=N pairs with TABLE one of "
                + ", ".join(TRUNCATED_TABLES)
            )
        if table in out:
            raise ValidationError(f"--tau {spec!r}: {table} is given twice")
        out[table] = parse_whole(value, where=f"--tau {table}", range_name="tau")
    return out


def summary_lines(
    result: Any, out_dir: Path, scale: float | None = None, errors: Any = None
) -> list[str]:
    """A readable summary of a run (what the CLI prints and writes to summary.txt).

    ``scale`` (the data's fraction of the full population) adds truncation error per 1,000 persons
    and projected to full scale, beside the noise MOE (which does not grow with population).
    ``errors``: the run's error analysis (:class:`engine.runs.phsafe.PHSafeErrorAnalysis`, the
    pipeline's metrics stage, ``RunOutput.extra["errors"]``) at ``scale``; computed here when None.
    """
    if errors is None:
        from engine.runs.phsafe import error_analysis

        errors = error_analysis(result, scale)
    cfg = result.config
    unit = "ρ" if cfg.privacy_defn == "zcdp" else "ε"
    lines = [
        f"PHSafe run — {result.label}",
        f"  persons {result.n_persons:,}, units {result.n_units:,}, states {len(result.states)}"
        + (" (Puerto Rico run)" if cfg.is_puerto_rico else ""),
        f"  privacy_defn {cfg.privacy_defn}; seed {result.seed}; trials {result.trials}; "
        f"runtime {result.runtime_s:.2f} s",
    ]
    if not result.non_private:
        total = cfg.total_budget()
        lines.append(
            f"  total {unit}: {total:.6g} unbounded, {2 * total:.6g} bounded (PHS Thm 3–4)"
        )
        lines.append("")
        lines.append(
            "  table      level       cells   VARIANCE   MOE90  emp.MOE90   MAE(noise)  MAE(trunc)"
        )
        for row in errors.levels.itertuples(index=False):
            lines.append(
                f"  {row.table:<10} {row.level:<10} {row.cells:>6} {row.analytic_variance:>10.4g} "
                f"{row.analytic_moe:>7} {row.empirical_moe:>10} {row.mae_noise:>12.2f} "
                f"{row.mae_truncation:>11.3f}"
            )
    lines.append("")
    lines.append("  truncation: share of joined persons dropped at the configured τ")
    for table, s in result.truncation_stats.items():
        lines.append(
            f"  {table:<8} τ={s.tau:<3} dropped {s.persons_dropped:,} of {s.persons_joined:,} "
            f"({100 * s.share_dropped:.3f}%), households over τ: {s.households_over_tau:,}, "
            f"largest: {s.largest_household}"
        )
    if not result.non_private and result.n_persons > 0:
        lines.extend(scale_lines(errors.at_scale, scale))
    unmapped = {t: n for t, n in result.unmapped_records.items() if n}
    if unmapped:
        lines.append(f"  records matching no basis cell (inconsistent input): {unmapped}")
    lines.append("")
    lines.append(f"  outputs written to {out_dir}")
    return lines


def run(args: argparse.Namespace) -> int:
    """Check the options and --out, then load, run and write atomically; print the summary."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    import numpy as np

    RANGES["trials"].check(args.trials, "--trials")
    tau = parse_tau(args.tau) if args.tau else None
    seed = args.seed
    if seed is None:
        seed = int(np.random.SeedSequence().entropy % (2**32))
    spec = spec_of(args, tau, seed)  # every option checked before --out is opened
    config_path = args.config if args.config and Path(args.config).exists() else None
    inputs = {"data": input_location(args.data), "config": config_path or args.config}
    with open_output(args, "run phsafe", inputs, seed=seed) as staging:
        return _run(args, staging, spec)


def spec_of(args: argparse.Namespace, tau: dict[str, int] | None, seed: int) -> Any:
    """The :class:`~engine.runs.spec.RunSpec` of the parsed arguments (configuration resolved;
    the data folder recorded as an absolute path)."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from engine.data.samples import declared_scale
    from engine.phsafe.inputs import resolve_config, resolve_data_dir
    from engine.runs.data_source import DataSource
    from engine.runs.inputs import resolve_paths
    from engine.runs.spec import RunSpec

    config = resolve_config(args.config, resolve_data_dir(args.data))
    if tau:
        config = config.with_tau(tau)
    scale = args.scale if args.scale is not None else declared_scale(args.data)
    backend, backend_options = backend_of(args)
    spec = RunSpec(
        engine="phsafe",
        data=DataSource(source=args.data, max_bytes=args.max_bytes),
        config=config.to_dict(),
        seed=seed,
        options=PHSafeRunOptions(
            trials=args.trials,
            non_private=bool(args.non_private),
            scale=scale,
            noise_method=args.noise_method,
        ),
        backend=backend,
        backend_options=backend_options,
    )
    return resolve_paths(spec, Path.cwd())


def _run(args: argparse.Namespace, staging: Any, spec: Any) -> int:
    """Run the description through the one pipeline and write into the staging folder."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from engine.runs.pipeline import execute, write

    staging.settings.update(
        {
            "privacy_defn": spec.config.get("privacy_defn", "zcdp"),
            "non_private": args.non_private,
        }
    )
    provenance = budget_provenance(args, spec)
    output = execute(spec, extra_metrics=provenance)
    staging.settings["run_fingerprint"] = output.spec.fingerprint()
    scale = spec.options.scale
    lines = summary_lines(output.result, staging.final, scale, output.extra.get("errors"))
    write(output, staging.path, summary=lines)
    print("\n".join(lines))
    for line in budget_lines(provenance):
        print(line)
    return 0


def budget_lines(provenance: dict[str, Any]) -> list[str]:
    """The budget the run used: its origin and fingerprint, then each number that differs from
    the preset it was modified from (``budget_changes`` of metrics.json); none for a non-private
    run."""
    if not provenance:
        return []
    lines = [
        f"budget: {provenance['budget_origin']} (fingerprint "
        f"{str(provenance['budget_fingerprint'])[:12]})"
    ]
    for change in provenance.get("budget_changes") or ():
        lines.append(f"  {change['item']}: {change['preset']} → {change['value']}")
    return lines


def budget_provenance(args: argparse.Namespace, spec: Any) -> dict[str, Any]:
    """``budget_fingerprint``, ``budget_origin`` and ``budget_changes`` of the run, as the app
    records them
    (:func:`engine.runs.provenance.run_provenance`, the one builder).

    The fingerprint is that of the configuration actually run (after ``--tau``), as the PHSafe
    planner would hold it (:func:`engine.runs.provenance.phsafe_budget_of`), so a scenario of the
    same budget attributes this run to itself. The origin is the preset named by ``--config``
    ("modified from phsafe-2020" after a ``--tau`` change, with what differs), else the shipped
    preset the file equals, else the file's name. A ``--non-private`` run uses no budget and records none.
    """
    if args.non_private:
        return {}
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from engine.phsafe.config import PRESET_ALIASES, PRESET_NAMES
    from engine.runs.provenance import run_provenance

    named = str(args.config) if args.config else None
    preset = PRESET_ALIASES.get(named, named) if named in PRESET_NAMES else None
    if preset is not None:
        name = preset
    elif named:
        name = Path(named).name
    else:
        name = f"{args.data}/config.json"
    return run_provenance(spec, preset=preset, name=name).metrics()


def scale_lines(at_scale: pd.DataFrame, scale: float | None) -> list[str]:
    """Truncation bias of the Nation and State levels at one scale with the noise MOE
    (``at_scale``: :func:`engine.metrics.phsafe_errors.truncation_at_scale` at ``scale``)."""
    frame = at_scale
    frame = frame[frame["mean_truncation_error"] != 0]
    if frame.empty:
        return ["", "  truncation: no cell lost persons at the configured τ"]
    if scale is None:
        head = (
            "  truncation bias per cell (no declared scale: the data are taken as the full "
            "population, so measured = full scale):"
        )
    else:
        head = (
            f"  truncation bias per cell at one scale with the noise: the data hold {scale:g} of "
            f"the full population, so the full-scale bias is projected ×{1 / scale:,.0f} "
            "(PROJECTION, same household-size mix assumed); noise MOE does not grow with population"
        )
    lines = ["", head]
    lines.append(
        "  table      level        mean err   per 1,000 persons   projected full scale   MOE90"
        "   |proj|/MOE"
    )
    for row in frame.itertuples(index=False):
        projected = row.mean_truncation_error_projected
        shown = row.mean_truncation_error if scale is None else projected
        ratio = abs(shown) / row.analytic_moe if row.analytic_moe else float("nan")
        lines.append(
            f"  {row.table:<10} {row.level:<10} {row.mean_truncation_error:>10.1f} "
            f"{row.mean_truncation_error_per_1000:>19.3f} {shown:>22,.0f} "
            f"{row.analytic_moe:>7.0f} {ratio:>12.1f}"
        )
    return lines
