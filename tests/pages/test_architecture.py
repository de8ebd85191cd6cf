"""The analytic core (``phexplore/`` outside ``cli/`` and ``api/``) never imports ``engine``."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imports_engine(path: Path) -> list[int]:
    lines = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            if any(a.name == "engine" or a.name.startswith("engine.") for a in node.names):
                lines.append(node.lineno)
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] == "engine"
        ):
            lines.append(node.lineno)
    return lines


def test_core_does_not_import_engine() -> None:
    core = ROOT / "phexplore"
    wiring = (core / "cli", core / "api")
    offenders = {
        str(p.relative_to(ROOT)): lines
        for p in sorted(core.rglob("*.py"))
        if not any(w in p.parents for w in wiring) and (lines := _imports_engine(p))
    }
    assert offenders == {}


def test_app_glue_lives_in_the_app_facing_api() -> None:
    assert not (ROOT / "phexplore" / "cli" / "app_runs.py").exists()
    assert not (ROOT / "phexplore" / "app_runs.py").exists()
    assert (ROOT / "phexplore" / "api" / "runs.py").exists()
    assert _imports_engine(ROOT / "phexplore" / "api" / "runs.py")
