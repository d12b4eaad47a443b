"""Secrets in bench configuration: never written out, never printed.

Every header value, the API key and a password inside a URL are replaced by ``<redacted>`` in
``summary.json``, ``--json`` output and messages. Credentials in a URL
(``http://user:password@host``) become a Basic ``Authorization`` header, so a URL carries no
secret past the command line.
"""

from __future__ import annotations

import base64

from yarl import URL

__all__ = ["REDACTED", "credentials_header", "redact_headers", "redact_url", "strip_credentials"]

REDACTED = "<redacted>"


def redact_url(url: str) -> str:
    """``http://user:secret@host/`` → ``http://user:<redacted>@host/`` (other URLs unchanged)."""
    try:
        u = URL(url)
    except (TypeError, ValueError):
        return url
    if u.password is None and u.user is None:
        return url
    return str(u.with_password(REDACTED if u.password is not None else None))


def redact_headers(headers: dict[str, str]) -> dict[str, str]:
    """Header names kept, every value replaced: a custom header may carry a token."""
    return {name: REDACTED for name in headers}


def strip_credentials(url: str) -> tuple[str, str | None, str | None]:
    """The URL without ``user:password@``, and the user and password it carried."""
    u = URL(url)
    if u.user is None and u.password is None:
        return url, None, None
    return str(u.with_user(None)), u.user, u.password


def credentials_header(user: str | None, password: str | None) -> str:
    """The Basic ``Authorization`` value for URL credentials."""
    token = base64.b64encode(f"{user or ''}:{password or ''}".encode()).decode("ascii")
    return f"Basic {token}"
