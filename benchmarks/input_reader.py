"""Loading + validating inputs against pyarrow's plain ``read_csv`` of the same files, same run.

What the input reader (``engine/data/csv_reader.py``) promises, measured as ratios to pyarrow's own
reader on the same machine in the same run (docs/reliability.md, "Limits"):

* ``cef``        — :func:`engine.data.cef.load_cef_extract` of a generated 1,000,000-person CEF
  extract (``persons.csv``, ``units.csv``, ``geo.csv``) against ``pyarrow.csv.read_csv`` of the
  three files; target ≤ 4×;
* ``ppmf``       — :func:`engine.data.ppmf.load_ppmf` of the same population's ``ppmf.csv``
  against ``read_csv`` of it; target ≤ 4×;
* ``generated``  — :func:`engine.data.generated.load_generated_population` of the folder (what
  ``run topdown --data FOLDER`` reads: ``ppmf.csv`` and ``blocks.csv``, the manifest verified)
  against ``read_csv`` of ``ppmf.csv`` and ``blocks.csv`` (reported, no target);
* ``bad-block-csv`` — :func:`engine.data.ri2010.load_ri2010` of a ~200 MB RI-2010-layout block
  CSV whose LAST row holds a bad count: the time to the located error against ``read_csv`` of
  the file (target ≤ 10×) and the loader's peak resident memory (target ≤ 1 GB);
* ``block-csv``  — the same file without the bad value, loaded: peak memory growth over the
  imports against the bytes the histogram keeps (counts + geography; target ≤ 3×).

"kept" is what the loaded data hold (a histogram's counts and geography, a CEF extract's three
tables as pandas reports them, deep); for PPMF person records it is the sparse histogram, far
smaller than the batches a reader holds while reading (its growth is bounded by the batch size,
not the file).

Every load runs in a fresh subprocess (its own peak RSS, ``ru_maxrss``), ``--runs`` times,
interleaving pyarrow, this checkout's loader and (with ``--before``) another checkout's loader;
the table prints medians and the same-run ratios. ``--before`` names the baseline's code — a copy
of ``main`` before the one reader, exported with ``git archive`` so that nothing is written into a
working tree — run with this machine's interpreter; each child reports which ``engine`` package it
imported, and the loaded data's digest shows both checkouts read the same numbers. On a shared
machine run it under ``nice`` and quote the ratios, not the seconds.

    .venv/bin/phexplore generate population --persons 1000000 --seed 1 --out /tmp/pop1m
    mkdir /tmp/before && git archive main | tar -x -C /tmp/before
    nice -n 10 .venv/bin/python benchmarks/input_reader.py --population /tmp/pop1m \
        --before /tmp/before --runs 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import hashlib, json, resource, sys, time
sys.path.insert(0, {root!r})
case, what, path = {case!r}, {what!r}, {path!r}
from pathlib import Path
import numpy as np
import pyarrow.csv as pacsv


def digest_frames(frames):
    h = hashlib.sha256()
    for frame in frames:
        for column in frame.columns:
            h.update(column.encode())
            h.update("\x1f".join(map(str, frame[column].tolist())).encode())
    return h.hexdigest()[:16]


def digest_hist(hist):
    h = hashlib.sha256()
    for chunk in hist.dense_row_chunks():
        h.update(np.ascontiguousarray(chunk, dtype=np.int64).tobytes())
    for level in hist.levels:
        h.update("\x1f".join(map(str, hist.geography[level].tolist())).encode())
    return h.hexdigest()[:16]


files = {{
    "cef": ["persons.csv", "units.csv", "geo.csv"],
    "ppmf": ["ppmf.csv"],
    "generated": ["ppmf.csv", "blocks.csv"],
}}
if what == "pyarrow":
    names = files.get(case)
    targets = [Path(path) / n for n in names] if names else [Path(path)]
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    rows = sum(pacsv.read_csv(t).num_rows for t in targets)
    out = {{"seconds": time.perf_counter() - start, "rows": rows}}
else:
    from engine.core.errors import DataValidationError
    if case == "cef":
        from engine.data.cef import load_cef_extract as load
    elif case == "ppmf":
        from engine.data.ppmf import load_ppmf
        load = lambda p: load_ppmf(Path(p) / "ppmf.csv", max_bytes=1 << 40)
    elif case == "generated":
        from engine.data.generated import load_generated_population as load
    else:
        from engine.data.ri2010 import load_ri2010
        load = lambda p: load_ri2010(p, max_bytes=1 << 40)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    try:
        loaded = load(path)
        problem = None
    except DataValidationError as exc:
        loaded, problem = None, exc.problems[0]
    seconds = time.perf_counter() - start
    out = {{"seconds": seconds, "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}}
    if problem is not None:
        out["problem"] = str(problem)[:200]
        out["row"] = problem.row
    elif case == "cef":
        frames = [loaded.persons, loaded.units, loaded.geo]
        out["kept_mb"] = sum(int(f.memory_usage(deep=True).sum()) for f in frames) / 2**20
        out["digest"] = digest_frames(frames)
        out["rows"] = len(loaded.persons) + len(loaded.units) + len(loaded.geo)
    else:
        if loaded.is_sparse:
            csr = loaded.sparse_counts
            kept = csr.data.nbytes + csr.indices.nbytes + csr.indptr.nbytes
        else:
            kept = loaded.counts.nbytes
        kept += int(loaded.geography.memory_usage(deep=True).sum())
        out["kept_mb"] = kept / 2**20
        out["digest"] = digest_hist(loaded)
        out["rows"] = loaded.n_blocks
out.setdefault("peak_mb", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
out["base_mb"] = base
if what != "pyarrow":
    import engine
    out["engine"] = str(Path(engine.__file__).parent)
print(json.dumps(out))
"""


