"""The committee's table: the planner's sample of geounits against every geounit (docs/prediction.md,
"The committee's table").

Runs :func:`phexplore.planning.committee.published_rows` on ``topdown-2020-production`` (the shipped
national profile) each way in its own child process, so each peak memory is its own, and prints
seconds, peak RSS and the TOTAL RMSE at County, Tract and Block. Baseline: every geounit
(``max_units=None``), the table's former setting.

    python benchmarks/committee_table.py
"""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = """
import json, resource, sys, time
from engine.dp.presets import load_topdown_preset
from engine.prediction import PLANNER_MAX_FAMILIES, PLANNER_MAX_UNITS
from phexplore.planning.committee import published_rows
runs = load_topdown_preset("topdown-2020-production")
sampled = sys.argv[1] == "sampled"
kw = {"max_units": PLANNER_MAX_UNITS, "max_families": PLANNER_MAX_FAMILIES} if sampled else {
    "max_units": None, "max_families": None}
t = time.perf_counter()
rows, _ = published_rows(runs, **kw)
out = {"seconds": time.perf_counter() - t,
       "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
for r in rows:
    if r.get("query") == "TOTAL" and r.get("run") == "persons":
        out[r["geolevel"]] = r.get("post_processed_rmse")
print(json.dumps(out))
"""


def main() -> None:
    print("| way | seconds | peak MB | County TOTAL | Tract TOTAL | Block TOTAL |")
    print("|---|---:|---:|---:|---:|---:|")
    for way in ("sampled", "every"):
        done = subprocess.run(
            [sys.executable, "-c", CHILD, way], capture_output=True, text=True, check=True
        )
        r = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"| {way} | {r['seconds']:.1f} | {r['peak_mb']:,.0f} | {r.get('County', 0):.3f} | "
            f"{r.get('Tract', 0):.3f} | {r.get('Block', 0):.3f} |"
        )


if __name__ == "__main__":
    main()
