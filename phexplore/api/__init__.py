"""The app-facing API: what the Streamlit pages and ``app.py`` call to load data and run engines.

Like :mod:`phexplore.cli`, this is a *wiring* package: it imports ``engine`` (the run pipeline
:mod:`engine.runs`, data loading in :mod:`engine.data`, metrics in :mod:`engine.metrics`). Pages
import this package, never :mod:`phexplore.cli` or ``engine`` (import-linter contracts in
pyproject.toml), so the typed records of a run description are re-exported here: the Run page
builds :class:`RunSpec` from :class:`TopDownRunOptions` / :class:`PHSafeRunOptions` and a
:func:`app_data_source`, as the CLI builds it from its arguments.

Modules: :mod:`~phexplore.api.data` (samples, uploads, subsets), :mod:`~phexplore.api.jobs` (a run
in a thread with the pipeline's progress and cancel, the runs kept in the session),
:mod:`~phexplore.api.run_choices` (what the Run page offers: samplers, EPL settings, error
universe, spine, backend, data source), :mod:`~phexplore.api.runs` (a run description executed by
:func:`engine.runs.pipeline.execute`), :mod:`~phexplore.api.run_records` (a finished run's record),
:mod:`~phexplore.api.results` (EPL curves, headline numbers, downloads),
:mod:`~phexplore.api.replay` (a recorded run again through the same pipeline),
:mod:`~phexplore.api.tda_view` (TDA's figures beside the published tables). Pages use them as
``from phexplore import api as R`` and ``R.topdown_work(spec, session, hist)``.
"""

from __future__ import annotations

from engine.data.histogram import BlockHistogram
from engine.metrics.srs import DEFAULT_FRACTIONS as SRS_FRACTIONS
from engine.runs.options import PHSafeRunOptions, TopDownRunOptions
from engine.runs.spec import RunSpec
from engine.runs.topdown_metrics import bootstrap_rng
from phexplore.api.data import (
    GENERATED_PERSONS_RANGE,
    PHSAFE_PLAN,
    TOPDOWN_UPLOAD_KINDS,
    RunEstimate,
    check_cef_upload,
    check_topdown_upload,
    generated_cef,
    generated_population,
    generated_topdown,
    kept_population,
    phsafe_sample,
    problem_lines,
    run_estimate,
    samples_of,
    subset,
    subset_units,
    topdown_cost_sentence,
    topdown_sample,
)
from phexplore.api.jobs import (
    BOARD,
    JOB_KEY,
    MESSAGE_KEY,
    RunJob,
    RunRecord,
    collect_finished,
    follow,
    start_job,
)
from phexplore.api.limits import APP_MAX_ROWS, CSV_CONVERSION_MAX_ROWS
from phexplore.api.replay import (
    SAME_SEED_NOTE,
    RecordedRun,
    recorded_in_file,
    recorded_of,
    replay_note,
    replay_outcome,
    replay_work,
)
from phexplore.api.results import (
    budget_caption,
    epl_curves,
    finest_level,
    headline_error,
    metrics_bytes,
    pf_reference_epl,
    prediction_sample_sentence,
    run_epl_settings,
    tidy_bytes,
)
from phexplore.api.run_choices import (
    EPL_BOOT,
    EPL_MULTIPLIER,
    EPL_MULTIPLIER_RANGE,
    EPL_PERCENTILE,
    EPL_PERCENTILE_RANGE,
    ERROR_UNIVERSE_HELP,
    ERROR_UNIVERSES,
    NOISE_HELP,
    NOISE_METHODS,
    PRESET_SPINE,
    SOLVER_HELP,
    SOLVERS,
    SRS_HELP,
    TRUTH_NOTE,
    app_backend,
    app_data_source,
    data_has_places,
    epl_settings,
    phsafe_run_config,
    sample_scale,
    spark_backend_options,
    spine_label,
)
from phexplore.api.run_folders import (
    FolderFile,
    folder_changed,
    folder_files,
    folder_record,
)
from phexplore.api.runs import SessionRun, Sweep, phsafe_work, topdown_work
from phexplore.api.tda_view import (
    PER_CELL_DEFINITION,
    TDA_DEFINITION,
    TDAView,
    spine_caption,
    tda_view,
    universe_caption,
    universe_tidy,
)

__all__ = [
    "kept_population",
    "BOARD",
    "PHSAFE_PLAN",
    "RunEstimate",
    "SRS_FRACTIONS",
    "run_estimate",
    "follow",
    "ERROR_UNIVERSES",
    "ERROR_UNIVERSE_HELP",
    "PRESET_SPINE",
    "data_has_places",
    "spine_label",
    "PER_CELL_DEFINITION",
    "TDA_DEFINITION",
    "TDAView",
    "spine_caption",
    "tda_view",
    "universe_caption",
    "universe_tidy",
    "SAME_SEED_NOTE",
    "RecordedRun",
    "RunSpec",
    "TopDownRunOptions",
    "PHSafeRunOptions",
    "SessionRun",
    "Sweep",
    "app_backend",
    "app_data_source",
    "phsafe_run_config",
    "recorded_in_file",
    "recorded_of",
    "replay_note",
    "replay_outcome",
    "replay_work",
    "APP_MAX_ROWS",
    "CSV_CONVERSION_MAX_ROWS",
    "FolderFile",
    "folder_changed",
    "folder_files",
    "folder_record",
    "GENERATED_PERSONS_RANGE",
    "generated_cef",
    "generated_population",
    "generated_topdown",
    "topdown_cost_sentence",
    "spark_backend_options",
    "EPL_BOOT",
    "EPL_MULTIPLIER",
    "EPL_MULTIPLIER_RANGE",
    "EPL_PERCENTILE",
    "EPL_PERCENTILE_RANGE",
    "JOB_KEY",
    "MESSAGE_KEY",
    "NOISE_HELP",
    "NOISE_METHODS",
    "SOLVER_HELP",
    "SOLVERS",
    "SRS_HELP",
    "TOPDOWN_UPLOAD_KINDS",
    "TRUTH_NOTE",
    "BlockHistogram",
    "RunJob",
    "RunRecord",
    "bootstrap_rng",
    "budget_caption",
    "collect_finished",
    "epl_curves",
    "epl_settings",
    "pf_reference_epl",
    "prediction_sample_sentence",
    "run_epl_settings",
    "finest_level",
    "headline_error",
    "check_cef_upload",
    "check_topdown_upload",
    "metrics_bytes",
    "phsafe_sample",
    "phsafe_work",
    "problem_lines",
    "sample_scale",
    "samples_of",
    "start_job",
    "subset",
    "subset_units",
    "tidy_bytes",
    "topdown_sample",
    "topdown_work",
]
