"""Which spine a TopDown run measures on, and why: the user's options, else the preset's (TDA §8.2).

Production measured optimized (custom) block groups built around places, minor civil divisions,
AIAN areas and GQ types, not the tabulation block groups (TDA Table 6 note, §8.2; SPN §6). A preset
names the spine it ran on (``"spine"`` in its JSON, :func:`engine.dp.presets.preset_spine`).
:func:`resolve_spine` gives a run, from its typed options
(:class:`~engine.runs.options.TopDownRunOptions`):

* ``spine`` naming a spine (``conventional``, ``aian``, ``optimized``): that spine with the other
  spine options, as given;
* ``spine`` = ``preset`` (the default): the preset's spine where the data carry its targets —
  ``topdown-2020-production`` on a generated population with places: the optimized spine around
  the data's places (``entities`` gains ``places``), bypass on, no AIAN branch unless
  ``special_areas`` names one; the other spine options (entities to report, special areas, fan-out
  cutoff, tract groups, bypass) add to it. Otherwise — an allocation that names no spine, data
  without its targets, or ``levels`` given — the conventional spine, saying why (e.g. the data
  carry no places, so tabulation block groups are on the spine, which production's were not).

The choice is written to metrics.json as ``spine_used`` (:meth:`SpineChoice.section`) and shown by
the CLI summary, the Results page and the report. A run description written before ``preset``
existed names its spine (or lacks the key and ran on the conventional one:
:data:`engine.runs.options.LEGACY_OPTIONS`), so replays never resolve a spine it did not run on.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from engine.data.histogram import BlockHistogram
from engine.dp.budget import TopDownAllocation
from engine.dp.presets import preset_spine
from engine.runs.options import PRESET_SPINE, TopDownRunOptions
from engine.topdown.spine.entities import has_places
from engine.topdown.spine.options import DATA_PLACES

CONVENTIONAL = "conventional"


@dataclass(frozen=True)
class SpineChoice:
    """The spine of one run: the options to build it with and whether the preset chose it."""

    kind: str
    build: TopDownRunOptions | None = None
    """The options to build the SPN spine with (``spine`` a kind, never ``preset``); None: the
    plain conventional spine (or the ``levels`` given), no spine options."""
    default: bool = False
    """True when the preset's spine was asked for (``spine`` = ``preset``)."""
    label: str = ""
    note: str = ""

    @property
    def given(self) -> bool:
        """Whether the run builds an SPN spine (:func:`engine.topdown.spine.plan.plan_spine`)."""
        return self.build is not None

    def section(self) -> dict[str, Any]:
        """metrics.json ``spine_used``."""
        built = self.build
        return {
            "kind": self.kind,
            "entities": [] if built is None else list(built.entities),
            "special_areas": None if built is None else built.special_areas,
            "chosen_by": "the preset's default" if self.default else "the run's options",
            "label": self.label,
            "note": self.note,
        }


def describe(kind: str, options: TopDownRunOptions | None) -> str:
    """What a spine is, in words: its kind, the entities it targets and its AIAN-style branch."""
    text = {
        "conventional": "conventional spine (tabulation block groups on the spine)",
        "aian": "AIAN-style spine",
        "optimized": "optimized block groups (tabulation block groups off the spine)",
    }.get(kind, f"{kind} spine")
    if options is None:
        return text
    if options.entities:
        names = ", ".join("the data’s places" if e == DATA_PLACES else e for e in options.entities)
        text += f" around {names}" if kind != CONVENTIONAL else f", reporting {names}"
    if options.has_special_areas:
        text += f", AIAN-style branch around {options.special_areas}"
    return text


def _conventional(options: TopDownRunOptions) -> TopDownRunOptions | None:
    """The options of a conventional spine keeping the other spine options (entities to report…),
    or None when there are none (the plain conventional spine)."""
    if not options.spine_given:
        return None
    return dataclasses.replace(options, spine=CONVENTIONAL)


def resolve_spine(
    options: TopDownRunOptions, allocation: TopDownAllocation, hist: BlockHistogram
) -> SpineChoice:
    """The :class:`SpineChoice` of a run with these options and allocation on ``hist``."""
    if options.spine != PRESET_SPINE:
        kind = options.spine
        build = options if options.spine_given else None
        label = describe(kind, build)
        if options.levels:
            label += f" over the levels {', '.join(options.levels)}"
        return SpineChoice(kind, build, False, f"{label} (the run's options)")
    name = allocation.name.split(" (", 1)[0]
    if options.levels:
        return SpineChoice(
            CONVENTIONAL,
            None,
            True,
            f"{describe(CONVENTIONAL, None)} over the levels {', '.join(options.levels)} (the "
            "run's levels)",
        )
    preset = preset_spine(allocation.name)
    if preset is None or preset.get("kind") == CONVENTIONAL:
        build = _conventional(options)
        return SpineChoice(CONVENTIONAL, build, True, describe(CONVENTIONAL, build))
    kind = str(preset.get("kind"))
    targets = str(preset.get("targets", ""))
    if targets == DATA_PLACES and has_places(hist):
        entities = (DATA_PLACES, *(e for e in options.entities if e != DATA_PLACES))
        build = dataclasses.replace(options, spine=kind, entities=entities)
        return SpineChoice(
            kind,
            build,
            True,
            f"{describe(kind, build)} — {name}'s default: production measured custom block "
            "groups (TDA Table 6 note, §8.2)"
            + ("" if build.has_special_areas else "; no AIAN branch"),
            f"Chosen because the allocation is {name} and the data carry places; give --spine "
            "conventional (the app: the conventional spine) to run on the tabulation block groups "
            "instead.",
        )
    build = _conventional(options)
    return SpineChoice(
        CONVENTIONAL,
        build,
        True,
        f"{describe(CONVENTIONAL, build)} — {name} ran on {kind} block groups around {targets}, "
        f"but these data carry no {targets}",
        "Production's tabulation block groups were off its spine (TDA Table 9: Block Group TOTAL "
        "16.00); here they are on it, so their error is far smaller than TDA's. A generated "
        "population written with places.csv runs on the optimized spine.",
    )
