"""Replay the hostile-input corpus against a checkout and count outcomes per class.

Usage (from the repository root)::

    python tests/hostile/run_corpus.py                 # this checkout
    python tests/hostile/run_corpus.py --root /tmp/old # another checkout, e.g. commit 6b6f688

Each case runs in its own subprocess (so a hang is caught by ``--timeout``) with ``--root`` first
on ``sys.path``. Classes: ``ok`` (the expected outcome and key words), ``traceback``, ``hang``,
``accepted-silently`` (garbage in, a result out), ``refused-valid-input``, ``other-wording``
(refused, but without the key words: possibly a fine message, possibly a misleading one — read
them), ``data-damaged`` (an on-disk check failed: an earlier output or a user's file destroyed, or
files of two runs mixed), ``no-such-feature`` (the case's set-up needs a feature the checkout lacks).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent

CHILD = r"""
import json, sys
from pathlib import Path
sys.path.insert(0, {root!r})
sys.path.insert(1, {here!r})
import importlib.util
spec = importlib.util.spec_from_file_location("corpus", {corpus!r})
corpus = importlib.util.module_from_spec(spec); sys.modules["corpus"] = corpus; spec.loader.exec_module(corpus)
case = next(c for c in corpus.CASES if c.id == {case_id!r})
folder = Path({folder!r})
try:
    result = corpus.run_case(case, folder)
except BaseException as exc:
    print(json.dumps({{"cls": "no-such-feature", "detail": repr(exc)[:200]}})); sys.exit(0)
try:
    problem = corpus.verdict(case, result, folder)
except BaseException as exc:
    problem = "data damaged or mixed: " + repr(exc)[:200]
print(json.dumps({{"problem": problem, "err": result.err[-400:], "code": result.code}}))
"""


def classify(case_outcome: str, payload: dict[str, object]) -> str:
    if "cls" in payload:
        return str(payload["cls"])
    problem = payload["problem"]
    if problem is None:
        return "ok"
    text = str(problem)
    if text.startswith("traceback"):
        return "traceback"
    if text.startswith("accepted silently"):
        return "accepted-silently"
    if text.startswith("refused (should have been accepted)"):
        return "refused-valid-input"
    if text.startswith("data damaged"):
        return "data-damaged"
    return "other-wording"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=str(HERE.parents[1]), help="checkout to test")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds before 'hang'")
    parser.add_argument("--json", action="store_true", help="print every case's class as JSON")
    parser.add_argument("--only", default="", help="comma-separated case ids (default: all)")
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    import corpus

    rows = []
    only = {c for c in args.only.split(",") if c}
    for case in corpus.CASES:
        if only and case.id not in only:
            continue
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / "case"
            folder.mkdir()
            code = CHILD.format(
                root=str(Path(args.root).resolve()),
                here=str(HERE),
                corpus=str(HERE / "corpus.py"),
                case_id=case.id,
                folder=str(folder),
            )
            try:
                done = subprocess.run(
                    [sys.executable, "-c", code],
                    capture_output=True,
                    text=True,
                    timeout=args.timeout,
                    cwd=tmp,
                )
                lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
                payload = json.loads(lines[-1]) if lines else {"cls": "traceback"}
                cls = classify(case.outcome, payload)
            except subprocess.TimeoutExpired:
                cls, payload = "hang", {}
        rows.append(
            {
                "id": case.id,
                "group": case.group,
                "expected": case.outcome,
                "class": cls,
                "detail": payload.get("problem") or payload.get("detail"),
            }
        )
        print(f"{case.id:<38} {case.outcome:<9} {cls}", flush=True)
    counts = Counter(r["class"] for r in rows)
    expected = Counter(r["expected"] for r in rows)
    print()
    print(f"{len(rows)} cases ({expected['refused']} to refuse, {expected['accepted']} to accept)")
    for cls, n in counts.most_common():
        print(f"  {cls:<22} {n}")
    if args.json:
        print(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
