"""Readable charts: one set of rules for every figure of the app and of the HTML report.

Presentation only, no science. The rules, checked by the browser tests at 1366×768 (readable on a
projector):

* every text is at least 12 px (:data:`MIN_TEXT`; ticks 13 px, titles 17 px) and dark
  (:data:`TEXT`, contrast 17:1 on white; WCAG AA asks 4.5:1) — never the theme's faded grey;
* a log axis labels every decade with the full number — 500 reads "500", never a bare "5" of
  Plotly's minor-tick shorthand; very small or large values read as powers of ten (10⁻¹⁰);
* a category axis labels every category (no label skipped when they crowd: they turn instead),
  and a heatmap row is at least :data:`HEATMAP_ROW` px high, so its cell numbers fit;
* axes grow their margins for long tick labels and titles (``automargin``), long titles wrap, and
  the plot area keeps at least :data:`MIN_PLOT` px of height whatever the labels take;
* legends sit below the plot, across its width, so they never squeeze the plot;
* bars carry an outline and their value, so a zero bar is still visible;
* titles say what is plotted — the budget (its preset or "modified from …"), the data, the run —
  built by :func:`chart_title`, never the sidebar's free-text scenario name;
* figures written into a standalone file use :data:`REPORT_TEMPLATE`, an explicit template with
  distinct colours — the app's Streamlit theme only resolves its colours inside the app.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

COLORWAY: tuple[str, ...] = (
    "#0072B2",
    "#D55E00",
    "#009E73",
    "#CC79A7",
    "#E69F00",
    "#56B4E9",
    "#8C564B",
    "#332288",
    "#999933",
    "#882255",
)
"""Distinct colours, safe for colour-blind readers (Okabe–Ito, then Tol's dark tones)."""

_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
TITLE_CHARS = 64
"""Titles longer than this wrap onto a second line (17 px text in a half-width chart at 1366)."""
TEXT = "#1b1b1b"
"""Colour of every chart text (17:1 on white)."""
GRID = "#d4d4d4"
"""Grid lines (not text: no contrast requirement, kept light so data stand out)."""
MIN_TEXT = 12
"""No chart text is smaller than this, in px."""
TICK_TEXT = 13
TITLE_TEXT = 17
MIN_PLOT = 220
DEFAULT_HEIGHT = 420
"""Height of a figure that sets none (Streamlit would give it 450 px)."""
"""Least height of a plot area, in px, after margins for titles, labels and legends."""
HEATMAP_ROW = 34
"""Least height of a heatmap row, in px (two 13 px lines of cell text)."""
CHAR_PX = 7.6
"""Mean width of a 13–14 px character, for estimating label and legend sizes."""
LEGEND_WIDTH = 640
"""Width assumed for a legend row below a plot (a half-width chart at 1366×768)."""


def _report_template() -> go.layout.Template:
    base = go.layout.Template(pio.templates["plotly_white"])
    base.layout.colorway = list(COLORWAY)
    base.layout.font = {
        "family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif",
        "size": 14,
        "color": TEXT,
    }
    base.layout.paper_bgcolor = "white"
    base.layout.plot_bgcolor = "white"
    return base


REPORT_TEMPLATE: go.layout.Template = _report_template()
"""Template of figures in standalone files (the HTML report): explicit colours and fonts."""


def tick_text(value: float) -> str:
    """A tick label in full: ``500`` → "500", ``2500`` → "2,500", ``1e-10`` → "10⁻¹⁰"."""
    if value <= 0 or not math.isfinite(value):
        return f"{value:g}"
    exponent = math.log10(value)
    if 1e-3 <= value < 1e6:
        if value >= 1:
            return f"{value:,.0f}" if abs(value - round(value)) < 1e-9 else f"{value:,.2f}"
        return f"{value:.6f}".rstrip("0").rstrip(".")
    if abs(exponent - round(exponent)) < 1e-9:
        return "10" + str(round(exponent)).translate(_SUPERSCRIPT)
    mantissa = value / 10 ** math.floor(exponent)
    return f"{mantissa:g}×10" + str(math.floor(exponent)).translate(_SUPERSCRIPT)


def log_ticks(values: Iterable[float]) -> tuple[list[float], list[str]]:
    """Tick positions and full labels of a log axis spanning ``values`` (positive, finite ones).

    Every decade is labelled; with three decades or fewer the 2× and 5× steps are labelled too.
    """
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v)) and v > 0]
    if not vals:
        return [], []
    lo = math.floor(math.log10(min(vals)) + 1e-12)
    hi = math.ceil(math.log10(max(vals)) - 1e-12)
    hi = max(hi, lo + 1)
    steps = (1, 2, 5) if hi - lo <= 3 else (1,)
    ticks = [m * 10.0**k for k in range(lo, hi + 1) for m in steps if m * 10.0**k <= 10.0**hi]
    return ticks, [tick_text(t) for t in ticks]


