"""The routing table (engine/topdown/qp/route.py): a pure plan, every route to the same optimum,
the names the CLI offers, and the routes recorded by a run (metrics.json diagnostics.routes)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest

from engine.core.errors import ValidationError
from engine.dp.presets import load_topdown_preset
from engine.runs.data_source import DataSource
from engine.runs.options import TopDownRunOptions
from engine.runs.spec import RunSpec
from engine.topdown.family import FamilyBatch
from engine.topdown.options import TopDownOptions
from engine.topdown.qp.problem import Band
from engine.topdown.qp.route import ROUTES, Pass, plan, solve_pass
from engine.topdown.qp.settings import ROUTE_NAMES, SETTINGS, SOLVER_CHOICES
from tests.engine.topdown.family_models import cvxpy_objective, family_batch
from tests.engine.topdown.helpers import engine_run, ri_subset
from tests.engine.topdown.test_run import assert_consistent

PASS = [1, 2, 3]


def _bands(batch: FamilyBatch) -> list[Band]:
    first = solve_pass(batch, [0], solver="clarabel")
    return [Band(0, batch.queries[0].answer(first.x), np.full(batch.n_families, 0.1))]


def test_the_table_and_the_cli_choices_name_the_same_routes():
    assert tuple(r.name for r in ROUTES) == ROUTE_NAMES
    assert ("auto", *ROUTE_NAMES) == SOLVER_CHOICES
    assert ROUTE_NAMES[-1] == "clarabel"  # the route every family can take comes last


def test_the_choices_module_imports_no_numpy():
    code = (
        "import sys; import engine.topdown.qp.settings; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('numpy','scipy','pandas')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_plan_is_pure_and_follows_the_settings():
    batch = family_batch(3, bounds=True)
    bands = tuple(_bands(batch))
    held = Pass(batch, tuple(PASS), bands)
    first = plan(held)
    again = plan(held)
    assert list(first) == list(ROUTE_NAMES)
    assert all(np.array_equal(first[k], again[k]) for k in first)
    # These small families in a held pass: PIQP (ADMM only above piqp_max_variables).
    assert not first["admm"].any() and first["piqp"].all() and first["clarabel"].all()
    assert plan(held, replace(SETTINGS, piqp_max_variables=0.0))["admm"].all()
    # The single pass (no band held): ADMM.
    assert plan(Pass(batch, tuple(PASS)))["admm"].all()
    # A TOTAL-only pass: the closed form; no DETAILED: no family solver.
    total = plan(Pass(batch, (0,)))
    assert total["closed_form"].all() and not total["admm"].any()
    assert not total["projected_cg"].any()
    # Large children: projected CG.
    assert plan(held, replace(SETTINGS, large_persons_per_child=0.0, piqp_max_variables=0.0))[
        "projected_cg"
    ].all()
    # A named route: it (wherever it can take a family) and clarabel, nothing else.
    named = plan(held, solver="admm")
    assert list(named) == ["admm", "clarabel"] and named["admm"].all()
    with pytest.raises(ValueError, match="solver must be one of"):
        plan(held, solver="fastest")


@pytest.mark.parametrize("solver", SOLVER_CHOICES)
def test_every_route_reaches_the_optimum(solver):
    batch = family_batch(4, bounds=True)
    bands = _bands(batch)
    routes: dict[str, int] = {}
    solved = solve_pass(batch, PASS, bands, solver=solver, routes=routes)
    assert sum(routes.values()) == batch.n_families
    assert set(routes) <= {solver, "clarabel"} or solver == "auto"
    for f in range(batch.n_families):
        assert solved.objective[f] == pytest.approx(
            cvxpy_objective(batch, f, PASS, bands), rel=1e-6, abs=1e-9
        )
    assert solved.x.min() >= 0.0


def test_a_family_piqp_does_not_solve_goes_to_clarabel(monkeypatch):
    from engine.topdown.qp import general

    batch = family_batch(5)
    monkeypatch.setattr(general, "solve_piqp", lambda *_args, **_kw: None)
    routes: dict[str, int] = {}
    solved = solve_pass(batch, PASS, _bands(batch), routes=routes)
    assert routes == {"clarabel": batch.n_families}
    reference = solve_pass(batch, PASS, _bands(batch), solver="clarabel")
    assert solved.objective == pytest.approx(reference.objective, rel=1e-6)


def test_solver_option_is_checked_and_recorded():
    with pytest.raises(ValidationError, match="solver must be one of"):
        TopDownOptions(solver="fastest")
    with pytest.raises(ValidationError, match="options.solver"):
        TopDownRunOptions.from_json({"solver": "fastest"})
    named = TopDownRunOptions(solver="clarabel")
    assert named.to_json()["solver"] == "clarabel"
    assert TopDownRunOptions.from_json(named.to_json()) == named


MAIN_FINGERPRINT = "eddaa5459b98ebf49ddb0ae0a5d213f5c42ee94381151c77121f411dffb3d78b"
"""The run fingerprint main without the ``solver`` option gives the default run below
(``RunSpec(topdown, DataSource("ri2010"), ri2010-production-like, seed 1)``, computed at commit
7cfcc0c, whose options include ``error_universe``): a default run keeps it."""


def test_a_default_run_keeps_the_fingerprint_it_had_before_the_solver_option():
    allocation = load_topdown_preset("ri2010-production-like")["persons"]
    spec = RunSpec(
        engine="topdown", data=DataSource(source="ri2010"), config=allocation.to_dict(), seed=1
    )
    assert spec.options.solver == "auto" and "solver" not in spec.to_dict()["options"]
    assert spec.fingerprint() == MAIN_FINGERPRINT
    named = spec.with_option(solver="clarabel")
    assert named.to_dict()["options"]["solver"] == "clarabel"
    assert named.fingerprint() != MAIN_FINGERPRINT  # another route: another run
    assert RunSpec.from_dict(named.to_dict()) == named


def test_a_run_records_its_routes_per_level_and_a_named_route_gives_the_same_totals():
    hist = ri_subset(n_tracts_per_county=2, counties=2)
    allocation = load_topdown_preset("ri2010-production-like")["persons"]
    auto = engine_run(hist, allocation, seed=3)
    assert_consistent(auto)
    routes = auto.diagnostics["routes"]
    assert auto.diagnostics["solver"] == "auto"
    assert set(routes) >= {"State", "County", "Tract", "Block_Group", "Block"}
    assert all(set(r) <= set(ROUTE_NAMES) for r in routes.values())
    assert routes["Block"].get("admm", 0) > 0  # a block group's blocks: the single pass
    general = engine_run(hist, allocation, seed=3, options=TopDownOptions(solver="clarabel"))
    assert_consistent(general)
    assert set().union(*general.diagnostics["routes"].values()) == {"clarabel"}
    assert general.estimates[0].sum() == auto.estimates[0].sum() == hist.total
