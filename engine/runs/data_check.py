"""What an input is, and every problem a run on it would hit, before the run (``phexplore data check``).

:func:`check_data` (a sample name, a file or a folder, as ``run topdown``/``run phsafe --data``
take it) and :func:`check_files` (uploads, as the app's Run page takes them) load the input with
the run's own loaders (:func:`engine.data.inputs.load_topdown_input`,
:func:`engine.data.cef.load_cef_extract`, the same size limit) and then run the checks a run makes
on loaded data before it spends time: the unit frame against the persons
(:func:`engine.topdown.constraints.block_bounds`) for TopDown, the configuration's state filter
against the extract (:func:`engine.phsafe.join.prepare_extract`) for PHSafe. Loaders gather the
problems of every file and every stage they reach before refusing, so the list is all of them,
not the first stage's.

The :class:`DataCheck` says what the input is — format, files and rows read, schema, blocks,
persons, geography, states, structural zeros / unit frame, declared scale — lists the problems
sorted by file and row, and the seconds it took (``load_s``). The loaded data ride along
(``data``) so the app keeps what it has checked.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from engine.core.errors import DataValidationError, PHExploreError, Problem, ValidationError
from engine.core.sniff import assign_by_name
from engine.data.cef import load_cef_extract
from engine.data.csv_records import records_read
from engine.data.generated import is_generated_population
from engine.data.inputs import load_topdown_files, load_topdown_input, sniff_format
from engine.data.places import NO_PLACE
from engine.data.samples import declared_scale, list_samples
from engine.data.sources import DEFAULT_MAX_BYTES
from engine.phsafe.inputs import resolve_config, resolve_data_dir
from engine.phsafe.join import prepare_extract
from engine.topdown.constraints import block_bounds

ENGINES = ("topdown", "phsafe")


@dataclass
class DataCheck:
    """The outcome of checking one input for one or both engines (module docstring)."""

    path: str
    format: str
    engines: tuple[str, ...]
    rows: dict[str, int] = field(default_factory=dict)
    facts: dict[str, dict[str, Any]] = field(default_factory=dict)
    problems: list[tuple[str, Problem]] = field(default_factory=list)
    load_s: float = 0.0
    data: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def ok(self) -> bool:
        return not self.problems

    def sorted_problems(self) -> list[tuple[str, Problem]]:
        """``(engine, problem)`` sorted by file, then row (whole-file problems first)."""
        return sorted(
            self.problems,
            key=lambda item: (
                item[1].file,
                -1 if item[1].row is None else item[1].row,
                item[1].column or "",
            ),
        )

    def problem_lines(self) -> list[str]:
        """One readable line a problem, sorted by file and row (what the CLI and the app list)."""
        return [str(p) for _, p in self.sorted_problems()]

    def summary(self) -> list[str]:
        """What the input is, one line a fact (the CLI's table and the app's caption)."""
        lines = [f"{self.format} ({', '.join(self.engines)})"]
        if self.rows:
            lines.append(
                "rows read: " + ", ".join(f"{name} {n:,}" for name, n in self.rows.items())
            )
        for engine, facts in self.facts.items():
            text = "; ".join(_fact(k, v) for k, v in facts.items() if v is not None)
            lines.append(f"{engine}: {text}")
        return lines

    def to_json(self) -> dict[str, Any]:
        """The JSON of ``phexplore data check --format json``."""
        return {
            "path": self.path,
            "format": self.format,
            "engines": list(self.engines),
            "ok": self.ok,
            "rows": dict(self.rows),
            **{engine: facts for engine, facts in self.facts.items()},
            "problems": [
                {
                    "engine": engine,
                    "file": p.file,
                    "row": p.row,
                    "column": p.column,
                    "message": p.message,
                }
                for engine, p in self.sorted_problems()
            ],
            "load_s": round(self.load_s, 3),
        }


def _fact(key: str, value: Any) -> str:
    name = key.replace("_", " ")
    if isinstance(value, dict):
        inner = ", ".join(
            f"{k} {v:,}" if isinstance(v, int) else f"{k} {v}" for k, v in value.items()
        )
        return f"{name}: {inner}"
    if isinstance(value, list | tuple):
        return f"{name}: {', '.join(map(str, value)) or 'none'}"
    if isinstance(value, bool):
        return f"{name}: {'yes' if value else 'no'}"
    if isinstance(value, int):
        return f"{name}: {value:,}"
    return f"{name}: {value}"


def input_format(source: str, *, data_format: str | None = None, mapping: str | None = None) -> str:
    """What ``source`` is, in words the CLI and the app print."""

    path = Path(source)
    if mapping is not None:
        return "block CSV with a mapping"
    if is_generated_population(path):
        return "generated population"
    if path.is_dir():
        names = {p.name.lower() for p in path.iterdir()}
        if any(n.startswith("persons") for n in names):
            return "CEF extract"
        if any(n.endswith(".pl") for n in names):
            return "P.L. 94-171 file set"
        return "folder"
    if path.is_file():
        if data_format:
            return data_format
        try:
            return sniff_format(path, 1 << 62)
        except DataValidationError:
            return "unknown file"
    for sample in list_samples():
        if sample.name == source:
            return f"shipped sample ({sample.kind}, {sample.loader})"
    return "not found"


def engines_for(source: str) -> tuple[str, ...]:
    """The engines an input is for: a generated population feeds both; a CEF extract (or a
    PHSafe sample) PHSafe; anything else TopDown."""
    path = Path(source)
    if is_generated_population(path):
        return ENGINES
    if path.is_dir() and any(p.name.lower().startswith("persons") for p in path.iterdir()):
        return ("phsafe",)
    for sample in list_samples():
        if sample.name == source and sample.kind == "phsafe":
            return ("phsafe",)
    return ("topdown",)


def check_data(
    source: str | os.PathLike[str],
    *,
    engine: str | None = None,
    data_format: str | None = None,
    mapping: str | os.PathLike[str] | None = None,
    config: Any = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> DataCheck:
    """Check ``source`` (a sample name, a file or a folder) for ``engine`` (both engines of a
    generated population when None); ``config`` is PHSafe's (as ``run phsafe --config``: a
    preset, a path or None for the folder's own config.json, else every state)."""
    text = str(source)
    started = time.perf_counter()
    engines = (engine,) if engine else engines_for(text)
    check = DataCheck(
        path=text,
        format=input_format(
            text, data_format=data_format, mapping=None if mapping is None else str(mapping)
        ),
        engines=engines,
    )
    with records_read() as rows:
        for name in engines:
            if name == "topdown":
                _topdown(check, text, data_format, mapping, max_bytes)
            else:
                _phsafe(check, text, config, max_bytes)
    check.rows = dict(rows)
    check.load_s = time.perf_counter() - started
    return check


