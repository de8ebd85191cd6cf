"""``phexplore moe phsafe|topdown``: analytic noise scale, MOE and total privacy loss of a scenario.

PHSafe rows follow PHS §7.1 and Table 10; TopDown rows follow TDA App. B (σ² = 1/(ρ·c·d)); with
``--post-processed`` the predicted accuracy of the published counts (docs/prediction.md).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.core.errors import ValidationError
from engine.core.numbers import option_type, parse_real, parse_whole
from engine.core.strict_json import load_json_object
from engine.dp.conversions import DEFAULT_DELTA
from phexplore.cli._options import add_data_format_option
from phexplore.cli._output import add_format_option, print_rows

if TYPE_CHECKING:
    from engine.dp.budget import PHSafeBudget, TopDownAllocation


def register(subparsers: Any) -> None:
    """Add ``moe phsafe`` and ``moe topdown``."""
    p = subparsers.add_parser(
        "moe",
        help="analytic σ, 90%% margins of error and total ρ/ε of a PHSafe or TopDown scenario",
        description="Analytic noise scale and margins of error, before any engine runs.",
    )
    sub = p.add_subparsers(dest="engine", metavar="ENGINE")

    ps = sub.add_parser(
        "phsafe",
        help="one row per (table, population-group level)",
        description="PHSafe MOEs: σ = Δ/√(2ρ), Δ = 2τ+2 (or 2 for denominators), MOE ≤ ⌊1.645σ⌋.",
    )
    src = ps.add_mutually_exclusive_group()
    src.add_argument("--preset", default=None, help="PHSafe preset (default phsafe-2020)")
    src.add_argument(
        "--config", type=Path, help="official PHSafe config.json or a PHExplore scenario JSON"
    )
    ps.add_argument(
        "--rho",
        action="append",
        default=[],
        metavar="TABLE:LEVEL=R",
        help="override one budget, e.g. --rho 'PH3:state_A-G=0.5' (LEVEL may be 'State:A-G')",
    )
    ps.add_argument(
        "--tau", action="append", default=[], metavar="TABLE=N", help="override τ, e.g. PH3=8"
    )
    ps.add_argument(
        "--drop-level",
        action="append",
        default=[],
        metavar="LEVEL",
        help="skip a level in every table: 'Nation', 'State', 'state_A-G' or 'State:A-G'",
    )
    _common(ps)
    ps.set_defaults(func=run_phsafe)

    pt = sub.add_parser(
        "topdown",
        help="one row per (run, geolevel, query)",
        description="TopDown noisy-measurement σ = 1/√(ρ·c·d) and 90% MOE = 1.645σ per query.",
    )
    src = pt.add_mutually_exclusive_group()
    src.add_argument(
        "--preset", default=None, help="TopDown preset (default topdown-2020-production)"
    )
    src.add_argument("--config", type=Path, help="allocation JSON (schema in docs/analytic.md)")
    rho = pt.add_mutually_exclusive_group()
    rho.add_argument(
        "--rho",
        type=option_type("exact", "rho", "--rho"),
        help="set EVERY run (persons and units alike) to this ρ (or ε for pure DP), 0 < ρ ≤ "
        "10^6 — not a total split between them: --rho 1.095 on topdown-2021-04 gives 1.095 + "
        "1.095 = 2.19 in all, where TDA §8.1's 1.095 is persons 1.05 + units 0.045 (give "
        "--rho-persons 1.05 --rho-units 0.045)",
    )
    rho.add_argument(
        "--rho-persons",
        type=option_type("exact", "rho", "--rho-persons"),
        default=None,
        metavar="RHO",
        help="the persons run's ρ (ε for pure DP); other runs keep the allocation's",
    )
    pt.add_argument(
        "--rho-units",
        type=option_type("exact", "rho", "--rho-units"),
        default=None,
        metavar="RHO",
        help="the units run's ρ; other runs keep the allocation's (not with --rho)",
    )
    pt.add_argument("--run", action="append", default=[], help="only these runs (persons, units)")
    pt.add_argument(
        "--states",
        type=int,
        default=None,
        metavar="N",
        help="states in the run's geography, 1 or more (default: 52 if the allocation has a US "
        "level, else 1); decides which TOTAL queries are held exact (TDA §5.2) and whether a "
        "single-child US level is bypassed into the state (SPN §5)",
    )
    pt.add_argument(
        "--spread-invariant-share",
        action="store_true",
        help="DEPARTURE FROM PRODUCTION: move each held-exact query's share to its level's other "
        "queries (the nominal ρ is then all spent)",
    )
    pt.add_argument(
        "--drop-level",
        action="append",
        default=[],
        metavar="LEVEL",
        help="hide a geolevel's rows (shares are not changed)",
    )
    pt.add_argument(
        "--post-processed",
        action="store_true",
        help="add the predicted accuracy of the published (post-processed) counts of the persons "
        "run: post_processed_rmse, post_processed_moe (90%% by default, --confidence), and "
        "post_processed_holds / post_processed_reason: whether the row lies where the "
        "prediction was validated against runs, and why not (docs/prediction.md)",
    )
    pt.add_argument(
        "--data",
        default=None,
        metavar="SAMPLE_OR_FILE",
        help="with --post-processed: predict on this data's spine and counts (a sample name such "
        "as ri2010 or ppmf_perry_al, a generated population folder, or a file as for 'run "
        "topdown'); default: a shipped count profile — the Rhode Island 2010 blocks for "
        "allocations on the folded VOTINGAGE x RACEETH schema, a generated national population "
        "of 20,000,000 persons (51 states, 206 counties) for the 2,016-cell production schema "
        "(one state of it with --states 1 or an allocation without a US level)",
    )
    add_data_format_option(pt)
    pt.add_argument(
        "--entities",
        default=None,
        metavar="SAMPLE_OR_CSV",
        help="with --post-processed --data: also predict off-spine entities made of the data's "
        "blocks (e.g. providence-wards, or a block → entity CSV); listed under "
        "summary.post_processed.entities",
    )
    _common(pt)
    pt.set_defaults(func=run_topdown)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--confidence",
        type=option_type("real", "confidence", "--confidence"),
        default=0.90,
        help="confidence level of the MOE, 0 < c < 1 (0.90)",
    )
    p.add_argument(
        "--delta",
        type=option_type("real", "delta", "--delta"),
        default=DEFAULT_DELTA,
        help="δ for the ε summary, 0 < δ < 1 (1e-10)",
    )
    add_format_option(p)


def _read_json(path: Path) -> dict[str, Any]:
    return load_json_object(path, allow_infinity=True)


def load_phsafe_budget(preset: str | None, config: Path | None) -> PHSafeBudget:
    """Budget from ``--config`` (official or PHExplore JSON) or ``--preset`` (default phsafe-2020)."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from engine.dp.presets import load_phsafe_preset, phsafe_from_dict

    if config is not None:
        return phsafe_from_dict(_read_json(config), name=config.name)
    return load_phsafe_preset(preset or "phsafe-2020")


