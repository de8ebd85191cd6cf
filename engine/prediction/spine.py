"""The shape of a geographic spine as the prediction needs it: levels, fan-outs, counts
(docs/science.md §7; SPN §3).

A :class:`SpineProfile` lists the levels root first and, for every level below the root, the number
of children of each geounit of the level above (children of one parent consecutive, parents in
order). Optionally it carries each geounit's true counts over the schema's cells (the *count
profile* of the non-negativity correction, :mod:`engine.prediction.correction`): dense arrays on
small schemas, SciPy CSR matrices on large ones (most of the 2,016 cells of a block are 0; a
national profile of 20,000,000 persons has ~480,000 blocks). Read them through
:meth:`SpineProfile.unit_counts`, :meth:`~SpineProfile.unit_cells` and
:meth:`~SpineProfile.root_counts`, which take either. It is plain data: the engine builds one from
a histogram (:func:`engine.topdown.profile.spine_profile`); shipped profiles are read by
:mod:`engine.prediction.profile_io`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np
import scipy.sparse as sp

from engine.core.errors import ValidationError
from engine.prediction.least_squares import path_coefficients
from engine.prediction.support import SupportCache, answer_indices
from engine.schema.marginals import cell_index, parse_marginal

SPARSE_MIN_CELLS = 64
"""Counts on schemas of more cells than this are kept sparse (CSR), by level."""

Counts = np.ndarray | sp.csr_matrix
"""One level's counts, ``(n_units, n_cells)``: dense, or CSR on large schemas."""


