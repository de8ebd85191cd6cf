"""Resolve a PHSafe run's inputs: a sample name or CEF-extract directory, and a configuration.

Shared by the CLI (``phexplore run phsafe``) and the app: ``data`` is a shipped sample name
(``engine.data.samples``; e.g. ``phsafe_synthetic_us``) or a directory with ``persons.csv``,
``units.csv`` and ``geo.csv`` (optionally ``.gz``); ``config`` is a :class:`PHSafeConfig`, a parsed
config.json mapping, a preset name (``phsafe-2020``, ``phsafe-2020-pr``; PHS Table 10), a path to a
config.json, or ``None`` for the data directory's own ``config.json``. The extract is read and
validated for the configuration's ``state_filter`` (:func:`engine.data.cef.load_cef_extract`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.core.errors import ValidationError
from engine.data.cef import load_cef_extract
from engine.data.cef_types import CefExtract
from engine.data.samples import get_sample, list_samples
from engine.data.sources import DEFAULT_MAX_BYTES
from engine.phsafe.config import PRESET_NAMES, PHSafeConfig, preset

ConfigSource = PHSafeConfig | Mapping[str, Any] | str | os.PathLike[str] | None


def resolve_data_dir(data: str | os.PathLike[str]) -> Path:
    """The directory of a sample name or an existing extract directory."""
    path = Path(data)
    if path.is_dir():
        return path
    text = str(data)
    if path.exists() or "/" in text or os.sep in text:
        reason = "not a folder" if path.exists() else "no such folder"

        names = ", ".join(s.name for s in list_samples() if s.kind == "phsafe")
        raise ValidationError(
            f"--data {text}: {reason}; give a folder with persons.csv, units.csv and geo.csv "
            f"or the name of a PHSafe sample ({names})"
        )

    return get_sample(str(data)).path


def resolve_config(config: ConfigSource, data_dir: Path | None = None) -> PHSafeConfig:
    """A :class:`PHSafeConfig` from any accepted form (see the module docstring)."""
    if isinstance(config, PHSafeConfig):
        return config
    if isinstance(config, Mapping):
        return PHSafeConfig.from_json(config)
    if config is None:
        candidate = (data_dir or Path(".")) / "config.json"
        if not candidate.is_file():
            raise ValidationError(
                f"no configuration given and {candidate} does not exist; pass a config.json or "
                "one of the presets " + ", ".join(PRESET_NAMES)
            )
        return PHSafeConfig.from_json(candidate)
    if str(config) in PRESET_NAMES:
        return preset(str(config))
    return PHSafeConfig.from_json(config)


def load_inputs(
    data: str | os.PathLike[str],
    config: ConfigSource = None,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> tuple[CefExtract, PHSafeConfig]:
    """Read and validate the extract and the configuration of a run."""
    data_dir = resolve_data_dir(data)
    cfg = resolve_config(config, data_dir)
    extract = load_cef_extract(data_dir, max_bytes=max_bytes, state_filter=cfg.state_filter)
    return extract, cfg
