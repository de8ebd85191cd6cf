"""The library's foundations, used by every other package of ``engine``.

:mod:`.errors` (typed, user-facing errors), :mod:`.numbers` (typed numbers and their documented
ranges), :mod:`.strict_json` (one strict JSON reader and writer), :mod:`.files` (reading a user's
file safely) and :mod:`.sniff` (what a delimited input file holds), :mod:`.output_folder` and
:mod:`.manifest` (atomic outputs with a manifest, and their checking readers), :mod:`.executors`
(where units of work run) and :mod:`.blas_threads` (BLAS thread limits for solver workers).
"""
