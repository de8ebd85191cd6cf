"""The hostile-input corpus: bad (and a few good) inputs across every format and option.

Each :class:`Case` builds its inputs in a fresh folder, runs the real CLI entry point
(:func:`phexplore.cli.main`) in-process with its argv, and states the exact class of outcome:

* ``refused``  — exit status ≠ 0, no traceback, and every key word in the message (stderr);
* ``accepted`` — exit status 0 and every key word in the output (stdout).

``check`` (optional) asserts what must hold on disk afterwards (e.g. an earlier output left intact,
no stale file beside a new one). ``run_case`` is also used by ``run_corpus.py``, which replays the
corpus against another checkout (e.g. a commit before these guarantees) in subprocesses with a timeout.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CEF = ROOT / "tests" / "fixtures" / "phsafe_official" / "e2e_test1"

RI_HEADER = (
    "GEOID,pop,pop_white,pop_black,pop_hisp,pop_aian,pop_asian,pop_nhpi,pop_other,pop_two,"
    "vap,vap_white,vap_black,vap_hisp,vap_aian,vap_asian,vap_nhpi,vap_other,vap_two"
)
RI_ROWS = (
    "440010301001000,23,19,0,4,0,0,0,0,0,12,8,0,4,0,0,0,0,0",
    "440010301001001,17,17,0,0,0,0,0,0,0,14,14,0,0,0,0,0,0,0",
    "440010301001002,5,5,0,0,0,0,0,0,0,5,5,0,0,0,0,0,0,0",
)
TD = ["run", "topdown", "--preset", "ri2010-production-like", "--quiet", "--no-microdata"]


@dataclass(frozen=True)
class Case:
    """One hostile (or control) input: how to build it, the argv, and the expected outcome."""

    id: str
    group: str
    argv: Callable[[Path], list[str]]
    outcome: str  # "refused" | "accepted"
    words: tuple[str, ...]
    setup: Callable[[Path], None] | None = None
    check: Callable[[Path], None] | None = None


@dataclass
class Result:
    """What a run did: exit code, output, error text, and the escaped exception if any."""

    code: int | None
    out: str
    err: str
    escaped: str | None = None


def run_case(case: Case, folder: Path) -> Result:
    """Build the case's inputs in ``folder`` and run the CLI in-process."""
    from phexplore.cli import main

    if case.setup is not None:
        case.setup(folder)
    argv = case.argv(folder)
    out, err = io.StringIO(), io.StringIO()
    escaped = None
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code: int | None = main(argv)
            except SystemExit as exc:  # argparse usage errors
                code = exc.code if isinstance(exc.code, int) else 2
            except BaseException as exc:  # noqa: BLE001 - the corpus records what escapes
                code, escaped = None, f"{type(exc).__name__}: {exc}"[:300]
    finally:
        os.chdir(cwd)
    return Result(code, out.getvalue(), err.getvalue(), escaped)


def verdict(case: Case, result: Result, folder: Path) -> str | None:
    """None if the result is the expected class with the key words; else what went wrong."""
    if result.escaped is not None or "Traceback (most recent call last)" in result.err:
        return f"traceback: {result.escaped or result.err[-300:]}"
    text = result.err if case.outcome == "refused" else result.out
    if case.outcome == "refused":
        if result.code == 0:
            return "accepted silently (should have been refused)"
        if not result.err.strip():
            return "refused without a message"
    elif result.code != 0:
        return f"refused (should have been accepted): {result.err.strip()[:300]}"
    missing = [w for w in case.words if w.lower() not in text.lower()]
    if missing:
        return f"message lacks {missing}: {text.strip()[:300]}"
    if case.check is not None:
        try:
            case.check(folder)
        except AssertionError as exc:
            return f"data damaged or mixed: {exc}"
    return None


# ------------------------------------------------------------------ input builders


