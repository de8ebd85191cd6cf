"""A run is data: the frozen, typed description of one engine run (docs/science.md §8: same seed →
same numbers).

:class:`RunSpec` holds everything that decides a run's numbers — engine, data source
(:class:`~engine.runs.data_source.DataSource`), allocation or configuration, seed, engine options
(:class:`~engine.runs.options.TopDownRunOptions` / :class:`~engine.runs.options.PHSafeRunOptions`)
— plus where it runs (backend, workers, :class:`~engine.runs.options.BackendOptions`), which does
not change them. The CLI and the app build one from their arguments and widgets, experiments build
grids of them (:meth:`RunSpec.replace`), metrics.json and scenarios save one (:meth:`RunSpec.to_dict`,
the ``run`` section) and :func:`engine.runs.pipeline.execute` runs it.

:meth:`RunSpec.from_dict` reads a saved description strictly: an unknown or misspelt key anywhere
(the section, ``data``, ``options``, ``backend_options``) is refused with the nearest known one,
every value is checked against its kind and range, and a stated ``fingerprint`` must match. Files
written by earlier versions keep working: every key they wrote is known.

:meth:`RunSpec.fingerprint` is the SHA-256 of the canonical JSON of the fields that decide the
numbers (backend and workers left out), computed on the JSON the description is written as, so a
reader of any version recomputes the same value from the file.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from engine.core.errors import ValidationError
from engine.core.executors import BACKENDS
from engine.core.numbers import value_kind
from engine.dp.budget import TopDownAllocation
from engine.phsafe.config import PHSafeConfig
from engine.runs.data_source import DataSource
from engine.runs.options import OPTIONS_OF, BackendOptions, EngineOptions
from engine.runs.typed import FieldError, check_known_keys, whole

ENGINES: tuple[str, ...] = ("topdown", "phsafe")
SPEC_VERSION = 1
"""Version of the :meth:`RunSpec.to_dict` layout (bumped only if a key changed meaning; keys are
only ever added, so every earlier file reads)."""
RUN_KEYS: tuple[str, ...] = (
    "spec_version",
    "engine",
    "data",
    "config",
    "seed",
    "options",
    "backend",
    "workers",
    "backend_options",
    "fingerprint",
)
"""The keys of a saved run description (metrics.json ``run``)."""
NUMBERS_KEYS: tuple[str, ...] = ("engine", "data", "config", "seed", "options")
"""The keys whose values decide the numbers (what :meth:`RunSpec.fingerprint` covers)."""


def freeze(value: Any) -> Any:
    """A read-only deep copy of JSON-like data (mappings become MappingProxyType, lists tuples)."""
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): freeze(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """Plain JSON data (dicts and lists) of a frozen value."""
    if isinstance(value, Mapping):
        return {str(k): thaw(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [thaw(v) for v in value]
    return value


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys: the same data always gives the same text.

    An infinite budget (PHSafe's "no noise") is written as ``Infinity``, so it stays distinct.
    """
    return json.dumps(thaw(value), sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def fingerprint_of_json(section: Mapping[str, Any]) -> str:
    """SHA-256 (hex) of a saved description's number keys, exactly as written (a missing
    ``options`` counts as ``{}``): the fingerprint any version computes from that file."""
    numbers = {key: section.get(key) for key in NUMBERS_KEYS}
    if numbers["options"] is None:
        numbers["options"] = {}
    text = canonical_json({"spec_version": SPEC_VERSION, **numbers})
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_config(engine: str, config: Mapping[str, Any], where: str = "config") -> None:
    """Refuse a config that is not a valid TopDown allocation / PHSafe config.json (its own
    strict readers name the key or value)."""
    if engine == "topdown":
        TopDownAllocation.from_dict(thaw(config), name=str(config.get("name", "allocation")))
    else:
        try:
            PHSafeConfig.from_json(thaw(config))
        except ValidationError as exc:
            raise ValidationError(f"{where}: {exc}") from None


@dataclass(frozen=True)
class RunSpec:
    """One run's description; typed records throughout. Use :meth:`replace` for a variant.

    ``data``: where the input comes from (:class:`DataSource`). ``config``: the TopDown allocation
    as :meth:`~engine.dp.budget.TopDownAllocation.to_dict`, or the official PHSafe config.json
    dictionary. ``options``: the engine's options record (default: every option at its default).
    ``backend``/``workers``/``backend_options``: where it runs (never the numbers).
    """

    engine: str
    data: DataSource
    config: Mapping[str, Any]
    seed: int
    options: EngineOptions = None  # type: ignore[assignment]  # None: the engine's defaults
    backend: str = "local"
    workers: int = 1
    backend_options: BackendOptions = field(default_factory=BackendOptions)

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValidationError(
                f"unknown engine {self.engine!r}; available: {', '.join(ENGINES)}"
            )
        try:
            object.__setattr__(self, "seed", whole("seed")("seed", self.seed))
            object.__setattr__(self, "workers", whole("workers")("workers", self.workers))
        except FieldError as exc:
            raise ValidationError(str(exc)) from None
        if not isinstance(self.data, DataSource):
            raise ValidationError(f"a run's data must be a DataSource; got {value_kind(self.data)}")
        kind = OPTIONS_OF[self.engine]
        if self.options is None:
            object.__setattr__(self, "options", kind())
        elif not isinstance(self.options, kind):
            raise ValidationError(
                f"a {self.engine} run takes {kind.__name__}; got {type(self.options).__name__}"
            )
        if not isinstance(self.config, Mapping):
            raise ValidationError("a run's config must be a JSON object (allocation or config)")
        object.__setattr__(self, "config", freeze(self.config))
        check_config(self.engine, self.config)
        self._check_backend()

    def _check_backend(self) -> None:
        if self.backend not in BACKENDS:
            raise ValidationError(
                f"unknown backend {self.backend!r}; available: {', '.join(BACKENDS)}"
            )
        options = self.backend_options
        if not isinstance(options, BackendOptions):
            raise ValidationError("backend_options must be a BackendOptions record")
        if self.backend != "spark":
            if options:
                raise ValidationError(
                    f"backend_options ({', '.join(options.to_json())}) apply only to the spark "
                    "backend"
                )
        elif (options.master is None) == (options.remote is None):
            raise ValidationError(
                "the spark backend needs exactly one of a master URL (e.g. local[2], "
                "spark://HOST:7077, yarn) or a Spark Connect remote (sc://HOST:15002)"
            )

    # ------------------------------------------------------------------ identity
    def numbers_dict(self) -> dict[str, Any]:
        """The fields that decide the run's numbers (no backend, no workers), as JSON."""
        return {
            "engine": self.engine,
            "data": self.data.to_json(),
            "config": thaw(self.config),
            "seed": self.seed,
            "options": self.options.to_json(),
        }

    def fingerprint(self) -> str:
        """SHA-256 (hex) of the canonical JSON of :meth:`numbers_dict`."""
        return fingerprint_of_json(self.numbers_dict())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dictionary (saved in scenarios and in metrics.json ``run``)."""
        return {
            "spec_version": SPEC_VERSION,
            **self.numbers_dict(),
            "backend": self.backend,
            "workers": self.workers,
            **({"backend_options": self.backend_options.to_json()} if self.backend_options else {}),
            "fingerprint": self.fingerprint(),
        }

    @classmethod
    def from_dict(cls, section: Any, where: str = "run") -> RunSpec:
        """A spec from a saved description (:meth:`to_dict` of this or an earlier version).

        Refused, naming the key: an unknown or misspelt key anywhere, a value of the wrong kind
        or out of range, a missing key, an unsupported ``spec_version``, and a stated
        ``fingerprint`` that does not match the fields as written (edited by hand)."""
        if not isinstance(section, Mapping):
            raise ValidationError(f"{where}: a run description must be a JSON object")
        check_known_keys(section, RUN_KEYS, where)
        version = section.get("spec_version", SPEC_VERSION)
        if version != SPEC_VERSION:
            raise ValidationError(
                f"{where}: run description version {version!r} is not supported "
                f"(expected {SPEC_VERSION})"
            )
        missing = [k for k in ("engine", "data", "config", "seed") if k not in section]
        if missing:
            raise ValidationError(f"{where}: the run description lacks {', '.join(missing)}")
        engine = section["engine"]
        if engine not in ENGINES:
            raise ValidationError(
                f"{where}.engine: unknown engine {engine!r}; available: {', '.join(ENGINES)}"
            )
        options = section.get("options")
        try:
            spec = cls(
                engine=engine,
                data=DataSource.from_json(section["data"], f"{where}.data"),
                config=section["config"],
                seed=section["seed"],
                options=OPTIONS_OF[engine].from_json(
                    {} if options is None else options, f"{where}.options"
                ),
                backend=section.get("backend", "local"),
                workers=section.get("workers", 1),
                backend_options=BackendOptions.from_json(
                    section.get("backend_options") or {}, f"{where}.backend_options"
                ),
            )
        except ValidationError as exc:
            text = str(exc)
            raise ValidationError(text if text.startswith(where) else f"{where}: {text}") from None
        stated = section.get("fingerprint")
        if stated is not None and stated != fingerprint_of_json(section):
            raise ValidationError(
                f"{where}: the run description's fingerprint does not match its fields (edited by "
                "hand?); remove 'fingerprint' to accept the fields as they are"
            )
        return spec

    def replace(self, **changes: Any) -> RunSpec:
        """A copy with ``changes`` (checked again)."""
        return replace(self, **changes)

    def with_option(self, **options: Any) -> RunSpec:
        """A copy with engine options changed (checked again)."""
        return replace(self, options=replace(self.options, **options))

    @property
    def noise_method(self) -> str:
        """``fast`` (keyed, reproducible) or ``exact`` (OpenDP)."""
        return self.options.noise_method