def check_files(
    engine: str,
    files: Sequence[Any],
    *,
    kind: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> DataCheck:
    """Check uploaded files (named file objects or paths): TopDown data of format ``kind``, or a
    CEF extract (``engine="phsafe"``: persons, units and geo assigned by name)."""
    started = time.perf_counter()
    names = ", ".join(Path(str(getattr(f, "name", f))).name for f in files) or "no file"
    check = DataCheck(path=names, format=kind or "CEF extract", engines=(engine,))
    with records_read() as rows:
        if engine == "topdown":
            hist = _attempt(
                check, "topdown", lambda: load_topdown_files(kind or "", files, max_bytes=max_bytes)
            )
            if hist is not None:
                _topdown_facts(check, hist, None)
        else:
            extract = _attempt(
                check,
                "phsafe",
                lambda: load_cef_extract(
                    assign_by_name(files, ("persons", "units", "geo"), what="CEF extract"),
                    max_bytes=max_bytes,
                ),
            )
            if extract is not None:
                _phsafe_facts(check, extract, None, None)
    check.rows = dict(rows)
    check.load_s = time.perf_counter() - started
    return check


def _attempt(check: DataCheck, engine: str, load: Any) -> Any:
    """``load()``, or None with its problems added to ``check``."""
    try:
        return load()
    except DataValidationError as exc:
        check.problems += [(engine, p) for p in exc.problems]
    except PHExploreError as exc:  # a refusal in words (a folder, a manifest, a config)
        check.problems.append((engine, Problem(check.path, str(exc))))
    return None


def _topdown(
    check: DataCheck,
    source: str,
    data_format: str | None,
    mapping: str | os.PathLike[str] | None,
    max_bytes: int,
) -> None:

    hist = _attempt(
        check,
        "topdown",
        lambda: load_topdown_input(
            source,
            kind=data_format,
            mapping=None if mapping is None else str(mapping),
            max_bytes=max_bytes,
        ),
    )
    if hist is not None:
        _topdown_facts(check, hist, source)


def _topdown_facts(check: DataCheck, hist: Any, source: str | None) -> None:
    """What a TopDown run would read, and the unit frame checked against the persons."""

    check.data["topdown"] = hist
    bounds = None
    try:
        bounds = block_bounds(hist)
    except ValidationError as exc:  # the unit frame and the persons disagree
        check.problems.append(("topdown", Problem(check.path, str(exc))))
    geography = hist.geography
    check.facts["topdown"] = {
        "schema": f"{hist.schema.name} ({hist.schema.size:,} cells: "
        + " × ".join(f"{a.name} {a.size}" for a in hist.schema.attributes)
        + ")",
        "blocks": int(hist.n_blocks),
        "persons": int(hist.total),
        "geography": {lv: int(geography[lv].nunique()) for lv in hist.levels},
        "states": sorted(str(s) for s in geography[hist.levels[0]].unique()),
        "unit_frame": "housing_units" in hist.extra or hist.units is not None,
        "structural_zeros": (
            f"held from the {bounds.source} ({_zero_blocks(bounds.upper):,} blocks at 0)"
            if bounds is not None
            else "none: the data carry no housing units or group quarters"
        ),
        "places": _places(hist),
        "scale": _scale(source),
    }


def _places(hist: Any) -> int | None:
    """How many places the data carry (a generated population written with ``places.csv``: the
    entities the optimized spine can be built around), None when they carry none."""
    codes = hist.extra.get("places")
    if not isinstance(codes, np.ndarray):
        return None
    text = codes.astype(str)
    state = hist.geography[hist.levels[0]].astype(str).to_numpy()
    inside = text != NO_PLACE
    return len(set(zip(state[inside], text[inside], strict=True)))


def _zero_blocks(upper: np.ndarray) -> int:
    """Blocks whose every count is bounded by 0 (no housing unit and no group quarters)."""
    return int(np.sum(np.all(upper == 0, axis=1)))


def _phsafe(check: DataCheck, source: str, config: Any, max_bytes: int) -> None:

    folder = _attempt(check, "phsafe", lambda: resolve_data_dir(source))
    if folder is None:
        return
    state_filter = None
    if config is not None or (folder / "config.json").is_file():
        cfg = _attempt(check, "phsafe", lambda: resolve_config(config, folder))
        state_filter = None if cfg is None else cfg.state_filter
    extract = _attempt(
        check,
        "phsafe",
        lambda: load_cef_extract(folder, max_bytes=max_bytes, state_filter=state_filter),
    )
    if extract is not None:
        _phsafe_facts(check, extract, state_filter, source)


def _phsafe_facts(
    check: DataCheck, extract: Any, state_filter: Sequence[str] | None, source: str | None
) -> None:
    """What a PHSafe run would read, and the state filter checked against the extract."""
    check.data["phsafe"] = extract
    if state_filter is not None:
        _attempt(check, "phsafe", lambda: prepare_extract(extract, state_filter))
    units, geo = extract.units, extract.geo
    rtype = units["RTYPE"].astype(str)
    check.facts["phsafe"] = {
        "persons": int(extract.n_persons),
        "housing_units": int((rtype == "2").sum()),
        "gq_facilities": int((rtype == "4").sum()),
        "states": sorted(str(s) for s in geo["TABBLKST"].unique()),
        "state_filter": None if state_filter is None else list(state_filter),
        "unit_frame": True,
        "scale": _scale(source),
    }


def _scale(source: str | None) -> float | None:
    """The scale a sample or folder declares (None: a whole population)."""
    if source is None:
        return None

    try:
        return declared_scale(source)
    except PHExploreError:
        return None
