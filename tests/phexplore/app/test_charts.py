"""Readability rules for figures: full log-axis labels, visible zero bars, report colours."""

from __future__ import annotations

import plotly.graph_objects as go
import plotly.io as pio

from phexplore.app.charts import COLORWAY, for_report, log_ticks, readable, tick_text


def test_log_ticks_label_every_decade_in_full() -> None:
    ticks, text = log_ticks([20, 500])
    assert dict(zip(ticks, text, strict=True))[500.0] == "500"
    assert "1,000" in text and "5" not in text
    _, tiny = log_ticks([1e-15, 1e-2])
    assert tiny[0] == "10⁻¹⁵" and "0.01" in tiny and len(tiny) == 14
    assert tick_text(2500) == "2,500"


def test_readable_sets_log_ticks_and_zero_bars() -> None:
    fig = go.Figure([go.Scatter(x=[1e-3, 10], y=[20, 700]), go.Bar(x=["a", "b"], y=[0, 3])])
    fig.update_yaxes(type="log")
    fig.update_layout(title="a very long title " * 8)
    readable(fig)
    assert "500" in fig.layout.yaxis.ticktext
    assert "<br>" in fig.layout.title.text
    bar = fig.data[1]
    assert bar.marker.line.width > 0 and bar.texttemplate


def test_report_figures_do_not_inherit_the_streamlit_theme() -> None:
    previous = pio.templates.default
    pio.templates["fake_theme"] = go.layout.Template(layout={"colorway": ["#000001"] * 3})
    pio.templates.default = "fake_theme"
    try:
        fig = for_report(go.Figure([go.Scatter(y=[1, 2]), go.Scatter(y=[2, 3])]))
    finally:
        pio.templates.default = previous
    colours = [t.line.color for t in fig.data]
    assert colours == list(COLORWAY[:2]) and len(set(colours)) == 2
