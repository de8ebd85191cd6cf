"""Every button, download button, upload and data editor of the pages has a key that
``app_state.keep_widget_state`` leaves alone.

keep_widget_state re-assigns the values of page widgets (keys starting ``run_``, ``res_`` …) so they
survive page changes; Streamlit refuses a button, upload or data editor whose key was assigned, and
the page then fails in the browser (AppTest does not notice). Found in the browser: the Results
page's ``res_replay`` and ``res_open_folder`` buttons; by this scan: the Budget session's
``bs_pub_use``.
"""

from __future__ import annotations

import ast
from pathlib import Path

from phexplore.app import state as S

ROOT = Path(__file__).resolve().parents[2]
UNASSIGNABLE = {"button", "download_button", "file_uploader", "data_editor", "form_submit_button"}


def _key_text(node: ast.expr, constants: dict[str, str]) -> str | None:
    """The key's text, or its constant prefix for an f-string (None when not known)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.JoinedStr):
        head = ""
        for part in node.values:
            if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
                break
            head += part.value
        return head or None
    return None


def _unassignable_keys() -> list[tuple[str, int, str]]:
    found = []
    for path in sorted([ROOT / "app.py", *(ROOT / "pages").rglob("*.py")]):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = {
            t.id: n.value.value
            for n in tree.body
            if isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Constant)
            and isinstance(n.value.value, str)
            for t in n.targets
            if isinstance(t, ast.Name)
        }
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr not in UNASSIGNABLE:
                continue
            for kw in node.keywords:
                if kw.arg == "key":
                    text = _key_text(kw.value, constants)
                    if text is not None:
                        found.append((str(path.relative_to(ROOT)), node.lineno, text))
    return found


def test_buttons_uploads_and_editors_are_never_reassigned() -> None:
    keys = _unassignable_keys()
    assert len(keys) > 20  # the scan sees the pages' widgets
    wrong = [f"{where}:{line} key {key!r}" for where, line, key in keys if S.is_kept_key(key)]
    assert not wrong, (
        "keep_widget_state would re-assign these (Streamlit then refuses the widget); end the key "
        "with _go/_upload/_download/… or list it in app_state._UNASSIGNABLE_PREFIXES: "
        + "; ".join(wrong)
    )


def test_the_scan_catches_a_reassigned_button_key() -> None:
    assert S.is_kept_key("res_replay") and not S.is_kept_key("res_replay_go")
    assert not S.is_kept_key("res_open_folder") and S.is_kept_key("res_run")
