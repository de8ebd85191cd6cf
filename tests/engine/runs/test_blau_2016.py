"""Blau-index bias on the 2,016-cell schema: PPMF uploads and generated populations (TDA Table 13).

Before, ``blau_bias`` was written only for schemas with a RACEETH attribute (the RI samples); the
eight groups are now folded from HISPANIC × CENRACE.
"""

from __future__ import annotations

import numpy as np

from engine.data.samples import load_topdown_sample
from engine.dp.presets import load_topdown_preset
from engine.metrics.blau import raceeth_counts_from_histogram
from engine.runs.data_source import DataSource
from engine.runs.options import TopDownRunOptions
from engine.runs.pipeline import execute
from engine.runs.spec import RunSpec


def test_a_ppmf_upload_gets_blau_bias_on_every_level() -> None:
    hist = load_topdown_sample("ppmf_perry_al")
    allocation = load_topdown_preset("topdown-2020-production")["persons"]
    spec = RunSpec(
        engine="topdown",
        data=DataSource(source="ppmf_perry_al"),
        config=allocation.to_dict(),
        seed=1,
        options=TopDownRunOptions(microdata=False, epl_boot=0),
    )
    metrics = execute(spec, data=hist).metrics
    bias = metrics["blau_bias"]
    assert {"Tract", "Block_Group", "Block"} <= set(bias)
    assert set(bias["Block"]) == {"1", "2", "3", "4", "5"}
    # PPMF records carry no housing-unit frame: the block quintiles rank every block, said so
    assert metrics["error_universe"]["universe"] == "all"
    # the groups sum to the persons of each block
    groups = raceeth_counts_from_histogram(hist)
    blocks = groups[groups["geolevel"] == "Block"]
    total = blocks.drop(columns=["geolevel", "geounit"]).to_numpy().sum()
    assert total == hist.total and np.isfinite(list(bias["Block"].values())).all()
