"""Run page data picker: shipped samples, validated uploads and the generated population.

Loading and validation are the data layer's, through :mod:`phexplore.api`; every problem is
listed per engine + data choice and shown only while that choice is on screen.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import streamlit as st

from phexplore import api as R
from phexplore.api.budgets import PHExploreError
from phexplore.app import state as S

if TYPE_CHECKING:
    from phexplore.api import BlockHistogram

UPLOAD_HIST = "run_upload_hist"
UPLOAD_CEF = "run_upload_cef"
KEEP_PROBLEM = "run_upload_keep_problem"
"""Session key: why a validated upload could not be kept in the workspace."""
UPLOAD_CHECK = "run_upload_check"
"""``(engine:source:choice, summary lines, seconds)`` of the last upload checked."""
UPLOAD_PROBLEMS = "run_upload_problems"
"""``{engine:source:choice: problem lines}``: a data problem belongs to its engine and data choice
and is shown only while that choice is on screen."""


def _set_problems(key: str, lines: list[str] | None) -> None:
    """Keep (or clear) the data problems of one engine + data choice."""
    s = st.session_state
    problems = dict(s.get(UPLOAD_PROBLEMS) or {})
    if lines:
        problems[key] = lines
    else:
        problems.pop(key, None)
    s[UPLOAD_PROBLEMS] = problems


def _validate_topdown_upload() -> None:
    """Check the uploads as ``phexplore data check`` does; keep the histogram or the problems."""
    s = st.session_state
    kind = s["run_upload_kind"]
    key = f"topdown:upload:{kind}"
    _set_problems(key, None)
    s.pop(UPLOAD_HIST, None)
    s.pop(UPLOAD_CHECK, None)
    files = s.get("run_upload_files") or []
    check = R.check_topdown_upload(kind, files)
    s[UPLOAD_CHECK] = (key, check.summary(), check.load_s)
    if check.ok:
        s[UPLOAD_HIST] = (check.data["topdown"], ", ".join(f.name for f in files), kind)
        _keep_upload("topdown", kind, files)
    else:
        _set_problems(key, check.problem_lines())


def _keep_upload(engine: str, kind: str, files: list[Any]) -> None:
    """Keep a validated upload in the workspace by content hash (offered again after a reload);
    a workspace that cannot take it is said, the loaded data stays usable."""
    s = st.session_state
    try:
        S.workspace().store_upload(engine, kind, [(f.name, f.getvalue()) for f in files])
        s.pop(KEEP_PROBLEM, None)
    except (PHExploreError, OSError) as exc:
        s[KEEP_PROBLEM] = (
            f"The upload could not be kept in the workspace ({exc}); it is usable until the page "
            "is reloaded."
        )


def _use_kept_upload(engine: str) -> None:
    """Load the kept upload chosen in the list (checked against its recorded hashes)."""
    s = st.session_state
    chosen = s.get(f"run_kept_{engine}")
    entry = next((u for u in S.workspace().uploads(engine) if u.sha256 == chosen), None)
    if entry is None:
        return
    problem_key = f"topdown:upload:{entry.kind}" if engine == "topdown" else "phsafe:upload"
    _set_problems(problem_key, None)
    try:
        files = [_Named(name, data) for name, data in S.workspace().upload_files(entry)]
    except PHExploreError as exc:
        _set_problems(problem_key, R.problem_lines(exc))
        return
    if engine == "topdown":
        check = R.check_topdown_upload(entry.kind, files)
        if check.ok:
            s["run_upload_kind"] = entry.kind
            s[UPLOAD_HIST] = (check.data["topdown"], entry.label, entry.kind)
    else:
        check = R.check_cef_upload(files)
        if check.ok:
            s[UPLOAD_CEF] = (check.data["phsafe"], entry.label)
    if not check.ok:
        _set_problems(problem_key, check.problem_lines())


class _Named(io.BytesIO):
    """A kept upload's bytes under its file name (what the loaders read, like an upload)."""

    def __init__(self, name: str, data: bytes) -> None:
        super().__init__(data)
        self.name = name


