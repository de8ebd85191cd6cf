"""The app's TopDown metrics stage: counted sparse residuals vs the dense tidy table (docs/metrics.md).

For each population size (default 1e5 persons, a generated Rhode Island) the script generates
the population, runs ``topdown-2020-production`` once (one worker, no metrics), then computes the
app's metrics (``tables=True``: metrics.json and the MAE, EPL, Blau-bias and prediction tables,
plus the tidy table the Results page charts) ``--repeats`` times each way, round-robin, every
computation in a forked child (:func:`outputs.in_child`) so its extra memory is its own:

* **sparse** — this code: :func:`engine.runs.topdown_metrics.metrics` with ``tables=True`` and the app's
  row limit (``max_tidy_rows`` = :data:`phexplore.api.limits.APP_MAX_ROWS`);
* **dense baseline** — the app path of main at 015850a, reproduced here: ``result.to_tidy()`` of
  every query, then ``mae_table``, ``epl_table``, ``blau_bias_of``, ``prediction_table`` and
  ``metrics_payload`` on it (skipped above ``--baseline-max-rows`` dense rows, default 20,000,000);
  its prediction table uses the app's sample of families (so the tables compare equal);
* **prediction sampled / prediction all** — the prediction step alone (the run's count profile
  and ``predict_topdown`` of every query): on the app's sample of whole families per level
  (:data:`engine.prediction.RUN_TABLE_MAX_UNITS` geounits, every k-th family) against every
  geounit, the app before that cap (``--no-prediction-all`` skips the latter).

Printed: dense rows, the rows the app keeps, wall seconds (median) and peak memory added (MB, max),
and whether the two ways' MAE / EPL / prediction tables are equal (computed once, in the parent).

Usage::

    .venv/bin/python benchmarks/app_metrics.py [--persons 1e5] [--repeats 3] [--no-prediction-all] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from outputs import in_child  # noqa: E402  (the forked-child measurement of benchmarks/outputs.py)


def dense_baseline(spec: Any, result: Any, hist: Any, measured: Any) -> dict[str, Any]:
    """The app's metrics stage before the sparse residuals (main at 015850a): every table from the whole tidy table."""
    from engine.metrics.epl import epl_table
    from engine.metrics.error_tables import mae_table
    from engine.metrics.prediction import prediction_table
    from engine.prediction import RUN_TABLE_MAX_UNITS
    from engine.runs import topdown_metrics as stages
    from engine.topdown.profile import tree_profile

    tidy = result.to_tidy()
    epl_boot = spec.options.epl_boot
    settings = stages.epl_settings_of(spec)
    tables = {"mae": mae_table(tidy)}
    tables["epl"] = epl_table(
        tidy, n_boot=epl_boot, rng=stages.bootstrap_rng(spec.seed), settings=settings
    )
    stages.blau_bias_of(result, tidy, hist)
    profile, _ = tree_profile(result.tree, hist, "run")
    predicted = prediction_table(
        profile, measured.allocation, tidy, max_units=RUN_TABLE_MAX_UNITS
    )  # the same sample of families as the app's (so the tables compare equal)
    if predicted is not None:
        tables["prediction"] = predicted
    stages.metrics_payload(
        result, {}, tidy=tidy, epl_boot=epl_boot, epl_settings=settings, hist=hist
    )
    return tables


def prediction_step(result: Any, hist: Any, measured: Any, *, sampled: bool) -> Any:
    """The app's prediction work: the run's count profile and :func:`predict_topdown` of every
    query of the run, on the app's sample of families per level (``sampled``) or on every
    geounit (the app before the cap)."""
    from engine.prediction import RUN_TABLE_MAX_UNITS, predict_topdown
    from engine.topdown.profile import tree_profile

    profile, _ = tree_profile(result.tree, hist, "run")
    queries = list(dict.fromkeys(["TOTAL", *result.query_names]))
    return predict_topdown(
        measured.allocation,
        profile,
        queries=queries,
        max_units=RUN_TABLE_MAX_UNITS if sampled else None,
    )


