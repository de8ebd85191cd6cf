"""Typed errors shared by the analytic core, the engines, the CLI and the app.

Every error a user can cause derives from :class:`PHExploreError`; its message says what is wrong,
where, and how to fix it. The CLI prints it without a traceback; the app renders it in place.
"""

from __future__ import annotations


class PHExploreError(Exception):
    """Base class of every user-facing error."""


class ValidationError(PHExploreError, ValueError):
    """A parameter, allocation or configuration is invalid (the message names the offending item)."""
