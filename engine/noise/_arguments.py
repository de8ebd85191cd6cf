"""Validation of the arguments every noise sampler shares: the scale array, the output size, the RNG.

Parameters come from the accounting of docs/science.md §1 (σ² = Δ²/(2ρ), TopDown σ² = 1/(ρ·c·d)) and
§4 (the geometric scale z); a mistake there must surface as a
:class:`~engine.core.errors.ValidationError` that names the argument, the offending element and how
to fix it, never as noise of the wrong size.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from engine.core.errors import ValidationError

# Samplers round floats to integers, so |noise| must stay far below 2^53 (exact float integers) and
# 2^63 (int64). The discrete Gaussian sampler's proposals reach about 40σ and the geometric sampler's
# about 45/z, so σ ≤ 1e12 and z ≥ 1e-12 keep every draw below 5e13.
MAX_SIGMA2 = 1.0e24
MIN_Z = 1.0e-12


@dataclass(frozen=True)
class ScaleArray:
    """A validated scale parameter: the flattened values and the shape of the requested output.

    ``values`` is either a 0-d array (one scale for every draw) or a 1-D array of length
    ``prod(shape)`` (one scale per draw, in C order).
    """

    values: np.ndarray
    shape: tuple[int, ...]

    @property
    def count(self) -> int:
        return math.prod(self.shape)

    @property
    def is_scalar(self) -> bool:
        return self.values.ndim == 0


def check_size(size: int | tuple[int, ...] | None, name: str = "size") -> tuple[int, ...] | None:
    """Return ``size`` as a shape tuple of non-negative ints (``None`` passes through)."""
    if size is None:
        return None
    items = (size,) if _is_int(size) else size
    try:
        shape = tuple(items)  # type: ignore[arg-type]
    except TypeError:
        raise ValidationError(
            f"{name} must be a non-negative integer or a tuple of them; got {size!r}"
        ) from None
    for i, n in enumerate(shape):
        if not _is_int(n):
            raise ValidationError(
                f"{name} must be a non-negative integer or a tuple of them; element {i} is {n!r}"
            )
        if int(n) < 0:
            raise ValidationError(
                f"{name} must not be negative; got {size!r} — ask for 0 draws or more"
            )
    return tuple(int(n) for n in shape)


def check_scale(
    value: ArrayLike,
    size: int | tuple[int, ...] | None,
    *,
    name: str,
    lower: float,
    upper: float,
    hint: str,
) -> ScaleArray:
    """Validate a positive, finite scale (scalar or array) and broadcast it against ``size``.

    ``size=None`` means "one draw per element of ``value``". Otherwise ``value`` must broadcast to
    ``size`` exactly as in :meth:`numpy.random.Generator.normal`.
    """
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValidationError(
            f"{name} must be a number or an array of numbers; got {value!r}"
        ) from None
    bad = ~np.isfinite(arr) | (arr <= 0)
    if bad.any():
        where = _first(bad)
        raise ValidationError(
            f"{name} must be positive and finite; {int(bad.sum())} element(s) are not, "
            f"first at {_describe(where)}: {float(arr[where] if arr.ndim else arr):g}. {hint}"
        )
    out_of_range = (arr < lower) | (arr > upper)
    if out_of_range.any():
        where = _first(out_of_range)
        raise ValidationError(
            f"{name} must be {_bounds(lower, upper)} so that every draw fits in an int64; "
            f"{_describe(where)} is {float(arr[where] if arr.ndim else arr):g}. {hint}"
        )
    shape = check_size(size)
    if shape is None:
        shape = arr.shape
    else:
        try:
            broadcast = np.broadcast_shapes(arr.shape, shape)
        except ValueError:
            broadcast = None
        if broadcast != shape:
            raise ValidationError(
                f"{name} has shape {arr.shape}, which does not broadcast to size {shape}; pass a "
                f"scalar, an array of shape {shape}, or size=None to draw one value per element"
            )
    if arr.size == 1 or (arr.size and arr.min() == arr.max()):  # one value: draw as a scalar
        return ScaleArray(np.asarray(arr.reshape(-1)[0]), shape)
    return ScaleArray(np.ascontiguousarray(np.broadcast_to(arr, shape)).reshape(-1), shape)


def check_generator(rng: object) -> np.random.Generator:
    """Require an explicit :class:`numpy.random.Generator` (seeded by the caller)."""
    if not isinstance(rng, np.random.Generator):
        raise ValidationError(
            "method='fast' needs an explicit numpy.random.Generator, e.g. "
            f"numpy.random.default_rng(seed); got {type(rng).__name__}. (An int seed is refused on "
            "purpose: reusing one seed for several calls would repeat the same noise.)"
        )
    return rng


def _is_int(x: object) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _first(mask: np.ndarray) -> tuple[int, ...]:
    """Index of the first True element (``()`` for a 0-d mask)."""
    return tuple(int(i) for i in np.argwhere(mask)[0]) if mask.ndim else ()


def _bounds(lower: float, upper: float) -> str:
    if lower <= 0:
        return f"at most {upper:g}"
    if math.isinf(upper):
        return f"at least {lower:g}"
    return f"in [{lower:g}, {upper:g}]"


def _describe(index: tuple[int, ...]) -> str:
    if not index:
        return "the scalar value"
    return f"index {index[0]}" if len(index) == 1 else f"index {index}"
