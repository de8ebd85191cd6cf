"""Scenarios: a named, saveable set of budget choices that the planners, runs and reports share.

A scenario holds either PHSafe parameters (:class:`~engine.dp.budget.PHSafeBudget`) or TopDown
allocations by universe (:class:`~engine.dp.budget.TopDownAllocation`), plus the reporting choices
(δ, which ρ → ε conversion is quoted, spine) and the ``metrics.json`` payloads of runs attached to it.
JSON schema (``"schema": "phexplore-scenario/1"``) is documented in the README; comparisons of two
scenarios are rows of ρ, ε and MOE side by side (docs/science.md §1–§2).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from engine.core.errors import ValidationError
from engine.core.files import read_input_bytes
from engine.core.numbers import as_float
from engine.core.strict_json import as_mapping, check_keys, dumps_json, loads_strict_json
from engine.dp.budget import PHSafeBudget, TopDownAllocation
from engine.dp.budget.fingerprint import allocation_fingerprint, budget_fingerprint
from engine.dp.conversions import CONVERSIONS, DEFAULT_DELTA
from engine.dp.origin import Origin, describe_origin
from engine.dp.presets import (
    load_phsafe_preset,
    load_topdown_preset,
    preset_info,
)
from engine.runs.provenance import ENGINES, check_reported_run
from phexplore.planning.moe_tables import (
    epsilons,
    phsafe_rows,
    phsafe_summary,
    topdown_rows,
    topdown_summary,
)

SCHEMA = "phexplore-scenario/1"
SPINES = ("preset", "conventional", "aian", "optimized")
"""``preset``: the allocation's own spine (engine.runs.spine_choice); the others as chosen."""


SCENARIO_KEYS: tuple[str, ...] = (
    "schema",
    "name",
    "kind",
    "delta",
    "conversion",
    "spine",
    "notes",
    "results",
    "phsafe",
    "topdown",
)
"""Keys of a scenario file (``phexplore-scenario/1``); any other key is refused."""


