"""``phexplore privacy``: ρ-zCDP → (ε, δ) under all three conversions (docs/science.md §1)."""

from __future__ import annotations

import argparse
from typing import Any

from engine.core.numbers import option_type, parse_exact
from engine.dp.conversions import CONVERSION_LABELS
from phexplore.cli._output import add_format_option, dumps_json


def register(subparsers: Any) -> None:
    """Add the ``privacy`` subcommand."""
    p = subparsers.add_parser(
        "privacy",
        help="convert a zCDP ρ to (ε, δ) with the Bun–Steinke, CKS and Gaussian-profile conversions",
        description=(
            "Convert ρ-zCDP to (ε, δ)-DP. Give δ to get ε (default δ = 1e-10), or ε to get δ. "
            "Conversions: " + "; ".join(f"{k} = {v}" for k, v in CONVERSION_LABELS.items())
        ),
    )
    p.add_argument(
        "--rho", required=True, help="total ρ (zCDP), e.g. 2.56 or an exact fraction 293764/114921"
    )
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--delta",
        type=option_type("real", "delta", "--delta"),
        help="δ at which to report ε, 0 < δ < 1 (default 1e-10)",
    )
    group.add_argument(
        "--epsilon",
        type=option_type("real", "epsilon", "--epsilon"),
        help="ε at which to report δ, 0 < ε ≤ 10^6",
    )
    add_format_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the conversions as JSON or a table."""
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from engine.dp.accounting import check_rho, conversions

    rho = check_rho(float(parse_exact(args.rho, where="--rho", range_name="rho")))
    conv = conversions(rho, delta=args.delta, epsilon=args.epsilon)
    if args.format == "json":
        print(dumps_json({"rho": rho, "conversions": conv, "labels": dict(CONVERSION_LABELS)}))
        return 0
    print(f"ρ = {rho:g}")
    for name, values in conv.items():
        print(
            f"  {name:<12} ε = {values['epsilon']:.4f}   δ = {values['delta']:.3g}   "
            f"({CONVERSION_LABELS[name]})"
        )
    return 0
