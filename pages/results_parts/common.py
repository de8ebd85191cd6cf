"""Helpers shared by the Results page's parts: a labelled chart and a CSV download."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from phexplore import api as R
from phexplore.app.charts import readable

LAYOUT = {"height": 420}


def chart(fig: go.Figure, name: str, *, half: bool = False) -> None:
    """A readable chart; ``half``: it shares the row with another (titles wrap sooner)."""
    st.plotly_chart(
        readable(fig, title_chars=42 if half else 70),
        config={"toImageButtonOptions": {"filename": name}},
    )


def csv_download(frame: pd.DataFrame, name: str, key: str) -> None:
    st.download_button(
        f"Download {name} (CSV)",
        R.tidy_bytes(frame, "csv"),
        file_name=f"{name}.csv",
        mime="text/csv",
        key=f"{key}_download",  # never re-assigned by keep_widget_state (a button's key)
    )


def most_residuals(tidy: pd.DataFrame) -> str:
    """The geolevel whose TOTAL query has the most geounits (EPL is steadier with more residuals)."""
    part = tidy[tidy["query"] == "TOTAL"] if (tidy["query"] == "TOTAL").any() else tidy
    return str(part.groupby("geolevel", sort=False).size().idxmax())
