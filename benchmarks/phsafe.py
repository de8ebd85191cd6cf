"""Benchmark PHSafe (PHS §3): one trial of all nine measured runs on 10⁶ persons, then noise-only trials.

Usage: ``.venv/bin/python benchmarks/phsafe.py [--persons 1000000] [--trials 100] [--seed 1]``

Data: the synthetic generator (:func:`engine.data.synthetic.generate_households`, ACS-calibrated
households over the 50 states and DC). Configuration: the production US preset (PHS Table 10).
Reported: wall time of (a) preparing the extract, (b) truncate-and-join and counting for the nine
runs, (c) one noise trial, (d) ``--trials`` additional noise-only trials reusing the counts, and
(e) a complete ``run_phsafe`` call (outputs, published tables, error analysis) with one trial;
persons per second = persons / (a + b + c).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from engine.data.synthetic import generate_households
from engine.phsafe.config import preset
from engine.phsafe.join import prepare_extract
from engine.phsafe.release import measure_all, run_phsafe, tabulate_all


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persons", type=int, default=1_000_000)
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = parser.parse_args()

    t = time.perf_counter()
    extract = generate_households(args.persons, seed=args.seed)
    t_gen = time.perf_counter() - t
    config = preset("phsafe-2020")

    t, c = time.perf_counter(), time.process_time()
    prepared = prepare_extract(extract, config.state_filter)
    t_prepare = time.perf_counter() - t
    tabulations = tabulate_all(prepared, config)
    t_join = time.perf_counter() - t - t_prepare
    cpu_prepare_join = time.process_time() - c
    rng = np.random.default_rng(args.seed)
    t = time.perf_counter()
    one = measure_all(tabulations, config, trials=1, rng=rng)
    t_noise1 = time.perf_counter() - t
    t = time.perf_counter()
    many = measure_all(tabulations, config, trials=args.trials, rng=rng)
    t_noise_many = time.perf_counter() - t
    t = time.perf_counter()
    result = run_phsafe(extract, config, seed=args.seed, trials=1)
    t_full = time.perf_counter() - t

    cells = sum(level.counts.true_full.size for level in one)
    draws = sum(level.noise.size for level in many)
    one_trial = t_prepare + t_join + t_noise1
    numbers = {
        "persons": prepared.n_persons,
        "units": prepared.n_units,
        "measured_cells_per_trial": cells,
        "generate_s": t_gen,
        "prepare_s": t_prepare,
        "join_and_count_nine_runs_s": t_join,
        "noise_one_trial_s": t_noise1,
        "one_trial_total_s": one_trial,
        "cpu_prepare_and_join_s": cpu_prepare_join,
        "persons_per_s_one_trial": prepared.n_persons / one_trial,
        "additional_noise_trials": args.trials,
        "noise_only_trials_s": t_noise_many,
        "noise_draws_per_s": draws / t_noise_many,
        "run_phsafe_one_trial_with_outputs_s": t_full,
        "run_phsafe_timings": result.timings,
    }
    if args.json:
        print(json.dumps(numbers, indent=2))
        return
    print(f"PHSafe benchmark: {numbers['persons']:,} persons, {numbers['units']:,} units")
    print(f"  measured basis cells per trial        {cells:>12,}")
    print(f"  prepare extract                        {t_prepare:>10.2f} s")
    print(f"  truncate-and-join + count (9 runs)     {t_join:>10.2f} s")
    print(f"  (CPU time of prepare + join + count    {cpu_prepare_join:>10.2f} s)")
    print(f"  noise, one trial                       {t_noise1:>10.3f} s")
    print(
        f"  one trial total                        {one_trial:>10.2f} s "
        f"({numbers['persons_per_s_one_trial']:,.0f} persons/s)"
    )
    print(
        f"  {args.trials} additional noise-only trials      {t_noise_many:>10.2f} s "
        f"({numbers['noise_draws_per_s']:,.0f} draws/s)"
    )
    print(f"  run_phsafe, 1 trial, with outputs      {t_full:>10.2f} s")


if __name__ == "__main__":
    main()
