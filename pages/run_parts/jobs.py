"""The Run page's job slot and run numbering (session state only)."""

from __future__ import annotations

import streamlit as st

from phexplore import api as R
from phexplore.app import state as S

JOB = R.JOB_KEY


def next_run_id() -> int:
    """The number of the next run of this session (one more than the highest so far)."""
    runs = st.session_state[S.RUNS]
    return 1 + max((r.id for r in runs), default=0)
