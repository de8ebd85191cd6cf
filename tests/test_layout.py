"""Layout rules that import-linter cannot state (its contracts, in pyproject.toml, hold the rest).

``make test`` runs ``lint-imports``: ``engine`` never imports ``phexplore``; the layers inside
``engine`` and ``phexplore``; pages import the application only; no import cycle. Here: ``app.py``
and ``serve.py`` (scripts, not packages import-linter sees) import the application only, and the engines define no
truth-vs-estimate metric (those live in ``engine/metrics``, called by the metrics stage of
``engine/runs``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _files(*folders: str) -> list[Path]:
    return [p for folder in folders for p in sorted((ROOT / folder).rglob("*.py"))]


def _imported(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
    return out


@pytest.mark.parametrize("script", ["app.py", "serve.py"])
def test_app_scripts_import_the_application_only(script: str) -> None:
    imported = {m for m in _imported(ROOT / script) if m.split(".")[0] in ("engine", "phexplore")}
    assert imported, f"{script} imports nothing of ours: the check would be vacuous"
    assert all(
        m.startswith(("phexplore.api", "phexplore.app")) or m == "phexplore" for m in imported
    ), imported


def test_import_linter_contracts_are_configured() -> None:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    for needle in ('source_modules = ["engine"]', 'type = "layers"', 'type = "acyclic_siblings"'):
        assert needle in text
    assert "lint-imports" in (ROOT / "Makefile").read_text(encoding="utf-8")


METRIC_NAMES = {
    # engine.metrics.spine (was engine/topdown/spine/report.py) and its pipeline stage
    "level_total_mae",
    "entity_total_mae",
    "grouped_total_mae",
    "spine_mae",
    "spine_metrics",
    "spine_report",
    # engine.metrics.phsafe_errors (was engine/phsafe/errors_analysis.py)
    "cell_errors",
    "level_summary",
    "truncation_at_scale",
    "empirical_moe",
    "mean_absolute",
    "level_errors",
}
"""Truth-vs-estimate computations that moved out of the engines (SPN §7; PHS §7.1)."""


def _defined_names(path: Path) -> set[str]:
    """Functions, classes, methods and annotated class fields defined in ``path``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return names


def test_engines_compute_no_metrics() -> None:
    assert not (ROOT / "engine" / "topdown" / "spine" / "report.py").exists()
    assert not (ROOT / "engine" / "phsafe" / "errors_analysis.py").exists()
    found = {
        str(p.relative_to(ROOT)): sorted(_defined_names(p) & METRIC_NAMES)
        for p in _files("engine/topdown", "engine/phsafe")
    }
    assert {k: v for k, v in found.items() if v} == {}
    defined = _defined_names(ROOT / "engine" / "metrics" / "spine.py") | _defined_names(
        ROOT / "engine" / "metrics" / "phsafe_errors.py"
    )
    assert {"level_total_mae", "entity_total_mae", "cell_errors", "level_summary"} <= defined
    assert "truncation_at_scale" in defined  # the checker sees what it looks for
