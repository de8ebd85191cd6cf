"""Hostile-corpus cases for the files a user gives: JSON (mappings, scenarios, configurations,
targets) and data files (block CSVs, CEF folders, PPMF, populations).

Loaded by ``corpus.py``'s ``_more_cases`` (see ``corpus_trust.py``).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any


def cases(base: Any) -> list[Any]:
    """The cases, built with the corpus module ``base`` (its Case, builders and runner)."""
    BIG = base.BIG
    CEF = base.CEF
    Case = base.Case
    TD = base.TD
    _scenario = base._scenario
    _write = base._write
    allocation = base.allocation
    cef_dir = base.cef_dir
    ph = base.ph
    ri = base.ri
    ri_text = base.ri_text
    td = base.td
    td_config = base.td_config
    R, A = "refused", "accepted"

    def report_scenario(d: Path) -> list[str]:
        """``report`` on the scenario file ``d/s.json``."""
        return ["report", "--scenario", str(d / "s.json"), "--out", str(d / "r.html")]

    def _config(**changes: object) -> bytes:
        data = json.loads((CEF / "config.json").read_text())
        data.update(changes)
        return json.dumps(data).encode()

    def config_case(case_id: str, text: str | bytes, words: tuple[str, ...]) -> Case:
        """A run topdown --config case refused with ``words``."""
        setup, argv = td_config(text)
        return Case(case_id, "json", argv, "refused", words, setup)

    def _loop(d: Path) -> None:
        os.symlink(d / "loop.csv", d / "loop.csv")

    def _broken(d: Path) -> None:
        os.symlink(d / "nowhere.csv", d / "broken.csv")

    def _stale_pair(d: Path) -> None:
        folder = cef_dir(d)
        (folder / "persons.csv.gz").write_bytes(
            gzip.compress((folder / "persons.csv").read_bytes())
        )

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

    def _nested(depth: int) -> str:
        return '{"name": "x", "notes": ' + "[" * depth + "]" * depth + "}"

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

    return [
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
            "json-misspelt-mechanism",
            allocation(mechanisms="puredp"),
            ("did you mean 'mechanism'",),
        ),
        config_case("json-nan-share", allocation(rho="nan"), ("finite",)),
        config_case("json-bare-nan", allocation().replace('"1"', "NaN", 1), ("NaN",)),
        config_case(
            "json-huge-integer", allocation().replace('"1"', "9" * 5000, 1), ("5000 digits",)
        ),
        config_case("json-exponent-string", allocation(rho="1e999999999"), ("exponent",)),
        Case(
            "json-deep-nesting",
            "json",
            MOE_CONFIG,
            R,
            ("nested deeper",),
            _moe_config(_nested(5000)),
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
            report_scenario,
            R,
            ("delta",),
            lambda d: _write(d / "s.json", _scenario(delta="abc")),
        ),
        Case(
            "scenario-unknown-key",
            "json",
            report_scenario,
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
            report_scenario,
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
            "data-broken-symlink",
            "file",
            td(data="broken.csv"),
            R,
            ("broken symbolic link",),
            _broken,
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
    ]
