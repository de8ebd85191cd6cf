"""Run the Tumult Analytics PHSafe-shaped workload (``phsafe_like.py``) from PHExplore's benchmark.

Called by ``benchmarks/spark.py --tumult`` in PHExplore's environment: writes the nine measured
runs of PHExplore's ``phsafe-2020`` (τ and ρ of every population-group level, PHS §3.2, Table 10)
as JSON, runs ``phsafe_like.py`` with the Tumult virtualenv's Python (``setup.sh`` makes it) on
the same generated population, and returns its per-trial seconds as a benchmark row.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
VENV_PYTHON = HERE / ".venv-tumult" / "bin" / "python"


def runs_of_preset(name: str = "phsafe-2020") -> list[dict[str, Any]]:
    """The measured runs of a PHSafe preset: name, algorithm, τ and the ρ of each enabled level."""
    from engine.phsafe.config import MEASURED_TABLES, preset
    from engine.phsafe.tables import MEASURED

    config = preset(name)
    runs = []
    for table in MEASURED_TABLES:
        levels = []
        for level in config.enabled_levels(table):
            geo, iteration = level.split("_", 1)
            levels.append({"geo": geo, "iteration": iteration, "rho": config.budget(table, level)})
        runs.append(
            {
                "name": table,
                "algorithm": MEASURED[table].algorithm,
                "tau": int(config.tau.get(table, 1)),
                "levels": levels,
            }
        )
    return runs


def run_tumult(
    folder: Path, persons: int, seed: int, repeats: int, warmup: bool, master: str = "local[2]"
) -> dict[str, Any]:
    """Tumult's median seconds per trial on ``folder`` as a row of benchmarks/spark.py."""
    if not VENV_PYTHON.is_file():
        raise SystemExit(
            f"no Tumult virtualenv at {VENV_PYTHON.parent.parent}; run {HERE}/setup.sh"
        )
    with tempfile.TemporaryDirectory() as tmp:
        runs = Path(tmp) / "runs.json"
        runs.write_text(json.dumps(runs_of_preset()))
        command = [str(VENV_PYTHON), str(HERE / "phsafe_like.py"), "--data", str(folder)]
        command += ["--runs", str(runs), "--trials", str(repeats), "--master", master]
        if warmup:
            command.append("--warmup")
        env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "SPARK_HOME")}
        env.pop("PYTHONPATH", None)  # PHExplore's tree must not shadow the Tumult environment
        done = subprocess.run(
            command, capture_output=True, text=True, check=False, env=env, cwd=tmp
        )
    if done.returncode != 0:
        raise SystemExit(f"Tumult run failed ({' '.join(command)}):\n{done.stderr[-3000:]}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    return {
        "engine": "tumult",
        "data": (
            f"PHSafe-shaped, {out['queries_per_trial']} counts, {persons:,} persons (seed {seed})"
        ),
        "local_s": None,
        "spark_s": out["median_trial_s"],
        "identical": "n/a (Tumult draws its own noise)",
        "tumult": out,
    }
