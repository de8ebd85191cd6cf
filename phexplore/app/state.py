"""Session-state and caching glue for the Streamlit app (no science here).

The app keeps one *working scenario* in ``st.session_state``: a PHSafe budget, TopDown allocations
per universe, the spine choice, the δ at which ε is reported and the conversion used to report it.
Every page calls :func:`init_state` first, so each page also works when opened directly. The
budget objects are immutable (frozen dataclasses); pages replace them with the edited copies that
the budget API returns, so a failed edit (a :class:`~engine.core.errors.ValidationError`) never
loses the last valid state.

Heavy or repeated computations are wrapped with ``st.cache_data`` here, keyed by plain JSON-ready
values, so that pages stay thin and reruns stay fast.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from engine.dp.budget import PHSafeBudget, TopDownAllocation
from engine.dp.budget.fingerprint import budget_fingerprint, short_fingerprint
from engine.dp.conversions import CONVERSION_LABELS, DEFAULT_DELTA
from engine.dp.origin import Origin, base_preset, describe_origin
from engine.dp.presets import list_presets, load_phsafe_preset, load_topdown_preset
from phexplore.app import links, naming
from phexplore.app.workspace.index import WorkspaceError
from phexplore.app.workspace.location import workspace_location
from phexplore.app.workspace.store import Workspace, open_workspace
from phexplore.failures import describe_failure
from phexplore.planning.scenarios import Scenario

# Session-state keys (one place, so pages and tests agree on them).
PHSAFE = "phsafe_budget"
PHSAFE_DISABLED = "phsafe_disabled_levels"
TOPDOWN = "topdown_runs"
TOPDOWN_PRESET = "topdown_preset"
SPINE = "spine"
SPREAD_INVARIANT = "td_spread_invariant"
"""Session key: spread held-exact query shares over their level (a departure from production);
set on the TopDown planner, applied by the Run page."""
DELTA = "delta"
CONVERSION = "conversion"
SCENARIO_NAME = "scenario_name"
EDITOR_VERSION = "editor_version"
RUNS = "run_results"
SAVED = "saved_scenarios"
OPEN_SCENARIO = "open_scenario"
"""Session key: the name of the scenario loaded into the planners or last saved (None: none)."""
WS_SEEN = "ws_seen"
"""Session key: (workspace folder, generation) of the scenarios and runs the session holds."""
WS_PROBLEMS = "ws_problems"
"""Session key: one line per thing in the workspace that cannot be used (shown, never raised)."""
UNDO = "ws_undo"
"""Session key: this session's deletions, newest last: (kind, key, label), for Undo."""

DEFAULT_PHSAFE_PRESET = "phsafe-2020"
DEFAULT_TOPDOWN_PRESET = "topdown-2020-production"
SPINES: dict[str, str] = {
    "preset": "The allocation's own: topdown-2020-production ran on optimized block groups around "
    "places (used where the data carry places, e.g. generated populations); other presets and "
    "data without places: conventional",
    "conventional": "Conventional (US > state > county > tract > block group > block)",
    "aian": "AIAN-style (split every geounit by membership in AIAN areas)",
    "optimized": "Optimized block groups (SPN Algorithm 2)",
}
DELTA_CHOICES: tuple[float, ...] = tuple(10.0**-k for k in range(15, 1, -1))

HELP_RHO = (
    "ρ (rho) is the privacy-loss budget under zero-concentrated differential privacy (zCDP). "
    "Larger ρ means less noise and more accurate statistics, but a weaker privacy guarantee. "
    "Budgets of separate measurements add up."
)
HELP_MOE = (
    "The 90% margin of error (MOE) is the half-width of the interval that contains the noise added "
    "to a count 90% of the time: a published count is within ± MOE of the noisy measurement's "
    "expectation 9 times out of 10. Smaller MOE needs a larger ρ."
)
HELP_TAU = (
    "τ (tau) is the truncation threshold: at most τ persons per household are counted. Noise "
    "scales with the sensitivity Δ = 2τ + 2, so a larger τ keeps more people but adds more noise."
)
HELP_DELTA = (
    "δ is the small probability with which the (ε, δ) guarantee may fail. The Census Bureau "
    "reports ε at δ = 10⁻¹⁰."
)
HELP_CONVERSION = (
    "How ρ is translated into the more familiar (ε, δ) scale. All three are shown; this choice "
    "decides which ε is reported in headline numbers."
)