def _write(path: Path, data: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


def ri_text(*rows: str, header: str = RI_HEADER, sep: str = ",") -> str:
    lines = [header, *(rows or RI_ROWS)]
    return "\n".join(line.replace(",", sep) for line in lines) + "\n"


def ri(text: str | bytes, name: str = "blocks.csv") -> Callable[[Path], None]:
    return lambda d: _write(d / name, text)


def td(*extra: str, data: str = "blocks.csv", out: str = "out") -> Callable[[Path], list[str]]:
    return lambda d: [*TD, "--data", str(d / data), "--out", str(d / out), *extra]


def households(*extra: str, persons: str = "1000", out: str = "o") -> Callable[[Path], list[str]]:
    """``generate households --persons N *extra --out d/out``."""
    return lambda d: ["generate", "households", "--persons", persons, *extra, "--out", str(d / out)]


def cef_dir(d: Path, name: str = "cef") -> Path:
    target = d / name
    shutil.copytree(CEF, target)
    return target


def ph(*extra: str, data: str = "cef", out: str = "out") -> Callable[[Path], list[str]]:
    return lambda d: [
        "run",
        "phsafe",
        "--data",
        str(d / data),
        "--out",
        str(d / out),
        "--seed",
        "1",
        *extra,
    ]


ALLOCATION = {
    "name": "tiny",
    "mechanism": "zcdp",
    "rho": "1",
    "geolevels": ["State", "County", "Tract", "Block_Group", "Block"],
    "level_shares": {
        "State": "1/5",
        "County": "1/5",
        "Tract": "1/5",
        "Block_Group": "1/5",
        "Block": "1/5",
    },
    "query_shares": {
        lv: {"TOTAL": "1/2", "DETAILED": "1/2"}
        for lv in ["State", "County", "Tract", "Block_Group", "Block"]
    },
}


def allocation(**changes: object) -> str:
    data = {**ALLOCATION, **changes}
    return json.dumps(data)


def td_config(text: str | bytes) -> tuple[Callable[[Path], None], Callable[[Path], list[str]]]:
    def setup(d: Path) -> None:
        _write(d / "blocks.csv", ri_text())
        _write(d / "alloc.json", text)

    def argv(d: Path) -> list[str]:
        return [
            "run",
            "topdown",
            "--config",
            str(d / "alloc.json"),
            "--data",
            str(d / "blocks.csv"),
            "--out",
            str(d / "out"),
            "--quiet",
        ]

    return setup, argv


def prior_output(d: Path) -> None:
    """An earlier PHExplore output at d/out (with microdata) and the data it came from."""
    from phexplore.cli import main

    _write(d / "blocks.csv", ri_text())
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main([*TD[:-1], "--data", str(d / "blocks.csv"), "--out", str(d / "out")])
    assert code == 0, "the prior run failed"


def _unchanged_prior(d: Path) -> None:
    manifest = json.loads((d / "out" / "manifest.json").read_text())
    assert "microdata.csv" in manifest["files"], "the earlier output was replaced"
    assert (d / "out" / "microdata.csv").is_file(), "the earlier output lost a file"


BIG = "999999999999999999"


def _scenario(**changes: object) -> str:
    data = {"schema": "phexplore-scenario/1", "name": "s", "kind": "phsafe", "delta": 1e-10}
    data.update(changes)
    return json.dumps(data)


# ------------------------------------------------------------------ the corpus


R, A = "refused", "accepted"
CASES: list[Case] = [
    # ---------------- numbers typed on the command line
    Case(
        "rho-huge-exponent",
        "number",
        lambda d: ["privacy", "--rho", "1e999999999"],
        R,
        ("exponent",),
    ),
    Case(
        "rho-100k-digits",
        "number",
        lambda d: ["privacy", "--rho", "1" * 100_000],
        R,
        ("characters long",),
    ),
    Case("rho-nan", "number", lambda d: ["privacy", "--rho", "nan"], R, ("finite",)),
    Case("rho-infinity", "number", lambda d: ["privacy", "--rho", "inf"], R, ("finite",)),
    Case("rho-negative", "number", lambda d: ["privacy", "--rho=-1"], R, ("--rho", "range")),
    Case(
        "rho-zero-denominator",
        "number",
        lambda d: ["privacy", "--rho", "1/0"],
        R,
        ("not a number",),
    ),
    Case("rho-fullwidth-digit", "number", lambda d: ["privacy", "--rho", "\uff13"], R, ("ASCII",)),
    Case("rho-exact-fraction", "number", lambda d: ["privacy", "--rho", "64/25"], A, ("ρ = 2.56",)),
    Case("rho-absurdly-large", "number", lambda d: ["privacy", "--rho", "1e300"], R, ("range",)),
    Case(
        "delta-zero", "number", lambda d: ["privacy", "--rho", "1", "--delta", "0"], R, ("--delta",)
    ),
    Case(
        "delta-nan",
        "number",
        lambda d: ["privacy", "--rho", "1", "--delta", "nan"],
        R,
        ("--delta",),
    ),
    Case(
        "epsilon-negative",
        "number",
        lambda d: ["privacy", "--rho", "1", "--epsilon=-2"],
        R,
        ("--epsilon",),
    ),
    Case("seed-negative", "number", td("--seed=-1"), R, ("--seed", "range"), ri(ri_text())),
    Case(
        "seed-beyond-int64", "number", td("--seed", "9" * 30), R, ("--seed", "range"), ri(ri_text())
    ),
    Case(
        "workers-zero",
        "number",
        td("--workers", "0"),
        R,
        ("--workers", "at least 1"),
        ri(ri_text()),
    ),
    Case(
        "workers-absurd",
        "number",
        td("--workers", "100000"),
        R,
        ("--workers", "at most 256"),
        ri(ri_text()),
    ),
    Case("topdown-rho-zero", "number", td("--rho", "0"), R, ("--rho", "range"), ri(ri_text())),
    Case(
        "topdown-rho-exponent",
        "number",
        td("--rho", "1e999999999"),
        R,
        ("exponent",),
        ri(ri_text()),
    ),
    Case("trials-zero", "number", ph("--trials", "0"), R, ("--trials", "at least 1"), cef_dir),
    Case(
        "trials-endless",
        "number",
        ph("--trials", "1000000000"),
        R,
        ("--trials", "at most 10,000"),
        cef_dir,
    ),
    Case("tau-zero", "number", ph("--tau", "0"), R, ("--tau", "at least 1"), cef_dir),
    Case(
        "tau-absurd",
        "number",
        ph("--tau", "PH3=99999999999"),
        R,
        ("--tau", "at most 10,000"),
        cef_dir,
    ),
    Case("tau-twice", "number", ph("--tau", "PH3=2,PH3=3"), R, ("twice",), cef_dir),
    Case(
        "max-bytes-zero",
        "number",
        ph("--max-bytes", "0"),
        R,
        ("--max-bytes", "at least 1"),
        cef_dir,
    ),
    Case(
        "experiment-rho-nan",
        "number",
        lambda d: ["experiment", "--rho", "nan", "--out", str(d / "o")],
        R,
        ("--rho", "finite"),
    ),
    Case(
        "experiment-seeds-endless",
        "number",
        lambda d: ["experiment", "--seeds", "10000000", "--out", str(d / "o")],
        R,
        ("--seeds", "10,000"),
    ),
    Case(
        "experiment-n-boot-endless",
        "number",
        lambda d: ["experiment", "--n-boot", "1000000000", "--out", str(d / "o")],
        R,
        ("--n-boot",),
    ),
    Case(
        "experiment-srs-zero",
        "number",
        lambda d: ["experiment", "--srs", "0", "--out", str(d / "o")],
        R,
        ("--srs",),
    ),
    Case(
        "generate-persons-absurd",
        "number",
        households("--seed", "1", persons="1000000000000"),
        R,
        ("--persons", "50,000,000"),
    ),
    Case(
        "generate-seed-negative",
        "number",
        households("--seed=-5"),
        R,
        ("--seed", "range"),
    ),
    Case(
        "generate-vacancy-nan",
        "number",
        households("--seed", "1", "--vacancy-rate", "nan"),
        R,
        ("--vacancy-rate",),
    ),
    Case(
        "confidence-above-one",
        "number",
        lambda d: ["moe", "phsafe", "--confidence", "1.5"],
        R,
        ("confidence",),
    ),
    Case(
        "confidence-nan",
        "number",
        lambda d: ["moe", "phsafe", "--confidence", "nan"],
        R,
        ("confidence",),
    ),
    Case(
        "moe-topdown-rho-exponent",
        "number",
        lambda d: ["moe", "topdown", "--rho", "1e999999999"],
        R,
        ("exponent",),
    ),
    Case(
        "moe-phsafe-rho-nan",
        "number",
        lambda d: ["moe", "phsafe", "--rho", "PH3:state_A-G=nan"],
        R,
        ("finite",),
    ),
    Case(
        "moe-rho-vanishing",
        "number",
        lambda d: ["moe", "topdown", "--rho", "1e-300"],
        R,
        ("pure noise",),
    ),
    Case(
        "plan-rho-cap-negative",
        "number",
        lambda d: ["plan", "phsafe", "--targets", "phsafe-2020", "--rho-cap=-1"],
        R,
        ("--rho-cap",),
    ),
]


def _more_cases(name: str) -> list[Case]:
    """The cases of ``tests/hostile/<name>.py`` (built with this module's helpers)."""
    import importlib.util
    import sys

    spec = importlib.util.spec_from_file_location(
        f"hostile_{name}", Path(__file__).with_name(f"{name}.py")
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.cases(sys.modules[__name__]))


CASES += _more_cases("corpus_files")
CASES += _more_cases("corpus_outputs")
CASES += _more_cases("corpus_trust")
