"""Run ``phexplore`` with a slowed-down TopDown writer, for the interrupt and concurrency tests.

The real CLI entry point runs in this (real) process; only
:func:`engine.runs.writers.write_topdown` is wrapped so that, after writing the real files into
the staging folder, it prints ``WRITING`` and waits ``PHEXPLORE_TEST_PAUSE`` seconds (or until
the file named by ``PHEXPLORE_TEST_RELEASE`` appears) — a window in which the test sends SIGINT or SIGTERM, or starts a second run against the same ``--out``.

Ctrl-C is restored first, as in a terminal: a test suite started as a background job (``make test &``
from a script) passes on SIGINT ignored, and Python then never installs its KeyboardInterrupt
handler — the SIGINT case would test the shell, not the CLI.
"""

from __future__ import annotations

import os
import signal
import sys
import time


def main() -> int:
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    import engine.runs.writers as writers  # the write stage of the one run pipeline
    from phexplore.cli import main as cli_main

    real = writers.write_topdown
    pause = float(os.environ.get("PHEXPLORE_TEST_PAUSE", "30"))

    def slow(*args, **kwargs):  # type: ignore[no-untyped-def]
        paths = real(*args, **kwargs)
        print("WRITING", flush=True)
        release = os.environ.get("PHEXPLORE_TEST_RELEASE")
        deadline = time.monotonic() + pause
        while time.monotonic() < deadline:  # until the test releases us (a file appears)
            if release and os.path.exists(release):
                break
            time.sleep(0.05)
        return paths

    writers.write_topdown = slow
    return cli_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