def init_state(state: MutableMapping[str, Any] | None = None) -> MutableMapping[str, Any]:
    """Fill in missing session-state entries with the shipped defaults; return the state."""
    s = st.session_state if state is None else state
    if PHSAFE not in s:
        s[PHSAFE] = load_phsafe_preset(DEFAULT_PHSAFE_PRESET)
    if PHSAFE_DISABLED not in s:
        s[PHSAFE_DISABLED] = []
    if TOPDOWN not in s:
        s[TOPDOWN] = load_topdown_preset(DEFAULT_TOPDOWN_PRESET)
        s[TOPDOWN_PRESET] = DEFAULT_TOPDOWN_PRESET
    s.setdefault(TOPDOWN_PRESET, DEFAULT_TOPDOWN_PRESET)
    s.setdefault(SPINE, "preset")
    s.setdefault(SPREAD_INVARIANT, False)
    s.setdefault(DELTA, DEFAULT_DELTA)
    s.setdefault(CONVERSION, "cks")
    s.setdefault(SCENARIO_NAME, "Working scenario")
    s.setdefault(EDITOR_VERSION, 0)
    s.setdefault(RUNS, [])
    s.setdefault(SAVED, {})
    s.setdefault(OPEN_SCENARIO, None)
    s.setdefault(UNDO, [])
    if state is None:
        sync_workspace(s)
    return s


# ------------------------------------------------------------------ the workspace (on disk)

_FALLBACK: dict[Path, tuple[Workspace, str]] = {}
_HOUSEKEPT: set[Path] = set()


def workspace() -> Workspace:
    """This server's workspace (:mod:`phexplore.app.workspace`): ``--workspace`` /
    ``$PHEXPLORE_WORKSPACE`` / the user's data directory. When that folder cannot be used, a
    temporary one for this server's lifetime (:func:`workspace_problem` says why)."""
    root = workspace_location()
    held = _FALLBACK.get(root)
    if held is not None:
        return held[0]
    try:
        ws = open_workspace(root)
        if root not in _HOUSEKEPT:  # once per server: runs a stopped server left, old deletions
            _HOUSEKEPT.add(root)
            ws.mark_interrupted()
            ws.purge()
        return ws
    except WorkspaceError as exc:
        temporary = open_workspace(tempfile.mkdtemp(prefix="phexplore-workspace-"))
        _FALLBACK[root] = (temporary, str(exc))
        return temporary


def page_id() -> str:
    """This browser session's id (the workspace counts its open pages by it; "test" outside a
    server)."""
    ctx = get_script_run_ctx()
    return ctx.session_id if ctx is not None else "test"


def workspace_problem() -> str | None:
    """Why the configured workspace is not used (a temporary one is), or None."""
    held = _FALLBACK.get(workspace_location())
    return None if held is None else held[1]


def sync_workspace(state: MutableMapping[str, Any] | None = None, *, force: bool = False) -> None:
    """Make the session's scenarios (:data:`SAVED`) and runs (:data:`RUNS`) those of the
    workspace, when it changed since the session last looked (a save in another tab, a run that
    finished after a reload). Runs that could not be saved stay in the session."""
    s = st.session_state if state is None else state
    ws = workspace()
    try:
        seen = (str(ws.root), ws.generation())
    except WorkspaceError as exc:
        s[WS_PROBLEMS] = [str(exc)]
        return
    if not force and s.get(WS_SEEN) == seen:
        return
    scenarios, problems = ws.scenarios()
    records, run_problems = ws.records()
    tokens = {r.token for r in records}
    unsaved = [r for r in s.get(RUNS) or [] if r.settings.get("unsaved") and r.token not in tokens]
    s[SAVED] = scenarios
    s[RUNS] = sorted([*records, *unsaved], key=lambda r: r.id)
    s[WS_PROBLEMS] = [*problems, *run_problems, *ws.problems()]
    if s.get(OPEN_SCENARIO) not in scenarios:
        s[OPEN_SCENARIO] = None
    s[WS_SEEN] = seen


