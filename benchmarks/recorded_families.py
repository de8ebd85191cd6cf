"""Record every family batch of a real TopDown run, for the solver and rounding benchmarks.

``record(data, out)`` runs TopDown once (through the run pipeline, one worker) on ``data`` — the
shipped ``ri2010`` sample (``ri2010-production-like``) or a generated population folder
(``topdown-2020-production``; make one with ``phexplore generate population --persons 1000000 --seed 1 --states RI --out DIR``) —
and pickles, for every unit of work the estimation phase solved, the batch with its noisy
answers, its least-squares passes, its rounding chain, the least-squares solution x̃ (CSR) the
run rounded and the run's route counts. ``load(out)`` reads them back.

Usage::

    .venv/bin/python benchmarks/recorded_families.py --data ri2010 --out /tmp/rec-ri2010.pkl
    .venv/bin/python benchmarks/recorded_families.py --data /tmp/pop/RI-1000000-seed1 \
        --out /tmp/rec-ri1m.pkl
"""

from __future__ import annotations

import argparse
import pickle
import sys
import time
from pathlib import Path

import scipy.sparse as sp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pipeline_run import topdown_result  # noqa: E402

from engine.topdown import estimation as estimation_module  # noqa: E402


def _load(data: str):
    from engine.data.generated import load_generated_population
    from engine.data.samples import load_topdown_sample
    from engine.dp.presets import load_topdown_preset

    if Path(data).is_dir():
        hist = load_generated_population(data)
        allocation = load_topdown_preset("topdown-2020-production")["persons"]
    else:
        hist = load_topdown_sample(data)
        allocation = load_topdown_preset("ri2010-production-like")["persons"].with_rho(2.56)
    return hist, allocation


def record(data: str, out: str, seed: int = 1) -> dict[str, object]:
    """Run TopDown on ``data`` and pickle every unit of work to ``out`` (see the module doc)."""
    from engine.topdown.qp.route import multipass_least_squares

    hist, allocation = _load(data)
    units: list[dict[str, object]] = []
    original = estimation_module.estimate_batch

    def recording(batch, passes, chain, *rest):
        x_tilde, _ = multipass_least_squares(batch, passes)
        units.append(
            {
                "batch": batch,
                "passes": [list(p) for p in passes],
                "chain": chain,
                "x_tilde": sp.csr_matrix(x_tilde),
            }
        )
        return original(batch, passes, chain, *rest)

    estimation_module.estimate_batch = recording
    t0 = time.perf_counter()
    try:
        result = topdown_result(hist, allocation, seed=seed)
    finally:
        estimation_module.estimate_batch = original
    summary = {
        "data": data,
        "seed": seed,
        "units": len(units),
        "families": sum(u["batch"].n_families for u in units),
        "run_s": time.perf_counter() - t0,
        "routes": result.diagnostics.get("routes"),
    }
    with open(out, "wb") as handle:
        pickle.dump({"summary": summary, "units": units}, handle, protocol=5)
    return summary


def load(path: str) -> dict[str, object]:
    """The recording written by :func:`record`."""
    with open(path, "rb") as handle:
        return pickle.load(handle)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="ri2010 or a generated population folder")
    parser.add_argument("--out", required=True, help="pickle to write")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    print(record(args.data, args.out, args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