@dataclass(frozen=True)
class Scenario:
    """A named budget scenario (PHSafe or TopDown) with reporting choices and attached run results."""

    name: str
    kind: str
    phsafe: PHSafeBudget | None = None
    topdown: Mapping[str, TopDownAllocation] | None = None
    delta: float = DEFAULT_DELTA
    conversion: str = "cks"
    spine: str = "conventional"
    notes: str = ""
    results: tuple[Mapping[str, Any], ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.name.strip():
            raise ValidationError("a scenario needs a non-empty name")
        if self.kind not in ("phsafe", "topdown"):
            raise ValidationError(f"scenario kind must be 'phsafe' or 'topdown'; got {self.kind!r}")
        if self.kind == "phsafe" and self.phsafe is None:
            raise ValidationError(f"scenario {self.name!r} is a PHSafe scenario without a budget")
        if self.kind == "topdown" and not self.topdown:
            raise ValidationError(
                f"scenario {self.name!r} is a TopDown scenario without allocations"
            )
        if self.conversion not in CONVERSIONS:
            raise ValidationError(
                f"conversion must be one of {', '.join(CONVERSIONS)}; got {self.conversion!r}"
            )
        if not (0.0 < self.delta < 1.0):
            raise ValidationError(f"δ must be between 0 and 1; got {self.delta}")
        if self.spine not in SPINES:
            raise ValidationError(f"spine must be one of {', '.join(SPINES)}; got {self.spine!r}")

    # ------------------------------------------------------------------ derived tables
    def moe_rows(self, confidence: float = 0.90) -> list[dict[str, Any]]:
        """The MOE rows ``phexplore moe`` prints for this scenario."""
        if self.kind == "phsafe":
            assert self.phsafe is not None
            return phsafe_rows(self.phsafe, confidence)
        assert self.topdown is not None
        return topdown_rows(self.topdown, confidence)

    def summary(self) -> dict[str, Any]:
        """Totals: ρ (unbounded/bounded for PHSafe) and ε per conversion at the scenario's δ."""
        if self.kind == "phsafe":
            assert self.phsafe is not None
            return phsafe_summary(self.phsafe, self.delta)
        assert self.topdown is not None
        return topdown_summary(self.topdown, self.delta)

    def budget(self) -> PHSafeBudget | Mapping[str, TopDownAllocation]:
        """The scenario's budget: the PHSafe budget, or the TopDown allocations of every universe."""
        if self.kind == "phsafe":
            assert self.phsafe is not None
            return self.phsafe
        assert self.topdown is not None
        return self.topdown

    def describe_origin(self) -> Origin:
        """The preset the budget is, or "modified from <preset>" with what differs
        (:func:`engine.dp.origin.describe_origin`)."""
        return describe_origin(self.budget())

    def origin(self) -> str:
        """The preset the scenario's budget is, or "modified from <preset>"."""
        return self.describe_origin().label

    def headline(self) -> dict[str, Any]:
        """Total ρ and the quoted ε (the scenario's conversion) for one-line comparisons."""
        if self.kind == "phsafe":
            assert self.phsafe is not None
            rho = self.phsafe.total_bounded()
            label = "bounded ρ (PHS Thm 3–4)"
        else:
            assert self.topdown is not None
            rho = sum(float(a.rho) for a in self.topdown.values())
            label = "ρ (bounded neighbours)"
        eps = epsilons(rho, self.delta)[self.conversion]
        return {"rho": rho, "rho_label": label, "epsilon": eps, "delta": self.delta}

    # ------------------------------------------------------------------ provenance
    def fingerprint(self) -> str:
        """The budget's one fingerprint (a TopDown budget: every universe together), as every page,
        run and report shows it (:func:`engine.dp.budget.fingerprint.budget_fingerprint`)."""
        return budget_fingerprint(self.budget())

    def fingerprints(self) -> frozenset[str]:
        """The fingerprints a run of this scenario records: the budget's one fingerprint."""
        return frozenset({self.fingerprint()})

    def legacy_fingerprints(self) -> frozenset[str]:
        """Fingerprints of the scenario's TopDown allocations alone, which runs recorded before a
        budget covered every universe (their metrics.json has no ``budget_allocations``)."""
        if self.kind != "topdown" or self.topdown is None:
            return frozenset()
        return frozenset(allocation_fingerprint(a) for a in self.topdown.values())

    def is_mine(self, metrics: Mapping[str, Any]) -> bool:
        """Whether the run of ``metrics`` used exactly this scenario's budget (a run recorded
        before budgets covered every universe: the allocation it measured is one of this
        scenario's)."""
        if metrics.get("engine") != self.kind:
            return False
        recorded = metrics.get("budget_fingerprint")
        if recorded == self.fingerprint():
            return True
        return "budget_allocations" not in metrics and recorded in self.legacy_fingerprints()

    def matching_runs(
        self, results: Sequence[Mapping[str, Any]], *, keep_unrecorded: bool = False
    ) -> list[Mapping[str, Any]]:
        """The runs among ``results`` made with this scenario's exact budget, each once.

        A run's ``metrics.json`` carries the fingerprint of the budget it used
        (``budget_fingerprint``); runs without one, of another engine or of another budget are
        left out (runs without one are kept when ``keep_unrecorded``: ``metrics.json`` files written
        before fingerprints were recorded), and a run listed twice (same ``run_token``, else same engine, run number, data
        and seed) is kept once, in first-seen order.
        """
        seen: set[tuple[Any, ...]] = set()
        out: list[Mapping[str, Any]] = []
        for metrics in results:
            engine = metrics.get("engine")
            if engine != self.kind and not (keep_unrecorded and engine is None):
                continue
            recorded = metrics.get("budget_fingerprint")
            if not (self.is_mine(metrics) or (keep_unrecorded and not recorded)):
                continue
            key = (
                ("token", metrics["run_token"])
                if metrics.get("run_token")
                else (
                    "run",
                    metrics.get("run_id"),
                    metrics.get("data"),
                    metrics.get("seed"),
                )
            )
            if key in seen:
                continue
            seen.add(key)
            out.append(metrics)
        return out

    # ------------------------------------------------------------------ edits
    def duplicate(self, new_name: str) -> Scenario:
        """A copy under another name (results are not copied: they belong to the original)."""
        return replace(self, name=new_name, results=())

    def with_result(self, metrics: Mapping[str, Any]) -> Scenario:
        """Attach a run's ``metrics.json`` payload (refused when it names no run)."""
        return replace(self, results=(*self.results, dict(names_a_run(metrics, "result"))))

    # ------------------------------------------------------------------ JSON
    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (schema ``phexplore-scenario/1``)."""
        out: dict[str, Any] = {
            "schema": SCHEMA,
            "name": self.name,
            "kind": self.kind,
            "delta": self.delta,
            "conversion": self.conversion,
            "spine": self.spine,
            "notes": self.notes,
            "results": [dict(r) for r in self.results],
        }
        if self.phsafe is not None:
            out["phsafe"] = self.phsafe.to_dict()
        if self.topdown is not None:
            out["topdown"] = {"runs": {k: v.to_dict() for k, v in self.topdown.items()}}
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scenario:
        """Parse and validate a scenario dict."""
        if not isinstance(data, Mapping):
            raise ValidationError("a scenario file must hold a JSON object")
        if data.get("schema") != SCHEMA:
            raise ValidationError(
                f'not a PHExplore scenario (expected "schema": "{SCHEMA}", got {data.get("schema")!r})'
            )
        check_keys(data, SCENARIO_KEYS, where="scenario")
        kind = data.get("kind")
        phsafe = None
        if "phsafe" in data:
            phsafe = PHSafeBudget.from_dict(as_mapping(data["phsafe"], where="scenario: phsafe"))
        topdown = None
        if "topdown" in data:
            block = as_mapping(data["topdown"], where="scenario: topdown")
            check_keys(block, ("runs",), where="scenario: topdown")
            runs = as_mapping(block.get("runs", {}), where="scenario: topdown.runs")
            topdown = {}
            for k, v in runs.items():
                run = as_mapping(v, where=f"scenario: topdown.runs[{k!r}]")
                topdown[k] = TopDownAllocation.from_dict(
                    {**run, "universe": k}, name=run.get("name", k)
                )
        results = data.get("results", [])
        if not isinstance(results, list):
            raise ValidationError("scenario: 'results' must be a list of metrics.json objects")
        attached = tuple(as_mapping(r, where="scenario: results[]") for r in results)
        for i, result in enumerate(attached, start=1):
            if result.get("budget_fingerprint"):  # a run claiming a budget must be that budget's
                check_reported_run(result, f"scenario: attached run {i}")
            else:  # valid JSON naming no run is refused, never shown as an empty run
                names_a_run(result, f"scenario: attached run {i} (results[{i - 1}])")
        return cls(
            name=str(data.get("name", "")),
            kind=str(kind),
            phsafe=phsafe,
            topdown=topdown,
            delta=as_float(data.get("delta", DEFAULT_DELTA), where="scenario: delta"),
            conversion=str(data.get("conversion", "cks")),
            spine=str(data.get("spine", "conventional")),
            notes=str(data.get("notes", "")),
            results=attached,
        )

    def to_json(self) -> str:
        """Pretty JSON text."""

        return dumps_json(self.to_dict())

    @classmethod
    def from_json(cls, text: str | bytes, *, source: str = "scenario") -> Scenario:
        """Parse JSON text, with a clear error for malformed input."""
        raw = text.encode("utf-8") if isinstance(text, str) else text
        data = loads_strict_json(raw, label=source, allow_infinity=True)
        try:
            return cls.from_dict(data)
        except ValidationError as exc:
            if str(exc).startswith(source):
                raise
            raise ValidationError(f"{source}: {exc}") from None

    @classmethod
    def load(cls, path: str | Path) -> Scenario:
        """Read a scenario JSON file."""
        p = Path(path)
        return cls.from_json(read_input_bytes(p, label=str(p)), source=str(p))


def names_a_run(metrics: Mapping[str, Any], where: str) -> Mapping[str, Any]:
    """``metrics``, when it is a run's ``metrics.json`` payload, which names the engine that ran
    (its required ``engine`` key: ``topdown`` or ``phsafe``); valid JSON that names no run (e.g.
    ``{}``, a config or a scenario given as results) is refused, never reported as an empty run."""
    engine = metrics.get("engine")
    if engine not in ENGINES:
        found = ", ".join(sorted(map(str, metrics))[:8]) or "no keys"
        what = f"engine {engine!r}" if engine is not None else f"no 'engine' (it has {found})"
        raise ValidationError(
            f"{where}: valid JSON, but it names no run: {what}; a run's metrics.json names its "
            "engine ('topdown' or 'phsafe') — give the metrics.json (or the folder) that "
            "'phexplore run' wrote"
        )
    return metrics


def scenario_from_preset(name: str, *, scenario_name: str | None = None) -> Scenario:
    """A scenario holding a shipped preset (PHSafe or TopDown)."""
    info = preset_info(name)
    if info.kind == "phsafe":
        return Scenario(name=scenario_name or name, kind="phsafe", phsafe=load_phsafe_preset(name))
    return Scenario(name=scenario_name or name, kind="topdown", topdown=load_topdown_preset(name))


def compare(a: Scenario, b: Scenario) -> dict[str, list[dict[str, Any]]]:
    """Side-by-side rows: totals (ρ, ε per conversion) and MOE per shared key, with differences."""
    ha, hb = a.headline(), b.headline()
    totals = [
        {"measure": "total ρ", "a": ha["rho"], "b": hb["rho"], "difference": hb["rho"] - ha["rho"]},
    ]
    ea, eb = epsilons(ha["rho"], a.delta), epsilons(hb["rho"], b.delta)
    for conv in CONVERSIONS:
        totals.append(
            {
                "measure": f"ε ({conv})",
                "a": ea[conv],
                "b": eb[conv],
                "difference": eb[conv] - ea[conv],
            }
        )
    moe = _compare_moe(a, b)
    results = _compare_results(a.results, b.results)
    return {"totals": totals, "moe": moe, "results": results}


def _row_key(kind: str, row: Mapping[str, Any]) -> tuple[str, ...]:
    if kind == "phsafe":
        return (row["table"], row["geo_level"], row["iteration_level"])
    return (row["run"], row["geolevel"], row["query"])


def _compare_moe(a: Scenario, b: Scenario) -> list[dict[str, Any]]:
    if a.kind != b.kind:
        return []
    field_name = "moe_exact" if a.kind == "phsafe" else "moe90"
    ra = {_row_key(a.kind, r): r for r in a.moe_rows()}
    rb = {_row_key(b.kind, r): r for r in b.moe_rows()}
    names = (
        ("table", "geo_level", "iteration_level")
        if a.kind == "phsafe"
        else ("run", "geolevel", "query")
    )
    rows = []
    for key in list(ra) + [k for k in rb if k not in ra]:
        va = ra.get(key, {}).get(field_name)
        vb = rb.get(key, {}).get(field_name)
        row = dict(zip(names, key, strict=True))
        row.update({"moe_a": va, "moe_b": vb})
        row["difference"] = None if va is None or vb is None else vb - va
        rows.append(row)
    return rows


def _compare_results(
    ra: Sequence[Mapping[str, Any]], rb: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """MAE by (geolevel, query) of the latest run attached to each scenario."""
    if not ra or not rb:
        return []
    ma, mb = ra[-1].get("mae", {}), rb[-1].get("mae", {})
    rows = []
    for level in list(ma) + [lv for lv in mb if lv not in ma]:
        qa, qb = ma.get(level, {}), mb.get(level, {})
        if not isinstance(qa, Mapping) or not isinstance(qb, Mapping):
            continue
        for q in list(qa) + [x for x in qb if x not in qa]:
            va, vb = qa.get(q), qb.get(q)
            rows.append(
                {
                    "geolevel": level,
                    "query": q,
                    "mae_a": va,
                    "mae_b": vb,
                    "difference": None if va is None or vb is None else vb - va,
                }
            )
    return rows
