"""The engine options and the backend options of a run: typed ``options`` and ``backend_options``.

:class:`TopDownRunOptions` and :class:`PHSafeRunOptions` hold every option a run of that engine
takes, each with its default, kind and range (:mod:`engine.runs.typed`, ranges from
:data:`engine.core.numbers.RANGES`); :class:`BackendOptions` says where a Spark run runs. The
command line, the app and the experiments build these records; a file's ``options`` object is
read into one with every unknown or misspelt key refused (``"spin": "aian"`` → ``unknown key
'spin'; did you mean 'spine'?``), never dropped in favour of a default.

metrics.json's ``run.options`` lists every option of the engine with the value used, except
``solver`` at its default ``auto`` (docs/metrics.md "The run description").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.metrics.epl_settings import PF_MULTIPLIER, PF_PERCENTILE
from engine.metrics.universe_options import ALL, HOUSED, UNIVERSES
from engine.runs.output_options import ESTIMATE_CHOICES, FORMATS
from engine.runs.typed import (
    FieldError,
    check_fields,
    choice,
    flag,
    names,
    optional,
    real,
    record_from_json,
    record_to_json,
    text,
    typed,
    whole,
)
from engine.topdown.qp.settings import SOLVER_CHOICES
from engine.topdown.spine.options import SPINE_KINDS

NOISE_METHODS: tuple[str, ...] = ("fast", "exact")
"""``fast``: counter-based generator keyed by (seed, level, geounit, query), reproducible;
``exact``: OpenDP's exact samplers with OS randomness (release-grade, not reproducible)."""


def noise_record(method: str) -> dict[str, Any]:
    """The metrics.json ``noise`` section: which sampler drew the measurements."""
    if method == "exact":
        return {
            "method": "exact",
            "sampler": "OpenDP exact samplers, OS randomness (release-grade, not reproducible)",
        }
    return {
        "method": "fast",
        "sampler": "counter-based generator keyed by (seed, level, geounit, query) "
        "(docs/science.md §8)",
    }


EPL_BOOT = 200
"""Bootstrap resamples of every EPL interval of a run (metrics.json and the app's tables)."""
NO_SPECIAL_AREAS = "none"
"""``special_areas`` spelling of "no AIAN-style branch" (the same as leaving it out)."""
SPINE_OPTION_NAMES: tuple[str, ...] = (
    "spine",
    "entities",
    "special_areas",
    "fanout_cutoff",
    "tract_groups",
    "bypass",
)
PRESET_SPINE = "preset"
"""``spine`` value meaning "the spine the allocation's preset ran on"
(:func:`engine.runs.spine_choice.resolve_spine`): ``topdown-2020-production``'s optimized block
groups around the data's places where the data carry places, else the conventional spine."""
SPINE_CHOICES: tuple[str, ...] = (PRESET_SPINE, *SPINE_KINDS)
"""The values of ``spine``: the allocation's own, or a spine named (SPN §1, §4–§6)."""
LEGACY_OPTIONS: dict[str, Any] = {"spine": "conventional", "error_universe": ALL}
"""What a run description written before an option existed ran with, for each option whose
default changes numbers (docs/metrics.md "Replaying older files"): a description without
``spine`` ran on the conventional spine (the default until ``preset``), one without
``error_universe`` averaged its block figures over every block. Every description written since
names both (:meth:`TopDownRunOptions.to_json` writes every option)."""


