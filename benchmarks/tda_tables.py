"""TopDown at the production settings beside TDA's published Tables 9, 10, 12 and 13 (TDA §9).

Prints, for groups of runs (e.g. "before" and "after" a change, several seeds each), the mean over
the runs (and min–max) of TDA's absolute error — per geounit |error| summed over the query's cells,
averaged over the geounits (``tda_mae``; derived from the per-cell MAE for metrics.json files that
predate it) — next to TDA Tables 9–10 (run baseline1), the block TOTAL error by size class next to
Table 12, and the Blau-quintile bias next to Table 13. The numbers of ``docs/metrics.md``
("Measured: production settings beside TDA") and of the closing note come from here.

Runs are read from folders written by ``phexplore run topdown`` (``--runs LABEL=DIR,DIR…``) or made
here on a generated population (``--generate STATE``: generated once into ``--workdir``, then
``topdown-2020-production`` for every ``--seeds``, on the preset's own spine unless ``--spine``)::

    python benchmarks/tda_tables.py --generate RI --persons 1e6 --seeds 1,2,3 --workdir /tmp/tda
    python benchmarks/tda_tables.py --runs before=/tmp/b1,/tmp/b2,/tmp/b3 --runs after=/tmp/a1,/tmp/a2
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import pandas as pd

from engine.metrics.tda_reference import (
    load_tda_absolute_error,
    load_tda_blau_bias,
    load_tda_size_classes,
    tda_mae_of_metrics,
)

LEVELS = ("US", "State", "County", "Tract", "Block_Group", "Block")
QUERIES = ("TOTAL", "VOTINGAGE", "HISPANIC", "CENRACE", "HISPANIC*CENRACE", "DETAILED")


def read_runs(spec: str) -> tuple[str, list[dict[str, Any]]]:
    """``LABEL=DIR,DIR…`` → (label, metrics.json of every folder)."""
    label, _, dirs = spec.partition("=")
    runs = [
        json.loads((Path(d) / "metrics.json").read_text(encoding="utf-8"))
        for d in dirs.split(",")
        if d.strip()
    ]
    return label, runs


def make_runs(args: argparse.Namespace) -> tuple[str, list[dict[str, Any]]]:
    """Generate the population once and run the production preset for every seed."""
    from engine.data.generated import load_generated_population
    from engine.data.population import generate_population
    from engine.dp.presets import load_topdown_preset
    from engine.runs.data_source import DataSource
    from engine.runs.options import PRESET_SPINE, TopDownRunOptions
    from engine.runs.pipeline import execute
    from engine.runs.spec import RunSpec

    folder = Path(args.workdir) / f"pop_{args.generate}_{int(args.persons)}_seed{args.pop_seed}"
    if not folder.exists():
        generate_population(
            int(args.persons), seed=args.pop_seed, states=[args.generate], out_dir=folder
        )
    hist = load_generated_population(folder)
    allocation = load_topdown_preset("topdown-2020-production")["persons"]
    runs = []
    for seed in args.seeds:
        spec = RunSpec(
            engine="topdown",
            data=DataSource(source=str(folder)),
            config=allocation.to_dict(),
            seed=seed,
            options=TopDownRunOptions(microdata=False, spine=args.spine or PRESET_SPINE),
        )
        started = time.perf_counter()
        output = execute(spec, data=hist)
        print(f"seed {seed}: {time.perf_counter() - started:.0f} s", flush=True)
        runs.append(output.metrics)
    label = f"{args.generate} {int(args.persons):,}, {args.spine or 'preset spine'}"
    return label, runs


def absolute_error_table(groups: list[tuple[str, list[dict[str, Any]]]]) -> pd.DataFrame:
    """Per (query, level): each group's mean [min–max] TDA figure, and TDA baseline1."""
    reference = load_tda_absolute_error().set_index(["query", "geolevel"])["baseline1"]
    rows = []
    for query in QUERIES:
        for level in LEVELS:
            if level == "US":
                continue
            row: dict[str, Any] = {"query": query, "level": level}
            for label, runs in groups:
                values = [
                    tda_mae_of_metrics(m)[0].get(level, {}).get(query)
                    for m in runs
                    if tda_mae_of_metrics(m)[0].get(level, {}).get(query) is not None
                ]
                row[label] = (
                    f"{sum(values) / len(values):.3g} [{min(values):.3g}–{max(values):.3g}]"
                    if values
                    else "—"
                )
            row["TDA baseline1"] = f"{reference.get((query, level), float('nan')):.2f}"
            rows.append(row)
    return pd.DataFrame(rows)