def save_scenario(scenario: Scenario, state: MutableMapping[str, Any] | None = None) -> None:
    """Save ``scenario`` in the workspace (one of the same name is replaced, undoably) and make
    it the open scenario."""
    s = st.session_state if state is None else state
    ws = workspace()
    replaced = scenario.name in (s.get(SAVED) or {})
    if replaced:
        old = ws.scenario_entries()
        previous = next((e.id for e in old if e.name == scenario.name), None)
        if previous is not None:
            s[UNDO] = [*s.get(UNDO, []), ("scenario", previous, f"the earlier “{scenario.name}”")]
    ws.save_scenario(scenario)
    sync_workspace(s, force=True)
    s[OPEN_SCENARIO] = scenario.name


def delete_scenario(name: str, state: MutableMapping[str, Any] | None = None) -> None:
    """Delete the saved scenario ``name`` (undoable: :func:`undo_delete`)."""
    s = st.session_state if state is None else state
    sid = workspace().delete_scenario(name)
    s[UNDO] = [*s.get(UNDO, []), ("scenario", sid, f"scenario “{name}”")]
    sync_workspace(s, force=True)


def delete_run(record: Any, state: MutableMapping[str, Any] | None = None) -> None:
    """Delete a run from the workspace (undoable: :func:`undo_delete`)."""
    s = st.session_state if state is None else state
    workspace().delete_run(record.token)
    s[UNDO] = [*s.get(UNDO, []), ("run", record.token, f"run #{record.id}")]
    sync_workspace(s, force=True)


def undo_delete(state: MutableMapping[str, Any] | None = None) -> str | None:
    """Undo this session's last deletion; returns what was restored (None: nothing to undo)."""
    s = st.session_state if state is None else state
    stack = list(s.get(UNDO) or [])
    if not stack:
        return None
    kind, key, label = stack.pop()
    s[UNDO] = stack
    ws = workspace()
    if kind == "scenario":
        ws.restore_scenario(key)
    else:
        ws.restore_run(key)
    sync_workspace(s, force=True)
    return str(label)


def add_run(record: Any, state: MutableMapping[str, Any] | None = None) -> Any:
    """Keep a run made outside a job (a run folder opened on the Results page) in the
    workspace; returns the record (renumbered to the workspace's next number)."""
    s = st.session_state if state is None else state
    workspace().save_run(record)
    sync_workspace(s, force=True)
    return record


def open_scenario(scenario: Scenario, state: MutableMapping[str, Any] | None = None) -> None:
    """Make a saved scenario the working one: its budget in its planner, its δ, conversion,
    spine and name — nothing else (the Run page's data, allocation choice and seed stay)."""
    s = st.session_state if state is None else state
    if scenario.kind == "phsafe" and scenario.phsafe is not None:
        s[PHSAFE] = scenario.phsafe
        s[PHSAFE_DISABLED] = []
        s.pop("ps_enabled_levels", None)
    elif scenario.topdown:
        s[TOPDOWN] = dict(scenario.topdown)
        s[TOPDOWN_PRESET] = base_preset(scenario.topdown) or s.get(TOPDOWN_PRESET)
        s["td_preset_pick"] = s[TOPDOWN_PRESET]
        s.pop("td_base", None)
    s[DELTA] = scenario.delta
    s[CONVERSION] = scenario.conversion
    s[SPINE] = scenario.spine
    s[SCENARIO_NAME] = scenario.name
    for key, value in (
        ("sb_delta", scenario.delta),
        ("sb_conversion", scenario.conversion),
        ("sb_scenario_name", scenario.name),
    ):
        s[key] = value
    s.pop("pl_delta", None)
    s.pop("td_spine", None)
    s[OPEN_SCENARIO] = scenario.name
    bump_editor_version(s)


