"""The report shows TDA's absolute error first, the spine and the block universe — old files too."""

from __future__ import annotations

from engine.dp.presets import load_topdown_preset
from phexplore.app.report_runs import spine_html, tda_error_html

PRODUCTION = load_topdown_preset("topdown-2020-production")["persons"]


def test_production_runs_get_tda_tables_beside_them() -> None:
    metrics = {
        "engine": "topdown",
        "allocation": PRODUCTION.name,
        "run": {"config": PRODUCTION.to_dict()},
        "tda_mae": {"Tract": {"TOTAL": 1.9, "CENRACE": 34.2}},
        "tda_size_classes": {"Block": {"10 to 99": {"n": 12, "mae": 4.8, "mean_error": 0.1}}},
        "error_universe": {"universe": "housed", "note": "over the 9 housed blocks"},
        "spine_used": {"kind": "optimized", "label": "optimized block groups around places"},
    }
    html = "\n".join(tda_error_html(metrics, "t"))
    assert html.index("TDA's definition") < html.index("Beside TDA's published Tables 9–10")
    assert "35.04" in html and "4.824" in html and "over the 9 housed blocks" in html
    assert "optimized block groups around places" in "".join(spine_html(metrics))


def test_an_old_metrics_json_still_reports() -> None:
    old = {
        "engine": "topdown",
        "allocation": "ri2010-production-like",
        "mae": {"Tract": {"TOTAL": 2.0}},
        "n_cells": {"Tract": {"TOTAL": 5}},
        "n_geounits": {"Tract": 5},
    }
    html = "\n".join(tda_error_html(old, "t"))
    assert "predates tda_mae" in html and "every block" in html
    assert "not shown beside this run" in html
    assert "not recorded" in "".join(spine_html(old))
