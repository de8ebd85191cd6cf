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
import gzip
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


def _config(**changes: object) -> bytes:
    data = json.loads((CEF / "config.json").read_text())
    data.update(changes)
    return json.dumps(data).encode()


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


def config_case(case_id: str, text: str | bytes, words: tuple[str, ...]) -> Case:
    """A run topdown --config case refused with ``words``."""
    setup, argv = td_config(text)
    return Case(case_id, "json", argv, "refused", words, setup)


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


def _foreign(d: Path) -> None:
    _write(d / "out" / "thesis.tex", "precious work")


def _foreign_intact(d: Path) -> None:
    assert (d / "out" / "thesis.tex").read_text() == "precious work", "a user's file was touched"
    assert sorted(os.listdir(d / "out")) == ["thesis.tex"], "files were mixed into a user's folder"


def _no_stale_microdata(d: Path) -> None:
    names = sorted(os.listdir(d / "out"))
    assert "microdata.csv" not in names, f"an earlier run's microdata.csv was left: {names}"
    assert "manifest.json" in names


def _tampered(d: Path) -> None:
    prior_output(d)
    with open(d / "out" / "estimates.csv", "a") as handle:
        handle.write("State,44,TOTAL,0,0,999\n")


def _no_manifest(d: Path) -> None:
    prior_output(d)
    (d / "out" / "manifest.json").unlink()


def _loop(d: Path) -> None:
    os.symlink(d / "loop.csv", d / "loop.csv")


def _broken(d: Path) -> None:
    os.symlink(d / "nowhere.csv", d / "broken.csv")


def _stale_pair(d: Path) -> None:
    folder = cef_dir(d)
    (folder / "persons.csv.gz").write_bytes(gzip.compress((folder / "persons.csv").read_bytes()))


def _two_persons_files(d: Path) -> None:
    folder = cef_dir(d)
    shutil.copy(folder / "persons.csv", folder / "persons_2019.csv")


def _two_segment_ones(d: Path) -> None:
    from engine.data.samples import samples_dir

    folder = d / "pl"
    shutil.copytree(samples_dir() / "pl94171_ri2018", folder)
    shutil.copy(folder / "ri000012018_2020Style.pl", folder / "ri000012018_old.pl")


def _mapping_named(data: str, mapping: str, text: str, rows: str) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        _write(d / data, rows)
        _write(d / mapping, text)

    return setup


SUM_MAPPING = json.dumps(
    {
        "schema": {"attributes": [{"name": "ALL", "levels": ["all"]}]},
        "geography": {"geoid": "GEOID"},
        "cells": {"a": {"ALL": "all"}, "b": {"ALL": "all"}},
    }
)
BIG = "999999999999999999"
SUM_ROWS = "GEOID,a,b\n" + "".join(f"4400103010010{k:02d},{BIG},{BIG}\n" for k in range(10))


def _scenario_with_result(result: dict[str, object]) -> str:
    """A valid saved scenario (the phsafe-2020 budget) with ``result`` attached."""
    from phexplore.planning.scenarios import scenario_from_preset

    data = scenario_from_preset("phsafe-2020").to_dict()
    data["results"] = [result]
    return json.dumps(data)


def _altered_population(d: Path) -> None:
    """A population folder written by the CLI, then edited by hand (a row appended)."""
    from phexplore.cli import main

    argv = ["generate", "population", "--persons", "1000", "--seed", "3", "--states", "RI"]
    argv += ["--out", str(d / "pop")]
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert main(argv) == 0, "generating the population failed"
    target = next(p for p in sorted((d / "pop").iterdir()) if p.name.startswith("blocks"))
    target.write_bytes(target.read_bytes() + target.read_bytes().splitlines(keepends=True)[-1])


def _report_file(d: Path) -> None:
    from phexplore.cli import main

    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["report", "--preset", "phsafe-2020", "--out", str(d / "r.html")]) == 0


def _nested(depth: int) -> str:
    return '{"name": "x", "notes": ' + "[" * depth + "]" * depth + "}"


def _scenario(**changes: object) -> str:
    data = {"schema": "phexplore-scenario/1", "name": "s", "kind": "phsafe", "delta": 1e-10}
    data.update(changes)
    return json.dumps(data)


