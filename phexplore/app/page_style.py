"""Page style shared by every page: room for tables at 1366×768 and a focus ring keyboard users see.

Presentation only. Streamlit's wide layout keeps 5 rem of padding on each side of the main area;
at 1366 px with the sidebar open that leaves about 906 px for content, less than the key columns
of the planners' tables need. 1.5 rem each side gives about 1,018 px. Keyboard focus is shown by a
3 px ring of :data:`FOCUS` (contrast 6.7:1 against white) on whatever element has it, since the
browser's own ring is faint or hidden on several of Streamlit's widgets. Colours and text contrast
live in the theme (``.streamlit/config.toml``).
"""

from __future__ import annotations

import streamlit as st

FOCUS = "#1d4ed8"
"""Colour of the keyboard-focus ring."""

GLOBAL_CSS = f"""
<style>
[data-testid="stMainBlockContainer"]{{padding-left:1.5rem;padding-right:1.5rem;max-width:none}}
:focus-visible{{outline:3px solid {FOCUS} !important;outline-offset:2px !important}}
[data-baseweb="radio"]:has(input:focus-visible),[data-baseweb="checkbox"]:has(input:focus-visible){{
outline:3px solid {FOCUS};outline-offset:2px;border-radius:4px}}
[data-testid="stDataFrame"]:focus-within{{outline:3px solid {FOCUS};outline-offset:2px}}
</style>
"""


def apply() -> None:
    """Add the shared style to the page (call once per run, before the page draws)."""
    st.html(GLOBAL_CSS)
