"""Session report: one self-contained HTML file for the budget meeting to take away (docs/app.md,
"Budget session").

Contents: the scenario's parameters, its MOE table (PHS §7.1 / TDA App. B), total ρ and ε with the
conversion named (docs/science.md §1), the (ε, δ) curve (TDA Figure 1), any attached run results
(MAE tables and charts) and a provenance block (PHExplore version, seeds, data source and licence,
timestamp). A two-scenario report (``compare_with``) says first what changed between them
(:mod:`phexplore.planning.changes`) and, for TopDown, shows the committee's table — the predicted
error of the published counts of both by geolevel, with ρ, ε and the differences
(:mod:`phexplore.planning.committee`, the same table as the app's); for PHSafe, the MOEs that
differ. Geolevels read from the root down (spine order) and PHSafe tables and levels in words, as
in the app (:mod:`phexplore.app.naming`). Plotly's JavaScript is embedded once, so the file opens offline. Figures use the
explicit report template of :mod:`phexplore.app.charts` (distinct colours, full log-axis labels) —
never the app's Streamlit theme, whose colours only resolve inside the app. Only runs made with the
scenario's exact budget (same fingerprint) are reported, each once, with run number, data and seed.
"""

from __future__ import annotations

import datetime as dt
import html
import math
from collections.abc import Mapping, Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import plotly.graph_objects as go

from engine.core.errors import PHExploreError
from engine.dp.accounting import delta_grid, epsilon_curves
from engine.dp.budget import budget_use
from engine.dp.budget.fingerprint import short_fingerprint
from engine.dp.budget.invariants import SPREAD_LABEL, spent_label
from engine.dp.conversions import CONVERSION_LABELS, CONVERSIONS
from engine.prediction import describe_profile, shipped_profile_for
from engine.prediction.tables import add_post_processed, predictions_for_runs
from phexplore.app.charts import chart_title, for_report
from phexplore.app.committee import CSS as COMMITTEE_CSS
from phexplore.app.committee import committee_html
from phexplore.app.report_runs import (
    mae_figure,
    mae_rows,
    run_notes_html,
    run_title,
    spine_html,
    spine_sorted,
    table_html,
    tda_error_html,
)
from phexplore.planning.changes import change_sentence, scenario_changes
from phexplore.planning.committee import committee_rows, published_rows
from phexplore.planning.moe_tables import epsilons
from phexplore.planning.scenarios import Scenario, compare

