"""The band of an earlier pass that a later least-squares pass must respect (TDA §7.2, eq. 7.5).

After a pass estimates a query, later passes hold every child's answer to it within a tolerance of
the pass's optimum (the "band"), so queries estimated first keep their accuracy.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Band:
    """Hold query ``query`` of every child within ``tol[family]`` of ``target`` (eq. 7.5)."""

    query: int
    target: np.ndarray
    tol: np.ndarray
