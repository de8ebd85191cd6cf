"""Readable charts: one set of rules for every figure of the app and of the HTML report.

Presentation only, no science. The rules, checked by the browser tests at 1366×768:

* a log axis labels every decade with the full number — 500 reads "500", never a bare "5" of
  Plotly's minor-tick shorthand; very small or large values read as powers of ten (10⁻¹⁰);
* axes grow their margins for long tick labels and titles (``automargin``) and long titles wrap,
  so no label is cut off;
* bars carry an outline and their value, so a zero bar is still visible;
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
TITLE_CHARS = 70
"""Titles longer than this wrap onto a second line."""


def _report_template() -> go.layout.Template:
    base = go.layout.Template(pio.templates["plotly_white"])
    base.layout.colorway = list(COLORWAY)
    base.layout.font = {
        "family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif",
        "size": 14,
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


def readable(
    fig: go.Figure, *, height: int | None = None, title_chars: int = TITLE_CHARS
) -> go.Figure:
    """Apply the readability rules to ``fig`` in place and return it.

    Log axes get full tick labels over the plotted range; every axis grows its margin for its
    labels; the title wraps; bars get outlines and value labels (zero bars stay visible).
    """
    layout = fig.layout
    title = layout.title.text if layout.title and layout.title.text else ""
    lines = 1
    if title:
        wrapped = wrap_title(title.replace("<br>", " "), title_chars)
        lines = wrapped.count("<br>") + 1
        fig.update_layout(
            title={"text": wrapped, "x": 0.0, "xanchor": "left", "font": {"size": 16}}
        )
    margin = {"l": 10, "r": 10, "t": 30 + 22 * lines if title else 20, "b": 10}
    fig.update_layout(margin=margin, legend={"font": {"size": 12}})
    if height is not None:
        fig.update_layout(height=height)
    fig.update_xaxes(automargin=True, title_standoff=8)
    fig.update_yaxes(automargin=True, title_standoff=8)
    for axis in ("x", "y"):
        for name, vals in _axis_values(fig, axis).items():
            ax = getattr(layout, name, None)
            if ax is not None and ax.type == "log":
                ticks, text = log_ticks(vals)
                if ticks:
                    ax.update(
                        tickmode="array", tickvals=ticks, ticktext=text, exponentformat="none"
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
        "title": {"text": title},
        "tickmode": "array",
        "tickvals": [math.log10(t) for t in ticks],
        "ticktext": text,
    }
