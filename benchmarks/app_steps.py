"""The steps of an app run and how long each takes: the engine, the metrics stage, writing the run
record into the workspace, one run of a budget sweep and one SRS replicate (the time estimate and
the progress bar of the Run page: ``engine.topdown.cost``, docs/topdown.md "The cost estimate shown
before Run").

For each data set the app's own TopDown run is timed step by step in one process — the pipeline's
progress reports mark where the engine ends and the metrics start — then the record folder is
written (:func:`phexplore.app.workspace.run_folders.write_run_folder`), then a sweep of one budget
and one seed with one SRS fraction (:func:`engine.runs.experiments.run_experiment` with the app's
sweep queries) marks a sweep run and an SRS replicate. ``--repeats`` times, medians printed with
the seconds per block of each step (2,016-cell data: as measured; 16-cell: scaled to 2,016 cells
by the cost model's rule).

Usage::

    .venv/bin/python benchmarks/app_steps.py [--data ppmf_perry_al,ri2010:County:44001,gen:100000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _data(name: str) -> tuple[Any, str, str]:
    """(histogram, label, preset) of ``sample``, ``sample:Level:unit`` or ``gen:persons``."""
    from engine.data.generated import load_generated_population
    from engine.data.histogram import subset_histogram
    from engine.data.population import generate_population
    from engine.data.samples import load_topdown_sample

    if name.startswith("gen:"):
        persons = int(float(name.split(":", 1)[1]))
        folder = Path(tempfile.mkdtemp(prefix="app-steps-")) / "population"
        generate_population(persons, seed=1, states=["RI"], out_dir=folder)
        return (
            load_generated_population(folder),
            f"generated {persons:,} RI",
            "topdown-2020-production",
        )
    sample, _, rest = name.partition(":")
    hist = load_topdown_sample(sample)
    if rest:
        level, _, unit = rest.partition(":")
        hist = subset_histogram(hist, level, [unit])
    preset = "ri2010-production-like" if hist.schema.size == 16 else "topdown-2020-production"
    return hist, name, preset


def one(hist: Any, label: str, preset: str) -> dict[str, float]:
    """Seconds of each step of one app run (and of a one-run, one-replicate sweep)."""
    from engine.dp.presets import load_topdown_preset
    from engine.runs.control import RunControl
    from engine.runs.experiments import default_queries, run_experiment
    from engine.runs.options import TopDownRunOptions
    from engine.runs.spec import RunSpec
    from engine.topdown.queries import SCHEMA_QUERIES
    from phexplore.api.limits import APP_MAX_ROWS
    from phexplore.api.run_choices import app_data_source
    from phexplore.app.records import RunRecord
    from phexplore.app.workspace.run_folders import write_run_folder

    allocation = load_topdown_preset(preset)["persons"]
    spec = RunSpec(
        engine="topdown",
        data=app_data_source(label, hist=hist),
        config=allocation.to_dict(),
        seed=1,
        options=TopDownRunOptions(),
    )
    marks: dict[str, float] = {}

    def progress(message: str, fraction: float) -> None:
        marks.setdefault(message, time.perf_counter())

    from engine.runs.pipeline import execute

    start = time.perf_counter()
    output = execute(
        spec,
        control=RunControl(progress),
        data=hist,
        tables=True,
        queries=SCHEMA_QUERIES.get(hist.schema.name),
        max_tidy_rows=APP_MAX_ROWS,
    )
    end = time.perf_counter()
    metrics_start = marks["Computing metrics"]
    record = RunRecord(1, label, "topdown", "bench", {}, output.metrics, output.tidy, output.tables)
    with tempfile.TemporaryDirectory() as folder:
        t0 = time.perf_counter()
        write_run_folder(Path(folder) / "run", record)
        saved = time.perf_counter() - t0
    sweep_marks: dict[str, float] = {}

    def sweep_progress(message: str, fraction: float) -> None:
        sweep_marks.setdefault(message.split(" (")[0], time.perf_counter())

    t0 = time.perf_counter()
    run_experiment(
        "topdown",
        hist,
        [1.0],
        [1],
        preset=preset,
        queries=default_queries(hist.schema),
        srs_fractions=[0.5],
        n_boot=20,
        control=RunControl(sweep_progress),
    )
    t1 = time.perf_counter()
    runs_done = sweep_marks["topdown runs done"]
    return {
        "engine_s": metrics_start - start,
        "metrics_s": end - metrics_start,
        "save_s": saved,
        "sweep_run_s": runs_done - t0,
        "srs_replicate_s": t1 - runs_done,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="ppmf_perry_al,ri2010:County:44001,gen:100000")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    print(
        f"{'data':<24}{'blocks':>8}{'cells':>7}  step               median s   s per block"
        " (2,016 cells)"
    )
    for name in args.data.split(","):
        hist, label, preset = _data(name)
        rows = [one(hist, label, preset) for _ in range(args.repeats)]
        scale = max(hist.schema.size / 2016.0, 0.05)
        for step in rows[0]:
            median = statistics.median(r[step] for r in rows)
            per_block = median / max(hist.n_blocks, 1) / scale
            print(
                f"{label:<24}{hist.n_blocks:>8,}{hist.schema.size:>7}  {step:<18}"
                f"{median:>9.2f}   {per_block:.2e}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