def wrap_title(text: str, width: int = TITLE_CHARS) -> str:
    """Break a long title into lines of at most ``width`` characters (Plotly ``<br>``)."""
    words, lines, line = text.split(" "), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return "<br>".join(lines)


def _axis_values(fig: go.Figure, axis: str) -> dict[str, list[float]]:
    """Positive values plotted on each x or y axis (``xaxis``, ``xaxis2``, …) of ``fig``."""
    out: dict[str, list[float]] = {}
    for trace in fig.data:
        ref = getattr(trace, f"{axis}axis", None) or axis
        name = f"{axis}axis" + ref[1:]
        data = getattr(trace, axis, None)
        if data is None:
            continue
        try:
            nums = [float(v) for v in data if v is not None]
        except (TypeError, ValueError):
            continue
        out.setdefault(name, []).extend(v for v in nums if math.isfinite(v) and v > 0)
    return out


def chart_title(what: str, *parts: object) -> str:
    """A title from what is plotted: ``what`` then the non-empty ``parts`` (budget label, data,
    run …) joined by " · " — e.g. "Published-count RMSE by geolevel × query — modified from
    topdown-2020-production · persons run"."""
    rest = [str(p) for p in parts if p not in (None, "")]
    return what + (" — " + " · ".join(rest) if rest else "")


def _category_labels(fig: go.Figure, axis: str) -> list[str]:
    """The category labels on the ``x`` or ``y`` axis of ``fig`` (empty for numeric axes)."""
    labels: list[str] = []
    for trace in fig.data:
        data = getattr(trace, axis, None)
        if data is None:
            continue
        values = list(data)
        if values and all(isinstance(v, str) for v in values):
            labels.extend(v for v in values if v not in labels)
    return labels


def _legend_rows(fig: go.Figure, width: int = LEGEND_WIDTH) -> int:
    """Rows a horizontal legend of ``fig``'s named traces takes across ``width`` px."""
    names = [
        str(t.name)
        for t in fig.data
        if t.name and t.showlegend is not False and not isinstance(t, go.Heatmap)
    ]
    if len(names) < 2 and fig.layout.showlegend is not True:
        return 0
    rows, used = 1, 0.0
    for name in names:
        item = 46 + CHAR_PX * len(name)
        if used and used + item > width:
            rows, used = rows + 1, 0.0
        used += item
    return rows


