"""One TopDown run through the run pipeline for the benchmarks (not a benchmark itself).

:func:`topdown_result` runs ``allocation`` on a block histogram the benchmark already holds with
every option at its default (the conventional spine, keyed noise, one worker; ``solver`` the
least-squares route, ``auto`` unless given) through
:func:`engine.runs.pipeline.execute` — the path the CLI and the app take — and returns the engine's
result without building any table (``outputs="result"``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.runs.data_source import DataSource  # noqa: E402
from engine.runs.options import TopDownRunOptions  # noqa: E402
from engine.runs.pipeline import execute  # noqa: E402
from engine.runs.spec import RunSpec  # noqa: E402


def topdown_result(
    hist: Any, allocation: Any, *, seed: int, label: str = "benchmark data", solver: str = "auto"
) -> Any:
    """The :class:`~engine.topdown.result.TopDownResult` of ``allocation`` on ``hist``."""
    spec = RunSpec(
        engine="topdown",
        data=DataSource(source=label),
        config=allocation.to_dict(),
        seed=seed,
        options=TopDownRunOptions(solver=solver),
    )
    return execute(spec, data=hist, outputs="result").result
