"""Which spine a run measures on: production's optimized spine where the data carry places.

Before, ``topdown-2020-production`` ran on the conventional spine whatever the data, and generated
populations had no places for the optimized spine to target. ``spine`` = ``preset`` (the typed
options' default) resolves to the preset's spine on the data; a spine named is used as given.
"""

from __future__ import annotations

import pytest

from engine.core.errors import PHExploreError
from engine.data.generated import load_generated_population
from engine.data.population import generate_population
from engine.data.samples import load_topdown_sample
from engine.dp.presets import load_topdown_preset, preset_spine
from engine.runs import topdown as stages
from engine.runs.control import RunControl
from engine.runs.data_source import DataSource
from engine.runs.options import PRESET_SPINE, TopDownRunOptions
from engine.runs.spec import RunSpec
from engine.runs.spine_choice import resolve_spine

PRODUCTION = load_topdown_preset("topdown-2020-production")["persons"]


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("choice") / "pop"
    generate_population(3_000, seed=2, states=["RI"], out_dir=out)
    return load_generated_population(out)


def test_the_production_preset_states_its_spine() -> None:
    spine = preset_spine(PRODUCTION.name)
    assert spine is not None and spine["kind"] == "optimized" and spine["targets"] == "places"
    assert preset_spine("ri2010-production-like") is None
    assert preset_spine("topdown-2021-04 (persons)") is None


def test_production_defaults_to_the_optimized_spine_around_the_places(generated) -> None:
    assert TopDownRunOptions().spine == PRESET_SPINE  # the default
    choice = resolve_spine(TopDownRunOptions(), PRODUCTION, generated)
    assert choice.kind == "optimized" and choice.default and choice.given
    assert choice.build is not None and choice.build.spine == "optimized"
    assert choice.build.entities == ("places",)
    section = choice.section()
    assert section["chosen_by"] == "the preset's default" and "places" in section["label"]
    assert section["entities"] == ["places"]
    # an explicit choice wins, and conventional builds no SPN spine (as before)
    explicit = resolve_spine(TopDownRunOptions(spine="conventional"), PRODUCTION, generated)
    assert explicit.kind == "conventional" and not explicit.given and not explicit.default
    assert explicit.section()["chosen_by"] == "the run's options"
    # another allocation keeps the conventional spine
    ri = load_topdown_preset("ri2010-production-like")["persons"]
    assert resolve_spine(TopDownRunOptions(), ri, load_topdown_sample("ri2010")).kind == (
        "conventional"
    )


def test_the_other_spine_options_add_to_the_preset_spine(generated) -> None:
    """Entities to report join the places the preset's spine targets; given levels keep the
    conventional spine over them."""
    options = TopDownRunOptions(entities=("places",), fanout_cutoff=8.0)
    choice = resolve_spine(options, PRODUCTION, generated)
    assert choice.build is not None and choice.build.entities == ("places",)
    assert choice.build.fanout_cutoff == 8.0 and choice.kind == "optimized"
    levels = resolve_spine(
        TopDownRunOptions(levels=("US", "State", "County")), PRODUCTION, generated
    )
    assert levels.kind == "conventional" and not levels.given and "levels" in levels.label


def test_production_without_places_says_why_it_runs_conventional() -> None:
    perry = load_topdown_sample("ppmf_perry_al")
    choice = resolve_spine(TopDownRunOptions(), PRODUCTION, perry)
    assert choice.kind == "conventional" and not choice.given
    assert "carry no places" in choice.label and "16.00" in choice.note
    # entities named on data without places: the conventional spine reports them
    reported = resolve_spine(TopDownRunOptions(entities=("x.csv",)), PRODUCTION, perry)
    assert reported.kind == "conventional" and reported.given


def test_places_on_data_without_places_are_refused_naming_them() -> None:
    perry = load_topdown_sample("ppmf_perry_al")
    spec = RunSpec(
        engine="topdown",
        data=DataSource(source="ppmf_perry_al"),
        config=PRODUCTION.to_dict(),
        seed=1,
        options=TopDownRunOptions(spine="optimized", entities=("places",), microdata=False),
    )
    with pytest.raises(PHExploreError, match="carry no places"):
        stages.measure(spec, perry, RunControl())


def test_a_run_records_the_spine_it_measured_on(generated) -> None:
    spec = RunSpec(
        engine="topdown",
        data=DataSource(source="generated"),
        config=PRODUCTION.to_dict(),
        seed=1,
        options=TopDownRunOptions(microdata=False, epl_boot=0),
    )
    measured = stages.measure(spec, generated, RunControl())
    assert measured.spine is not None and measured.spine.kind == "optimized"
    assert "Optimized_Block_Group" in measured.plan.tree.levels
    assert measured.spine_plan is not None
    assert [s.name for s in measured.spine_plan.entity_sets] == ["places"]
