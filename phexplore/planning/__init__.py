"""Planning without an engine: MOE tables, target-driven budgets and scenarios.

:mod:`.moe_tables` (σ, MOE, ρ and ε per table/query of a budget), :mod:`.targets` (the least ρ
that meets accuracy targets, the best allocation under a cap, trade-off curves) and
:mod:`.scenarios` (named, saveable budgets with their runs). The CLI, the API and the app call these.
"""