CONVERSION_SHORT = {"bun_steinke": "Bun–Steinke", "cks": "CKS", "gaussian": "Gaussian profile"}
"""Short conversion names of the privacy table's columns."""

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem auto;max-width:1100px;
color:#1b1b1b;line-height:1.45}h1{margin-bottom:.2rem}h2{border-bottom:2px solid #e3e3e3;padding-bottom:.2rem;
margin-top:2rem}table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0}th,td{border:1px solid #ddd;
padding:.25rem .5rem;text-align:right}th{background:#f4f6f8}td:first-child,th:first-child{text-align:left}
.note{background:#fff8e1;border-left:4px solid #f0b400;padding:.5rem 1rem}.prov td{text-align:left}
"""


def phexplore_version() -> str:
    """Installed PHExplore version (or 'unknown' in a source checkout without metadata)."""
    try:
        return version("phexplore")
    except PackageNotFoundError:
        return "unknown"


def epsilon_delta_figure(scenario: Scenario) -> go.Figure:
    """(ε, δ) curves of the scenario's total ρ for all three conversions, log δ axis."""
    rho = scenario.headline()["rho"]
    grid = delta_grid()
    fig = go.Figure()
    for name, eps in epsilon_curves(rho, grid).items():
        fig.add_trace(go.Scatter(x=grid, y=eps, mode="lines", name=CONVERSION_LABELS[name]))
    fig.add_vline(x=scenario.delta, line_dash="dot", annotation_text=f"δ = {scenario.delta:g}")
    fig.update_layout(
        title=f"(ε, δ) curves — {scenario.name} (ρ = {rho:.4g})",
        xaxis={"title": "δ (probability the guarantee may fail)", "type": "log"},
        yaxis={"title": "ε (privacy-loss parameter)"},
        height=520,
    )
    fig = for_report(fig)
    # Legend under the plot so the δ axis gets the page's width (14 decades, unrotated labels).
    fig.update_layout(legend={"orientation": "h", "yanchor": "top", "y": -0.28, "x": 0})
    return fig


def build_report_html(
    scenario: Scenario,
    results: Sequence[Mapping[str, Any]] | None = None,
    *,
    generated_at: dt.datetime | None = None,
    keep_unrecorded: bool = False,
    compare_with: Scenario | None = None,
) -> str:
    """Self-contained HTML report of a scenario and its run results (``metrics.json`` payloads).

    Of ``results`` (default: the scenario's attached runs) only those made with the scenario's
    exact budget are reported, each once (:meth:`Scenario.matching_runs`; ``keep_unrecorded``
    also keeps runs whose ``metrics.json`` records no budget, labelled as such). With
    ``compare_with`` (e.g. the baseline), the report opens with what changed from it and, for
    TopDown, the committee's table of both (:func:`comparison_html`).
    """
    runs = scenario.matching_runs(
        list(results if results is not None else scenario.results),
        keep_unrecorded=keep_unrecorded,
    )
    when = (generated_at or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%d %H:%M:%S UTC")
    origin = scenario.describe_origin()
    summary = scenario.summary()
    head = scenario.headline()
    parts: list[str] = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f'<meta name="generator" content="PHExplore {html.escape(phexplore_version())}">'
        f"<title>PHExplore report — {html.escape(scenario.name)}</title><style>{_CSS}</style>"
        f"{COMMITTEE_CSS}</head><body>",
        f"<h1>PHExplore session report: {html.escape(scenario.name)}</h1>",
        f"<p>{'PHSafe (S-DHC)' if scenario.kind == 'phsafe' else 'TopDown Algorithm'} scenario. "
        f"Quoted privacy loss: <b>ε = {head['epsilon']:.2f}</b> at δ = {scenario.delta:g} from "
        f"{html.escape(head['rho_label'])} = <b>{head['rho']:.6g}</b>, conversion "
        f"<b>{html.escape(CONVERSION_LABELS[scenario.conversion])}</b>.</p>",
        f"<p id='budget-origin'>Budget: <b>{html.escape(origin.label)}</b> (fingerprint "
        f"{short_fingerprint(scenario.fingerprint())}).</p>",
    ]
    if origin.changes:  # what differs from the preset it was modified from
        parts.append(
            "<ul id='budget-changes'>"
            + "".join(f"<li>{html.escape(c.text())}</li>" for c in origin.changes)
            + "</ul>"
        )
    if scenario.notes:
        parts.append(f"<p>{html.escape(scenario.notes)}</p>")
    if compare_with is not None:
        parts.append(comparison_html(compare_with, scenario))
    parts.append("<h2>Privacy loss</h2>")
    parts.append(_privacy_table(scenario))
    parts.append(
        "<h3 id='eps-delta-chart'>(ε, δ) curves of the scenario's total ρ (all three conversions)</h3>"
    )
    parts.append(epsilon_delta_figure(scenario).to_html(full_html=False, include_plotlyjs=True))
    parts.append("<h2>Parameters and margins of error</h2>")
    if scenario.kind == "phsafe":
        assert scenario.phsafe is not None
        parts.append(
            f"<p>privacy_defn = {scenario.phsafe.privacy_defn}; state filter = "
            f"{list(scenario.phsafe.state_filter or []) or 'all states'}; "
            f"confidence = {scenario.phsafe.confidence:.0%}. MOE bound = ⌊1.645σ⌋, exact MOE from the "
            "discrete-Gaussian pmf (PHSafe §7.1).</p>"
        )
        cols = [
            "table",
            "geo_level",
            "iteration_level",
            "tau",
            "sensitivity",
            "rho_unbounded",
            "rho_bounded",
            "sigma",
            "moe_target",
            "moe_bound",
            "moe_exact",
        ]
    else:
        parts.append(
            "<p>Noisy-measurement σ = 1/√(ρ·c·d) and 90% MOE = 1.645σ per query (TDA App. B), "
            "beside the <b>predicted</b> RMSE and 90% MOE of the <b>published counts</b> (after "
            "least squares, non-negativity and rounding; docs/science.md §7, docs/prediction.md) "
            f"on {_profile_phrase(scenario)}. Measured errors of runs follow below.</p>"
        )
        cols = [
            "run",
            "geolevel",
            "query",
            "cells",
            "share_level",
            "share_query",
            "rho_query",
            "sigma",
            "moe90",
            "post_processed_rmse",
            "post_processed_moe",
            "post_processed_holds",
            "post_processed_reason",
            "status",
        ]
    moe_rows = scenario.moe_rows()
    if scenario.kind == "topdown":
        moe_rows, notes = _with_post_processed(scenario, moe_rows)
        parts.extend(f"<p class='note'>{html.escape(n)}.</p>" for n in notes)
    parts.append(f"<div id='moe-table'>{table_html(moe_rows, cols)}</div>")
    parts.append(
        f"<details><summary>Summary (JSON)</summary><pre>{html.escape(str(summary))}</pre></details>"
    )
    if runs:
        parts.append("<h2>Run results</h2>")
        parts.append(
            "<p class='note'>Comparisons of DP output with the confidential truth are possible only "
            "for non-confidential test data such as the shipped samples.</p>"
        )
        for metrics in runs:
            label = run_title(metrics)
            parts.append(f"<h3>{html.escape(label)}</h3>")
            if metrics.get("engine") == "topdown" and metrics.get("rho") is not None:
                spent = spent_label(float(metrics["rho"]), metrics.get("rho_spent"))
                if metrics.get("spread_invariant_share"):
                    spent += f". Allocation: {SPREAD_LABEL}"
                parts.append(f"<p>{html.escape(spent)}.</p>")
            if metrics.get("engine") == "topdown":
                parts.extend(spine_html(metrics))
                parts.extend(tda_error_html(metrics, f"{scenario.origin()} · {label}"))
            parts.append(
                "<h4>Per-cell MAE (mean over geounit × cell: TDA's figure ÷ the query's cells)</h4>"
                if metrics.get("engine") == "topdown"
                else "<h4>Mean absolute error</h4>"
            )
            parts.append(table_html(mae_rows(metrics)))
            fig = mae_figure(
                metrics,
                chart_title(
                    "Mean absolute error per cell"
                    if metrics.get("engine") == "topdown"
                    else "Mean absolute error",
                    scenario.origin(),
                    label,
                ),
            )
            if fig is not None:
                parts.append(fig.to_html(full_html=False, include_plotlyjs=False))
            prediction = metrics.get("prediction")
            if isinstance(prediction, list) and prediction:
                parts.append(
                    "<p>Predicted (before the run) vs measured RMSE of the published counts:</p>"
                )
                parts.append(table_html(spine_sorted(prediction, metrics)))
            parts.extend(run_notes_html(metrics))
    elif scenario.results or results:
        parts.append("<h2>Run results</h2>")
        parts.append("<p><em>No run of this exact budget is attached.</em></p>")
    parts.append("<h2>Provenance</h2>")
    parts.append(_provenance(scenario, runs, when))
    parts.append("</body></html>")
    return "\n".join(parts)


def comparison_html(a: Scenario, b: Scenario) -> str:
    """The two-scenario section: what changed from ``a`` to ``b`` (a sentence and the numbers that
    differ), then the committee's table (TopDown) or the MOEs that differ (PHSafe)."""
    rows = scenario_changes(a, b)
    parts = [
        f"<h2 id='comparison'>Compared with “{html.escape(a.name)}”</h2>",
        f"<p id='what-changed'><b>What changed:</b> {html.escape(change_sentence(a, b, rows))}</p>",
    ]
    if rows:
        shown = [
            {"what": r["what"], "where": r["where"], a.name: r["a"], b.name: r["b"]} for r in rows
        ]
        parts.append(f"<details><summary>The {len(rows)} number(s) that differ</summary>")
        parts.append(table_html(shown))
        parts.append("</details>")
    if a.kind == b.kind == "topdown":
        assert a.topdown is not None and b.topdown is not None
        try:
            a_rows, a_notes = published_rows(a.topdown)
            b_rows, b_notes = published_rows(b.topdown)
            table = committee_rows(
                a.topdown, a_rows, b.topdown, b_rows, delta=b.delta, conversion=b.conversion
            )
        except PHExploreError as exc:
            parts.append(
                f"<p class='note'>No published-count comparison: {html.escape(str(exc))}</p>"
            )
            return "".join(parts)
        parts.append(
            "<h3 id='committee-table'>Predicted error of the published counts by geolevel</h3>"
            "<p>After least squares, non-negativity and rounding (docs/science.md §7, "
            "docs/prediction.md), on the shipped count profile of the allocations' schema; "
            "each cell reads “A → B” with the difference B − A and its percentage.</p>"
        )
        parts.append(
            committee_html(table, a.name, b.name, caption=f"{a.name} → {b.name}").replace(
                COMMITTEE_CSS, ""
            )
        )
        for n in sorted(set(a_notes) | set(b_notes)):
            parts.append(f"<p class='note'>{html.escape(n)}.</p>")
    elif a.kind == b.kind:
        moe = [r for r in compare(a, b)["moe"] if r["difference"] != 0]
        parts.append(f"<h3>90% MOEs that differ ({len(moe)})</h3>")
        parts.append(
            table_html(
                [{**r, a.name: r["moe_a"], b.name: r["moe_b"]} for r in moe],
                ["table", "geo_level", "iteration_level", a.name, b.name, "difference"],
            )
        )
    return "".join(parts)


def _profile_phrase(scenario: Scenario) -> str:
    """The count profile the scenario's published-count prediction rests on, in words."""
    if scenario.topdown is None:
        return "no count profile"
    try:
        return describe_profile(shipped_profile_for(scenario.topdown))
    except PHExploreError as exc:
        return f"no count profile ({exc})"


def _with_post_processed(
    scenario: Scenario, rows: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[str]]:
    """MOE rows plus the predicted published-count accuracy (docs/science.md §7) and its notes."""

    assert scenario.topdown is not None
    try:
        predictions = predictions_for_runs(scenario.topdown, shipped_profile_for(scenario.topdown))
    except PHExploreError as exc:
        return rows, [f"No published-count prediction: {exc}"]
    notes = sorted({n for p in predictions.values() for n in p.notes})
    return add_post_processed(rows, predictions), notes


def _privacy_table(scenario: Scenario) -> str:
    rows = []
    if scenario.kind == "phsafe":
        assert scenario.phsafe is not None
        pairs = [
            ("unbounded ρ", scenario.phsafe.total_unbounded()),
            ("bounded ρ (2×)", scenario.phsafe.total_bounded()),
        ]
    else:
        assert scenario.topdown is not None
        pairs = [(f"ρ {run}", float(a.rho)) for run, a in scenario.topdown.items()]
        spent = [float(budget_use(a).spent) for a in scenario.topdown.values()]
        pairs.append(("ρ total", sum(p for _, p in pairs)))
        spent.append(sum(spent))
    for i, (label, rho) in enumerate(pairs):
        row: dict[str, Any] = {"quantity": label, "rho": rho}
        if scenario.kind != "phsafe":
            # TDA §5.2: shares of queries held exact (US/State TOTAL) buy no measurement
            row["rho_spent"] = spent[i]
        eps = (
            epsilons(rho, scenario.delta)
            if math.isfinite(rho)
            else dict.fromkeys(CONVERSIONS, math.inf)
        )
        row.update({f"ε ({CONVERSION_SHORT[c]})": eps[c] for c in CONVERSIONS})
        rows.append(row)
    return table_html(rows)


def _provenance(scenario: Scenario, runs: Sequence[Mapping[str, Any]], when: str) -> str:
    items = [
        ("PHExplore version", phexplore_version()),
        ("generated", when),
        ("scenario", scenario.name),
        ("δ", f"{scenario.delta:g}"),
        ("conversion quoted", CONVERSION_LABELS[scenario.conversion]),
    ]
    if scenario.phsafe is not None and scenario.phsafe.citation:
        items.append(("parameters from", scenario.phsafe.citation))
    if scenario.topdown:
        cite = next(iter(scenario.topdown.values())).citation
        if cite:
            items.append(("parameters from", cite))
    items.append(("budget fingerprint (SHA-256)", scenario.fingerprint()))
    for m in runs:
        items.append(
            (
                f"run #{m.get('run_id', '?')}",
                f"engine={m.get('engine')}, data={m.get('data')}, seed={m.get('seed')}, "
                f"budget={short_fingerprint(str(m['budget_fingerprint'])) if m.get('budget_fingerprint') else 'not recorded'}, "
                f"licence={m.get('licence', m.get('data_licence', 'see data/samples'))}",
            )
        )
    body = "".join(
        f"<tr><th>{html.escape(k)}</th><td>{html.escape(str(v))}</td></tr>" for k, v in items
    )
    return f"<table class='prov'>{body}</table>"
