"""Property-based fuzzing of every input parser and option validator (hypothesis; docs/reliability.md).

Whatever the input, each parser either returns a value inside its documented range or raises the
project's own error type with a message — never another exception, never a hang (hypothesis'
deadline catches a parser that computes ``10**999999999``).
"""

from __future__ import annotations

import argparse
import json
import math
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.core.errors import DataValidationError, PHExploreError, ValidationError
from engine.core.numbers import RANGES, parse_exact, parse_real, parse_whole
from engine.core.sniff import assign_by_name
from engine.core.strict_json import MAX_JSON_DEPTH, check_keys, loads_strict_json
from engine.data.sources import read_source
from phexplore.cli.experiment import parse_rhos, parse_seeds
from phexplore.cli.run_phsafe import parse_tau

FAST = settings(max_examples=150, deadline=500, suppress_health_check=[HealthCheck.too_slow])

number_like = st.one_of(
    st.text(max_size=80),
    st.from_regex(r"[+-]?[0-9]{0,30}(\.[0-9]{0,30})?([eE][+-]?[0-9]{1,12})?", fullmatch=True),
    st.from_regex(r"[+-]?[0-9]{1,20}/[0-9]{1,20}", fullmatch=True),
    st.sampled_from(["nan", "inf", "-Infinity", "1e999999999", "1e-999999999", "\uff13", "٣"]),
)


@FAST
@given(text=number_like, name=st.sampled_from(sorted(RANGES)))
def test_parse_exact_is_in_range_or_refused(text: str, name: str) -> None:
    try:
        value = parse_exact(text, where="--x", range_name=name)
    except ValidationError as exc:
        assert str(exc).startswith("--x")
        return
    assert isinstance(value, Fraction) and RANGES[name].contains(value)


@FAST
@given(text=number_like, name=st.sampled_from(sorted(RANGES)))
def test_parse_real_is_finite_and_in_range_or_refused(text: str, name: str) -> None:
    try:
        value = parse_real(text, where="--x", range_name=name)
    except ValidationError:
        return
    assert math.isfinite(value) and RANGES[name].contains(value)


@FAST
@given(text=st.one_of(number_like, st.integers().map(str)), name=st.sampled_from(sorted(RANGES)))
def test_parse_whole_is_an_int_in_range_or_refused(text: str, name: str) -> None:
    try:
        value = parse_whole(text, where="--x", range_name=name)
    except ValidationError:
        return
    assert isinstance(value, int) and RANGES[name].contains(value)


@FAST
@given(data=st.binary(max_size=300))
def test_strict_json_on_arbitrary_bytes(data: bytes) -> None:
    try:
        loads_strict_json(data, label="f.json")
    except ValidationError as exc:
        assert str(exc).startswith("f.json")


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


@FAST
@given(value=json_values)
def test_strict_json_round_trips_valid_documents(value: object) -> None:
    assert loads_strict_json(json.dumps(value).encode(), label="f.json") == value


@FAST
@given(depth=st.integers(1, 3000), kind=st.sampled_from(["[]", "{}"]))
def test_strict_json_depth_limit(depth: int, kind: str) -> None:
    inner = "[" * depth + "1" + "]" * depth
    text = inner if kind == "[]" else '{"a":' * depth + "1" + "}" * depth
    try:
        loads_strict_json(text, label="f.json")
    except ValidationError as exc:
        assert depth > MAX_JSON_DEPTH - 1 and "nested deeper" in str(exc)
        return
    assert depth <= MAX_JSON_DEPTH


@FAST
@given(key=st.text(min_size=1, max_size=20))
def test_check_keys_refuses_every_unknown_key(key: str) -> None:
    allowed = ("privacy_defn", "privacy_budget", "tau", "state_filter", "reader")
    try:
        check_keys({key: 1}, allowed, where="config.json")
    except ValidationError as exc:
        assert key not in allowed and "unknown key" in str(exc)
        return
    assert key in allowed


@FAST
@given(spec=st.text(max_size=40))
def test_cli_tau_parser(spec: str) -> None:
    try:
        out = parse_tau(spec)
    except ValidationError:
        return
    assert out and all(1 <= v <= 10_000 for v in out.values())


@FAST
@given(spec=st.text(max_size=40))
def test_cli_seeds_and_rhos_parsers(spec: str) -> None:
    try:
        seeds = parse_seeds(spec)
        assert seeds and all(0 <= s <= RANGES["seed"].high for s in seeds)
        assert len(seeds) <= 10_000 or "," in spec
    except argparse.ArgumentTypeError:
        pass
    try:
        rhos = parse_rhos(spec)
        assert rhos and all(math.isfinite(r) and r > 0 for r in rhos)
    except ValidationError:
        pass


@settings(
    max_examples=60, deadline=2000, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(body=st.binary(max_size=400))
def test_manifest_reader_refuses_anything_but_a_complete_manifest(
    tmp_path: Path, body: bytes
) -> None:
    from engine.core.errors import OutputError
    from engine.core.manifest import read_output_folder

    folder = tmp_path / "out"
    folder.mkdir(exist_ok=True)
    (folder / "manifest.json").write_bytes(body)
    with pytest.raises(OutputError):
        read_output_folder(folder)


@FAST
@given(
    names=st.lists(
        st.sampled_from(
            [
                "persons.csv",
                "units.csv",
                "geo.csv",
                "persons_old.csv",
                "persons_units.csv",
                "notes.txt",
                "GEO.csv.gz",
            ]
        ),
        max_size=5,
    )
)
def test_upload_assignment_never_guesses(names: list[str]) -> None:
    try:
        found = assign_by_name(names, ("persons", "units", "geo"))
    except DataValidationError:
        return
    assert sorted(found) == ["geo", "persons", "units"] and len(set(found.values())) == 3
    for kind, name in found.items():
        assert [n for n in names if kind in n.lower()] == [name]


@FAST
@given(data=st.binary(max_size=200))
def test_sniffed_file_bytes(data: bytes) -> None:
    try:
        out = read_source(data, max_bytes=10_000, name="x.csv")
    except DataValidationError as exc:
        assert exc.problems[0].file == "x.csv"
        return
    assert b"\x00" not in out[:8192]


def test_fuzz_covers_the_error_type() -> None:
    assert issubclass(ValidationError, PHExploreError)