def _kept_uploads(engine: str) -> None:
    """The uploads kept in the workspace for ``engine``: pick one to use it again."""
    kept = S.workspace().uploads(engine)
    if not kept:
        return
    labels = {u.sha256: f"{u.label} ({u.kind}, {sum(f[2] for f in u.files):,} bytes)" for u in kept}
    c1, c2 = st.columns([3, 1])
    c1.selectbox(
        "Or an earlier upload (kept in the workspace)",
        list(labels),
        format_func=labels.get,
        key=f"run_kept_{engine}",
        persist_state="session",
        help="Uploads that passed validation are kept in the workspace by content hash, so a "
        "reload or another tab can use them again without uploading.",
    )
    c2.button(
        "Use it",
        key=f"run_use_kept_{engine}",
        on_click=S.guarded(_use_kept_upload, "run: use kept upload"),
        args=(engine,),
    )


def _validate_cef_upload() -> None:
    """Check the CEF uploads as ``phexplore data check`` does."""
    s = st.session_state
    _set_problems("phsafe:upload", None)
    s.pop(UPLOAD_CEF, None)
    s.pop(UPLOAD_CHECK, None)
    files = s.get("run_cef_files") or []
    check = R.check_cef_upload(files)
    s[UPLOAD_CHECK] = ("phsafe:upload", check.summary(), check.load_s)
    if check.ok:
        s[UPLOAD_CEF] = (check.data["phsafe"], ", ".join(f.name for f in files))
        _keep_upload("phsafe", "cef", files)
    else:
        _set_problems("phsafe:upload", check.problem_lines())


def _checked(key: str) -> None:
    """What the checked upload of ``key`` is and how long reading it took (as the CLI says)."""
    held = st.session_state.get(UPLOAD_CHECK)
    if held is not None and held[0] == key:
        _, lines, seconds = held
        st.caption(" · ".join(lines) + f" — read and checked in {seconds:.2f} s")


def _problems(key: str) -> None:
    """The data problems of the engine + data choice ``key`` (none of another choice), sorted by
    file and row as ``phexplore data check`` lists them."""
    lines = (st.session_state.get(UPLOAD_PROBLEMS) or {}).get(key)
    if lines:
        shown = "\n".join(f"- {line}" for line in lines[:30])
        more = f"\n- … and {len(lines) - 30} more" if len(lines) > 30 else ""
        st.error(f"The data did not pass validation ({len(lines)} problem(s)):\n\n{shown}{more}")
    if key.endswith(":upload") or ":upload:" in key:
        _checked(key)


@dataclass
class TopDownData:
    """The Data column's choices: the loaded histogram (None until valid) and the subset."""

    hist: BlockHistogram | None
    data_label: str
    sample: str | None
    level: str | None
    units: list[str]
    folder: str | None = None
    """A generated population's folder (its data can be read again there for a replay)."""
    n_blocks: int = 0
    """Blocks of the run (the subset's)."""


def _pick_sample(
    kind: str, key: str, help_text: str, load: Callable[[str], Any]
) -> tuple[str, Any | None]:
    """A shipped-sample selectbox; returns the name and the loaded data (None + listed problems)."""
    samples = R.samples_of(kind)
    sample = st.selectbox(
        "Sample",
        list(samples),
        format_func=lambda n: f"{n} — {samples[n]}",
        key=key,
        persist_state="session",
        help=help_text,
    )
    try:
        loaded = load(sample)
        _set_problems(f"{kind}:sample:{sample}", None)
        return sample, loaded
    except PHExploreError as exc:
        _set_problems(f"{kind}:sample:{sample}", R.problem_lines(exc))
        return sample, None


