"""The objectives of planning under a ρ cap, with the words the app and the CLI show (PHS §7.1).

``max-ratio`` scales every target-meeting ρ by the same factor (the same shortfall for every target);
``weighted`` minimises the weighted sum of shortfalls (ρᵢ ∝ (wᵢ·aᵢ)^⅔, see
:mod:`phexplore.planning.targets`). No heavy import, so ``phexplore plan --help`` can list them.
"""

from __future__ import annotations

OBJECTIVE_LABELS: dict[str, str] = {
    "max-ratio": "Same shortfall for every target (scale all ρ together)",
    "weighted": "Minimise the summed shortfall (ρ ∝ (Δ/target)^⅔)",
}
"""Each objective of planning under a cap and how the app describes it."""
OBJECTIVES: tuple[str, ...] = tuple(OBJECTIVE_LABELS)
"""The objective names (``--objective``)."""
