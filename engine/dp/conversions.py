"""The three ρ-zCDP → (ε, δ) conversions PHExplore offers, by name, with the label shown everywhere.

The formulas are in :mod:`engine.dp.accounting` (docs/science.md §1); this module only names them,
with no heavy import, so the CLI's ``--help`` can list them.
"""

from __future__ import annotations

from typing import Literal

Conversion = Literal["bun_steinke", "cks", "gaussian"]
CONVERSIONS: tuple[Conversion, ...] = ("bun_steinke", "cks", "gaussian")
CONVERSION_LABELS: dict[str, str] = {
    "bun_steinke": "Bun–Steinke 2016 (the conversion the TDA paper quotes)",
    "cks": "Canonne–Kamath–Steinke 2020 (tight; used by the production privacy-loss certificates)",
    "gaussian": "Gaussian-mechanism profile (approximate for discrete Gaussian noise)",
}
DEFAULT_DELTA = 1e-10
"""The δ at which ε is quoted unless the user picks another (TDA §2.1, App. B; docs/science.md §1)."""
