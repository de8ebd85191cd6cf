"""Shareable links: the open scenario and the working budget in the page's address (docs/app.md,
"Links").

Two query parameters, bound to the sidebar's widgets with Streamlit's query-parameter binding:

``scenario``
    the open scenario as ``"<name> · <fingerprint>"`` (its budget's first 12 hex digits). A link
    naming a scenario the workspace does not hold, or one whose budget is no longer the one the
    link was made with (the scenario was replaced, or the link edited), is reported and opens
    nothing: the fingerprint makes the link say which budget it means.
``budget``
    the working budget where it differs from the open scenario (or, with none open, from the
    shipped defaults): ``b1.`` and the URL-safe base64 of the zlib-compressed JSON of the PHSafe
    budget and/or the TopDown allocations, each with its fingerprint. A code that cannot be read
    (cut short) or whose budget does not give its fingerprint (altered) is reported and not
    applied.

Only numbers travel in a link; the workspace's scenarios and runs stay on the server.
"""

from __future__ import annotations

import base64
import binascii
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.core.errors import ValidationError
from engine.dp.budget import PHSafeBudget, TopDownAllocation
from engine.dp.budget.fingerprint import budget_fingerprint, short_fingerprint
from phexplore.planning.scenarios import Scenario

SCENARIO_PARAM = "scenario"
BUDGET_PARAM = "budget"
CODE_PREFIX = "b1."
SEPARATOR = " · "
MAX_CODE_CHARS = 64_000
"""Longer budget codes are refused unread (a URL holds far less than Streamlit's limit)."""


def scenario_label(scenario: Scenario) -> str:
    """How a link (and the sidebar) names a saved scenario: ``"<name> · <fingerprint>"``."""
    return f"{scenario.name}{SEPARATOR}{short_fingerprint(scenario.fingerprint())}"


def split_label(text: str) -> tuple[str, str | None]:
    """``(name, fingerprint)`` of a scenario label (fingerprint None when the text has none)."""
    name, sep, fingerprint = str(text).rpartition(SEPARATOR)
    tail = fingerprint.strip().lower()
    if not sep or not tail or any(c not in "0123456789abcdef" for c in tail):
        return str(text), None  # a name that holds the separator itself
    return name, tail


def find_scenario(text: str, saved: Mapping[str, Scenario]) -> Scenario:
    """The saved scenario a link's ``scenario`` parameter names; a ValidationError says why none:
    unknown, or its budget changed since the link was made (or the link was altered)."""
    name, fingerprint = (str(text), None) if str(text) in saved else split_label(text)
    scenario = saved.get(name)
    if scenario is None:
        raise ValidationError(
            f"this link opens scenario “{name}”, which this workspace does not hold (deleted, "
            "renamed, or saved in another workspace); nothing was opened"
        )
    mine = short_fingerprint(scenario.fingerprint())
    if fingerprint is not None and fingerprint != mine:
        raise ValidationError(
            f"this link opens scenario “{name}” with budget {fingerprint}, but the saved "
            f"scenario's budget is {mine}: the scenario changed after the link was made, or the "
            "link was altered; nothing was opened — open the current version from the list if "
            "you mean it"
        )
    return scenario


@dataclass(frozen=True)
class LinkedBudget:
    """The budgets a link carries (None: that engine's budget is not in the link)."""

    phsafe: PHSafeBudget | None = None
    topdown: dict[str, TopDownAllocation] | None = None
    topdown_preset: str | None = None


def encode_budget(
    phsafe: PHSafeBudget | None = None,
    topdown: Mapping[str, TopDownAllocation] | None = None,
    topdown_preset: str | None = None,
) -> str:
    """The ``budget`` code of these budgets ("" when neither is given)."""
    payload: dict[str, Any] = {}
    if phsafe is not None:
        payload["phsafe"] = {"fp": budget_fingerprint(phsafe), "budget": phsafe.to_dict()}
    if topdown is not None:
        payload["topdown"] = {
            "fp": budget_fingerprint(topdown),
            "preset": topdown_preset,
            "runs": {u: a.to_dict() for u, a in topdown.items()},
        }
    if not payload:
        return ""
    raw = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return CODE_PREFIX + base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode("ascii").rstrip("=")


def decode_budget(code: str) -> LinkedBudget:
    """The budgets of a ``budget`` code; a ValidationError when it is damaged (cannot be read)
    or altered (a budget that does not give the fingerprint it came with)."""
    text = str(code).strip()
    damaged = ValidationError(
        "this link's budget code is damaged (cut short or altered) and was not applied; ask for "
        "the link again"
    )
    if not text.startswith(CODE_PREFIX) or len(text) > MAX_CODE_CHARS:
        raise damaged
    body = text[len(CODE_PREFIX) :]
    try:
        raw = zlib.decompress(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        payload = json.loads(raw.decode("utf-8"))
    except (binascii.Error, zlib.error, ValueError, UnicodeDecodeError):
        raise damaged from None
    if not isinstance(payload, dict):
        raise damaged
    phsafe = topdown = preset = None
    try:
        if "phsafe" in payload:
            part = payload["phsafe"]
            phsafe = PHSafeBudget.from_dict(part["budget"], name=part["budget"].get("name"))
            _check(phsafe, part.get("fp"), "PHSafe")
        if "topdown" in payload:
            part = payload["topdown"]
            topdown = {
                str(u): TopDownAllocation.from_dict({**a, "universe": u}, name=a.get("name", u))
                for u, a in part["runs"].items()
            }
            _check(topdown, part.get("fp"), "TopDown")
            preset = part.get("preset")
    except (KeyError, TypeError, AttributeError):
        raise damaged from None
    except ValidationError as exc:
        if str(exc).startswith("this link"):
            raise
        raise ValidationError(
            f"this link's budget is not a valid budget ({exc}); it was not applied"
        ) from None
    return LinkedBudget(phsafe, topdown, str(preset) if preset else None)


def _check(budget: Any, stated: Any, what: str) -> None:
    if budget_fingerprint(budget) != stated:
        raise ValidationError(
            f"this link's {what} budget does not match the fingerprint it came with (the link was "
            "altered); it was not applied"
        )
