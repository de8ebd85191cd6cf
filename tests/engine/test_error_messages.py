"""Engine errors name no command of the CLI: the engine is the library of two faces (the CLI and the
app), so advice such as "run it with 'phexplore run topdown'" is added by the face that knows it
(e.g. ``phexplore.cli.run_replay``, ``phexplore.api.runs``), never by the engine."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ENGINE = Path(__file__).resolve().parents[2] / "engine"
COMMAND = re.compile(r"phexplore (run|generate|samples|plan|report|experiment|moe|presets|app)\b")


def _raised_texts(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Raise) and node.exc is not None:
            for part in ast.walk(node.exc):
                if isinstance(part, ast.Constant) and isinstance(part.value, str):
                    out.append((node.lineno, part.value))
    return out


def test_engine_errors_tell_no_cli_command() -> None:
    found = [
        f"{path.relative_to(ENGINE.parent)}:{line}: {text.strip()[:80]}"
        for path in sorted(ENGINE.rglob("*.py"))
        for line, text in _raised_texts(path)
        if COMMAND.search(text)
    ]
    assert not found, "\n".join(found)
    # the check sees f-strings and concatenations (it would have found the old advice)
    sample = "raise ValidationError(f'{x}: run it with ' 'phexplore run topdown')"
    tree = ast.parse(sample)
    texts = [p.value for p in ast.walk(tree) if isinstance(p, ast.Constant)]
    assert any(COMMAND.search(t) for t in texts)
