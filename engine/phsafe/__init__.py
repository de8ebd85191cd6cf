"""PHSafe (Sexton et al. 2024, "PHS"): the S-DHC tables PH1–PH8 under zCDP or pure DP.

Entry points: :func:`engine.phsafe.release.run_phsafe` (the release: truncate, join, count,
measure, post-process; the app and the CLI call it),
:class:`engine.phsafe.config.PHSafeConfig` (the official config.json) and
:func:`engine.phsafe.inputs.load_inputs`. Module map and decisions: ``docs/phsafe.md``.
"""
