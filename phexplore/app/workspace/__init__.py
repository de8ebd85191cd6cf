"""The app's workspace: scenarios, run records, uploads and generated populations on disk, indexed by
SQLite, so that a reload, a second tab or a server restart finds the same work (docs/app.md,
"Workspace").

:mod:`~phexplore.app.workspace.location` (where it lives: ``--workspace``,
``$PHEXPLORE_WORKSPACE``, the user's data directory), :mod:`~phexplore.app.workspace.index` (the
SQLite index, its schema and version), :mod:`~phexplore.app.workspace.run_folders` (a run's record
folder), :mod:`~phexplore.app.workspace.store` (the :class:`~.store.Workspace` itself). This
package imports none of them, so the CLI's ``--help`` can read the location cheaply.
"""