def size_class_table(groups: list[tuple[str, list[dict[str, Any]]]]) -> pd.DataFrame:
    """Block TOTAL mean |error| by size class (TDA Table 12) per group, beside TDA's."""
    reference = load_tda_size_classes()
    reference = reference[(reference["table"] == 12) & (reference["metric"] == "mae")]
    rows = []
    for record in reference.itertuples(index=False):
        row: dict[str, Any] = {"size class": record.size_class}
        for label, runs in groups:
            values = [
                entry["mae"]
                for m in runs
                if (
                    entry := (m.get("tda_size_classes") or {})
                    .get("Block", {})
                    .get(record.size_class)
                )
            ]
            blocks = [
                entry["n"]
                for m in runs
                if (
                    entry := (m.get("tda_size_classes") or {})
                    .get("Block", {})
                    .get(record.size_class)
                )
            ]
            row[label] = (
                f"{sum(values) / len(values):.3g} (n={blocks[0]:,})" if values else "not recorded"
            )
        row["TDA baseline1"] = f"{record.baseline1:.3f} (n={record.count:,})"
        rows.append(row)
    return pd.DataFrame(rows)


def blau_table(groups: list[tuple[str, list[dict[str, Any]]]]) -> pd.DataFrame:
    """Mean signed error of the total by Blau quintile (TDA Table 13) per group, beside TDA's."""
    reference = load_tda_blau_bias()
    rows = []
    for level in ("County", "Tract", "Block_Group", "Block"):
        for quintile in ("1", "2", "3", "4", "5"):
            row: dict[str, Any] = {"level": level, "quintile": quintile}
            for label, runs in groups:
                values = [
                    m["blau_bias"][level][quintile]
                    for m in runs
                    if quintile in ((m.get("blau_bias") or {}).get(level) or {})
                ]
                row[label] = f"{sum(values) / len(values):+.2f}" if values else "—"
            key = "1 and 2" if level == "Block" and quintile in ("1", "2") else quintile
            match = reference[(reference["geolevel"] == level) & (reference["quintile"] == key)]
            row["TDA baseline1"] = f"{match['baseline1'].iloc[0]:+.2f}" if len(match) else "—"
            rows.append(row)
    return pd.DataFrame(rows)


def markdown(frame: pd.DataFrame) -> str:
    """A Markdown table of ``frame`` (the form docs/metrics.md quotes)."""
    lines = ["| " + " | ".join(map(str, frame.columns)) + " |"]
    lines.append("|" + "---|" * len(frame.columns))
    for row in frame.itertuples(index=False):
        lines.append("| " + " | ".join(map(str, row)) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", action="append", default=[], metavar="LABEL=DIR,DIR…")
    parser.add_argument("--generate", metavar="STATE", help="generate a state and run it here")
    parser.add_argument("--persons", type=float, default=1e6)
    parser.add_argument("--pop-seed", type=int, default=1)
    parser.add_argument("--seeds", type=lambda t: [int(x) for x in t.split(",")], default=[1, 2, 3])
    parser.add_argument("--spine", default=None, help="e.g. conventional (default: the preset's)")
    parser.add_argument("--workdir", default="/tmp/tda_tables")
    args = parser.parse_args()
    groups = [read_runs(spec) for spec in args.runs]
    if args.generate:
        groups.append(make_runs(args))
    if not groups:
        parser.error("give --runs LABEL=DIR,… or --generate STATE")
    for label, runs in groups:
        spines = {str((m.get("spine_used") or {}).get("kind", "not recorded")) for m in runs}
        universes = {
            str((m.get("error_universe") or {}).get("universe", "every block (not recorded)"))
            for m in runs
        }
        print(
            f"{label}: {len(runs)} runs; spine {', '.join(spines)}; blocks {', '.join(universes)}"
        )
    print(
        "\nTDA Tables 9–10: absolute error per geounit (Σ over the query's cells), mean [min–max]"
    )
    print(markdown(absolute_error_table(groups)))
    print("\nTDA Table 12: Block TOTAL mean |error| by size class of the true count")
    print(markdown(size_class_table(groups)))
    print("\nTDA Table 13: mean signed error of the total by Blau quintile (1 = homogeneous)")
    print(markdown(blau_table(groups)))


if __name__ == "__main__":
    main()