def _targets(**changes: object) -> str:
    data = {"tau": {"PH1_num": 10}, "moe_targets": {"PH1_num": {"usa_*": 10}}}
    data.update(changes)
    return json.dumps(data)


def _mapping(text: str) -> Callable[[Path], None]:
    def setup(d: Path) -> None:
        _write(d / "blocks.csv", "GEOID,total\n440010301001000,5\n")
        _write(d / "map.json", text)

    return setup


MAP_ARGV = lambda d: [  # noqa: E731
    *TD,
    "--data",
    str(d / "blocks.csv"),
    "--mapping",
    str(d / "map.json"),
    "--out",
    str(d / "out"),
]


def _moe_config(text: str | bytes) -> Callable[[Path], None]:
    return lambda d: _write(d / "config.json", text)


MOE_CONFIG = lambda d: ["moe", "phsafe", "--config", str(d / "config.json")]  # noqa: E731


# ------------------------------------------------------------------ the corpus

# ------------------------------------------------------------------ replays (docs/reliability.md "Replays")


def _recorded(edit: Callable[[dict], None] | None = None) -> Callable[[Path], None]:
    """A run's metrics.json copied to d/m.json with its run description edited by ``edit`` and
    its fingerprint removed (what a refusal of an edited file used to suggest: "remove
    'fingerprint' to accept the fields as they are")."""

    def setup(d: Path) -> None:
        prior_output(d)
        metrics = json.loads((d / "out" / "metrics.json").read_text(encoding="utf-8"))
        if edit is not None:
            edit(metrics["run"])
            metrics["run"].pop("fingerprint", None)
        _write(d / "m.json", json.dumps(metrics))

    return setup


def replay(*extra: str, spec: str = "m.json") -> Callable[[Path], list[str]]:
    return lambda d: [
        "run",
        "replay",
        "--spec",
        str(d / spec),
        "--quiet",
        "--out",
        str(d / "r"),
        *extra,
    ]


def _remote_backend(run: dict) -> None:
    run["backend"] = "spark"
    run["backend_options"] = {"remote": "sc://127.0.0.1:9"}


def _changed_data(d: Path) -> None:
    """The run recorded, then its data file edited (one count changed)."""
    _recorded()(d)
    _write(d / "blocks.csv", ri_text(RI_ROWS[0].replace(",23,19,", ",24,20,", 1), *RI_ROWS[1:]))


def _relative_source(d: Path) -> None:
    """A description in d/rec naming ``blocks.csv`` relative to it; another blocks.csv in d."""
    prior_output(d)
    metrics = json.loads((d / "out" / "metrics.json").read_text(encoding="utf-8"))
    run = metrics["run"]
    run["data"] = {"source": "blocks.csv"}
    run.pop("fingerprint")
    _write(d / "rec" / "m.json", json.dumps({"run": run}))
    _write(d / "rec" / "blocks.csv", ri_text())
    _write(d / "blocks.csv", ri_text(*RI_ROWS[:2]))  # the current folder's: other data


def _read_from_rec(d: Path) -> None:
    run = json.loads((d / "r" / "metrics.json").read_text())["run"]
    assert run["data"]["source"] == str(d / "rec" / "blocks.csv"), "read from the current folder"
    assert json.loads((d / "r" / "metrics.json").read_text())["n_blocks"] == 3, "other data read"


def _missing_relative(d: Path) -> None:
    _relative_source(d)
    (d / "rec" / "blocks.csv").unlink()


def _not_written(d: Path) -> None:
    assert not (d / "r").exists(), "an output was written for a refused replay"


def _recorded_changes(d: Path) -> None:
    of = json.loads((d / "r" / "metrics.json").read_text())["replay_of"]
    assert of["inputs_changed"] == ["data/blocks.csv (content differs)"], of
    assert of["recorded_placement"] == "local, 1 worker", of