def load_topdown_runs(preset: str | None, config: Path | None) -> dict[str, TopDownAllocation]:
    """Allocations from ``--config`` or ``--preset`` (default topdown-2020-production)."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from engine.dp.presets import load_topdown_preset, topdown_from_dict

    if config is not None:
        return topdown_from_dict(_read_json(config))
    return load_topdown_preset(preset or "topdown-2020-production")


def _split(spec: str, sep: str, what: str) -> tuple[str, str]:
    if sep not in spec:
        raise ValidationError(
            f"{what} {spec!r} must look like {'TABLE:LEVEL=R' if sep == '=' else ''}"
        )
    a, b = spec.rsplit(sep, 1)
    return a.strip(), b.strip()


def apply_phsafe_overrides(
    budget: PHSafeBudget, rhos: list[str], taus: list[str], drops: list[str]
) -> PHSafeBudget:
    """Apply ``--tau``, ``--rho`` and ``--drop-level`` in that order."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from engine.dp.budget import resolve_level_spec

    for spec in taus:
        table, value = _split(spec, "=", "--tau")
        if not (value.isascii() and value.isdigit()):
            raise ValidationError(f"--tau {spec!r}: τ must be a whole number")
        budget = budget.with_tau(
            table, parse_whole(value, where=f"--tau {spec!r}", range_name="tau")
        )
    for spec in rhos:
        target, value = _split(spec, "=", "--rho")
        if ":" not in target:
            raise ValidationError(f"--rho {spec!r} must look like 'PH3:state_A-G=0.5'")
        table, level = target.split(":", 1)
        r = parse_real(value, where=f"--rho {spec!r}", range_name="share_rho")
        for key in resolve_level_spec(level):
            budget = budget.with_rho(table, key, r)
    for spec in drops:
        budget = budget.without_levels(resolve_level_spec(spec))
    return budget


