"""One naming function for tables, levels and columns."""

from __future__ import annotations

import pandas as pd

from phexplore.app.naming import cell_label, column_label, display_frame, level_label, table_label


def test_tables_levels_and_columns_are_words() -> None:
    assert table_label("PH1_num") == "PH1 numerator"
    assert table_label("PH5_denom") == "PH5 denominator"
    assert table_label("PH3") == "PH3"
    assert level_label("state_A-G") == "State · A-G"
    assert cell_label("PH8_denom", "usa_*") == "PH8 denominator · Nation · Unattributed"
    assert column_label("moe90") == "90% MOE (persons)"
    assert column_label("some_new_thing") == "Some new thing"


def test_display_frame_renames_values_and_columns() -> None:
    frame = pd.DataFrame({"table": ["PH1_num"], "level": ["state_*"], "mae_noise": [1.0]})
    shown = display_frame(frame, extra={"mae_noise": "Noise"})
    assert list(shown.columns) == ["Table", "Level", "Noise"]
    assert shown.iloc[0].tolist() == ["PH1 numerator", "State · Unattributed", 1.0]
    assert not any("_" in c for c in display_frame(frame).columns)