REPLAY_CASES: list[Case] = [
    Case(
        "replay-misspelt-option",
        "replay",
        replay(),
        "refused",
        ("unknown key 'spin'", "did you mean 'spine'", "nothing was run"),
        _recorded(lambda run: run["options"].update(spin="aian")),
        _not_written,
    ),
    Case(
        "replay-misspelt-section",
        "replay",
        replay(),
        "refused",
        ("unknown key 'optons'", "did you mean 'options'"),
        _recorded(lambda run: run.update(optons=run.pop("options"))),
        _not_written,
    ),
    Case(
        "replay-option-of-a-newer-version",
        "replay",
        replay(),
        "refused",
        ("unknown key 'rounding_passes'", "newer PHExplore"),
        _recorded(lambda run: run["options"].update(rounding_passes=3)),
        _not_written,
    ),
    Case(
        "replay-option-out-of-range",
        "replay",
        replay(),
        "refused",
        ("run.options.epl_boot", "out of range"),
        _recorded(lambda run: run["options"].update(epl_boot=10**9)),
        _not_written,
    ),
    Case(
        "replay-option-wrong-type",
        "replay",
        replay(),
        "refused",
        ("run.options.microdata", "expected true or false"),
        _recorded(lambda run: run["options"].update(microdata="no")),
        _not_written,
    ),
    Case(
        "replay-file-names-a-remote-spark",
        "replay",
        replay(),
        "accepted",
        ("recorded on spark (remote sc://127.0.0.1:9)", "replayed on local, 1 worker"),
        _recorded(_remote_backend),
    ),
    Case(
        "replay-changed-data",
        "replay",
        replay(),
        "refused",
        ("data/blocks.csv (content differs)", "--allow-changed-data"),
        _changed_data,
        _not_written,
    ),
    Case(
        "replay-changed-data-allowed",
        "replay",
        replay("--allow-changed-data"),
        "accepted",
        ("warning: input changed since the run was recorded: data/blocks.csv",),
        _changed_data,
        _recorded_changes,
    ),
    Case(
        "replay-relative-source-read-from-its-file",
        "replay",
        replay(spec="rec/m.json"),
        "accepted",
        ("Replayed topdown run",),
        _relative_source,
        _read_from_rec,
    ),
    Case(
        "replay-relative-source-missing-beside-its-file",
        "replay",
        replay(spec="rec/m.json"),
        "refused",
        ("rec/blocks.csv",),
        _missing_relative,
        _not_written,
    ),
]


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
        lambda d: [
            "generate",
            "households",
            "--persons",
            "1000000000000",
            "--seed",
            "1",
            "--out",
            str(d / "o"),
        ],
        R,
        ("--persons", "50,000,000"),
    ),
    Case(
        "generate-seed-negative",
        "number",
        lambda d: [
            "generate",
            "households",
            "--persons",
            "1000",
            "--seed=-5",
            "--out",
            str(d / "o"),
        ],
        R,
        ("--seed", "range"),
    ),
    Case(
        "generate-vacancy-nan",
        "number",
        lambda d: [
            "generate",
            "households",
            "--persons",
            "1000",
            "--seed",
            "1",
            "--vacancy-rate",
            "nan",
            "--out",
            str(d / "o"),
        ],
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
    # ---------------- JSON files
    Case(
        "json-duplicate-key",
        "json",
        MOE_CONFIG,
        R,
        ("duplicate key", "privacy_defn"),
        _moe_config(
            b'{"privacy_defn": "zcdp", "privacy_defn": "puredp", "privacy_budget": {}, "tau": {}, "state_filter": []}'
        ),
    ),
    Case(
        "json-misspelt-privacy-defn",
        "json",
        ph("--config", "cfg.json"),
        R,
        ("did you mean 'privacy_defn'",),
        lambda d: (cef_dir(d), _write(d / "cfg.json", _config(privacy_def="puredp"))),
    ),
    config_case(
        "json-misspelt-mechanism", allocation(mechanisms="puredp"), ("did you mean 'mechanism'",)
    ),
    config_case("json-nan-share", allocation(rho="nan"), ("finite",)),
    config_case("json-bare-nan", allocation().replace('"1"', "NaN", 1), ("NaN",)),
    config_case("json-huge-integer", allocation().replace('"1"', "9" * 5000, 1), ("5000 digits",)),
    config_case("json-exponent-string", allocation(rho="1e999999999"), ("exponent",)),
    Case(
        "json-deep-nesting", "json", MOE_CONFIG, R, ("nested deeper",), _moe_config(_nested(5000))
    ),
    Case(
        "json-bom",
        "json",
        MOE_CONFIG,
        R,
        ("byte-order mark",),
        _moe_config(b"\xef\xbb\xbf" + _config()),
    ),
    Case(
        "json-utf16",
        "json",
        MOE_CONFIG,
        R,
        ("UTF-16",),
        _moe_config(_config().decode().encode("utf-16")),
    ),
    Case("json-gzip", "json", MOE_CONFIG, R, ("gzip",), _moe_config(gzip.compress(_config()))),
    Case(
        "json-latin1",
        "json",
        MOE_CONFIG,
        R,
        ("not UTF-8",),
        _moe_config('{"name": "caf\u00e9"}'.encode("latin-1")),
    ),
    Case(
        "json-top-level-list",
        "json",
        MOE_CONFIG,
        R,
        ("expected a JSON object",),
        _moe_config(b"[1, 2]"),
    ),
    Case(
        "json-is-a-folder",
        "json",
        MOE_CONFIG,
        R,
        ("folder",),
        lambda d: (d / "config.json").mkdir(),
    ),
    Case(
        "scenario-wrong-type",
        "json",
        lambda d: ["report", "--scenario", str(d / "s.json"), "--out", str(d / "r.html")],
        R,
        ("delta",),
        lambda d: _write(d / "s.json", _scenario(delta="abc")),
    ),
    Case(
        "scenario-unknown-key",
        "json",
        lambda d: ["report", "--scenario", str(d / "s.json"), "--out", str(d / "r.html")],
        R,
        ("did you mean 'conversion'",),
        lambda d: _write(d / "s.json", _scenario(convertion="cks")),
    ),
    Case(
        "results-json-names-no-run",
        "json",
        lambda d: [
            "report",
            "--preset",
            "phsafe-2020",
            "--results",
            str(d / "m.json"),
            "--out",
            str(d / "r.html"),
        ],
        R,
        ("names no run", "engine", "m.json"),
        lambda d: _write(d / "m.json", '{"rho": 1, "note": "not a run"}'),
    ),
    Case(
        "scenario-result-names-no-run",
        "json",
        lambda d: ["report", "--scenario", str(d / "s.json"), "--out", str(d / "r.html")],
        R,
        ("results[0]", "names no run"),
        lambda d: _write(d / "s.json", _scenario_with_result({"seed": 1})),
    ),
    Case(
        "targets-misspelt",
        "json",
        lambda d: ["plan", "phsafe", "--targets", str(d / "t.json")],
        R,
        ("did you mean 'moe_targets'",),
        lambda d: _write(d / "t.json", _targets(moe_target={})),
    ),
    Case(
        "mapping-duplicate-key",
        "json",
        MAP_ARGV,
        R,
        ("duplicate key",),
        _mapping(
            '{"schema": "redistricting2020", "schema": "ri2010", "geography": {"geoid": "GEOID"}, "cells": {}}'
        ),
    ),
    Case(
        "mapping-misspelt-key",
        "json",
        MAP_ARGV,
        R,
        ("did you mean 'cells'",),
        _mapping('{"schema": "ri2010", "geography": {"geoid": "GEOID"}, "cels": {}}'),
    ),
    # ---------------- data files
    Case(
        "data-folder-without-pl",
        "file",
        td(data="empty_dir"),
        R,
        ("folder",),
        lambda d: (d / "empty_dir").mkdir(),
    ),
    Case("data-symlink-loop", "file", td(data="loop.csv"), R, ("symbolic-link loop",), _loop),
    Case(
        "data-broken-symlink", "file", td(data="broken.csv"), R, ("broken symbolic link",), _broken
    ),
    Case(
        "data-gzip-csv",
        "file",
        td(data="blocks.csv.gz"),
        A,
        ("TopDown run",),
        ri(gzip.compress(ri_text().encode()), "blocks.csv.gz"),
    ),
    Case(
        "data-xlsx",
        "file",
        td("--data-format", "ri2010", data="blocks.xlsx"),
        R,
        ("zip archive",),
        ri(b"PK\x03\x04" + b"\x00" * 200, "blocks.xlsx"),
    ),
    Case(
        "data-utf16",
        "file",
        td("--data-format", "ri2010"),
        R,
        ("UTF-16",),
        ri(ri_text().encode("utf-16")),
    ),
    Case("data-semicolon", "file", td(), A, ("TopDown run",), ri(ri_text(sep=";"))),
    Case(
        "data-geoid-scientific",
        "file",
        td("--data-format", "ri2010"),
        R,
        ("scientific notation",),
        ri(ri_text("4.40010301001E+14,23,19,0,4,0,0,0,0,0,12,8,0,4,0,0,0,0,0")),
    ),
    Case(
        "data-non-ascii-digits",
        "file",
        td(),
        R,
        ("not ASCII",),
        ri(ri_text("440010301001000,\u0662\u0663,19,0,4,0,0,0,0,0,12,8,0,4,0,0,0,0,0")),
    ),
    Case(
        "data-count-beyond-int64",
        "file",
        td(),
        R,
        ("int64",),
        ri(ri_text("440010301001000,99999999999999999999,19,0,4,0,0,0,0,0,12,8,0,4,0,0,0,0,0")),
    ),
    Case(
        "data-two-exports-concatenated",
        "file",
        td(),
        R,
        ("header line appears again",),
        ri(ri_text() + ri_text()),
    ),
    Case("data-empty-file", "file", td("--data-format", "ri2010"), R, ("empty",), ri("")),
    Case(
        "data-wrong-format",
        "file",
        td("--data-format", "ppmf"),
        R,
        ("missing column",),
        ri(ri_text()),
    ),
    Case("data-unknown-name", "file", td(data="no_such_sample"), R, ("neither a file",)),
    Case(
        "data-over-size-limit",
        "file",
        td("--max-bytes", "100"),
        R,
        ("size limit", "--max-bytes"),
        ri(ri_text()),
    ),
    Case(
        "cef-stale-uncompressed-copy",
        "file",
        ph(),
        R,
        ("persons.csv", "persons.csv.gz"),
        _stale_pair,
    ),
    Case(
        "cef-two-persons-files",
        "file",
        ph(),
        R,
        ("persons.csv", "persons_2019.csv", "could be the persons file"),
        _two_persons_files,
    ),
    Case(
        "pl94171-two-segment-1-files",
        "file",
        td(data="pl"),
        R,
        ("ri000012018_2020Style.pl", "ri000012018_old.pl", "segment 1"),
        _two_segment_ones,
    ),
    Case(
        "mapping-unexpected-extension",
        "file",
        lambda d: [
            *TD,
            "--data",
            str(d / "b.csv"),
            "--mapping",
            str(d / "map.txt"),
            "--out",
            str(d / "o"),
        ],
        R,
        ("map.txt", ".json"),
        _mapping_named("b.csv", "map.txt", SUM_MAPPING, SUM_ROWS),
    ),
    Case(
        "mapping-and-data-swapped",
        "file",
        lambda d: [
            *TD,
            "--data",
            str(d / "map.json"),
            "--mapping",
            str(d / "b.csv"),
            "--out",
            str(d / "o"),
        ],
        R,
        ("swapped", "map.json", "b.csv"),
        _mapping_named("b.csv", "map.json", SUM_MAPPING, SUM_ROWS),
    ),
    Case(
        "block-csv-counts-sum-beyond-int64",
        "file",
        lambda d: [
            *TD,
            "--data",
            str(d / "b.csv"),
            "--mapping",
            str(d / "map.json"),
            "--out",
            str(d / "o"),
        ],
        R,
        ("int64", "row 1"),
        _mapping_named("b.csv", "map.json", SUM_MAPPING, SUM_ROWS),
    ),
    Case(
        "cef-file-is-a-folder",
        "file",
        ph(),
        R,
        ("folder",),
        lambda d: (cef_dir(d) / "units.csv").unlink() or (d / "cef" / "units.csv").mkdir(),
    ),
    Case("cef-over-size-limit", "file", ph("--max-bytes", "50"), R, ("size limit",), cef_dir),
    Case("cef-accepted", "file", ph(), A, ("PHSafe run",), cef_dir),
    Case(
        "population-minimum-size-all-states",
        "number",
        lambda d: [
            "generate",
            "population",
            "--persons",
            "1000",
            "--seed",
            "3",
            "--out",
            str(d / "p"),
        ],
        A,
        ("persons",),
    ),
    Case(
        "population-altered-after-writing",
        "file",
        td(data="pop"),
        R,
        ("does not match the manifest",),
        _altered_population,
    ),
    Case(
        "max-bytes-one-tebibyte",
        "file",
        ph("--max-bytes", str(2**40)),
        A,
        ("PHSafe run",),
        cef_dir,
    ),
    # ---------------- outputs
    Case(
        "out-is-a-file",
        "output",
        td(out="taken"),
        R,
        ("a file is in the way",),
        lambda d: (ri(ri_text())(d), _write(d / "taken", "x")),
    ),
    Case(
        "out-foreign-folder",
        "output",
        td("--overwrite"),
        R,
        ("not a PHExplore output",),
        lambda d: (ri(ri_text())(d), _foreign(d)),
        _foreign_intact,
    ),
    Case(
        "out-earlier-output-no-overwrite",
        "output",
        td(),
        R,
        ("--overwrite",),
        prior_output,
        _unchanged_prior,
    ),
    Case(
        "out-overwrite-replaces-whole",
        "output",
        td("--overwrite"),
        A,
        ("TopDown run",),
        prior_output,
        _no_stale_microdata,
    ),
    Case(
        "out-is-the-input-folder",
        "output",
        ph("--overwrite", out="cef"),
        R,
        ("inputs",),
        cef_dir,
        lambda d: (
            None
            if (d / "cef" / "persons.csv").is_file()
            else (_ for _ in ()).throw(AssertionError("input deleted"))
        ),
    ),
    Case(
        "out-contains-the-input",
        "output",
        lambda d: [
            *TD,
            "--data",
            str(d / "out" / "blocks.csv"),
            "--out",
            str(d / "out"),
            "--overwrite",
        ],
        R,
        ("inputs",),
        lambda d: _write(d / "out" / "blocks.csv", ri_text()),
    ),
    Case(
        "generate-out-foreign",
        "output",
        lambda d: [
            "generate",
            "households",
            "--persons",
            "1000",
            "--seed",
            "1",
            "--out",
            str(d / "out"),
        ],
        R,
        ("not a PHExplore output",),
        _foreign,
        _foreign_intact,
    ),
    Case(
        "report-out-foreign-file",
        "output",
        lambda d: [
            "report",
            "--preset",
            "phsafe-2020",
            "--out",
            str(d / "notes.html"),
            "--overwrite",
        ],
        R,
        ("not written by PHExplore",),
        lambda d: _write(d / "notes.html", "my notes"),
        lambda d: (
            None
            if (d / "notes.html").read_text() == "my notes"
            else (_ for _ in ()).throw(AssertionError("notes overwritten"))
        ),
    ),
    Case(
        "report-out-exists-no-overwrite",
        "output",
        lambda d: ["report", "--preset", "phsafe-2020", "--out", str(d / "r.html")],
        R,
        ("--overwrite",),
        _report_file,
    ),
    Case(
        "report-out-is-the-scenario",
        "output",
        lambda d: [
            "report",
            "--scenario",
            str(d / "s.json"),
            "--out",
            str(d / "s.json"),
            "--overwrite",
        ],
        R,
        ("inputs",),
        lambda d: _write(d / "s.json", _scenario()),
    ),
    Case(
        "report-results-tampered",
        "output",
        lambda d: [
            "report",
            "--preset",
            "ri2010-production-like",
            "--results",
            str(d / "out"),
            "--out",
            str(d / "r.html"),
        ],
        R,
        ("does not match",),
        _tampered,
    ),
    Case(
        "report-results-no-manifest",
        "output",
        lambda d: [
            "report",
            "--preset",
            "ri2010-production-like",
            "--results",
            str(d / "out" / "metrics.json"),
            "--out",
            str(d / "r.html"),
        ],
        R,
        ("no manifest.json",),
        _no_manifest,
    ),
    Case(
        "report-results-complete",
        "output",
        lambda d: [
            "report",
            "--preset",
            "ri2010-production-like",
            "--results",
            str(d / "out" / "metrics.json"),
            "--out",
            str(d / "r.html"),
        ],
        A,
        ("wrote",),
        prior_output,
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


CASES += _more_cases("corpus_trust")
CASES += REPLAY_CASES
