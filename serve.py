"""Serve the PHExplore app with its Host check: ``streamlit run serve.py`` (what ``phexplore app``
and ``make run`` do).

``app.py`` is the Streamlit script; this launcher wraps it in Streamlit's ASGI app (``st.App``) with
Starlette's ``TrustedHostMiddleware``, so every HTTP request and WebSocket whose ``Host`` is not a
loopback name or a name the user configured gets HTTP 400 before Streamlit sees it — a web page
using DNS rebinding cannot drive a running app (:mod:`phexplore.app.hosts`, docs/reliability.md).
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware

from phexplore.app.hosts import hosts_from_env

APP_SCRIPT = Path(__file__).resolve().parent / "app.py"

app = st.App(
    APP_SCRIPT,
    middleware=[
        Middleware(TrustedHostMiddleware, allowed_hosts=hosts_from_env(), www_redirect=False)
    ],
)