@dataclass(frozen=True)
class TopDownRunOptions:
    """Every option of a TopDown run (TDA §6–§7; SPN for the spine options).

    Numbers: ``levels`` (the conventional spine's levels, root first; default: the allocation's
    levels present in the data), the spine options (``spine``, ``entities``, ``special_areas``,
    ``fanout_cutoff``, ``tract_groups``, ``bypass``; docs/topdown.md "Spines"),
    ``spread_invariant_share`` (a labelled departure from production, TDA §5.2), ``noise_method``
    and ``solver`` (the least-squares route, :data:`engine.topdown.qp.settings.SOLVER_CHOICES`;
    written only when not ``auto``, so a default run keeps the fingerprint it had before the option
    existed). ``spine`` defaults to :data:`PRESET_SPINE`, the spine the allocation's preset
    ran on (production's optimized block groups around the data's places where the data carry
    them, TDA Table 6 note, §8.2; else conventional); the other spine options add to it.
    ``entities`` and ``special_areas`` name entity sources: a shipped sample
    (``providence-wards``), :data:`DATA_PLACES` (the data's places) or a block → entity CSV.
    Metrics: ``error_universe`` (the blocks the block-level figures average over: ``housed``, TDA's
    blocks with housing units or GQ where the data carry a unit frame, or ``all``;
    :mod:`engine.metrics.universe`), ``epl_boot``, ``epl_percentile``, ``epl_multiplier``
    (docs/science.md §5). Outputs (no number depends on them): ``microdata``, ``measurements``,
    ``output_format`` (``auto``/``csv``/``parquet``), ``estimates`` (``auto``/``dense``/``sparse``).

    A description read from a file without ``spine`` or ``error_universe`` gets the value that
    version ran with (:data:`LEGACY_OPTIONS`), not today's default: an old file replays as it ran.
    """

    levels: tuple[str, ...] | None = typed(optional(names), None)
    spine: str = typed(choice(*SPINE_CHOICES), PRESET_SPINE)
    entities: tuple[str, ...] = typed(names, ())
    special_areas: str | None = typed(optional(text), None)
    fanout_cutoff: float | None = typed(optional(real("fanout")), None)
    tract_groups: bool = typed(flag, False)
    bypass: bool | None = typed(optional(flag), None)
    spread_invariant_share: bool = typed(flag, False)
    noise_method: str = typed(choice(*NOISE_METHODS), "fast")
    solver: str = typed(choice(*SOLVER_CHOICES), "auto", when_set=True)
    error_universe: str = typed(choice(*UNIVERSES), HOUSED)
    epl_boot: int = typed(whole("n_boot"), EPL_BOOT)
    epl_percentile: float = typed(real("epl_percentile"), PF_PERCENTILE)
    epl_multiplier: float = typed(real("epl_multiplier"), PF_MULTIPLIER)
    microdata: bool = typed(flag, True)
    measurements: bool = typed(flag, True)
    output_format: str = typed(choice(*FORMATS), "auto")
    estimates: str = typed(choice(*ESTIMATE_CHOICES), "auto")

    def __post_init__(self) -> None:
        check_fields(self)
        if self.levels and self.spine_given:
            raise FieldError(
                "levels: cannot be combined with the spine options "
                f"({', '.join(SPINE_OPTION_NAMES)}): a spine names its own levels"
            )
        if self.spread_invariant_share and self.has_special_areas:
            raise FieldError(
                "spread_invariant_share: cannot be combined with special_areas: a split state's "
                "branches measure the State TOTAL (TDA §7.4), so its share is spent there"
            )

    @property
    def spine_given(self) -> bool:
        """True when a spine option names more than a default: a spine kind other than the
        allocation's own or the conventional one, entities, special areas or a spine setting (the
        run builds an SPN spine and reports entities)."""
        return bool(
            self.spine not in (PRESET_SPINE, "conventional")
            or self.entities
            or self.special_areas is not None
            or self.tract_groups
            or self.bypass is not None
            or self.fanout_cutoff is not None
        )

    @property
    def has_special_areas(self) -> bool:
        """True when the options name the areas of an AIAN-style branch."""
        return self.special_areas not in (None, NO_SPECIAL_AREAS)

    @classmethod
    def from_json(cls, raw: Any, where: str = "options") -> TopDownRunOptions:
        """The options of a run description's ``options`` object (unknown keys refused); an
        option of :data:`LEGACY_OPTIONS` the object lacks gets the value its version ran with."""
        if isinstance(raw, Mapping):
            raw = {**{k: v for k, v in LEGACY_OPTIONS.items() if k not in raw}, **raw}
        return record_from_json(cls, raw, where)

    def to_json(self) -> dict[str, Any]:
        """Every option with its value (the ``options`` of metrics.json ``run``)."""
        return record_to_json(self)


@dataclass(frozen=True)
class PHSafeRunOptions:
    """Every option of a PHSafe run (PHS §3–§7): ``trials`` noise draws on one join,
    ``non_private`` (the true tabulation, labelled non-private), ``scale`` (the data's fraction of
    the full population, for truncation error projected to full scale) and ``noise_method``."""

    trials: int = typed(whole("trials"), 1)
    non_private: bool = typed(flag, False)
    scale: float | None = typed(optional(real("scale")), None)
    noise_method: str = typed(choice(*NOISE_METHODS), "fast")

    def __post_init__(self) -> None:
        check_fields(self)

    @classmethod
    def from_json(cls, raw: Any, where: str = "options") -> PHSafeRunOptions:
        """The options of a run description's ``options`` object (unknown keys refused)."""
        return record_from_json(cls, raw, where)

    def to_json(self) -> dict[str, Any]:
        """Every option with its value (the ``options`` of metrics.json ``run``)."""
        return record_to_json(self)


EngineOptions = TopDownRunOptions | PHSafeRunOptions
OPTIONS_OF: dict[str, type[TopDownRunOptions] | type[PHSafeRunOptions]] = {
    "topdown": TopDownRunOptions,
    "phsafe": PHSafeRunOptions,
}
"""The options record of each engine."""


@dataclass(frozen=True)
class BackendOptions:
    """Where a Spark run runs: ``master`` (``local[2]``, ``spark://HOST:7077``, ``yarn``…) or
    ``remote`` (a Spark Connect ``sc://HOST:PORT``), an optional ``checkpoint`` folder and an
    optional ``driver_memory`` (classic sessions only). Never the numbers (docs/spark.md).

    Only the user's own options or environment decide where a run runs: a replayed file's backend
    options are shown, never used (docs/reliability.md "Replays")."""

    master: str | None = typed(optional(text), None)
    remote: str | None = typed(optional(text), None)
    checkpoint: str | None = typed(optional(text), None)
    driver_memory: str | None = typed(optional(text), None)

    def __post_init__(self) -> None:
        check_fields(self)

    @classmethod
    def from_json(cls, raw: Any, where: str = "backend_options") -> BackendOptions:
        """The backend options of a run description (unknown keys refused)."""
        return record_from_json(cls, raw, where)

    def to_json(self) -> dict[str, Any]:
        """The options set (an empty object on the local backend)."""
        return record_to_json(self, only_set=True)

    def __bool__(self) -> bool:
        return bool(self.to_json())

    def describe(self) -> str:
        """``master local[2]`` / ``remote sc://host:15002`` (what a user reads)."""
        return ", ".join(f"{k} {v}" for k, v in self.to_json().items())
