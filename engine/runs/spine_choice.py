"""Which spine a TopDown run measures on, and why: the user's options, else the preset's (TDA §8.2).

Production measured optimized (custom) block groups built around places, minor civil divisions,
AIAN areas and GQ types, not the tabulation block groups (TDA Table 6 note, §8.2; SPN §6). A preset
names the spine it ran on (``"spine"`` in its JSON, :func:`engine.dp.presets.preset_spine`);
:func:`resolve_spine` gives a run

* the spine options the user set (``--spine``, ``--entities`` …, or ``--levels``), as given;
* otherwise the preset's spine where the data carry its targets — ``topdown-2020-production`` on a
  generated population with places: the optimized spine around the data's places (``--entities
  places``), bypass on, no AIAN branch;
* otherwise the conventional spine, saying why (e.g. the data carry no places, so tabulation block
  groups are on the spine, which production's were not).

The choice is written to metrics.json as ``spine_used`` (:meth:`SpineChoice.section`) and shown by
the CLI summary, the Results page and the report.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.data.histogram import BlockHistogram
from engine.dp.budget import TopDownAllocation
from engine.dp.presets import preset_spine
from engine.topdown.spine.entities import DATA_PLACES, has_places

SPINE_KEYS: tuple[str, ...] = (
    "spine",
    "entities",
    "special_areas",
    "fanout_cutoff",
    "tract_groups",
    "bypass",
)
"""The run options that choose a spine (``phexplore run topdown`` spine options)."""


@dataclass(frozen=True)
class SpineChoice:
    """The spine of one run: its options, and whether they came from the preset's default."""

    kind: str
    options: dict[str, Any] = field(default_factory=dict)
    """The spine options to build it with (empty: the conventional spine, no spine options)."""
    default: bool = False
    """True when the preset's default chose the spine (the user set no spine option)."""
    label: str = ""
    note: str = ""

    @property
    def given(self) -> bool:
        """Whether the run builds an SPN spine (:func:`engine.topdown.spine.plan.plan_spine`)."""
        return bool(self.options)

    def section(self) -> dict[str, Any]:
        """metrics.json ``spine_used``."""
        return {
            "kind": self.kind,
            "entities": list(self.options.get("entities") or ()),
            "special_areas": self.options.get("special_areas"),
            "chosen_by": "the preset's default" if self.default else "the run's options",
            "label": self.label,
            "note": self.note,
        }


def _user_set(options: Mapping[str, Any]) -> bool:
    return bool(
        "spine" in options
        or options.get("entities")
        or options.get("special_areas") is not None
        or options.get("tract_groups")
        or options.get("bypass") is not None
        or options.get("fanout_cutoff") is not None
    )


def _describe(kind: str, options: Mapping[str, Any]) -> str:
    entities = list(options.get("entities") or ())
    text = {
        "conventional": "conventional spine (tabulation block groups on the spine)",
        "aian": "AIAN-style spine",
        "optimized": "optimized block groups (tabulation block groups off the spine)",
    }.get(kind, f"{kind} spine")
    if entities:
        text += (
            f" around {', '.join('the data’s places' if e == DATA_PLACES else e for e in entities)}"
        )
    areas = options.get("special_areas")
    if areas not in (None, "none"):
        text += f", AIAN-style branch around {areas}"
    return text


def resolve_spine(
    options: Mapping[str, Any], allocation: TopDownAllocation, hist: BlockHistogram
) -> SpineChoice:
    """The :class:`SpineChoice` of a run with these options and allocation on ``hist``."""
    spine_options = {k: options[k] for k in SPINE_KEYS if k in options}
    if _user_set(options):
        kind = str(options.get("spine") or "conventional")
        wanted = spine_options if _any_beyond_conventional(spine_options) else {}
        return SpineChoice(
            kind, wanted, False, _describe(kind, spine_options) + " (the run's options)"
        )
    preset = preset_spine(allocation.name)
    name = allocation.name.split(" (", 1)[0]
    if options.get("levels"):
        return SpineChoice(
            "conventional",
            {},
            False,
            f"conventional spine over the levels {', '.join(options['levels'])} (the run's "
            "--levels)",
            "",
        )
    if preset is None or preset.get("kind") == "conventional":
        return SpineChoice("conventional", {}, True, _describe("conventional", {}), "")
    kind = str(preset.get("kind"))
    targets = str(preset.get("targets", ""))
    if targets == DATA_PLACES and has_places(hist):
        chosen = {"spine": kind, "entities": [DATA_PLACES]}
        return SpineChoice(
            kind,
            chosen,
            True,
            f"{_describe(kind, chosen)} — {name}'s default: production measured custom block "
            "groups (TDA Table 6 note, §8.2); no AIAN branch",
            f"Chosen because the allocation is {name} and the data carry places; give --spine "
            "conventional to run on the tabulation block groups instead.",
        )
    return SpineChoice(
        "conventional",
        {},
        True,
        f"{_describe('conventional', {})} — {name} ran on {kind} block groups around {targets}, "
        f"but these data carry no {targets}",
        "Production's tabulation block groups were off its spine (TDA Table 9: Block Group TOTAL "
        "16.00); here they are on it, so their error is far smaller than TDA's. A generated "
        "population written with places.csv runs on the optimized spine.",
    )


def _any_beyond_conventional(options: Mapping[str, Any]) -> bool:
    """Whether user-set spine options need an SPN spine (anything but ``spine=conventional``)."""
    return bool(
        (options.get("spine") or "conventional") != "conventional"
        or options.get("entities")
        or options.get("special_areas") is not None
        or options.get("tract_groups")
        or options.get("bypass") is not None
        or options.get("fanout_cutoff") is not None
    )
