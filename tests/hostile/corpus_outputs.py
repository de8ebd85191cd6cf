"""Hostile-corpus cases for outputs (an earlier run's folder, a file in the way, a tampered
manifest) and for replays of recorded runs (docs/reliability.md "Replays").

Loaded by ``corpus.py``'s ``_more_cases`` (see ``corpus_trust.py``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any


def cases(base: Any) -> list[Any]:
    """The cases, built with the corpus module ``base`` (its Case, builders and runner)."""
    Case = base.Case
    households = base.households
    RI_ROWS = base.RI_ROWS
    TD = base.TD
    _scenario = base._scenario
    _unchanged_prior = base._unchanged_prior
    _write = base._write
    cef_dir = base.cef_dir
    ph = base.ph
    prior_output = base.prior_output
    ri = base.ri
    ri_text = base.ri_text
    td = base.td
    R, A = "refused", "accepted"

    def report_results(d: Path) -> list[str]:
        """``report`` on the earlier run's metrics.json in ``d/out``."""
        return [
            "report",
            "--preset",
            "ri2010-production-like",
            "--results",
            str(d / "out" / "metrics.json"),
            "--out",
            str(d / "r.html"),
        ]

    def _foreign(d: Path) -> None:
        _write(d / "out" / "thesis.tex", "precious work")

    def _foreign_intact(d: Path) -> None:
        assert (d / "out" / "thesis.tex").read_text() == "precious work", (
            "a user's file was touched"
        )
        assert sorted(os.listdir(d / "out")) == ["thesis.tex"], (
            "files were mixed into a user's folder"
        )

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

    def _report_file(d: Path) -> None:
        from phexplore.cli import main

        with contextlib.redirect_stdout(io.StringIO()):
            assert main(["report", "--preset", "phsafe-2020", "--out", str(d / "r.html")]) == 0

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
        assert run["data"]["source"] == str(d / "rec" / "blocks.csv"), (
            "read from the current folder"
        )
        assert json.loads((d / "r" / "metrics.json").read_text())["n_blocks"] == 3, (
            "other data read"
        )

    def _missing_relative(d: Path) -> None:
        _relative_source(d)
        (d / "rec" / "blocks.csv").unlink()

    def _not_written(d: Path) -> None:
        assert not (d / "r").exists(), "an output was written for a refused replay"

    def _recorded_changes(d: Path) -> None:
        of = json.loads((d / "r" / "metrics.json").read_text())["replay_of"]
        assert of["inputs_changed"] == ["data/blocks.csv (content differs)"], of
        assert of["recorded_placement"] == "local, 1 worker", of

    return [
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
            households("--seed", "1", out="out"),
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
            report_results,
            R,
            ("no manifest.json",),
            _no_manifest,
        ),
        Case(
            "report-results-complete",
            "output",
            report_results,
            A,
            ("wrote",),
            prior_output,
        ),
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
