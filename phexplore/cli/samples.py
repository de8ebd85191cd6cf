"""``phexplore samples``: list and describe the shipped data samples (``data/samples/*/sample.json``).

``samples list`` prints name, kind, rows, geography and licence of every manifest found;
``samples show NAME`` prints one manifest in full, and with ``--load`` loads a TopDown sample and
reports its blocks, persons and schema (the documented totals, e.g. RI 2010: 1,052,567 persons in
25,181 blocks). The registry is :mod:`engine.data.samples`.
"""

from __future__ import annotations

import argparse
from typing import Any

from phexplore.cli._output import add_format_option, dumps_json, print_rows

LIST_FIELDS: tuple[str, ...] = ("name", "kind", "rows", "geography", "licence")
TABLE_WIDTH = 60
"""Longest geography text shown by ``samples list`` in table format (licence: 40)."""


def register(subparsers: Any) -> None:
    """Add ``samples list`` and ``samples show NAME``."""
    parser = subparsers.add_parser(
        "samples",
        help="list and describe the shipped data samples",
        description="List and describe the data samples shipped in data/samples/.",
    )
    sub = parser.add_subparsers(dest="samples_command", metavar="SUBCOMMAND")

    list_parser = sub.add_parser("list", help="list every shipped sample")
    add_format_option(list_parser)
    list_parser.set_defaults(func=_list)

    show = sub.add_parser("show", help="describe one sample")
    show.add_argument("name", help="sample name (see 'phexplore samples list')")
    show.add_argument(
        "--load",
        action="store_true",
        help="load a TopDown sample and report its blocks, persons and schema",
    )
    add_format_option(show)
    show.set_defaults(func=_show)

    parser.set_defaults(func=lambda args: _usage(parser))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def _list(args: argparse.Namespace) -> int:
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from engine.data.samples import list_samples

    samples = list_samples()
    rows = [{k: s.summary()[k] for k in LIST_FIELDS} for s in samples]
    if args.format == "table":  # keep the table readable; 'samples show' prints the full text
        rows = [
            {
                **r,
                "geography": _clip(r["geography"], TABLE_WIDTH),
                "licence": _clip(r["licence"], 40),
            }
            for r in rows
        ]
    print_rows(rows, {"samples": len(rows)}, args.format)
    return 0


def _show(args: argparse.Namespace) -> int:
    # heavy: imported when the command runs, so `phexplore … --help` stays light
    from engine.data.samples import get_sample, load_topdown_sample

    info = get_sample(args.name)
    details: dict[str, Any] = {
        "name": info.name,
        "kind": info.kind,
        "title": info.title,
        "description": info.description,
        "rows": info.rows,
        "persons": info.persons,
        "geography": info.geography,
        "source": info.source,
        "licence": info.licence,
        "licence_file": str(info.path / info.licence_file),
        "loader": info.loader,
        "files": {f: _size(info.path / f) for f in info.files},
    }
    if args.load:
        histogram = load_topdown_sample(info.name)
        details["loaded"] = {
            "schema": histogram.schema.name,
            "attributes": {a.name: a.size for a in histogram.schema.attributes},
            "cells": histogram.schema.size,
            "blocks": histogram.n_blocks,
            "persons": histogram.total,
            "geounits": {lv: int(histogram.geography[lv].nunique()) for lv in histogram.levels},
        }
    if args.format == "json":
        print(dumps_json(details))
    else:
        print_rows([], details, "table")
    return 0


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _size(path: Any) -> str:
    try:
        return f"{path.stat().st_size:,} bytes"
    except OSError:
        return "missing"