def _generated_controls(prefix: str) -> str | None:
    """Persons, states and seed of a generated population; its folder once generated."""
    s = st.session_state
    low, high = R.GENERATED_PERSONS_RANGE
    c1, c2, c3 = st.columns([2, 2, 1])
    persons = c1.number_input(
        f"Persons ({low:,} – {high:,})",
        min_value=low,
        max_value=high,
        value=100_000,
        step=10_000,
        key=f"{prefix}_gen_persons",
        persist_state="session",
        help="Size of the synthetic population (the same persons feed TopDown and PHSafe). "
        "Larger ones: `phexplore generate population`.",
    )
    states = c2.text_input(
        "States (postal codes)",
        value="RI",
        key=f"{prefix}_gen_states",
        persist_state="session",
        help="e.g. RI or RI CT; empty = all 50 states and DC in proportion to 2010 populations.",
    )
    seed = c3.number_input(
        "Seed", min_value=0, value=1, step=1, key=f"{prefix}_gen_seed", persist_state="session"
    )
    wanted = tuple(x.strip().upper() for x in states.replace(",", " ").split() if x.strip())
    key = (int(persons), wanted, int(seed))
    workspace = S.workspace()
    if st.button("Generate", key=f"{prefix}_gen_go"):
        try:
            s["run_generated"] = (key, R.generated_population(*key, workspace))
        except PHExploreError as exc:
            st.error(str(exc))
    held = s.get("run_generated")
    if held is not None and held[0] == key:
        return held[1]
    kept = R.kept_population(*key, workspace)
    if kept is not None:  # generated earlier in this workspace (before a reload, in another tab)
        s["run_generated"] = (key, kept)
        return kept
    st.caption("Choose the size and press Generate (about 4 s per million persons).")
    return None


def topdown_data() -> TopDownData:
    """Data column: shipped sample or validated upload, and the subset to run on."""
    s = st.session_state
    st.markdown("**Data**")
    source = st.radio(
        "Source",
        ["sample", "upload", "generated"],
        format_func={
            "sample": "Shipped sample",
            "upload": "Upload a file",
            "generated": "Generated population",
        }.get,
        horizontal=True,
        key="run_td_source",
        persist_state="session",
        help="Shipped public or synthetic samples, or your own files in a supported layout.",
    )
    hist, data_label, sample, folder = None, "", None, None
    problem_key = ""
    if source == "sample":
        samples = R.samples_of("topdown")
        if s.get("run_td_sample") not in samples:
            s["run_td_sample"] = "ri2010" if "ri2010" in samples else next(iter(samples))
        sample, hist = _pick_sample(
            "topdown",
            "run_td_sample",
            "Public, non-confidential test data shipped with PHExplore.",
            R.topdown_sample,
        )
        data_label = sample if hist is not None else ""
        problem_key = f"topdown:sample:{sample}"
    elif source == "generated":
        folder = _generated_controls("run_td")
        if folder is not None:
            hist = R.generated_topdown(folder)
            persons, states, seed = s["run_generated"][0]
            data_label = f"generated {persons:,} ({' '.join(states) or 'US'}, seed {seed})"
            st.success(
                f"{hist.n_blocks:,} blocks, {hist.total:,} persons, with housing units and GQ"
            )
    else:
        st.selectbox(
            "File type",
            list(R.TOPDOWN_UPLOAD_KINDS),
            format_func=R.TOPDOWN_UPLOAD_KINDS.get,
            key="run_upload_kind",
            persist_state="session",
            help="The layout of your file; the data layer checks every row and column and lists each problem.",
        )
        st.file_uploader(
            "Files",
            type=["csv", "txt", "pl", "gz", "json"],
            accept_multiple_files=True,
            key="run_upload_files",
            help="Checked as `phexplore data check` checks a file: every problem is listed with its "
            "file, row and column.",
        )
        st.button(
            "Validate upload",
            on_click=S.guarded(_validate_topdown_upload, "run: validate_topdown_upload"),
        )
        _kept_uploads("topdown")
        if s.get(KEEP_PROBLEM):
            st.warning(s[KEEP_PROBLEM])
        problem_key = f"topdown:upload:{s.get('run_upload_kind')}"
        loaded = s.get(UPLOAD_HIST)
        if loaded is not None and loaded[2] == s.get("run_upload_kind"):
            hist, data_label = loaded[0], loaded[1]
            st.success(
                f"Loaded {data_label}: {hist.n_blocks:,} blocks, {hist.total:,} persons "
                f"({hist.schema.name} schema)"
            )
    _problems(problem_key)
    level, units, n_blocks = None, [], 0
    if hist is not None:
        choices = [lv for lv in hist.levels[1:-1]]
        options = ["(all data)", *choices]
        # Many cells per block (the 2,016-cell schema) → start from the finest level.
        default_level = (choices[0] if hist.schema.size <= 64 else choices[-1]) if choices else None
        level_key = f"run_td_subset_level_{data_label}"
        if s.get(level_key) not in options:
            s[level_key] = default_level or options[0]
        level = st.selectbox(
            "Run on a subset (geolevel)",
            options,
            key=level_key,
            persist_state="session",
            help="A small subset (one county, a few tracts) runs in seconds; all of RI takes "
            "minutes. Run time grows with blocks × cells per block.",
        )
        if level == "(all data)":
            level = None
        else:
            sizes = R.subset_units(hist, level)
            default = [str(sizes.index[0])]
            key = f"run_td_units_{data_label}_{level}"
            if key not in s:
                s[key] = default
            units = st.multiselect(
                f"{level}s to include",
                [str(u) for u in sizes.index],
                format_func=lambda u, z=sizes: f"{u} ({int(z[u]):,} blocks)",
                key=key,
                persist_state="session",
                help="Geounits whose blocks are run; the smallest comes first.",
            )
        n_blocks = (
            int(R.subset_units(hist, level).loc[units].sum()) if level and units else hist.n_blocks
        )
        st.caption(
            f"Run size: {n_blocks:,} blocks × {hist.schema.size:,} cells per block "
            f"({hist.schema.name} schema); time estimate beside the Run button."
        )
    return TopDownData(hist, data_label, sample, level, list(units), folder, n_blocks)


