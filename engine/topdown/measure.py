"""Measurement phase: noisy answers to every query group at every geounit (TDA §6.1, App. B).

Per-node per-query budgets come from the allocation (:func:`node_query_budget`): the query budget of
node n for query q is ρ·c_level·d_{level,q} (TDA App. B Thm 2; docs/science.md §1). zCDP runs add
discrete Gaussian noise with σ² = 1/budget (bounded neighbours: L2 sensitivity √2, so σ² = Δ²/(2ρ_q)
= 1/ρ_q); pure-DP runs (2018 E2E test, PF) add two-sided geometric noise with z = budget/2 (L1
sensitivity 2). Noise comes from :mod:`engine.noise`: by default from the counter-based generator
keyed by (seed, level, geounit, query) (:mod:`engine.noise.keyed`, docs/science.md §8), so a run is
reproducible from its seed whatever the order or split of the work; ``method="exact"`` draws from
OpenDP's exact samplers (release-grade, not reproducible).

Invariants (TDA §5.2) bypass noise: by default the TOTAL of the US and of every state. An invariant
set at one level is also held at every level above it (its right-hand side summed up the tree,
docs/science.md §4), which keeps every parent→children problem feasible. A spine may also hold the
*sum* of sibling geounits (:class:`InvariantSum`): a state split into AIAN-style inside and outside
branches measures both branches with noise and holds only their sum (TDA §7.4).

A spine other than the conventional one (SPN: AIAN branches, optimized block groups, bypassed
single-child parents) supplies its own tree and, if it moves budget between nodes, its own
``(n_nodes, n_queries)`` budget array; :func:`node_query_budget` is the conventional rule, including
the one documented level rule: an allocation root level the data lack (e.g. ``US`` for a one-state
file) whose single child is the tree's root is bypassed: its level share is added to the child's,
which is measured with the bypassed level's query proportions (SPN §5, Algorithm 3, Observation 1:
the merged geounit sits in the parent's geolevel).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import scipy.sparse as sp

from engine import noise
from engine.core.errors import ValidationError
from engine.dp.budget import TopDownAllocation
from engine.noise.keyed import unit_keys
from engine.topdown.batch_answers import DrawnAnswers
from engine.topdown.geography import GeoTree
from engine.topdown.queries import QueryGroup
from engine.topdown.sparse_histograms import dense_rows

DEFAULT_INVARIANTS: Mapping[str, tuple[str, ...]] = {"US": ("TOTAL",), "State": ("TOTAL",)}
"""Levels whose query answers are published exactly (TDA §5.2: US and state total population)."""


@dataclass(frozen=True)
class InvariantSum:
    """The answer to ``query`` summed over sibling tree ``nodes`` is held exact (TDA §5.2, §7.4).

    A state whose geounit is split into an AIAN-style inside and outside branch keeps its total
    invariant as the sum of the two branches, each branch being measured with noise ("only their
    sum is invariant", TDA §7.4). A single node is an ordinary invariant (no noise). ``nodes`` are
    node indices of the run's :class:`~engine.topdown.geography.GeoTree`.
    """

    query: str
    nodes: tuple[int, ...]


@dataclass(frozen=True)
class HeldSum:
    """A resolved :class:`InvariantSum` of two or more siblings: query index, nodes, exact answer."""

    query: int
    nodes: np.ndarray
    exact: np.ndarray


def held_sums(
    tree: GeoTree,
    truth: np.ndarray | sp.spmatrix,
    queries: Sequence[QueryGroup],
    sums: Sequence[InvariantSum],
) -> tuple[HeldSum, ...]:
    """The multi-node :class:`InvariantSum` constraints with their exact answers.

    Sets that hold every child of their parent are implied by the parent's invariant (which
    :func:`invariant_mask` sets) and are left out.
    """
    names = [q.name for q in queries]
    n_children = np.bincount(tree.parent[1:], minlength=tree.n_nodes)
    out: list[HeldSum] = []
    for held in sums:
        nodes = _check_sum(tree, held, names)
        if nodes.size < 2 or nodes.size == n_children[tree.parent[nodes[0]]]:
            continue
        q = names.index(held.query)
        exact = queries[q].answer(dense_rows(truth, nodes)).sum(axis=0).astype(np.float64)
        out.append(HeldSum(q, nodes, exact))
    return tuple(out)


def _check_sum(tree: GeoTree, held: InvariantSum, names: Sequence[str]) -> np.ndarray:
    if held.query not in names:
        raise ValidationError(f"invariant query {held.query!r} is not a query of this run")
    nodes = np.unique(np.asarray(held.nodes, dtype=np.int64))
    if nodes.size == 0 or nodes.min() < 0 or nodes.max() >= tree.n_nodes:
        raise ValidationError(
            f"an invariant sum of {held.query} names no node or a node outside the spine "
            f"(0..{tree.n_nodes - 1})"
        )
    if nodes.size > 1 and np.unique(tree.parent[nodes]).size != 1:
        ids = ", ".join(tree.node_id[n] for n in nodes[:5])
        raise ValidationError(
            f"an invariant sum of {held.query} must join siblings; {ids} have different parents"
        )
    return nodes


@dataclass(frozen=True)
class Measurements:
    """Noisy answers of a run: per query ``(n_nodes, size_q)`` arrays, NaN where not measured.

    ``variance[n, q]`` is the noise variance of node n's answers to query q (0 for an invariant,
    NaN where not measured); ``invariant[q]`` holds the exact answers where query q is invariant
    (NaN elsewhere) or is ``None``; ``budget`` is the per-node per-query ρ (or ε) used.
    ``nominal_variance`` is the scale the estimator weights by (TDA §7.1: W = inverse noise
    variances): σ² = 1/ρ_q for zCDP, the Laplace-equivalent 2/z² for pure DP. It equals the exact
    variance for σ ≥ 3 but, unlike it, does not collapse to ~0 at very large budgets (the discrete
    Gaussian's variance at σ² = 0.001 is ~1e-217), which would make the least squares ill-posed.
    """

    queries: tuple[QueryGroup, ...]
    noisy: tuple[np.ndarray, ...]
    variance: np.ndarray
    invariant: tuple[np.ndarray | None, ...]
    budget: np.ndarray
    mechanism: str
    nominal_variance: np.ndarray

    def weight(self) -> np.ndarray:
        """Least-squares weights 1/σ² ``(n_nodes, n_queries)``; 0 for unmeasured or invariant."""
        return weights_of(self.nominal_variance)

    def answers(self, j: int, nodes: np.ndarray) -> np.ndarray:
        """Answers to query ``j`` of ``nodes``: noisy, exact where invariant, NaN elsewhere."""
        return self.noisy[j][nodes]

    def batch_answers(self, kids: np.ndarray) -> DrawnAnswers:
        """The answers of a batch's children ``kids`` (already drawn)."""
        return DrawnAnswers(tuple(m[kids] for m in self.noisy))


def weights_of(nominal_variance: np.ndarray) -> np.ndarray:
    """Least-squares weights 1/σ² (TDA §7.1); 0 where σ² is 0 (invariant) or NaN (unmeasured)."""
    v = nominal_variance
    with np.errstate(divide="ignore", invalid="ignore"):
        w = 1.0 / v
    return np.where(np.isfinite(w) & (v > 0), w, 0.0)


def allocation_levels(tree: GeoTree, allocation: TopDownAllocation) -> dict[str, tuple[str, ...]]:
    """For each tree level, the allocation levels whose budgets it receives.

    Each tree level must be an allocation level. Allocation levels missing from the tree are an
    error, except the allocation's root when the tree's root is its child (single-child bypass,
    SPN Algorithm 3): its budgets are added to the tree root's level.
    """
    alloc_levels = tuple(allocation.geolevels)
    missing_in_alloc = [lv for lv in tree.levels if lv not in alloc_levels]
    if missing_in_alloc:
        raise ValidationError(
            f"allocation {allocation.name!r} has no share for level(s) {', '.join(missing_in_alloc)} "
            f"of the spine; its levels are {', '.join(alloc_levels)}"
        )
    out: dict[str, tuple[str, ...]] = {lv: (lv,) for lv in tree.levels}
    for lv in alloc_levels:
        if lv in tree.levels:
            continue
        root_level = tree.levels[int(tree.level[0])]
        if lv == alloc_levels[0] and len(alloc_levels) > 1 and alloc_levels[1] == root_level:
            out[root_level] = (lv, *out[root_level])
            continue
        raise ValidationError(
            f"allocation {allocation.name!r} has level {lv!r}, which the data's spine lacks "
            f"(spine levels: {', '.join(tree.levels)}); only a root level with a single child can "
            "be bypassed (SPN Algorithm 3)"
        )
    return out


def node_query_budget(
    tree: GeoTree, allocation: TopDownAllocation, query_names: Sequence[str]
) -> np.ndarray:
    """``(n_nodes, n_queries)`` budgets ρ·c·d (ε·c·d for pure DP); 0 where not measured.

    For a tree root that took a bypassed allocation root's budget, c is the sum of both level
    shares and d the bypassed (parent) level's query proportions.
    """
    mapping = allocation_levels(tree, allocation)
    per_level = np.zeros((len(tree.levels), len(query_names)))
    for i, level in enumerate(tree.levels):
        # A bypassed root's level share moves to its child, measured with the bypassed level's
        # query proportions (SPN §5: the merged geounit sits in the parent's geolevel).
        owner = mapping[level][0]
        level_share = sum((allocation.level_shares[s] for s in mapping[level]), Fraction(0))
        measured = allocation.queries(owner)
        for j, q in enumerate(query_names):
            if q in measured:
                per_level[i, j] = float(
                    allocation.rho * level_share * allocation.query_share(owner, q)
                )
    return per_level[tree.level]


def invariant_mask(
    tree: GeoTree,
    invariants: Mapping[str, Sequence[str]],
    query_names: Sequence[str],
    sums: Sequence[InvariantSum] = (),
) -> np.ndarray:
    """``(n_nodes, n_queries)`` bool: answers held exactly (levels listed and every ancestor).

    Of ``sums``, a single node is held like a listed level; a set of siblings is measured with
    noise, and its parent (and every ancestor) is held.
    """
    mask = np.zeros((tree.n_nodes, len(query_names)), dtype=bool)
    for held in sums:
        nodes = _check_sum(tree, held, query_names)
        q = list(query_names).index(held.query)
        if nodes.size == 1:
            mask[nodes[0], q] = True
        else:
            mask[tree.parent[nodes[0]], q] = True
    for level, names in invariants.items():
        if level not in tree.levels:
            continue
        nodes = tree.nodes_at_level(level)
        for name in names:
            if name not in query_names:
                raise ValidationError(f"invariant query {name!r} is not a query of this run")
            mask[nodes, list(query_names).index(name)] = True
    depth = tree.depth
    for d in range(int(depth.max()), 0, -1):  # an invariant below implies one above (summed RHS)
        nodes = np.flatnonzero(depth == d)
        np.logical_or.at(mask, tree.parent[nodes], mask[nodes])
    return mask


def spent_budget(tree: GeoTree, budget: np.ndarray, invariant: np.ndarray) -> float:
    """The budget the noisy measurements spend: the largest root-to-leaf path sum of the
    per-node per-query budgets over the answers that are measured (not invariant).

    ρ-zCDP (ε-DP) composes sequentially down a path and in parallel across disjoint geounits
    (SPN Theorem 3), so this is the run's actual privacy loss from noise; a share assigned to an
    invariant (TDA §5.2) is nominal only. :func:`engine.dp.budget.budget_use` is its analytic twin.
    """
    per_node = np.where(invariant, 0.0, np.asarray(budget, dtype=np.float64)).sum(axis=1)
    path = per_node.copy()
    for n in range(1, tree.n_nodes):  # parents are numbered before their children
        path[n] += path[tree.parent[n]]
    leaves = np.ones(tree.n_nodes, dtype=bool)
    leaves[tree.parent[1:]] = False
    return float(path[leaves].max())


KEYED_BLOCK_CELLS = 2_000_000
"""Keyed noise is drawn for at most this many cells at a time: the counter-based sampler's
temporaries then stay small (on the 2,016-cell schema a state's blocks hold ~50 M cells), and the
values are the same as in one call because every value depends only on its key and cell."""


def _in_row_blocks(
    sampler: Callable[..., np.ndarray], scale: np.ndarray, keys: np.ndarray, cells: np.ndarray
) -> np.ndarray:
    """``sampler(scale, keys, cells)`` for ``(rows, 1)`` scale/keys, evaluated in row blocks."""
    rows = max(1, KEYED_BLOCK_CELLS // max(int(cells.size), 1))
    if keys.shape[0] <= rows:
        return sampler(scale, keys, cells)
    first = sampler(scale[:rows], keys[:rows], cells)
    out = np.empty((keys.shape[0], first.shape[1]), dtype=first.dtype)
    out[:rows] = first
    for start in range(rows, keys.shape[0], rows):
        stop = start + rows
        out[start:stop] = sampler(scale[start:stop], keys[start:stop], cells)
    return out


def check_budget(budget: np.ndarray, n_nodes: int, n_queries: int, mechanism: str) -> None:
    """Refuse a per-node query budget array of the wrong shape, with a negative or non-finite
    entry, or an unknown mechanism (one message each, naming the fix)."""
    if budget.shape != (n_nodes, n_queries):
        raise ValidationError(
            f"budget array must have shape {(n_nodes, n_queries)}; got {budget.shape}"
        )
    if np.any(~np.isfinite(budget)) or np.any(budget < 0):
        raise ValidationError("per-node query budgets must be finite and non-negative")
    if mechanism not in ("zcdp", "puredp"):
        raise ValidationError(f"unknown mechanism {mechanism!r}; use 'zcdp' or 'puredp'")


def noise_variances(b: np.ndarray, mechanism: str) -> tuple[np.ndarray, np.ndarray]:
    """(exact, nominal) variance of the noise of answers measured with budgets ``b`` > 0.

    zCDP: discrete Gaussian with σ² = 1/b (TDA App. B; the exact variance is below σ² for small σ,
    docs/science.md §1); pure DP: two-sided geometric with z = b/2, nominal variance 2/z²
    (docs/science.md §4)."""
    if mechanism == "zcdp":
        return noise.discrete_gaussian_variance(1.0 / b), 1.0 / b
    return noise.two_sided_geometric_variance(b / 2.0), 2.0 / (b / 2.0) ** 2


def measure(
    truth: np.ndarray,
    queries: Sequence[QueryGroup],
    budget: np.ndarray,
    invariant: np.ndarray,
    mechanism: str,
    rng: np.random.Generator | None,
    *,
    method: noise.Method = "fast",
    seed: int | None = None,
    geounit_hash: np.ndarray | None = None,
) -> Measurements:
    """Noisy answers for every (node, query) with positive budget that is not invariant.

    With ``seed`` and ``geounit_hash`` (H(level, geounit) of every node,
    :func:`engine.noise.keyed.geounit_hashes`) the ``fast`` noise comes from the counter-based
    generator keyed by (seed, level, geounit, query) (docs/science.md §8): a node's noise does not
    depend on which other nodes are measured with it. Otherwise from ``rng``; ``method="exact"``
    uses OpenDP.
    """
    keyed = method == "fast" and seed is not None and geounit_hash is not None
    if keyed and len(geounit_hash) != truth.shape[0]:  # type: ignore[arg-type]
        raise ValidationError("geounit_hash needs one entry per node")
    check_budget(budget, truth.shape[0], len(queries), mechanism)
    n_nodes = truth.shape[0]
    noisy: list[np.ndarray] = []
    exact: list[np.ndarray | None] = []
    variance = np.full((n_nodes, len(queries)), np.nan)
    nominal = np.full((n_nodes, len(queries)), np.nan)
    for j, group in enumerate(queries):
        answers = group.answer(truth).astype(np.float64)
        out = np.full_like(answers, np.nan)
        measured = np.flatnonzero((budget[:, j] > 0) & ~invariant[:, j])
        if measured.size:
            b = budget[measured, j][:, None]
            shape = (measured.size, group.size)
            if keyed:
                keys = unit_keys(int(seed), group.name, geounit_hash[measured])[:, None]  # type: ignore[arg-type, index]
                cells = np.arange(group.size, dtype=np.uint64)[None, :]
            if keyed and mechanism == "zcdp":
                draw = _in_row_blocks(noise.keyed_discrete_gaussian, 1.0 / b, keys, cells)
            elif keyed:
                draw = _in_row_blocks(noise.keyed_two_sided_geometric, b / 2.0, keys, cells)
            elif mechanism == "zcdp":
                draw = noise.discrete_gaussian(1.0 / b, shape, rng, method=method)
            else:
                draw = noise.two_sided_geometric(b / 2.0, shape, rng, method=method)
            variance[measured, j], nominal[measured, j] = noise_variances(b[:, 0], mechanism)
            out[measured] = answers[measured] + draw
        held = np.flatnonzero(invariant[:, j])
        if held.size:
            out[held] = answers[held]
            variance[held, j] = 0.0
            nominal[held, j] = 0.0
            fixed = np.full_like(answers, np.nan)
            fixed[held] = answers[held]
            exact.append(fixed)
        else:
            exact.append(None)
        noisy.append(out)
    return Measurements(
        queries=tuple(queries),
        noisy=tuple(noisy),
        variance=variance,
        invariant=tuple(exact),
        budget=budget,
        mechanism=mechanism,
        nominal_variance=nominal,
    )