def one_size(
    persons: int,
    repeats: int,
    baseline_max_rows: int,
    seed: int,
    prediction_baseline: bool = True,
) -> dict[str, Any]:
    import pandas as pd

    from engine.data.generated import load_generated_population
    from engine.data.population import generate_population
    from engine.dp.presets import load_topdown_preset
    from engine.runs import topdown as stages
    from engine.runs import topdown_metrics as metrics_stage
    from engine.runs.control import RunControl
    from engine.runs.data_source import DataSource
    from engine.runs.options import TopDownRunOptions
    from engine.runs.pipeline import execute
    from engine.runs.spec import RunSpec
    from engine.topdown.queries import query_group
    from phexplore.api.limits import APP_MAX_ROWS

    with tempfile.TemporaryDirectory() as folder:
        generate_population(persons, seed=seed, states=["RI"], out_dir=Path(folder))
        hist = load_generated_population(folder)
    allocation = load_topdown_preset("topdown-2020-production")["persons"]
    spec = RunSpec(
        engine="topdown",
        data=DataSource(source="generated"),
        config=allocation.to_dict(),
        seed=seed,
        # the conventional spine over every block: the dense baseline predates the spine choice
        # and the error universe (so the two ways' tables compare equal)
        options=TopDownRunOptions(microdata=False, spine="conventional", error_universe="all"),
    )
    result = execute(spec, data=hist, outputs="tidy", queries=("TOTAL",)).result
    measured = stages.measure(spec, hist, RunControl())
    dense_rows = sum(
        result.tree.n_nodes * query_group(result.schema, q).size for q in result.query_names
    )

    def sparse() -> Any:
        return metrics_stage.metrics(
            spec, result, hist, measured, tables=True, max_tidy_rows=APP_MAX_ROWS
        )

    ways: dict[str, Any] = {"sparse": sparse}
    if dense_rows <= baseline_max_rows:
        ways["dense baseline"] = lambda: dense_baseline(spec, result, hist, measured)
    # the prediction step alone (the run's count profile, then every production query): the
    # app's sample of families per level against every geounit (the app before its per-level family cap)
    ways["prediction sampled"] = lambda: prediction_step(result, hist, measured, sampled=True)
    if prediction_baseline:
        ways["prediction all"] = lambda: prediction_step(result, hist, measured, sampled=False)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in ways}
    for _ in range(repeats):
        for name, work in ways.items():
            runs[name].append(in_child(work))
    kept = sparse()
    equal = None
    if "dense baseline" in ways:
        old = dense_baseline(spec, result, hist, measured)
        try:
            for name, table in old.items():
                pd.testing.assert_frame_equal(kept.tables[name], table, check_exact=True)
            equal = True
        except AssertionError:
            equal = False
    return {
        "persons": persons,
        "geounits": int(result.tree.n_nodes),
        "dense_rows": int(dense_rows),
        "app_rows": len(kept.tidy),
        "queries_left_out": list(kept.queries_left_out),
        "tables_equal": equal,
        "ways": {
            name: {
                "median_s": statistics.median(r["s"] for r in rows),
                "peak_added_mb": max(r["mb"] for r in rows),
            }
            for name, rows in runs.items()
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--persons", default="1e5", help="comma-separated sizes (1e3 – 1e7)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per way, 1 – 20 (default 3)")
    parser.add_argument(
        "--baseline-max-rows",
        type=int,
        default=20_000_000,
        help="skip the dense baseline above this many dense rows (default 20,000,000)",
    )
    parser.add_argument("--seed", type=int, default=1, help="population and noise seed")
    parser.add_argument(
        "--no-prediction-all",
        action="store_true",
        help="skip the prediction step on every geounit (the baseline; +6.9 GB at 1e6 persons)",
    )
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args(argv)
    try:
        sizes = [int(float(p)) for p in args.persons.split(",") if p.strip()]
    except ValueError:
        parser.error(f"--persons: expected numbers like 1e5,1e6; got {args.persons!r}")
    if not sizes or any(not 1_000 <= n <= 10_000_000 for n in sizes):
        parser.error("--persons: every size must lie in 1e3 – 1e7")
    if not 1 <= args.repeats <= 20:
        parser.error("--repeats must lie in 1 – 20")
    rows = [
        one_size(n, args.repeats, args.baseline_max_rows, args.seed, not args.no_prediction_all)
        for n in sizes
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(
        f"{'persons':>10} {'geounits':>9} {'dense rows':>11} {'app rows':>10} {'way':>15} "
        f"{'median s':>9} {'peak +MB':>9}  tables equal"
    )
    for row in rows:
        for name, way in row["ways"].items():
            print(
                f"{row['persons']:>10,} {row['geounits']:>9,} {row['dense_rows']:>11,} "
                f"{row['app_rows']:>10,} {name:>15} {way['median_s']:>9.2f} "
                f"{way['peak_added_mb']:>9.0f}  {row['tables_equal']}"
            )
        if row["queries_left_out"]:
            print(
                f"{'':>10} left out of the app's tidy table: {', '.join(row['queries_left_out'])}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
