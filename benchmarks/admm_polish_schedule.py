"""When ADMM's first polish is tried (``QPSettings.admm_early_polish_at``): CPU of the least
squares under each schedule on every recorded unit of work, and whether the solutions change.

The polish solves the KKT system on the active set the ADMM iterate guesses and corrects it by
active-set steps (engine/topdown/qp/family_admm.py); the verified solution depends on the final
active set, not on the iterate. So an earlier first polish can save ADMM iterations without
changing a number. For every schedule the script solves every unit of the recordings
(``benchmarks/recorded_families.py``) with ``multipass_least_squares`` — the run's passes, routes
and settings but the schedule — ``--repeats`` times in one process, schedules alternating, one
BLAS thread, and prints the median CPU seconds per recording, the same-run ratio to the first
schedule (the named baseline: the schedule before 2026-11-27 evening, (10, 25)) and how many
units' solutions differ from the baseline's by even one bit.

    .venv/bin/python benchmarks/recorded_families.py --data /tmp/qp-pop/RI-1000000-seed1 --out /tmp/rec-ri1m.pkl
    .venv/bin/python benchmarks/admm_polish_schedule.py /tmp/rec-ri1m.pkl [/tmp/rec-ri2010.pkl] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recorded_families import load  # noqa: E402

from engine.core.blas_threads import single_blas_thread  # noqa: E402
from engine.topdown.qp.route import multipass_least_squares  # noqa: E402
from engine.topdown.qp.settings import SETTINGS  # noqa: E402

SCHEDULES: tuple[tuple[int, ...], ...] = ((10, 25), (5, 10, 25), (1, 5, 10, 25), (3, 10, 25))


def solve_all(units: list[dict[str, object]], schedule: tuple[int, ...]) -> list[np.ndarray]:
    settings = replace(SETTINGS, admm_early_polish_at=schedule)
    return [
        multipass_least_squares(u["batch"], u["passes"], settings=settings, objectives=False)[0]
        for u in units
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recordings", nargs="+")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print("| recording | first polishes | median CPU s | ÷ baseline (same run) | units differing |")
    print("|---|---|---|---|---|")
    for path in args.recordings:
        units = load(path)["units"]
        times: dict[tuple[int, ...], list[float]] = {s: [] for s in SCHEDULES}
        solutions: dict[tuple[int, ...], list[np.ndarray]] = {}
        with single_blas_thread():
            for _ in range(args.repeats):
                for schedule in SCHEDULES:
                    t0 = time.process_time()
                    solutions[schedule] = solve_all(units, schedule)
                    times[schedule].append(time.process_time() - t0)
        base = SCHEDULES[0]
        for schedule in SCHEDULES:
            differing = sum(
                not np.array_equal(a, b)
                for a, b in zip(solutions[schedule], solutions[base], strict=True)
            )
            median = statistics.median(times[schedule])
            ratio = median / statistics.median(times[base])
            print(
                f"| {Path(path).name} ({len(units)} units) | {schedule} | {median:.2f} | "
                f"{ratio:.2f} | {differing} |"
            )


if __name__ == "__main__":
    main()
