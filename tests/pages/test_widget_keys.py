"""Every keyed input widget of the pages keeps its value for the session (``persist_state``).

A user who sets the Run page's seed, waits a second and opens Results must find the seed again on
the way back. Streamlit forgets a widget's value when a run does not draw it; the pages declare
``persist_state="session"`` (Streamlit ≥ 1.67) on every keyed input widget so that it does not.
The hand-written alternative we had (re-assigning every page key at the start of each run) lost a
value whenever the Run page's one-second progress fragment ran between the edit and the page
change (Streamlit issue #10805; tests/pages/test_browser_committee.py reproduces it in chromium).
This scan keeps a new widget from forgetting the declaration.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INPUTS = {
    "checkbox",
    "color_picker",
    "date_input",
    "multiselect",
    "number_input",
    "pills",
    "radio",
    "segmented_control",
    "select_slider",
    "selectbox",
    "slider",
    "text_area",
    "text_input",
    "time_input",
    "toggle",
}


def _forgetful(source: str, where: str) -> list[str]:
    """``where:line widget`` for each keyed input widget without ``persist_state="session"``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in INPUTS:
            continue
        keywords = {kw.arg: kw.value for kw in node.keywords}
        if "key" not in keywords:
            continue
        persist = keywords.get("persist_state")
        if not (isinstance(persist, ast.Constant) and persist.value == "session"):
            found.append(f"{where}:{node.lineno} {node.func.attr}")
    return found


def _page_sources() -> list[tuple[str, str]]:
    return [
        (str(p.relative_to(ROOT)), p.read_text(encoding="utf-8"))
        for p in sorted((ROOT / "pages").rglob("*.py"))
    ]


def test_every_keyed_input_widget_of_the_pages_persists_for_the_session() -> None:
    sources = _page_sources()
    keyed = sum(
        1
        for _, text in sources
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in INPUTS
        and any(kw.arg == "key" for kw in node.keywords)
    )
    assert keyed > 60  # the scan sees the pages' widgets
    wrong = [hit for where, text in sources for hit in _forgetful(text, where)]
    assert not wrong, (
        'these widgets forget their value on a page change; add persist_state="session": '
        + "; ".join(wrong)
    )


def test_the_scan_catches_a_widget_without_persistence() -> None:
    source = (
        'st.number_input("Seed", key="run_x")\n'
        'c[0].selectbox("Pick", [1], key=k, persist_state="page")\n'
        'st.toggle("Kept", key="res_y", persist_state="session")\n'
        'st.button("Go", key="run_go")\n'
    )
    assert _forgetful(source, "p.py") == ["p.py:1 number_input", "p.py:2 selectbox"]
