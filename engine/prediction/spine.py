"""The shape of a geographic spine as the prediction needs it: levels and fan-outs (docs/science.md
§7; SPN §3).

A :class:`SpineProfile` lists the levels root first and, for every level below the root, the number
of children of each geounit of the level above (children of one parent consecutive, parents in
order). Optionally it carries each geounit's true counts over the schema's cells (the *count
profile* of the non-negativity correction, :mod:`engine.prediction.correction`). It is plain
data: the engine builds one from a histogram (:func:`engine.topdown.profile.spine_profile`), and a
profile of the Rhode Island 2010 blocks is shipped as JSON (:func:`shipped_profile`).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from engine.core.errors import ValidationError
from engine.prediction.least_squares import path_coefficients
from engine.prediction.support import SupportCache, answer_indices, largest_family
from engine.schema.marginals import cell_index, parse_marginal

PROFILE_DIR = Path(__file__).with_name("profiles")


@dataclass(frozen=True, eq=False)
class SpineProfile:
    """Levels (root first), fan-outs and optional per-geounit counts of a spine.

    ``fanouts[k]`` (k ≥ 1) has one entry per geounit of level k−1; ``fanouts[0]`` is ``[1]``.
    ``counts[k]`` is ``(n_units_k, n_cells)`` true counts (or ``None``), on ``attributes``.
    """

    name: str
    levels: tuple[str, ...]
    fanouts: tuple[np.ndarray, ...]
    attributes: tuple[tuple[str, tuple[str, ...]], ...] = ()
    counts: tuple[np.ndarray, ...] | None = None
    source: str = ""
    licence: str = ""
    zero_query: str = ""
    zero_answers: tuple[np.ndarray, ...] | None = None
    """Structural zeros of the unit frame (TDA §5.2; ``engine/topdown/constraints``): per level,
    ``(n_units, answer cells of zero_query)`` bool, True where the answer is held at 0 (e.g. a GQ
    type in a block without such a facility) — cells the engine gives no variable."""

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
        if self.counts is not None:
            for k, c in enumerate(self.counts):
                if c.shape[0] != self.n_units(k):
                    raise ValidationError(
                        f"spine profile {self.name!r}: counts of {self.levels[k]} have "
                        f"{c.shape[0]} rows for {self.n_units(k)} geounits"
                    )

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
        """:func:`engine.prediction.support.largest_family` of the profile (computed once)."""

        if self.counts is None:
            return 0
        return largest_family(self.counts, self.fanouts)

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
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "levels": list(self.levels),
            "fanouts": [f.tolist() for f in self.fanouts],
            "attributes": [[a, list(lv)] for a, lv in self.attributes],
            "source": self.source,
            "licence": self.licence,
        }
        if self.counts is not None:
            leaf = self.counts[-1].astype(np.int64)
            if leaf.shape[1] > 64:  # sparse: most cells of the large schemas are 0
                rows, cols = np.nonzero(leaf)
                out["leaf_counts_sparse"] = {
                    "shape": list(leaf.shape),
                    "rows": rows.tolist(),
                    "cols": cols.tolist(),
                    "values": leaf[rows, cols].tolist(),
                }
            else:
                out["leaf_counts"] = leaf.tolist()
        if self.zero_answers is not None and self.zero_query:
            rows, cols = np.nonzero(self.zero_answers[-1])
            out["structural_zeros"] = {
                "query": self.zero_query,
                "shape": list(self.zero_answers[-1].shape),
                "rows": rows.tolist(),
                "cols": cols.tolist(),
            }
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SpineProfile:
        fanouts = tuple(np.asarray(f, dtype=np.int64) for f in data["fanouts"])
        attributes = tuple((str(a), tuple(str(x) for x in lv)) for a, lv in data["attributes"])
        counts = None
        if "leaf_counts" in data:
            leaf = np.asarray(data["leaf_counts"], dtype=np.int64)
            counts = aggregate_counts(fanouts, leaf)
        elif "leaf_counts_sparse" in data:
            sparse = data["leaf_counts_sparse"]
            leaf = np.zeros(tuple(int(x) for x in sparse["shape"]), dtype=np.int64)
            leaf[np.asarray(sparse["rows"], dtype=np.int64), np.asarray(sparse["cols"])] = (
                np.asarray(sparse["values"], dtype=np.int64)
            )
            counts = aggregate_counts(fanouts, leaf)
        zero_query, zero_answers = "", None
        if "structural_zeros" in data:
            spec = data["structural_zeros"]
            leaf_zero = np.zeros(tuple(int(x) for x in spec["shape"]), dtype=bool)
            leaf_zero[np.asarray(spec["rows"], dtype=np.int64), np.asarray(spec["cols"])] = True
            zero_query, zero_answers = str(spec["query"]), aggregate_zeros(fanouts, leaf_zero)
        return cls(
            str(data["name"]),
            tuple(str(x) for x in data["levels"]),
            fanouts,
            attributes,
            counts,
            str(data.get("source", "")),
            str(data.get("licence", "")),
            zero_query,
            zero_answers,
        )


def aggregate_counts(fanouts: Sequence[np.ndarray], leaf: np.ndarray) -> tuple[np.ndarray, ...]:
    """Counts of every level from the leaves' counts (children sum to their parent)."""
    out = [leaf]
    for k in range(len(fanouts) - 1, 0, -1):
        starts = np.concatenate([[0], np.cumsum(fanouts[k])[:-1]]).astype(np.int64)
        child = out[0]
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


SHIPPED_PROFILES = {
    "ri2010": "ri2010_spine.json.gz",
    "generated-ri-100k": "generated_ri_100k_spine.json.gz",
}
"""Shipped spine profiles (see ``profiles/NOTICE.md`` for sources and licences): the Rhode Island
2010 blocks on the folded VOTINGAGE × RACEETH schema, and a generated Rhode Island population of
100,000 persons (``phexplore generate population``, seed 12) on the 2,016-cell production schema."""


def profile_for(queries: Sequence[str]) -> SpineProfile:
    """The shipped profile whose schema answers every query in ``queries``: the Rhode Island 2010
    blocks when they can (the folded schema), else the generated 2,016-cell one; the RI profile
    (no count correction on another schema) when neither does."""

    for name in SHIPPED_PROFILES:
        profile = shipped_profile(name)
        try:
            for q in queries:
                parse_marginal(q, profile.attributes)
        except ValidationError:
            continue
        return profile
    return shipped_profile("ri2010")


def shipped_profile_for(runs: Any) -> SpineProfile:
    """:func:`profile_for` the queries of the persons run(s) of ``runs`` (a mapping of run name
    to :class:`engine.dp.budget.TopDownAllocation`, or one allocation)."""
    allocations = runs.values() if hasattr(runs, "values") else [runs]
    queries = [
        q
        for a in allocations
        if getattr(a, "universe", "persons") == "persons"
        for q in a.all_queries()
    ]
    return profile_for(list(dict.fromkeys(queries)))


@lru_cache(maxsize=4)
def shipped_profile(name: str = "ri2010") -> SpineProfile:
    """A shipped spine profile; ``ri2010``: the Rhode Island 2010 blocks (CC BY-SA 4.0);
    ``generated-ri-100k``: a generated RI population on the production schema (CC BY-SA 4.0)."""
    if name not in SHIPPED_PROFILES:
        raise ValidationError(
            f"unknown spine profile {name!r}; shipped: {', '.join(SHIPPED_PROFILES)}"
        )
    with gzip.open(PROFILE_DIR / SHIPPED_PROFILES[name], "rt", encoding="utf-8") as fh:
        return SpineProfile.from_json(json.load(fh))