def run_phsafe(args: argparse.Namespace) -> int:
    """Print PHSafe rows and summary."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from phexplore.planning.moe_tables import phsafe_rows, phsafe_summary

    budget = load_phsafe_budget(args.preset, args.config)
    budget = apply_phsafe_overrides(budget, args.rho, args.tau, args.drop_level)
    rows = phsafe_rows(budget, args.confidence)
    print_rows(rows, phsafe_summary(budget, args.delta), args.format)
    return 0


def with_run_rhos(
    runs: dict[str, Any], every: Any, persons: Any = None, units: Any = None
) -> dict[str, Any]:
    """``--rho`` (every run set to it), ``--rho-persons``/``--rho-units`` (that run only)."""
    if every is not None and units is not None:
        raise ValidationError(
            "--rho sets every run; give either --rho or --rho-persons/--rho-units, not both"
        )
    if every is not None:
        return {k: v.with_rho(every) for k, v in runs.items()}
    out = dict(runs)
    for universe, value in (("persons", persons), ("units", units)):
        if value is None:
            continue
        if universe not in out:
            raise ValidationError(
                f"--rho-{universe}: this scenario has no {universe} run (runs: {', '.join(out)})"
            )
        out[universe] = out[universe].with_rho(value)
    return out


def run_topdown(args: argparse.Namespace) -> int:
    """Print TopDown rows and summary."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from engine.dp.budget.invariants import SPREAD_LABEL, spread_invariant_share
    from phexplore.planning.moe_tables import topdown_rows, topdown_summary

    runs = load_topdown_runs(args.preset, args.config)
    if args.run:
        unknown = [r for r in args.run if r not in runs]
        if unknown:
            raise ValidationError(f"unknown run(s) {unknown}; this scenario has {list(runs)}")
        runs = {k: v for k, v in runs.items() if k in args.run}
    runs = with_run_rhos(runs, args.rho, args.rho_persons, args.rho_units)
    levels = {lv for alloc in runs.values() for lv in alloc.geolevels}
    unknown = [lv for lv in args.drop_level if lv not in levels]
    if unknown:
        raise ValidationError(
            f"--drop-level: unknown geolevel(s) {unknown}; this scenario has {sorted(levels)}"
        )
    if args.states is not None and args.states < 1:
        raise ValidationError(f"--states must be 1 or more (a count of states); got {args.states}")
    if args.spread_invariant_share:
        runs = {k: spread_invariant_share(v, args.states) for k, v in runs.items()}
    rows = [
        r
        for r in topdown_rows(runs, args.confidence, args.states)
        if r["geolevel"] not in args.drop_level
    ]
    summary = topdown_summary(runs, args.delta, args.states)
    if args.spread_invariant_share:
        summary["allocation_note"] = SPREAD_LABEL
    if args.data is not None and not args.post_processed:
        raise ValidationError("--data is used by --post-processed; add --post-processed")
    if args.post_processed:
        rows, summary["post_processed"] = _post_processed(rows, runs, args)
    if args.format != "json":
        for r in rows:  # the table shows the label in place of a σ that is never drawn
            if r["status"] != "measured":
                r["sigma"] = r["moe90"] = "—"
        if args.post_processed:
            _reasons_as_footnotes(rows, summary["post_processed"])
    print_rows(rows, summary, args.format)
    return 0


def _reasons_as_footnotes(rows: list[dict[str, Any]], summary: dict[str, Any]) -> None:
    """In the table, each row's reason (why it is outside the validated range) as a numbered
    footnote, listed under ``post_processed.reasons`` (the JSON keeps the text in every row)."""
    numbers: dict[str, int] = {}
    for r in rows:
        reason = r.get("post_processed_reason")
        if reason:
            r["post_processed_reason"] = f"[{numbers.setdefault(reason, len(numbers) + 1)}]"
    if numbers:
        summary["reasons"] = {f"[{n}]": text for text, n in numbers.items()}


def _post_processed(
    rows: list[dict[str, Any]], runs: dict[str, TopDownAllocation], args: argparse.Namespace
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Rows with the predicted accuracy of the published counts (docs/science.md §7) and what it
    rests on."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light

    from engine.prediction import shipped_profile_for
    from engine.prediction.tables import (
        add_post_processed,
        prediction_summary,
        predictions_for_runs,
    )

    if args.entities is not None and args.data is None:
        raise ValidationError("--entities needs --data (the blocks the entities are made of)")
    if args.data is None:
        profile = shipped_profile_for(runs, n_states=args.states)
    else:
        from engine.data.inputs import load_topdown_input
        from engine.topdown.profile import spine_profile

        persons = [a for a in runs.values() if a.universe == "persons"]
        if not persons:
            raise ValidationError("--post-processed needs a persons run")
        hist = load_topdown_input(args.data, kind=args.data_format)
        profile = spine_profile(hist, persons[0], name=str(args.data))
    predictions = predictions_for_runs(runs, profile, confidence=args.confidence)
    summary = prediction_summary(predictions, profile)
    if args.entities is not None:
        summary["entities"] = _entity_rows(hist, persons[0], predictions, args.entities)
    return add_post_processed(rows, predictions), summary


def _entity_rows(
    hist: Any, alloc: TopDownAllocation, predictions: dict[str, Any], entities: str
) -> list[dict[str, Any]]:
    """Predicted TOTAL and VOTINGAGE (where the schema has it) accuracy of every entity."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light

    from engine.prediction.entities import predict_entities
    from engine.topdown.profile import entity_membership
    from engine.topdown.spine.entities import block_ids_of, load_entities

    run, prediction = next((k, p) for k, p in predictions.items() if p.allocation == alloc.name)
    assert prediction.algebra is not None
    queries = [q for q in ("TOTAL", "VOTINGAGE") if q in prediction.algebra.queries]
    out: list[dict[str, Any]] = []
    for entity_set in load_entities(entities, block_ids_of(hist.geography)):
        member = entity_membership(hist, alloc, entity_set.codes)
        for e in predict_entities(prediction, member, entity_set.entity_ids, queries):
            out.append({"run": run, "entity_set": entity_set.name, **e.as_row()})
    return out
