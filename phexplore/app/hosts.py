"""Which Host names the local app answers: loopback names and the ones the user configures.

The app listens on 127.0.0.1 and refuses cross-origin WebSockets, but a web page can still reach it
through DNS rebinding: the page's own name (``evil.example``) is re-pointed at 127.0.0.1, so the
browser sends ``Host: evil.example:8501`` and ``Origin: http://evil.example:8501`` — same-origin,
from the browser's point of view. Checking the Host name closes that door: the app answers only
``127.0.0.1``, ``localhost`` and ``[::1]`` (any port) plus the names given with ``phexplore app
--allow-host NAME`` or in ``$PHEXPLORE_ALLOWED_HOSTS`` (comma-separated). ``serve.py`` enforces the
list for every HTTP request and WebSocket with Starlette's ``TrustedHostMiddleware`` (HTTP 400
"Invalid host header" otherwise), and passes it to Streamlit's own WebSocket check
(``server.allowedHosts``). docs/app.md ("Serving") and docs/reliability.md say how to add a name.
"""

from __future__ import annotations

import ipaddress
import os
import re
from collections.abc import Iterable, Mapping

from engine.core.errors import ValidationError

LOOPBACK_HOSTS: tuple[str, ...] = ("127.0.0.1", "localhost", "[::1]")
"""Host names the app always answers (loopback; any port)."""
HOSTS_ENV = "PHEXPLORE_ALLOWED_HOSTS"
"""Environment variable with further host names the app answers (comma-separated)."""
_NAME = re.compile(
    r"^(?=.{1,253}$)(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$"
)


def check_host_name(value: str, where: str = "--allow-host") -> str:
    """``value`` as a Host-header name the middleware compares with: a DNS name (optionally
    ``*.example.org`` for its subdomains), an IPv4 address or a bracketed IPv6 address; lower case.
    A scheme, port, path or ``*`` alone is refused (ports never matter)."""
    text = str(value).strip().lower().rstrip(".")
    if text.startswith("[") and text.endswith("]"):
        try:
            ipaddress.IPv6Address(text[1:-1])
        except ValueError:
            pass
        else:
            return text
    else:
        try:
            ipaddress.IPv4Address(text)
        except ValueError:
            if _NAME.match(text):
                return text
        else:
            return text
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        raise ValidationError(
            f"{where} {value!r} is not a host name; give a name as a browser's address bar shows "
            "it, without scheme or port (e.g. myhost.example.org, 192.168.1.20, [fe80::1])"
        ) from None
    return f"[{text}]"  # a bare IPv6 address: the Host header brackets it


def allowed_hosts(extra: Iterable[str] = (), *, bind_address: str | None = None) -> list[str]:
    """The loopback names, ``bind_address`` when it is a specific address or name (not a wildcard
    such as ``0.0.0.0``), and ``extra`` — each checked, without repeats."""
    names = list(LOOPBACK_HOSTS)
    candidates = list(extra)
    if bind_address and bind_address.strip() not in ("0.0.0.0", "::", "[::]", ""):
        candidates.insert(0, bind_address)
    for value in candidates:
        name = check_host_name(value)
        if name not in names:
            names.append(name)
    return names


def hosts_from_env(environ: Mapping[str, str] | None = None) -> list[str]:
    """:func:`allowed_hosts` with the names of ``$PHEXPLORE_ALLOWED_HOSTS`` (what ``serve.py``
    enforces; ``phexplore app`` sets the variable from ``--host`` and ``--allow-host``)."""
    env = os.environ if environ is None else environ
    raw = env.get(HOSTS_ENV, "")
    return allowed_hosts([part for part in raw.split(",") if part.strip()], bind_address=None)


def streamlit_host_names(hosts: Iterable[str]) -> list[str]:
    """The same names as Streamlit's ``server.allowedHosts`` spells them (IPv6 without brackets)."""
    return [h[1:-1] if h.startswith("[") else h for h in hosts]
