"""Peak memory of loading a large block CSV: block-by-block reader vs whole-file reader.

Writes a synthetic RI-2010-layout block CSV of about ``--mb`` megabytes (repeating the shipped
sample's rows with fresh block ids), then loads it with :func:`engine.data.ri2010.load_ri2010` in
fresh subprocesses, once with the streaming reader (files ≥ ``STREAM_BYTES``, the default) and once
with the whole-file reader as the baseline (``STREAM_BYTES`` set above the file size), and prints
the median peak resident memory (``ru_maxrss``) and time of ``--runs`` runs each.

    python benchmarks/large_input.py --mb 150 --runs 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHILD = r"""
import json, resource, sys, time
sys.path.insert(0, {root!r})
import engine.data.validate as v
if {whole!r}:
    v.STREAM_BYTES = 1 << 62
from engine.data.ri2010 import load_ri2010
start = time.perf_counter()
hist = load_ri2010({path!r}, max_bytes=1 << 40)
print(json.dumps({{"seconds": time.perf_counter() - start, "blocks": hist.n_blocks,
    "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}))
"""


def make_file(path: Path, megabytes: float) -> int:
    lines = (ROOT / "data" / "samples" / "ri2010" / "ri2010_blocks.csv").read_text().splitlines()
    header, rows = lines[0], [r.split(",", 1)[1] for r in lines[1:]]
    target = int(megabytes * 1e6)
    n = 0
    with open(path, "w") as handle:
        handle.write(header + "\n")
        size = len(header) + 1
        while size < target:
            line = f"44{n // 10_000_000:03d}{n % 10_000_000:010d},{rows[n % len(rows)]}\n"
            handle.write(line)
            size += len(line)
            n += 1
    return n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=150.0, help="file size in MB (default 150)")
    parser.add_argument("--runs", type=int, default=3, help="runs per reader (default 3)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "blocks.csv"
        rows = make_file(path, args.mb)
        size = path.stat().st_size / 1e6
        print(f"file: {size:.0f} MB, {rows:,} blocks; median of {args.runs} runs each")
        print(f"{'reader':<34} {'peak RSS (MB)':>14} {'seconds':>9}")
        for label, whole in (("whole file (baseline)", True), ("block by block (default)", False)):
            results = []
            for _ in range(args.runs):
                code = CHILD.format(root=str(ROOT), whole=whole, path=str(path))
                done = subprocess.run(
                    [sys.executable, "-c", code], capture_output=True, text=True, check=True
                )
                results.append(json.loads(done.stdout.strip().splitlines()[-1]))
            peak = statistics.median(r["peak_mb"] for r in results)
            secs = statistics.median(r["seconds"] for r in results)
            print(f"{label:<34} {peak:>14.0f} {secs:>9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