def _base_budget(kind: str, s: Mapping[str, Any]) -> Any:
    """What the working budget of ``kind`` is compared with in a link: the open scenario's of
    that kind, else the shipped default."""
    opened = (s.get(SAVED) or {}).get(s.get(OPEN_SCENARIO) or "")
    if opened is not None and opened.kind == kind:
        return opened.budget()
    if kind == "phsafe":
        return load_phsafe_preset(DEFAULT_PHSAFE_PRESET)
    return load_topdown_preset(DEFAULT_TOPDOWN_PRESET)


def link_budget_code(state: Mapping[str, Any] | None = None) -> str:
    """The ``budget`` parameter of the page's link: the working budgets that differ from the
    open scenario (or the defaults); "" when none does (:func:`phexplore.app.links.encode_budget`)."""
    s = st.session_state if state is None else state
    parts: dict[str, Any] = {}
    for kind in ("phsafe", "topdown"):
        working = working_budget(kind, s)
        if budget_fingerprint(working) != budget_fingerprint(_base_budget(kind, s)):
            parts[kind] = working
    return links.encode_budget(
        parts.get("phsafe"),
        parts.get("topdown"),
        s.get(TOPDOWN_PRESET) if "topdown" in parts else None,
    )


def apply_linked_budget(
    linked: links.LinkedBudget, state: MutableMapping[str, Any] | None = None
) -> None:
    """Make a link's budgets the working ones (the planners show them)."""
    s = st.session_state if state is None else state
    if linked.phsafe is not None:
        s[PHSAFE] = linked.phsafe
        s[PHSAFE_DISABLED] = []
        s.pop("ps_enabled_levels", None)
    if linked.topdown is not None:
        s[TOPDOWN] = dict(linked.topdown)
        s[TOPDOWN_PRESET] = (
            linked.topdown_preset or base_preset(linked.topdown) or s.get(TOPDOWN_PRESET)
        )
        s.pop("td_base", None)
    bump_editor_version(s)


def report_basis(scenario: Scenario, runs: list[Mapping[str, Any]]) -> tuple[Any, ...]:
    """What a built report depends on: the scenario (name, budget fingerprint, δ, conversion,
    spine, notes) and the runs it includes (their tokens); a report whose basis differs from the
    current one is out of date."""
    included = sorted(
        str(m.get("run_token") or m.get("run_id")) for m in scenario.matching_runs(runs)
    )
    return (
        scenario.name,
        scenario.fingerprint(),
        scenario.delta,
        scenario.conversion,
        scenario.spine,
        scenario.notes,
        tuple(included),
    )


def reserve_run(engine: str, label: str, state: MutableMapping[str, Any] | None = None) -> Any:
    """A new run's number and token in the workspace (:meth:`Workspace.reserve_run`)."""
    s = st.session_state if state is None else state
    return workspace().reserve_run(engine, label, str(s.get(SCENARIO_NAME, "")))


def working_budget(
    kind: str, state: Mapping[str, Any] | None = None
) -> PHSafeBudget | Mapping[str, TopDownAllocation]:
    """The working budget of ``kind``: the effective PHSafe budget, or the TopDown allocations of
    every universe (persons and units: one budget, one fingerprint)."""
    s = st.session_state if state is None else state
    return effective_phsafe(s) if kind == "phsafe" else dict(s[TOPDOWN])


def working_origin(kind: str, state: Mapping[str, Any] | None = None) -> Origin:
    """The working budget's :class:`~engine.dp.origin.Origin`: the preset it is, or "modified
    from" the preset last loaded into its planner, with what differs."""
    s = st.session_state if state is None else state
    preset = None if kind == "phsafe" else s.get(TOPDOWN_PRESET)
    return describe_origin(working_budget(kind, s), preset)


def phsafe_origin(state: Mapping[str, Any] | None = None) -> str:
    """ "phsafe-2020" or "modified from phsafe-2020" for the working PHSafe budget (by fingerprint)."""
    return working_origin("phsafe", state).label


def topdown_origin(state: Mapping[str, Any] | None = None) -> str:
    """The working TopDown allocations' preset, or "modified from <preset>" after an edit."""
    return working_origin("topdown", state).label


