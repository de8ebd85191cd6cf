"""The AIAN-style spine: an inside and an outside branch at the state level and below (SPN §1, Fig. 1).

Given a set of special areas (block → area id; in the 2020 DAS the AIAN tribal areas), the
*Aggregated Areas* entity is the union of all their blocks. Every geounit of the split level
(the state) and of every level below it is replaced by the part inside and the part outside
that union; when one part holds no block the geounit is kept whole under its original id (SPN
footnote 2), so a state without special areas is not split. Levels above the split level (the
US root) are unchanged; a split state's total invariant is then held for the sum of its two
branches, each branch being measured with noise (TDA §7.4; the constraint is set by
:func:`engine.topdown.spine.build.build_spine`).

Split geounits are labelled ``<id>|inside`` and ``<id>|outside``.
"""

from __future__ import annotations

import numpy as np

from engine.core.errors import ValidationError
from engine.topdown.spine.levels import SpineLevels, codes_from_keys

INSIDE_SUFFIX = "|inside"
OUTSIDE_SUFFIX = "|outside"


def split_by_special_areas(
    spine: SpineLevels, inside: np.ndarray, *, split_level: str = "State"
) -> SpineLevels:
    """Split ``split_level`` and every level below by membership in the special areas' union.

    ``inside`` is a boolean array over blocks (True for blocks in any special area). The block
    level is never split (a block is either inside or outside).
    """
    inside = np.asarray(inside)
    if inside.shape != (spine.n_blocks,):
        raise ValidationError(
            f"special-area membership must have one entry per block ({spine.n_blocks}); "
            f"got shape {inside.shape}"
        )
    inside = inside.astype(bool)
    if not inside.any():
        raise ValidationError("the special areas contain none of the spine's blocks")
    start = spine.index(split_level)
    if start == 0:
        raise ValidationError("the root level cannot be split; choose a level below it")
    codes = list(spine.codes)
    labels = list(spine.labels)
    for level in range(start, spine.n_levels - 1):
        codes[level], labels[level] = _split_level(spine.codes[level], spine.labels[level], inside)
    return SpineLevels(spine.names, tuple(codes), tuple(labels))


def _split_level(
    codes: np.ndarray, labels: tuple[str, ...], inside: np.ndarray
) -> tuple[np.ndarray, tuple[str, ...]]:
    n_units = len(labels)
    has_inside = np.bincount(codes, weights=inside, minlength=n_units) > 0
    has_outside = np.bincount(codes, weights=~inside, minlength=n_units) > 0
    straddles = has_inside & has_outside
    part = np.where(straddles[codes], inside.astype(np.int64), -1)
    new_codes, first_block = codes_from_keys(codes, part)
    new_labels = []
    for block in first_block:
        label = labels[codes[block]]
        if part[block] == 1:
            label += INSIDE_SUFFIX
        elif part[block] == 0:
            label += OUTSIDE_SUFFIX
        new_labels.append(label)
    return new_codes, tuple(new_labels)
