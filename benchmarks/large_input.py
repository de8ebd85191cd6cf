"""Peak memory of loading a large block CSV: block-by-block reader vs whole-file reader.

Writes a synthetic RI-2010-layout block CSV of about ``--mb`` megabytes (repeating the shipped
sample's rows with fresh block ids), then loads it with :func:`engine.data.ri2010.load_ri2010` in
fresh subprocesses, once with the streaming reader (files ≥ ``STREAM_BYTES``, the default) and once
with the whole-file reader as the baseline (``STREAM_BYTES`` set above the file size), and prints
the median peak resident memory (``ru_maxrss``), its growth over the imports, the memory of the
data kept (the histogram's counts and geography) and time of ``--runs`` runs each.

    python benchmarks/large_input.py --mb 40 --runs 3
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
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
start = time.perf_counter()
hist = load_ri2010({path!r}, max_bytes=1 << 40)
kept = hist.counts.nbytes + int(hist.geography.memory_usage(deep=True).sum())
print(json.dumps({{"seconds": time.perf_counter() - start, "blocks": hist.n_blocks,
    "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "base_mb": base,
    "kept_mb": kept / 2**20}}))
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
        print(
            f"{'reader':<26} {'peak RSS MB':>12} {'over imports':>13} {'kept MB':>8} "
            f"{'over/kept':>10} {'seconds':>8}"
        )
        for label, whole in (("whole file (baseline)", True), ("block by block (default)", False)):
            results = []
            for _ in range(args.runs):
                code = CHILD.format(root=str(ROOT), whole=whole, path=str(path))
                done = subprocess.run(
                    [sys.executable, "-c", code], capture_output=True, text=True, check=True
                )
                results.append(json.loads(done.stdout.strip().splitlines()[-1]))
            peak = statistics.median(r["peak_mb"] for r in results)
            over = statistics.median(r["peak_mb"] - r["base_mb"] for r in results)
            kept = statistics.median(r["kept_mb"] for r in results)
            secs = statistics.median(r["seconds"] for r in results)
            print(
                f"{label:<26} {peak:>12.0f} {over:>13.0f} {kept:>8.0f} {over / kept:>10.1f} "
                f"{secs:>8.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
