"""The typed options whose defaults change numbers: ``spine`` (``preset``) and ``error_universe``
(``housed``), and the rule that a run description without them replays as its version ran
(docs/metrics.md "Replaying older files").

Before, the error universe and the spine choice were untyped keys read with ``options.get`` (a
misspelt value fell back to a default); a file without them now reads as the conventional spine over
every block — what every earlier version ran — never as today's defaults.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from engine.core.errors import ValidationError
from engine.data.generated import load_generated_population
from engine.data.population import generate_population
from engine.dp.presets import load_topdown_preset
from engine.runs.data_source import DataSource
from engine.runs.inputs import input_files
from engine.runs.options import LEGACY_OPTIONS, PRESET_SPINE, TopDownRunOptions
from engine.runs.pipeline import execute
from engine.runs.spec import RunSpec

PRODUCTION = load_topdown_preset("topdown-2020-production")["persons"]


@pytest.fixture(scope="module")
def population(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated population with places and a unit frame (both defaults change its numbers)."""
    folder = tmp_path_factory.mktemp("defaults") / "pop"
    generate_population(3_000, seed=4, states=["RI"], out_dir=folder)
    return folder


def _spec(folder: Path, options: TopDownRunOptions) -> RunSpec:
    return RunSpec(
        engine="topdown",
        data=DataSource(source=str(folder)),
        config=PRODUCTION.to_dict(),
        seed=3,
        options=options,
    )


def test_the_new_options_are_typed_checked_and_written() -> None:
    options = TopDownRunOptions()
    assert options.spine == PRESET_SPINE and options.error_universe == "housed"
    written = options.to_json()
    assert written["spine"] == "preset" and written["error_universe"] == "housed"
    assert TopDownRunOptions.from_json(written) == options  # round trip, nothing legacy applied
    for key, value, words in [
        ("error_universe", "housed-blocks", "is not one of housed, all"),
        ("error_universe", 1, "expected one of housed, all"),
        ("spine", "auto", "is not one of preset, conventional, aian, optimized"),
    ]:
        with pytest.raises(ValidationError, match=words) as refused:
            TopDownRunOptions.from_json({**written, key: value}, "run.options")
        assert f"run.options.{key}" in str(refused.value)
    with pytest.raises(ValidationError, match="did you mean 'error_universe'"):
        TopDownRunOptions.from_json({"error_univers": "all"})
    # the preset's spine is not a spine option: it combines with levels; entities do not
    assert TopDownRunOptions(levels=("US", "State")).spine == PRESET_SPINE
    with pytest.raises(ValidationError, match="levels: cannot be combined"):
        TopDownRunOptions(levels=("US", "State"), entities=("places",))


def test_a_description_without_the_new_keys_reads_as_its_version_ran() -> None:
    legacy = TopDownRunOptions.from_json({"microdata": True, "epl_percentile": 95.0})
    assert (legacy.spine, legacy.error_universe) == ("conventional", "all")
    assert LEGACY_OPTIONS == {"spine": "conventional", "error_universe": "all"}
    # a key the file does name is kept, whichever it is
    named = TopDownRunOptions.from_json({"spine": "optimized", "entities": ["providence-wards"]})
    assert (named.spine, named.error_universe) == ("optimized", "all")
    assert TopDownRunOptions.from_json({"error_universe": "housed"}).spine == "conventional"


def test_a_legacy_run_on_a_generated_population_replays_as_it_ran(population: Path) -> None:
    """The same description with and without the new keys: without them the conventional spine
    over every block (as recorded by every earlier version), with today's defaults the optimized
    spine around the data's places over the housed blocks — other numbers."""
    hist = load_generated_population(population)
    today = _spec(population, TopDownRunOptions(microdata=False, epl_boot=0))
    section = json.loads(json.dumps(today.to_dict()))
    for key in LEGACY_OPTIONS:
        del section["options"][key]
    del section["fingerprint"]
    legacy = RunSpec.from_dict(section)
    assert (legacy.options.spine, legacy.options.error_universe) == ("conventional", "all")
    old = execute(legacy, data=hist, outputs="metrics").metrics
    new = execute(today, data=hist, outputs="metrics").metrics
    assert old["spine_used"]["kind"] == "conventional"
    assert old["spine_used"]["chosen_by"] == "the run's options"
    assert old["error_universe"]["universe"] == "all"
    assert old["error_universe"]["blocks_left_out"] == 0
    assert "Block_Group" in old["mae"] and "Optimized_Block_Group" not in old["mae"]
    assert new["spine_used"]["kind"] == "optimized"
    assert new["spine_used"]["chosen_by"] == "the preset's default"
    assert new["error_universe"]["universe"] == "housed"
    assert new["error_universe"]["blocks_left_out"] > 0
    assert "Optimized_Block_Group" in new["mae"]
    # the replayed description names both, so it replays the same way again
    assert old["run"]["options"]["spine"] == "conventional"
    assert old["run"]["options"]["error_universe"] == "all"
    # the same options written explicitly give the same numbers as the legacy reading
    explicit = _spec(
        population,
        TopDownRunOptions(microdata=False, epl_boot=0, spine="conventional", error_universe="all"),
    )
    again = execute(explicit, data=hist, outputs="metrics").metrics
    assert again["mae"] == old["mae"] and again["tda_mae"] == old["tda_mae"]


def test_the_error_universe_changes_only_the_block_figures(population: Path) -> None:
    hist = load_generated_population(population)
    base = TopDownRunOptions(microdata=False, epl_boot=0, spine="conventional")
    housed = execute(_spec(population, base), data=hist, outputs="metrics").metrics
    every = execute(
        _spec(population, dataclasses.replace(base, error_universe="all")),
        data=hist,
        outputs="metrics",
    ).metrics
    for level in housed["mae"]:
        if level == "Block":
            assert housed["n_cells"][level] != every["n_cells"][level]
        else:
            assert housed["mae"][level] == every["mae"][level], level


def test_a_run_that_may_use_the_places_records_their_file(population: Path) -> None:
    """``preset`` or ``places`` among the entities: places.csv is an input whose content a replay
    checks; a conventional run does not read it (a folder regenerated with places still replays)."""
    preset = input_files(_spec(population, TopDownRunOptions()))
    assert "data/places.csv" in preset
    named = input_files(
        _spec(population, TopDownRunOptions(spine="optimized", entities=("places",)))
    )
    assert "data/places.csv" in named and not any(k.startswith("entities/") for k in named)
    conventional = input_files(_spec(population, TopDownRunOptions(spine="conventional")))
    assert "data/places.csv" not in conventional and "data/ppmf.csv" in conventional