@dataclass(frozen=True)
class ReadAgain:
    """Where a run's data can be read again for a replay: a shipped sample or a generated
    population's folder (neither: an upload, held only in this session)."""

    sample: str | None = None
    folder: str | None = None


def phsafe_data() -> tuple[Any | None, str, float | None, ReadAgain]:
    """Data column of a PHSafe run: shipped sample, validated upload or generated population.

    Returns (CEF extract or None until valid, data label, sample scale or None, where the data
    can be read again for a replay).
    """
    s = st.session_state
    extract, data_label, scale, where = None, "", None, ReadAgain()
    st.markdown("**Data (CEF extract)**")
    source = st.radio(
        "Source",
        ["sample", "upload", "generated"],
        format_func={
            "sample": "Shipped sample",
            "upload": "Upload persons/units/geo CSV",
            "generated": "Generated population",
        }.get,
        horizontal=True,
        key="run_ph_source",
        persist_state="session",
        help="Shipped public or synthetic samples, or your own files in a supported layout.",
    )
    if source == "sample":
        sample, loaded = _pick_sample(
            "phsafe", "run_ph_sample", "Synthetic or public records only.", R.phsafe_sample
        )
        if loaded is not None:
            extract, data_label, scale = loaded, sample, R.sample_scale(sample)
            where = ReadAgain(sample=sample)
    elif source == "generated":
        folder = _generated_controls("run_ph")
        if folder is not None:
            extract = R.generated_cef(folder)
            where = ReadAgain(folder=folder)
            persons, states, seed = s["run_generated"][0]
            data_label = f"generated {persons:,} ({' '.join(states) or 'US'}, seed {seed})"
    else:
        st.file_uploader(
            "CEF extract files (persons, units, geo)",
            type=["csv", "gz"],
            accept_multiple_files=True,
            key="run_cef_files",
            help="Three files named persons…, units… and geo… (CSV, optionally gzip-compressed).",
        )
        st.button(
            "Validate upload",
            on_click=S.guarded(_validate_cef_upload, "run: validate_cef_upload"),
            key="run_cef_validate",
        )
        _kept_uploads("phsafe")
        if s.get(KEEP_PROBLEM):
            st.warning(s[KEEP_PROBLEM])
        if UPLOAD_CEF in s:
            extract, data_label = s[UPLOAD_CEF]
            st.success(f"Loaded {data_label}")
    _problems(f"phsafe:sample:{s.get('run_ph_sample')}" if source == "sample" else "phsafe:upload")
    return extract, data_label, scale, where
