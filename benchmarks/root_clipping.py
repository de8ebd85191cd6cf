"""The root term of the prediction (engine/prediction/root_clipping.py) against Monte Carlo of
the engine's own least squares of the root, before rounding (docs/science.md §7; TDA §7.1).

On a generated population with ``topdown-2020-production`` (the root is the state; the allocation's
US level is folded into it, as the engine does), the root's single least-squares pass is run
``--reps`` times by :func:`engine.topdown.qp.route.multipass_least_squares` — continuous
Gaussian noise with the prediction's weights, the TOTAL invariant, structural zeros held at 0, no
rounding — and the mass it lifts into the root's empty cells and the bias of every marginal
(RMS over its answers of the mean error) are compared with the mean-field term. The published
counts add the controlled rounding on top (``benchmarks/prediction.py`` measures those); the
difference between the two scripts' numbers is what the rounding does.

Usage: ``.venv/bin/python benchmarks/root_clipping.py [--persons 30000] [--population-seed 11]
[--rhos 0.64,2.556,10] [--reps 40]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.data.inputs import load_topdown_input  # noqa: E402
from engine.data.population import generate_population  # noqa: E402
from engine.dp.presets import load_topdown_preset  # noqa: E402
from engine.prediction.predict import DEFAULT_INVARIANTS, _design, held_exactly, level_budgets
from engine.prediction.root_clipping import root_clipping  # noqa: E402
from engine.prediction.support import answer_indices  # noqa: E402
from engine.schema.attributes import REDISTRICTING_SCHEMA  # noqa: E402
from engine.topdown.family import ChildBounds, FamilyBatch, QuerySpec  # noqa: E402
from engine.topdown.profile import spine_profile  # noqa: E402
from engine.topdown.qp.route import multipass_least_squares  # noqa: E402
from engine.topdown.queries import query_group  # noqa: E402


def compare(hist: object, rho: float, reps: int, seed: int) -> None:
    alloc = load_topdown_preset("topdown-2020-production")["persons"].with_rho(rho)
    spine = spine_profile(hist, alloc, name="population")  # type: ignore[arg-type]
    spine = spine.restrict([lv for lv in spine.levels if lv in alloc.geolevels])
    levels = spine.levels
    design = _design(
        alloc,
        level_budgets(alloc, levels)[levels[0]],
        held_exactly(levels, DEFAULT_INVARIANTS)[levels[0]],
        True,
        None,
    )
    names = ["TOTAL", *design.passes[0]]
    specs = tuple(
        QuerySpec(g.name, g.cell_index, g.size)
        for g in (query_group(REDISTRICTING_SCHEMA, q) for q in names)
    )
    assert spine.counts is not None
    truth = spine.counts[0][0].astype(np.float64)
    zeros = spine.zero_cells(0, np.zeros(1, dtype=np.int64), spine.attributes)
    zero = np.zeros(truth.size, dtype=bool) if zeros is None else zeros[0]
    rng = np.random.default_rng(seed)
    roots = np.tile(truth, (reps, 1))
    noisy, weight = [], np.zeros((reps, len(specs)))
    for j, spec in enumerate(specs):
        answer = spec.answer(roots)
        if spec.name == "TOTAL":
            noisy.append(answer)
            continue
        w = design.weight[spec.name]
        weight[:, j] = w
        noisy.append(answer + rng.normal(0.0, np.sqrt(1.0 / w), answer.shape))
    invariant: list[np.ndarray | None] = [None] * len(specs)
    invariant[0] = roots.sum(axis=1, keepdims=True)
    detailed = specs[names.index("DETAILED")]
    upper = np.where(np.tile(zero, (reps, 1)), 0.0, np.inf)
    batch = FamilyBatch(
        queries=specs,
        parent=None,
        child_ptr=np.arange(reps + 1),
        noisy=tuple(noisy),
        weight=weight,
        invariant=tuple(invariant),
        family_id=tuple(str(i) for i in range(reps)),
        child_id=tuple(str(i) for i in range(reps)),
        bounds=(ChildBounds(detailed, np.full(roots.shape, -np.inf), upper),),
    )
    t0 = time.perf_counter()
    estimate, _ = multipass_least_squares(batch, [list(range(1, len(specs)))])
    solve_s = time.perf_counter() - t0
    err = estimate - roots
    index = answer_indices(spine.attributes, names)
    t0 = time.perf_counter()
    term = root_clipping(design, index, truth, zero, {q: int(index[q].max()) + 1 for q in names})
    term_s = time.perf_counter() - t0
    lifted = err[:, term.empty].sum(axis=1)
    print(
        f"\n## ρ = {rho:g}: {reps} least squares of the root ({solve_s:.0f} s; the term "
        f"{term_s:.2f} s); {truth.astype(bool).sum()} populated and {term.empty_cells} empty cells"
    )
    print(
        f"mass lifted into the empty cells: Monte Carlo {lifted.mean():.1f} ± "
        f"{lifted.std(ddof=1) / np.sqrt(reps):.1f}, model {term.lifted_mass:.1f} "
        f"(model / MC {term.lifted_mass / lifted.mean():.2f})"
    )
    print(f"{'query':27s} {'bias MC':>8s} {'± SE':>6s} {'model':>8s} {'model/MC':>9s}")
    for q in names[1:]:
        n = int(index[q].max()) + 1
        answers = np.array([np.bincount(index[q], weights=e, minlength=n) for e in err])
        mean = answers.mean(axis=0)
        mc = float(np.sqrt((mean**2).mean()))
        se = float(np.sqrt((answers.var(axis=0, ddof=1) / reps).mean()))
        model = float(np.sqrt((term.bias[q] ** 2).mean()))
        print(f"{q:27s} {mc:8.3f} {se:6.3f} {model:8.3f} {model / mc:9.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--persons", type=int, default=30_000, help="persons generated (RI)")
    parser.add_argument("--population-seed", type=int, default=11, help="generator seed")
    parser.add_argument("--rhos", default="0.64,2.556,10", help="total ρ values")
    parser.add_argument("--reps", type=int, default=40, help="least squares per ρ")
    parser.add_argument("--seed", type=int, default=7, help="noise seed")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "population"
        generate_population(args.persons, seed=args.population_seed, out_dir=folder, states=["RI"])
        hist = load_topdown_input(str(folder))
        for rho in (float(x) for x in args.rhos.split(",") if x.strip()):
            compare(hist, rho, args.reps, args.seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