def readable(
    fig: go.Figure,
    *,
    height: int | None = None,
    title_chars: int = TITLE_CHARS,
    legend_below: bool = True,
    width: int = LEGEND_WIDTH,
) -> go.Figure:
    """Apply the readability rules (module docstring) to ``fig`` in place and return it.

    Log axes get full tick labels over the plotted range; every text gets at least
    :data:`MIN_TEXT` px in :data:`TEXT`; every axis grows its margin for its labels; every
    category is labelled; the title wraps; the legend goes below the plot; bars get outlines and
    value labels (zero bars stay visible); the figure grows so its plot area keeps
    :data:`MIN_PLOT` px (a heatmap :data:`HEATMAP_ROW` px per row). ``width`` is the width the
    chart is expected to get (px), for sizing the legend's rows.
    """
    layout = fig.layout
    title = layout.title.text if layout.title and layout.title.text else ""
    lines = 1
    if title:
        wrapped = wrap_title(title.replace("<br>", " "), title_chars)
        lines = wrapped.count("<br>") + 1
        fig.update_layout(
            title={
                "text": wrapped,
                "x": 0.0,
                "xanchor": "left",
                "font": {"size": TITLE_TEXT, "color": TEXT},
            }
        )
    top = 30 + 24 * lines if title else 20
    legend_rows = _legend_rows(fig, width) if legend_below else 0
    legend_px = 26 * legend_rows + 8 if legend_rows else 0
    fig.update_layout(
        font={"color": TEXT, "size": 14},
        hoverlabel={"font": {"size": TICK_TEXT}},
        legend={"font": {"size": TICK_TEXT, "color": TEXT}},
    )
    axis_style = {
        "automargin": True,
        "title_standoff": 8,
        "tickfont": {"size": TICK_TEXT, "color": TEXT},
        "title_font": {"size": 14, "color": TEXT},
        "gridcolor": GRID,
        "linecolor": "#6e6e6e",
    }
    fig.update_xaxes(**axis_style)
    fig.update_yaxes(**axis_style)
    bottom = 20
    x_labels = _category_labels(fig, "x")
    if x_labels:
        longest = max(len(v) for v in x_labels)
        # Crowded or long category labels turn by 45°: they need about 0.7 × their length.
        turned = len(x_labels) > 6 or longest > 14
        band = (0.72 * CHAR_PX * longest if turned else 18) + 34
        bottom = int(band)
        fig.update_xaxes(tickmode="linear", dtick=1, tickangle=-45 if turned else 0)
    else:
        bottom = 62
    if _category_labels(fig, "y"):
        fig.update_yaxes(tickmode="linear", dtick=1)
    fig.update_layout(margin={"l": 10, "r": 10, "t": top, "b": bottom + legend_px})
    for axis in ("x", "y"):
        for name, vals in _axis_values(fig, axis).items():
            ax = getattr(layout, name, None)
            if ax is not None and ax.type == "log":
                ticks, text = log_ticks(vals)
                if ticks:
                    ax.update(
                        tickmode="array", tickvals=ticks, ticktext=text, exponentformat="none"
                    )
    for annotation in layout.annotations or ():
        size = annotation.font.size if annotation.font and annotation.font.size else 14
        annotation.update(font={"size": max(MIN_TEXT, size), "color": TEXT})
    rows = 0
    for trace in fig.data:
        if isinstance(trace, go.Heatmap):
            trace.update(textfont={"size": TICK_TEXT})
            if trace.colorbar is not None:
                trace.update(
                    colorbar={
                        "tickfont": {"size": TICK_TEXT, "color": TEXT},
                        "title": {"font": {"size": 14, "color": TEXT}},
                    }
                )
            rows = max(rows, len(_category_labels(fig, "y")) or len(trace.z or []))
    plot_min = max(MIN_PLOT, HEATMAP_ROW * rows)
    wanted = height if height is not None else (layout.height or DEFAULT_HEIGHT)
    total = max(int(wanted or 0), plot_min + top + bottom + legend_px)
    fig.update_layout(height=total)
    if legend_rows:
        # Just under the axis labels and title, whatever the number of legend rows: a position
        # in the plot's own coordinates, (bottom band + gap) / plot height below its bottom edge.
        plot_height = total - top - bottom - legend_px
        fig.update_layout(
            legend={
                "orientation": "h",
                "x": 0.0,
                "xanchor": "left",
                "y": -(bottom + 6) / plot_height,
                "yanchor": "top",
            }
        )
    visible_bars(fig)
    return fig


LABELLED_BARS = 24
"""Up to this many bars in a figure each print their value; beyond, the outline alone shows them."""


def visible_bars(fig: go.Figure) -> go.Figure:
    """Outline every bar (a bar of height 0 is still seen as a line) and, when there are few,
    print each value (so a zero bar reads "0")."""
    bars = [t for t in fig.data if isinstance(t, go.Bar)]
    count = 0
    for t in bars:
        categories = t.y if t.orientation == "h" else t.x
        count += len(categories) if categories is not None else 0
    for trace in bars:
        trace.update(marker_line={"width": 1.5, "color": "#333333"}, cliponaxis=False)
        if count <= LABELLED_BARS and not trace.texttemplate:
            value = "%{x:.3~g}" if trace.orientation == "h" else "%{y:.3~g}"
            trace.update(texttemplate=value, textposition=trace.textposition or "outside")
        if trace.texttemplate:
            size = trace.textfont.size if trace.textfont and trace.textfont.size else MIN_TEXT
            trace.update(textfont={"size": max(MIN_TEXT, size)})
    return fig


def for_report(fig: go.Figure) -> go.Figure:
    """``fig`` readable and with :data:`REPORT_TEMPLATE`, for a standalone HTML file."""
    fig.update_layout(template=REPORT_TEMPLATE)
    for i, trace in enumerate(fig.data):
        colour = COLORWAY[i % len(COLORWAY)]
        if isinstance(trace, go.Scatter) and not (trace.line and trace.line.color):
            trace.update(line={"color": colour}, marker={"color": colour})
        elif isinstance(trace, go.Bar) and not (trace.marker and trace.marker.color):
            trace.update(marker={"color": colour})
    return readable(fig)


def log_colorbar(values: Iterable[float], title: str) -> dict[str, Any]:
    """Colour bar of a heatmap coloured by log₁₀ of ``values``: ticks labelled with full numbers."""
    ticks, text = log_ticks(values)
    return {
        "title": {"text": title, "side": "right", "font": {"size": 14, "color": TEXT}},
        "tickmode": "array",
        "tickvals": [math.log10(t) for t in ticks],
        "ticktext": text,
        "tickfont": {"size": TICK_TEXT, "color": TEXT},
    }