def budget_badge(kind: str, state: Mapping[str, Any] | None = None) -> str:
    """How every page names the working budget of ``kind``: its origin, its one fingerprint
    (persons and units together for TopDown) and, when modified, what differs —
    ``"modified from phsafe-2020 · fingerprint 3f2a… — PH3 · State · A-G ρ: 0.1 → 0.2"``."""
    s = st.session_state if state is None else state
    origin = working_origin(kind, s)
    head = f"{origin.label} · fingerprint {short_fingerprint(budget_fingerprint(working_budget(kind, s)))}"
    if not origin.changes:
        return head
    return head + " — " + origin.summary().removeprefix(origin.label + ": ")


def bump_editor_version(state: MutableMapping[str, Any] | None = None) -> None:
    """Give every data editor a fresh key (after a preset/file load replaces the data)."""
    s = st.session_state if state is None else state
    s[EDITOR_VERSION] = int(s.get(EDITOR_VERSION, 0)) + 1


def effective_phsafe(state: Mapping[str, Any] | None = None) -> PHSafeBudget:
    """The working PHSafe budget with the globally disabled population-group levels removed."""
    s = st.session_state if state is None else state
    budget: PHSafeBudget = s[PHSAFE]
    disabled = s.get(PHSAFE_DISABLED) or []
    return budget.without_levels(disabled) if disabled else budget


def describe_bad_input(exc: BaseException) -> str:
    """A readable reason for an uploaded file's wrong-shaped content (a KeyError names the field)."""
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]!r}" if exc.args else "a required field is missing"
    text = str(exc)
    return text or type(exc).__name__


def fmt_delta(delta: float) -> str:
    """δ as the pickers show it: ``1e-10`` (a power of ten), else a compact number."""
    exponent = math.log10(delta)
    return f"1e{round(exponent)}" if abs(exponent - round(exponent)) < 1e-9 else f"{delta:.1e}"


def conversion_label(name: str) -> str:
    """Readable label of a ρ → (ε, δ) conversion."""
    return CONVERSION_LABELS.get(name, name)


def level_label(key: str) -> str:
    """``"state_A-G"`` → ``"State · A-G"`` (:func:`phexplore.app.naming.level_label`)."""
    return naming.level_label(key)


def preset_options(kind: str) -> dict[str, str]:
    """``{preset name: "name — title"}`` for a select box."""
    return {p.name: f"{p.name} — {p.title}" for p in list_presets(kind)}


def sync_widget(widget_key: str, canonical_key: str) -> None:
    """Show the canonical session value in a keyed widget (call just before drawing it).

    The canonical copy is what the pages compute with; the widget's ``on_change`` callback copies
    user edits into it before the script runs, so setting the widget from it on every run keeps
    the two identical — also after a page change, when Streamlit has forgotten the widget.
    """
    s = st.session_state
    s[widget_key] = s[canonical_key]


def json_bytes(data: Any) -> bytes:
    """Pretty UTF-8 JSON for downloads (∞ written as ``Infinity`` like the official config)."""

    return json.dumps(data, indent=2, ensure_ascii=False).encode("utf-8")


def saved_rhos(state: Mapping[str, Any] | None = None) -> dict[str, float]:
    """Headline total ρ of every saved scenario, labelled ``"name (kind)"``."""
    s = st.session_state if state is None else state
    out: dict[str, float] = {}
    for name, scenario in (s.get(SAVED) or {}).items():
        out[f"{name} ({scenario.kind})"] = float(scenario.headline()["rho"])
    return out


# ------------------------------------------------------------------ errors in callbacks and pages


def show_failure(exc: BaseException, what: str) -> None:
    """Show one readable line for ``exc`` (traceback to the log file, never on the page)."""

    st.error(describe_failure(exc, what))


def guarded(callback: Any, what: str) -> Any:
    """``callback`` for ``on_click``/``on_change`` that turns any escaping error into one line.

    A user error (PHExploreError) is shown as is; anything else as "<what> failed: …" with the
    traceback appended to the log file (:mod:`phexplore.failures`).
    """

    def run(*args: Any, **kwargs: Any) -> Any:
        try:
            return callback(*args, **kwargs)
        except Exception as exc:  # Streamlit's control-flow exceptions are BaseException
            show_failure(exc, what)
            return None

    run.__name__ = getattr(callback, "__name__", "callback")
    return run
