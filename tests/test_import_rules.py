"""Import rules of the layout (issue 16), checked on the parsed source of every module.

data → engine (measure → estimate) → metrics → one run pipeline → CLI and pages:

* ``engine/metrics`` imports no engine (topdown, phsafe), no run pipeline and no CLI/API;
* ``engine/topdown`` and ``engine/phsafe`` import no metrics, no other engine, no pipeline, no CLI;
* ``engine/data``, ``engine/noise`` and ``engine/executors`` import no engine and no pipeline;
* pages and ``app.py`` import the app-facing API (:mod:`phexplore.api`), never ``phexplore.cli``
  nor ``engine`` directly;
* the analytic core (``phexplore/`` minus ``cli/`` and ``api/``) imports nothing from ``engine``
  (and nothing from the wiring packages).

Every import counts, including those inside functions and ``TYPE_CHECKING`` blocks. Beyond
imports, the engines define no metric: no function or result field of ``engine/topdown`` or
``engine/phsafe`` compares estimates with the truth (those live in ``engine/metrics``, called by the
metrics stage of ``engine/runs``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _module_name(path: Path) -> str:
    parts = list(
        path.with_suffix("").parts[-2:]
        if not path.is_relative_to(ROOT)
        else path.relative_to(ROOT).with_suffix("").parts
    )
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path) -> set[str]:
    """Absolute names of every module ``path`` imports (relative imports resolved)."""
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            out.add(module)
            out.update(f"{module}.{a.name}" for a in node.names)
    return out


def _files(*folders: str) -> list[Path]:
    files: list[Path] = []
    for folder in folders:
        target = ROOT / folder
        files += [target] if target.is_file() else sorted(target.rglob("*.py"))
    return files


def _within(name: str, prefixes: Iterable[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def _offenders(files: list[Path], forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for path in files:
        bad = sorted(m for m in imported_modules(path) if _within(m, forbidden))
        if bad:
            out[str(path.relative_to(ROOT))] = bad
    return out


ENGINES = ("engine.topdown", "engine.phsafe")
WIRING = ("phexplore.cli", "phexplore.api")
RULES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "metrics runs no engine": (("engine/metrics",), (*ENGINES, "engine.runs", *WIRING)),
    "topdown imports no metrics, other engine, pipeline or CLI": (
        ("engine/topdown",),
        ("engine.metrics", "engine.phsafe", "engine.runs", *WIRING),
    ),
    "phsafe imports no metrics, other engine, pipeline or CLI": (
        ("engine/phsafe",),
        ("engine.metrics", "engine.topdown", "engine.runs", *WIRING),
    ),
    "data, noise and executors import no engine": (
        ("engine/data", "engine/noise", "engine/executors.py"),
        (*ENGINES, "engine.metrics", "engine.runs", *WIRING),
    ),
    "the pipeline is not wired to a face": (("engine/runs",), WIRING),
    "pages and app.py use the app-facing API": (
        ("pages", "app.py"),
        ("phexplore.cli", "engine"),
    ),
}


@pytest.mark.parametrize("rule", sorted(RULES))
def test_import_rule(rule: str) -> None:
    folders, forbidden = RULES[rule]
    assert _offenders(_files(*folders), forbidden) == {}


def test_core_imports_no_engine_and_no_wiring() -> None:
    core = [
        p
        for p in _files("phexplore")
        if not any((ROOT / "phexplore" / w) in p.parents for w in ("cli", "api"))
    ]
    assert _offenders(core, ("engine", *WIRING)) == {}


def test_pages_use_the_api() -> None:
    used = {p.name for p in _files("pages", "app.py") if "phexplore.api" in imported_modules(p)}
    assert "app.py" in used and "run.py" in used


def test_checker_sees_imports_inside_functions(tmp_path: Path) -> None:
    module = ROOT / "engine" / "metrics" / "blau.py"
    assert "engine.data.histogram" in imported_modules(module)
    # A deliberate offender is caught (the rule can fail).
    assert _offenders([ROOT / "engine" / "runs" / "topdown.py"], ("engine.topdown",)) != {}
    inside = tmp_path / "inside.py"
    inside.write_text("def f():\n    from engine.topdown import run\n", encoding="utf-8")
    assert "engine.topdown.run" in imported_modules(inside)


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
