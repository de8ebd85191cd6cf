"""Helpers shared by the Results page's parts: a chart titled by what it plots, a CSV download."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from phexplore import api as R
from phexplore.app.charts import chart_title, readable

LAYOUT = {"height": 420}


def run_title(what: str, record: R.RunRecord) -> str:
    """A chart title from what is plotted: the measure, the run's budget (its preset or "modified
    from …"), engine and data, and the run number — never the sidebar's scenario name."""
    settings = record.settings
    origin = settings.get("budget_origin") or (record.metrics or {}).get("budget_origin")
    engine = "TopDown" if record.engine == "topdown" else "PHSafe"
    return chart_title(what, origin, f"{engine} on {settings.get('data')}", f"run #{record.id}")


def chart(fig: go.Figure, name: str, *, half: bool = False, alt: str | None = None) -> None:
    """A readable chart; ``half``: it shares the row with another (titles wrap sooner, the
    legend gets half the width)."""
    title = fig.layout.title.text if fig.layout.title and fig.layout.title.text else name
    st.plotly_chart(
        readable(fig, title_chars=42 if half else 90, width=480 if half else 1000),
        config={"toImageButtonOptions": {"filename": name}},
        alt=alt or str(title).replace("<br>", " "),
    )


def csv_download(frame: pd.DataFrame, name: str, key: str) -> None:
    st.download_button(
        f"Download {name} (CSV)",
        R.tidy_bytes(frame, "csv"),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=f"{key}_download",
    )


def most_residuals(tidy: pd.DataFrame) -> str:
    """The geolevel whose TOTAL query has the most geounits (EPL is steadier with more residuals)."""
    part = tidy[tidy["query"] == "TOTAL"] if (tidy["query"] == "TOTAL").any() else tidy
    return str(part.groupby("geolevel", sort=False).size().idxmax())
