"""The one run pipeline behind the CLI, the app and the experiments (docs/science.md §8).

Map (what happens when you press Run or type ``phexplore run``)::

    RunSpec (spec.py)            a run as data: engine, data, allocation/config, seed, options,
       │                         backend; fingerprint = SHA-256 of its canonical JSON
       ▼
    execute (pipeline.py)        with a RunControl (control.py): progress and cancel for every face
       ├─ load                   topdown.load / phsafe.load            (engine.data)
       ├─ measure                topdown.measure (spine_choice.resolve_spine) /
       │                         phsafe.measure_and_estimate
       ├─ estimate               units of work on an Executor         (engine.core.executors)
       ├─ metrics                topdown_metrics.metrics (+ spine.spine_sections,
       │                         tabulation.tda_sections) /
       │                         phsafe.error_analysis + phsafe.metrics_payload (engine.metrics)
       ▼
    write (pipeline.py → writers.py)   the run's files; metrics.json records the spec and the noise

    experiments.py               grids of RunSpecs (budgets × seeds) through ``execute``

Faces: :mod:`phexplore.cli` parses arguments into a :class:`RunSpec`; :mod:`phexplore.api` (the
app-facing API) builds one from the widgets and runs it in a thread with a :class:`RunControl`.
Engines (:mod:`engine.topdown`, :mod:`engine.phsafe`) return estimates and diagnostics only and
never import this package or :mod:`engine.metrics`.
"""
