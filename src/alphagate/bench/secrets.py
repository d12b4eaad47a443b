"""Secrets in bench configuration: never written out, never printed.

Every header value, the API key and a password inside a URL are replaced by ``<redacted>`` in
``summary.json``, ``--json`` output and messages. Credentials in a URL
(``http://user:password@host``) become a Basic ``Authorization`` header, so a URL carries no
secret past the command line.
"""

from __future__ import annotations

import base64

from yarl import URL

from alphagate.core.errors import ConfigError

__all__ = [
    "REDACTED",
    "auth_headers",
    "credentials_header",
    "redact_headers",
    "redact_url",
    "strip_credentials",
]

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


def auth_headers(
    header_flags: list[str], api_key: str | None, targets: tuple[tuple[str, str], ...]
) -> tuple[dict[str, str], tuple[tuple[str, str], ...]]:
    """``NAME:VALUE`` header flags, and URL credentials turned into a Basic Authorization header.

    Returns the headers and the targets with their credentials removed. Raises ConfigError for a
    malformed header, an empty key, credentials given twice, or a URL that is not http(s).
    """
    if api_key is not None and not api_key.strip():
        raise ConfigError(
            "the API key is empty; omit it (and unset ALPHAGATE_API_KEY) to send none"
        )
    headers: dict[str, str] = {}
    for h in header_flags:
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            raise ConfigError(f"{h.split(':')[0][:20]!r}…: not NAME:VALUE")
        headers[name.strip()] = value.strip()
    clean = []
    for name, url in targets:
        try:
            bare, user, password = strip_credentials(url)
        except ValueError:
            raise ConfigError(f"the {name} URL {redact_url(url)!r} is not a valid URL") from None
        if not bare.startswith(("http://", "https://")):
            raise ConfigError(f"the {name} URL must start with http:// or https://")
        if user is not None or password is not None:
            if api_key is not None:
                raise ConfigError("give credentials in the URL or an API key, not both")
            headers["Authorization"] = credentials_header(user, password)
        clean.append((name, bare))
    return headers, tuple(clean)
