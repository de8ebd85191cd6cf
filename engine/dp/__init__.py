"""Differential-privacy budgets and their accounting: what the planners compute without an engine.

:mod:`.accounting` (ρ-zCDP composition and ρ → (ε, δ) conversions), :mod:`.distributions`
(discrete Gaussian and geometric noise: variance, tails, MOE), :mod:`.moe` (margins of error and the
ρ a target needs), :mod:`.budget` (TopDown allocations, PHSafe budgets, their fingerprint and
invariants), :mod:`.presets` (the shipped budgets, as JSON, with citations) and :mod:`.origin`
(which preset a budget is, or is modified from). See docs/science.md §1–§2.
"""
