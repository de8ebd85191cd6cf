"""Run options of the engines' forms: seed, noise sampler, TopDown's least-squares solver, backend,
EPL settings and (TopDown) the error universe of the block figures."""

from __future__ import annotations

import streamlit as st

from phexplore import api as R


def seed_input(key: str) -> int:
    """The run's seed (a whole number ≥ 0): the same seed gives the same numbers on any backend."""
    return int(
        st.number_input(
            "Seed",
            min_value=0,
            step=1,
            key=key,
            persist_state="session",
            help="Seeds the noise: the same seed gives the same run.",
        )
    )


def noise_choice(key: str) -> None:
    """The noise sampler: keyed and reproducible (default) or OpenDP's exact samplers."""
    st.radio(
        "Noise",
        list(R.NOISE_METHODS),
        format_func=R.NOISE_METHODS.get,
        key=key,
        persist_state="session",
        help=R.NOISE_HELP,
    )


def solver_choice(key: str) -> None:
    """TopDown's least-squares route: automatic (default) or one named route."""
    st.selectbox(
        "Least-squares solver",
        list(R.SOLVERS),
        format_func=R.SOLVERS.get,
        key=key,
        persist_state="session",
        help=R.SOLVER_HELP,
    )


def backend_choice(key: str) -> None:
    """Local or Spark, offered only when pyspark is installed and a Spark master is configured."""
    options = R.spark_backend_options()
    if options is None:
        return
    target = options.master or options.remote
    st.radio(
        "Where to run",
        ["local", "spark"],
        format_func=lambda b: "This machine" if b == "local" else f"Spark ({target})",
        key=key,
        persist_state="session",
        horizontal=True,
        help="The same numbers either way (docs/spark.md); Spark pays off on a cluster.",
    )


def epl_options() -> None:
    """EPL density-range settings (default: Petti & Flaxman's published p = 95, m = 1.0)."""
    (p_lo, p_hi), (m_lo, m_hi) = R.EPL_PERCENTILE_RANGE, R.EPL_MULTIPLIER_RANGE
    with st.expander("EPL settings (default: Petti & Flaxman's published)"):
        st.number_input(
            f"EPL percentile p ({p_lo:g} < p ≤ {p_hi:g})",
            min_value=p_lo + 0.5,
            max_value=p_hi,
            step=0.5,
            key="run_td_epl_p",
            persist_state="session",
            help="EPL's density range is ±m × max(|P(100−p)|, |P(p)|) of the residuals. PF "
            "published every EPL with p = 95, m = 1.0; their function's defaults 99 / 1.5 give "
            "values up to ~10× larger. PF's numbers are drawn only beside EPLs with p = 95, m = 1.",
        )
        st.number_input(
            f"EPL multiplier m ({m_lo:g} < m ≤ {m_hi:g})",
            min_value=0.1,
            max_value=m_hi,
            step=0.1,
            key="run_td_epl_m",
            persist_state="session",
            help="Multiplier of the density range (PF's published setting: 1.0).",
        )


def universe_choice(key: str) -> None:
    """TopDown: the blocks the block-level figures average over (the run option
    ``error_universe``; default TDA's, the blocks with housing units or group quarters)."""
    st.radio(
        "Block figures average over",
        list(R.ERROR_UNIVERSES),
        format_func=R.ERROR_UNIVERSES.get,
        key=key,
        persist_state="session",
        help=R.ERROR_UNIVERSE_HELP,
    )
