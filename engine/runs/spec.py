"""A run is data: the frozen description of one engine run (SPEC §8: same seed → same numbers).

:class:`RunSpec` holds everything that decides a run's numbers — engine, data source, allocation or
configuration, seed, engine options — plus where it runs (backend, workers), which by SPEC §8 does
not change them. The CLI parses its arguments into one, the app builds one from its widgets,
experiments build grids of them (:meth:`RunSpec.with_budget`), a scenario saves one
(:meth:`RunSpec.to_dict`) and :func:`engine.runs.pipeline.execute` replays it.

:meth:`RunSpec.fingerprint` is the SHA-256 of the canonical JSON of the fields that decide the
numbers (backend and workers left out), so two runs with the same fingerprint give the same outputs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from engine.core.errors import ValidationError
from engine.topdown.qp.settings import SOLVER_CHOICES

ENGINES: tuple[str, ...] = ("topdown", "phsafe")
SPEC_VERSION = 1
"""Version of the :meth:`RunSpec.to_dict` layout (bump when a field changes meaning)."""
NOISE_METHODS: tuple[str, ...] = ("fast", "exact")
"""``fast``: counter-based generator keyed by (seed, level, geounit, query), reproducible;
``exact``: OpenDP's exact samplers with OS randomness (release-grade, not reproducible)."""


def _freeze(value: Any) -> Any:
    """A read-only deep copy of JSON-like data (mappings become MappingProxyType, lists tuples)."""
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): _freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    """Plain JSON data (dicts and lists) of a frozen value."""
    if isinstance(value, Mapping):
        return {str(k): _thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_thaw(v) for v in value]
    return value


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys: the same data always gives the same text.

    An infinite budget (PHSafe's "no noise") is written as ``Infinity``, so it stays distinct.
    """
    return json.dumps(_thaw(value), sort_keys=True, separators=(",", ":"), ensure_ascii=True)


@dataclass(frozen=True)
class RunSpec:
    """One run's description. Every mapping is frozen; use :meth:`replace` for a variant.

    ``data``: where the input comes from, e.g. ``{"source": "ri2010"}`` (a sample name, a file or
    folder path), optionally with ``format``, ``mapping`` (generic block CSV), ``filter``
    (``{"level": "County", "units": ["44001"]}``) and, for data the app already holds (uploads),
    a ``label`` and a content ``sha256``.
    ``config``: the TopDown allocation as :meth:`~engine.dp.budget.TopDownAllocation.to_dict`, or
    the official PHSafe config.json dictionary.
    ``options``: engine options — TopDown: ``levels``, ``spine`` and its options, ``noise_method``,
    ``solver`` (only when not ``auto``), ``microdata``; PHSafe: ``trials``, ``non_private``, ``noise_method``.
    """

    engine: str
    data: Mapping[str, Any]
    config: Mapping[str, Any]
    seed: int
    options: Mapping[str, Any] = field(default_factory=dict)
    backend: str = "local"
    workers: int = 1
    backend_options: Mapping[str, Any] = field(default_factory=dict)
    """Where a Spark run runs: ``master`` or ``remote``, optional ``checkpoint`` (not numbers)."""

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValidationError(
                f"unknown engine {self.engine!r}; available: {', '.join(ENGINES)}"
            )
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValidationError(f"seed must be a non-negative whole number; got {self.seed!r}")
        if not isinstance(self.data, Mapping) or not self.data.get("source"):
            raise ValidationError("a run's data must name its source, e.g. {'source': 'ri2010'}")
        if not isinstance(self.config, Mapping):
            raise ValidationError("a run's config must be a JSON object (allocation or config)")
        method = self.options.get("noise_method", "fast")
        if method not in NOISE_METHODS:
            raise ValidationError(
                f"noise_method must be one of {', '.join(NOISE_METHODS)}; got {method!r}"
            )
        solver = self.options.get("solver", "auto")
        if solver not in SOLVER_CHOICES:
            raise ValidationError(
                f"solver must be one of {', '.join(SOLVER_CHOICES)}; got {solver!r}"
            )
        from engine.core.executors import BACKENDS, check_backend_options, check_workers

        if self.backend not in BACKENDS:
            raise ValidationError(
                f"unknown backend {self.backend!r}; available: {', '.join(BACKENDS)}"
            )
        check_workers(self.workers)
        object.__setattr__(
            self,
            "backend_options",
            _freeze(check_backend_options(self.backend, self.backend_options)),
        )
        object.__setattr__(self, "data", _freeze(self.data))
        object.__setattr__(self, "config", _freeze(self.config))
        object.__setattr__(self, "options", _freeze(self.options))

    # ------------------------------------------------------------------ identity
    def numbers_dict(self) -> dict[str, Any]:
        """The fields that decide the run's numbers (no backend, no workers)."""
        return {
            "engine": self.engine,
            "data": _thaw(self.data),
            "config": _thaw(self.config),
            "seed": self.seed,
            "options": _thaw(self.options),
        }

    def fingerprint(self) -> str:
        """SHA-256 (hex) of the canonical JSON of :meth:`numbers_dict`."""
        text = canonical_json({"spec_version": SPEC_VERSION, **self.numbers_dict()})
        return hashlib.sha256(text.encode("utf-8")).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (saved in scenarios and in metrics.json ``run``)."""
        return {
            "spec_version": SPEC_VERSION,
            **self.numbers_dict(),
            "backend": self.backend,
            "workers": self.workers,
            **({"backend_options": _thaw(self.backend_options)} if self.backend_options else {}),
            "fingerprint": self.fingerprint(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunSpec:
        """A spec from :meth:`to_dict` output (the fingerprint, when present, must match)."""
        if not isinstance(data, Mapping):
            raise ValidationError("a run description must be a JSON object")
        version = data.get("spec_version", SPEC_VERSION)
        if version != SPEC_VERSION:
            raise ValidationError(
                f"run description version {version!r} is not supported (expected {SPEC_VERSION})"
            )
        missing = [k for k in ("engine", "data", "config", "seed") if k not in data]
        if missing:
            raise ValidationError(f"run description lacks {', '.join(missing)}")
        spec = cls(
            engine=data["engine"],
            data=data["data"],
            config=data["config"],
            seed=data["seed"],
            options=data.get("options", {}),
            backend=data.get("backend", "local"),
            workers=data.get("workers", 1),
            backend_options=data.get("backend_options", {}),
        )
        stated = data.get("fingerprint")
        if stated is not None and stated != spec.fingerprint():
            raise ValidationError(
                "run description fingerprint does not match its fields (edited by hand?); "
                "remove 'fingerprint' to accept the fields as they are"
            )
        return spec

    def replace(self, **changes: Any) -> RunSpec:
        """A copy with ``changes`` (validated again)."""
        thawed = {k: _thaw(v) if isinstance(v, Mapping) else v for k, v in changes.items()}
        base = {
            "data": _thaw(self.data),
            "config": _thaw(self.config),
            "options": _thaw(self.options),
            "backend_options": _thaw(self.backend_options),
        }
        return replace(self, **{**base, **thawed})

    def with_option(self, **options: Any) -> RunSpec:
        """A copy with engine options added or changed."""
        return self.replace(options={**_thaw(self.options), **options})

    @property
    def noise_method(self) -> str:
        """``fast`` (keyed, reproducible) or ``exact`` (OpenDP)."""
        return str(self.options.get("noise_method", "fast"))

    @property
    def solver(self) -> str:
        """TopDown's least-squares route: ``auto`` or one route name (``--solver``)."""
        return str(self.options.get("solver", "auto"))
