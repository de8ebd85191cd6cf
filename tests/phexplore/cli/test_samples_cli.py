"""Tests of ``phexplore samples list`` and ``phexplore samples show``."""

from __future__ import annotations

import json

from phexplore.cli import main


def test_list_json_has_every_sample_with_its_fields(capsys):
    assert main(["samples", "list", "--format", "json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    rows = {row["name"]: row for row in payload["rows"]}
    assert {"ri2010", "ppmf_perry_al", "pl94171_ri2018"} <= set(rows)
    assert set(rows["ri2010"]) == {"name", "kind", "rows", "geography", "licence"}
    assert rows["ri2010"]["rows"] == 25_181
    assert rows["ri2010"]["licence"] == "CC BY-SA 4.0"
    assert payload["summary"]["samples"] == len(rows)


def test_list_table(capsys):
    assert main(["samples", "list"]) == 0
    out = capsys.readouterr().out
    assert "ri2010" in out and "CC BY-SA 4.0" in out and "topdown" in out


def test_show_load_reports_documented_totals(capsys):
    assert main(["samples", "show", "ri2010", "--load", "--format", "json"]) == 0
    details = json.loads(capsys.readouterr().out)
    assert details["loaded"]["persons"] == 1_052_567
    assert details["loaded"]["blocks"] == 25_181
    assert details["loaded"]["geounits"]["County"] == 5
    assert details["licence_file"].endswith("LICENSE-source.md")


def test_show_unknown_sample_is_a_clean_error(capsys):
    assert main(["samples", "show", "atlantis"]) == 1
    err = capsys.readouterr().err
    assert "unknown sample 'atlantis'" in err and "ri2010" in err