def make_block_csv(path: Path, megabytes: float, *, bad_last_row: bool) -> int:
    """An RI-2010-layout block CSV of about ``megabytes`` MB (the shipped sample's rows repeated
    with fresh block ids); with ``bad_last_row`` its last row's ``pop_other`` reads ``x``."""
    lines = (ROOT / "data" / "samples" / "ri2010" / "ri2010_blocks.csv").read_text().splitlines()
    header, rows = lines[0], [r.split(",", 1)[1] for r in lines[1:]]
    column = header.split(",").index("pop_other") - 1
    target = int(megabytes * 1e6)
    n = 0
    with open(path, "w") as handle:
        handle.write(header + "\n")
        size = len(header) + 1
        while True:
            fields = rows[n % len(rows)]
            line = f"44{n // 10_000_000:03d}{n % 10_000_000:010d},{fields}\n"
            last = size + len(line) >= target
            if last and bad_last_row:
                parts = fields.split(",")
                parts[column] = "x"
                line = f"44{n // 10_000_000:03d}{n % 10_000_000:010d},{','.join(parts)}\n"
            handle.write(line)
            size += len(line)
            n += 1
            if last:
                return n


def measure(root: Path, case: str, what: str, path: Path) -> dict[str, object]:
    code = CHILD.format(root=str(root), case=case, what=what, path=str(path))
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{case}/{what} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _median(rows: list[dict[str, object]], key: str) -> float:
    return statistics.median(float(r[key]) for r in rows)  # type: ignore[arg-type]


def _result(first: dict[str, object]) -> str:
    if "problem" in first:
        return f"row {first['row']}: {str(first['problem'])[:60]}"
    return f"{first.get('rows', '')} rows, digest {first.get('digest', '')}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--population", type=Path, required=True, help="generated folder")
    parser.add_argument("--root", type=Path, default=ROOT, help="checkout whose code is timed")
    parser.add_argument("--before", type=Path, help="the baseline's code (same run, interleaved)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each (median)")
    parser.add_argument("--mb", type=float, default=200.0, help="block CSV size in MB")
    parser.add_argument("--cases", default="cef,ppmf,generated,bad-block-csv,block-csv")
    parser.add_argument("--json", action="store_true", help="print every run as JSON too")
    args = parser.parse_args()
    cases = [c for c in args.cases.split(",") if c]
    roots = {"loader": args.root, **({"before": args.before} if args.before else {})}
    every: dict[str, dict[str, list[dict[str, object]]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        paths: dict[str, Path] = {c: args.population for c in ("cef", "ppmf", "generated")}
        if "bad-block-csv" in cases:
            paths["bad-block-csv"] = Path(tmp) / "bad_blocks.csv"
            make_block_csv(paths["bad-block-csv"], args.mb, bad_last_row=True)
        if "block-csv" in cases:
            paths["block-csv"] = Path(tmp) / "blocks.csv"
            make_block_csv(paths["block-csv"], args.mb, bad_last_row=False)
        for case in cases:
            every[case] = {"pyarrow": [], **{name: [] for name in roots}}
            for _ in range(args.runs):
                every[case]["pyarrow"].append(measure(ROOT, case, "pyarrow", paths[case]))
                for name, root in roots.items():
                    every[case][name].append(measure(root, case, "loader", paths[case]))
        sizes = {
            c: sum(p.stat().st_size for p in _files(c, paths[c])) / 1e6 for c in cases if c in paths
        }
    code = ", ".join(f"{name}: {every[cases[0]][name][0]['engine']}" for name in roots)
    print(f"code ({code}); medians of {args.runs} runs, one fresh process per load")
    print(
        "| case | MB | code | pyarrow read_csv s | loader s | × pyarrow | peak MB | growth MB | "
        "kept MB | growth/kept | result |"
    )
    print("|" + "---|" * 11)
    for case in cases:
        b = _median(every[case]["pyarrow"], "seconds")
        for name in roots:
            load = every[case][name]
            s = _median(load, "seconds")
            peak = _median(load, "peak_mb")
            growth = statistics.median(float(r["peak_mb"]) - float(r["base_mb"]) for r in load)
            kept = [float(r["kept_mb"]) for r in load if "kept_mb" in r]
            kept_mb = statistics.median(kept) if kept else None
            print(
                f"| {case} | {sizes[case]:.0f} | {name} | {b:.2f} | {s:.2f} | {s / b:.1f}× | "
                f"{peak:.0f} | {growth:.0f} | {'' if kept_mb is None else f'{kept_mb:.0f}'} | "
                f"{'' if kept_mb is None else f'{growth / kept_mb:.1f}×'} | {_result(load[0])} |"
            )
    if "before" in roots:
        print()
        print(
            "| case | before s | after s | after / before (same run) | peak before MB | after MB |"
        )
        print("|" + "---|" * 6)
        for case in cases:
            before, after = every[case]["before"], every[case]["loader"]
            sb, sa = _median(before, "seconds"), _median(after, "seconds")
            print(
                f"| {case} | {sb:.2f} | {sa:.2f} | {sa / sb:.2f} | {_median(before, 'peak_mb'):.0f} "
                f"| {_median(after, 'peak_mb'):.0f} |"
            )
    if args.json:
        print(json.dumps(every, indent=1))
    return 0


def _files(case: str, path: Path) -> list[Path]:
    names = {
        "cef": ["persons.csv", "units.csv", "geo.csv"],
        "ppmf": ["ppmf.csv"],
        "generated": ["ppmf.csv", "blocks.csv"],
    }.get(case)
    return [path / n for n in names] if names else [path]


if __name__ == "__main__":
    sys.exit(main())