@dataclass(frozen=True, eq=False)
class SpineProfile:
    """Levels (root first), fan-outs and optional per-geounit counts of a spine.

    ``fanouts[k]`` (k ≥ 1) has one entry per geounit of level k−1; ``fanouts[0]`` is ``[1]``.
    ``counts[k]`` is ``(n_units_k, n_cells)`` true counts (or ``None``), on ``attributes``:
    a dense array or a CSR matrix (:data:`Counts`).
    """

    name: str
    levels: tuple[str, ...]
    fanouts: tuple[np.ndarray, ...]
    attributes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    counts: tuple[Counts, ...] | None = None
    source: str = ""
    licence: str = ""
    zero_query: str = ""
    zero_answers: tuple[np.ndarray, ...] | None = None
    """Structural zeros of the unit frame (TDA §5.2; ``engine/topdown/constraints``): per level,
    ``(n_units, answer cells of zero_query)`` bool, True where the answer is held at 0 (e.g. a GQ
    type in a block without such a facility) — cells the engine gives no variable."""
    child_names: tuple[str, ...] = ()
    """Optional names of the root's children (the states of a national profile), in order."""

    def __post_init__(self) -> None:
        if len(self.fanouts) != len(self.levels):
            raise ValidationError(
                f"spine profile {self.name!r}: {len(self.fanouts)} fan-out arrays for "
                f"{len(self.levels)} levels"
            )
        for k in range(1, len(self.levels)):
            if self.fanouts[k].size != self.n_units(k - 1):
                raise ValidationError(
                    f"spine profile {self.name!r}: level {self.levels[k]} has "
                    f"{self.fanouts[k].size} fan-outs for {self.n_units(k - 1)} parents"
                )
        if self.child_names and len(self.levels) > 1 and len(self.child_names) != self.n_units(1):
            raise ValidationError(
                f"spine profile {self.name!r}: {len(self.child_names)} names for "
                f"{self.n_units(1)} units of {self.levels[1]}"
            )
        if self.counts is not None:
            for k, c in enumerate(self.counts):
                if c.shape[0] != self.n_units(k):
                    raise ValidationError(
                        f"spine profile {self.name!r}: counts of {self.levels[k]} have "
                        f"{c.shape[0]} rows for {self.n_units(k)} geounits"
                    )

    # -- counts, dense or sparse -------------------------------------------------------------
    def unit_counts(
        self, k: int, units: np.ndarray | None = None, cells: np.ndarray | None = None
    ) -> np.ndarray:
        """Dense ``(len(units), len(cells))`` counts of units of level k (default all of
        either)."""
        if self.counts is None:
            raise ValidationError(f"spine profile {self.name!r} carries no counts")
        level = self.counts[k]
        rows = level if units is None else level[np.asarray(units, dtype=np.int64)]
        if cells is not None:
            rows = rows[:, np.asarray(cells, dtype=np.int64)]
        return rows.toarray() if sp.issparse(rows) else np.asarray(rows)

    def root_counts(self) -> np.ndarray:
        """The root's counts, one value per schema cell."""
        return self.unit_counts(0, np.zeros(1, dtype=np.int64))[0]

    def unit_cells(self, k: int, unit: int) -> np.ndarray:
        """The cells (sorted) where unit ``unit`` of level k has a positive count."""
        assert self.counts is not None
        level = self.counts[k]
        if sp.issparse(level):
            row = level[int(unit)]
            return np.sort(row.indices[row.data > 0]).astype(np.int64)
        return np.flatnonzero(np.asarray(level[int(unit)]) > 0)

    def populated_cells(self, k: int) -> np.ndarray:
        """Per unit of level k, the number of cells with a positive count."""
        assert self.counts is not None
        level = self.counts[k]
        if sp.issparse(level):
            return np.asarray((level > 0).sum(axis=1)).reshape(-1).astype(np.int64)
        return (np.asarray(level) > 0).sum(axis=1)

    def n_persons(self, k: int = 0) -> np.ndarray:
        """Per unit of level k, its total count."""
        assert self.counts is not None
        return np.asarray(self.counts[k].sum(axis=1)).reshape(-1)

    def zero_cells(
        self,
        k: int,
        units: np.ndarray,
        attributes: Sequence[tuple[str, Sequence[str]]],
        cells: np.ndarray | None = None,
    ) -> np.ndarray | None:
        """``(len(units), n_cells)`` bool: the structural-zero cells of the units of level k
        (``cells``: only those columns)."""
        if self.zero_answers is None or not self.zero_query:
            return None

        index = cell_index(parse_marginal(self.zero_query, attributes), attributes)
        if cells is not None:
            index = index[cells]
        return self.zero_answers[k][np.ix_(units, index)]

    def to_json(self) -> dict[str, Any]:
        """:func:`profile_to_json` of this profile."""
        return profile_to_json(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SpineProfile:
        """:func:`profile_from_json`."""
        return profile_from_json(data)

    def n_units(self, k: int) -> int:
        return 1 if k == 0 else int(np.sum(self.fanouts[k]))

    @cached_property
    def coefficients(self) -> list[np.ndarray]:
        """Per level, the path coefficients of
        :func:`engine.prediction.least_squares.path_coefficients` (computed once)."""

        return path_coefficients(self.fanouts)

    def support_cache(
        self, attributes: tuple[tuple[str, tuple[str, ...]], ...], queries: tuple[str, ...]
    ) -> Any:
        """The :class:`engine.prediction.support.SupportCache` of this profile for a schema
        and query set (budget-independent structure and covariances, reused across edits)."""

        key = (attributes, queries)
        if key not in self._support_caches:
            self._support_caches[key] = SupportCache(answer_indices(attributes, queries))
        return self._support_caches[key]

    @cached_property
    def largest_family(self) -> int:
        """The most variables (children's populated cells) of any family of the spine."""
        if self.counts is None:
            return 0
        largest = int(self.populated_cells(0).max(initial=0))
        for k in range(1, len(self.levels)):
            nnz = self.populated_cells(k)
            if nnz.size == 0:
                continue
            family = np.repeat(np.arange(self.fanouts[k].size), self.fanouts[k])
            largest = max(largest, int(np.bincount(family, weights=nnz).max(initial=0)))
        return largest

    @cached_property
    def _support_caches(self) -> dict[tuple[object, ...], Any]:
        return {}

    @cached_property
    def _restricted(self) -> dict[tuple[str, ...], SpineProfile]:
        return {}

    def restrict(self, keep: Sequence[str]) -> SpineProfile:
        """The profile with only the levels ``keep`` (root kept): a dropped level's children
        join its parent, as the engine's spine does when an allocation lacks a data level.
        Cached per ``keep``; the profile itself when nothing is dropped."""
        key = tuple(lv for lv in self.levels if lv in set(keep))
        if key == self.levels:
            return self
        if key not in self._restricted:
            self._restricted[key] = self._restrict(key)
        return self._restricted[key]

    def _restrict(self, keep: Sequence[str]) -> SpineProfile:
        keep_set = set(keep)
        if self.levels[0] not in keep_set:
            raise ValidationError(f"the root level {self.levels[0]} cannot be dropped")
        levels = [self.levels[0]]
        fanouts = [np.ones(1, dtype=np.int64)]
        counts = None if self.counts is None else [self.counts[0]]
        zeros = None if self.zero_answers is None else [self.zero_answers[0]]
        # parent index (into the last kept level) of every unit of the current level
        parent_of = np.zeros(1, dtype=np.int64)
        n_last = 1
        for k in range(1, len(self.levels)):
            kids = np.repeat(np.arange(self.n_units(k - 1)), self.fanouts[k])
            parent_of = parent_of[kids]
            if self.levels[k] in keep_set:
                fanouts.append(np.bincount(parent_of, minlength=n_last).astype(np.int64))
                n_last = self.n_units(k)
                levels.append(self.levels[k])
                if counts is not None:
                    counts.append(self.counts[k])  # type: ignore[index]
                if zeros is not None:
                    zeros.append(self.zero_answers[k])  # type: ignore[index]
                parent_of = np.arange(self.n_units(k))
        return SpineProfile(
            self.name,
            tuple(levels),
            tuple(fanouts),
            self.attributes,
            None if counts is None else tuple(counts),
            self.source,
            self.licence,
            self.zero_query,
            None if zeros is None else tuple(zeros),
            self.child_names if len(levels) > 1 and levels[1] == self.levels[1] else (),
        )

    def subtree(self, unit: int, name: str | None = None) -> SpineProfile:
        """The profile below unit ``unit`` of the level under the root (e.g. one state of a
        national profile), that unit its root: what a run on that state alone sees."""
        if len(self.levels) < 2 or not 0 <= unit < self.n_units(1):
            raise ValidationError(
                f"spine profile {self.name!r} has no unit {unit} below its root to start from"
            )
        units = np.array([unit], dtype=np.int64)
        fanouts = [np.ones(1, dtype=np.int64)]
        rows = [units]
        for k in range(2, len(self.levels)):
            starts = np.concatenate([[0], np.cumsum(self.fanouts[k])[:-1]]).astype(np.int64)
            fan = self.fanouts[k][rows[-1]]
            fanouts.append(fan.astype(np.int64))
            rows.append(
                np.concatenate(
                    [
                        np.arange(starts[u], starts[u] + f)
                        for u, f in zip(rows[-1], fan, strict=True)
                    ]
                )
                if fan.size
                else np.zeros(0, dtype=np.int64)
            )
        return SpineProfile(
            name
            or (
                f"{self.name}: {self.child_names[unit]}"
                if self.child_names
                else f"{self.name} (unit {unit} of {self.levels[1]})"
            ),
            self.levels[1:],
            tuple(fanouts),
            self.attributes,
            None
            if self.counts is None
            else tuple(self.counts[k + 1][r] for k, r in enumerate(rows)),
            self.source,
            self.licence,
            self.zero_query,
            None
            if self.zero_answers is None
            else tuple(self.zero_answers[k + 1][r] for k, r in enumerate(rows)),
        )


def aggregate_counts(fanouts: Sequence[np.ndarray], leaf: Counts) -> tuple[Counts, ...]:
    """Counts of every level from the leaves' counts (children sum to their parent); CSR in,
    CSR out."""
    out: list[Counts] = [leaf]
    for k in range(len(fanouts) - 1, 0, -1):
        child = out[0]
        if sp.issparse(child):
            parent_of = np.repeat(np.arange(fanouts[k].size), fanouts[k])
            summing = sp.csr_matrix(
                (np.ones(parent_of.size), (parent_of, np.arange(parent_of.size))),
                shape=(fanouts[k].size, parent_of.size),
            )
            out.insert(0, sp.csr_matrix(summing @ child).astype(child.dtype))
            continue
        starts = np.concatenate([[0], np.cumsum(fanouts[k])[:-1]]).astype(np.int64)
        summed = np.zeros((fanouts[k].size, child.shape[1]), dtype=child.dtype)
        nonempty = fanouts[k] > 0
        summed[nonempty] = np.add.reduceat(child, starts[nonempty], axis=0)
        out.insert(0, summed)
    return tuple(out)


def aggregate_zeros(fanouts: Sequence[np.ndarray], leaf: np.ndarray) -> tuple[np.ndarray, ...]:
    """Structural zeros of every level from the leaves': an answer is held at 0 in a geounit when
    it is in every one of its children (the bounds summed up the tree)."""
    out = [leaf.astype(bool)]
    for k in range(len(fanouts) - 1, 0, -1):
        starts = np.concatenate([[0], np.cumsum(fanouts[k])[:-1]]).astype(np.int64)
        child = out[0]
        summed = np.ones((fanouts[k].size, child.shape[1]), dtype=bool)
        nonempty = fanouts[k] > 0
        summed[nonempty] = np.logical_and.reduceat(child, starts[nonempty], axis=0)
        out.insert(0, summed)
    return tuple(out)


def profile_to_json(profile: SpineProfile) -> dict[str, Any]:
    """A JSON-able dict of ``profile`` (leaf counts only; sparse triples on large schemas)."""
    out: dict[str, Any] = {
        "name": profile.name,
        "levels": list(profile.levels),
        "fanouts": [f.tolist() for f in profile.fanouts],
        "attributes": [[a, list(lv)] for a, lv in profile.attributes],
        "source": profile.source,
        "licence": profile.licence,
    }
    if profile.child_names:
        out["child_names"] = list(profile.child_names)
    if profile.counts is not None:
        leaf = profile.counts[-1]
        if sp.issparse(leaf) or leaf.shape[1] > SPARSE_MIN_CELLS:
            coo = sp.coo_matrix(leaf)
            keep = coo.data != 0
            out["leaf_counts_sparse"] = {
                "shape": list(leaf.shape),
                "rows": coo.row[keep].tolist(),
                "cols": coo.col[keep].tolist(),
                "values": coo.data[keep].astype(np.int64).tolist(),
            }
        else:
            out["leaf_counts"] = np.asarray(leaf).astype(np.int64).tolist()
    if profile.zero_answers is not None and profile.zero_query:
        rows, cols = np.nonzero(profile.zero_answers[-1])
        out["structural_zeros"] = {
            "query": profile.zero_query,
            "shape": list(profile.zero_answers[-1].shape),
            "rows": rows.tolist(),
            "cols": cols.tolist(),
        }
    return out


def profile_from_json(data: dict[str, Any]) -> SpineProfile:
    """The profile of :func:`profile_to_json`'s dict (counts of every level summed from the
    leaves; sparse on large schemas)."""
    fanouts = tuple(np.asarray(f, dtype=np.int64) for f in data["fanouts"])
    attributes = tuple((str(a), tuple(str(x) for x in lv)) for a, lv in data["attributes"])
    leaf: Counts | None = None
    if "leaf_counts" in data:
        leaf = np.asarray(data["leaf_counts"], dtype=np.int64)
    elif "leaf_counts_sparse" in data:
        spec = data["leaf_counts_sparse"]
        shape = tuple(int(x) for x in spec["shape"])
        triples = (
            np.asarray(spec["values"], dtype=np.int64),
            (np.asarray(spec["rows"], dtype=np.int64), np.asarray(spec["cols"], dtype=np.int64)),
        )
        leaf = sp.csr_matrix(triples, shape=shape)
        if shape[1] <= SPARSE_MIN_CELLS:
            leaf = leaf.toarray()
    zero_leaf = None
    zero_query = ""
    if "structural_zeros" in data:
        spec = data["structural_zeros"]
        zero_leaf = np.zeros(tuple(int(x) for x in spec["shape"]), dtype=bool)
        zero_leaf[np.asarray(spec["rows"], dtype=np.int64), np.asarray(spec["cols"])] = True
        zero_query = str(spec["query"])
    return _assemble(data, fanouts, attributes, leaf, zero_query, zero_leaf)


def _assemble(
    data: dict[str, Any],
    fanouts: tuple[np.ndarray, ...],
    attributes: tuple[tuple[str, tuple[str, ...]], ...],
    leaf: Counts | None,
    zero_query: str,
    zero_leaf: np.ndarray | None,
) -> SpineProfile:
    return SpineProfile(
        str(data["name"]),
        tuple(str(x) for x in data["levels"]),
        fanouts,
        attributes,
        None if leaf is None else aggregate_counts(fanouts, leaf),
        str(data.get("source", "")),
        str(data.get("licence", "")),
        zero_query,
        None if zero_leaf is None else aggregate_zeros(fanouts, zero_leaf),
        tuple(str(x) for x in data.get("child_names", ())),
    )


def profile_to_npz(profile: SpineProfile, path: Any) -> None:
    """Write ``profile`` as a compressed NumPy archive (no pickled objects): what a profile of
    hundreds of thousands of blocks is shipped as (the leaf counts as CSR arrays, the
    structural zeros as bits)."""
    meta = profile_to_json(
        SpineProfile(
            profile.name, profile.levels, profile.fanouts, profile.attributes,
            source=profile.source, licence=profile.licence, child_names=profile.child_names,
        )
    )  # fmt: skip
    del meta["fanouts"]
    arrays: dict[str, np.ndarray] = {
        "meta": np.array(json.dumps(meta)),
        "fanout_lengths": np.array([f.size for f in profile.fanouts], dtype=np.int64),
        "fanouts": np.concatenate(profile.fanouts).astype(np.int32),
    }
    if profile.counts is not None:
        leaf = sp.csr_matrix(profile.counts[-1])
        leaf.sum_duplicates()
        leaf.eliminate_zeros()
        arrays |= {
            "leaf_shape": np.array(leaf.shape, dtype=np.int64),
            "leaf_indptr": leaf.indptr.astype(np.int64),
            "leaf_indices": leaf.indices.astype(np.uint16 if leaf.shape[1] < 2**16 else np.int32),
            "leaf_data": leaf.data.astype(np.int32),
        }
    if profile.zero_answers is not None and profile.zero_query:
        zero = profile.zero_answers[-1]
        arrays |= {
            "zero_query": np.array(profile.zero_query),
            "zero_shape": np.array(zero.shape, dtype=np.int64),
            "zero_bits": np.packbits(zero, axis=1),
        }
    np.savez_compressed(path, **arrays)


def profile_from_npz(path: Any) -> SpineProfile:
    """The profile written by :func:`profile_to_npz`."""
    with np.load(path, allow_pickle=False) as npz:
        data = json.loads(str(npz["meta"]))
        lengths = npz["fanout_lengths"]
        flat = npz["fanouts"].astype(np.int64)
        bounds = np.concatenate([[0], np.cumsum(lengths)])
        fanouts = tuple(flat[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True))
        attributes = tuple((str(a), tuple(str(x) for x in lv)) for a, lv in data["attributes"])
        leaf: Counts | None = None
        if "leaf_shape" in npz:
            shape = tuple(int(x) for x in npz["leaf_shape"])
            leaf = sp.csr_matrix(
                (
                    npz["leaf_data"].astype(np.int64),
                    npz["leaf_indices"].astype(np.int32),
                    npz["leaf_indptr"],
                ),
                shape=shape,
            )
            if shape[1] <= SPARSE_MIN_CELLS:
                leaf = leaf.toarray()
        zero_query, zero_leaf = "", None
        if "zero_query" in npz:
            zero_query = str(npz["zero_query"])
            shape = tuple(int(x) for x in npz["zero_shape"])
            zero_leaf = np.unpackbits(npz["zero_bits"], axis=1, count=shape[1]).astype(bool)
    return _assemble(data, fanouts, attributes, leaf, zero_query, zero_leaf)
