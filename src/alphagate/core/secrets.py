"""Secrets the client holds — API keys, header values, credentials and keys inside URLs — kept
out of every file, output and message.

:func:`redact` is the one function every URL, error body and exception message goes through
before it is printed, logged or written. It replaces

- in every URL inside the text, the password of its userinfo (``http://user:<redacted>@host``)
  or a lone token (``http://<redacted>@host``), and the value of each query parameter that
  carries a key (:data:`SECRET_QUERY_KEYS`: ``?api_key=<redacted>``);
- every value a :class:`Secrets` collection holds — the API key, header values, URL passwords,
  tokens and query keys the client was given — in the forms a server or a library may echo it
  back: as given, percent-encoded, JSON-escaped, and the parts of an ``Authorization`` value
  (a Bearer token; a Basic credential's base64 and what it decodes to).

Credentials in a URL are never sent as userinfo (``urllib`` takes ``user:password@host`` for the
host): :func:`split_credentials` turns them into an ``Authorization`` header — Basic for
``user:password`` (RFC 7617), Bearer for a lone token (RFC 6750) — so that a URL carries no
credential past the command line. :func:`plain_http_warning` says when a key would go over
plain http to a host that is not this machine.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import quote, quote_plus, unquote, unquote_plus, urlsplit, urlunsplit

from alphagate.core.errors import ConfigError

__all__ = [
    "MIN_SECRET_CHARS",
    "REDACTED",
    "SECRET_QUERY_KEYS",
    "Secrets",
    "auth_headers",
    "check_header",
    "credentials_header",
    "join_path",
    "plain_http_warning",
    "redact",
    "redact_headers",
    "redact_url",
    "split_credentials",
    "strip_credentials",
]

REDACTED: Final = "<redacted>"

#: Query parameters whose value is a credential (compared lower-case, ``-`` read as ``_``): the
#: names API gateways and proxies take a key under (``?api_key=``, ``?key=``, ``?token=`` …).
SECRET_QUERY_KEYS: Final = frozenset(
    {
        "access_token",
        "api_key",
        "apikey",
        "api_token",
        "auth",
        "auth_token",
        "authorization",
        "bearer",
        "client_secret",
        "id_token",
        "key",
        "pass",
        "passwd",
        "password",
        "pwd",
        "refresh_token",
        "secret",
        "session",
        "sig",
        "signature",
        "token",
        "x_api_key",
    }
)

#: A secret shorter than this is not searched for in free text: replacing every "ab" of a
#: message would garble it, and a key that short is no secret anyway.
MIN_SECRET_CHARS: Final = 4

#: Headers the client sets itself whose values are not secrets (the rest are: a custom header
#: may carry a token).
_PLAIN_HEADERS: Final = frozenset(
    {"accept", "content-type", "content-length", "host", "user-agent", "connection"}
)

# scheme://authority — the authority stops where a path, query, fragment, space or quote starts
_URL_AUTHORITY = re.compile(
    r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<authority>[^\s/?#\"'<>]*)"
)
# ?name=value or &name=value (also ; as a separator)
_QUERY_PARAM = re.compile(
    r"(?P<name>[?&;](?P<key>(?:[A-Za-z0-9_.\-~]|%[0-9A-Fa-f]{2})+)=)(?P<value>[^&#\s\"'<>]*)"
)
# an Authorization-style value: SCHEME TOKEN
_SCHEME_VALUE = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9_\-]*)\s+(?P<token>\S.*)$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")  # RFC 9110 token


def _is_secret_key(name: str) -> bool:
    return unquote(name).lower().replace("-", "_") in SECRET_QUERY_KEYS


def _forms(value: str) -> set[str]:
    """The spellings of one secret that a server or a library may echo back."""
    out = {value, quote(value, safe=""), quote_plus(value), quote(value)}
    out.add(json.dumps(value)[1:-1])
    out.add(json.dumps(value, ensure_ascii=False)[1:-1])
    return {v for v in out if len(v) >= MIN_SECRET_CHARS}


def _header_secrets(value: str) -> set[str]:
    """A header value and its parts: a scheme's token, a Basic credential decoded."""
    out = {value.strip()}
    m = _SCHEME_VALUE.match(value.strip())
    if m:
        token = m.group("token").strip()
        out.add(token)
        if m.group("scheme").lower() == "basic":
            try:
                decoded = base64.b64decode(token, validate=True).decode("utf-8")
            except (binascii.Error, ValueError):
                decoded = ""
            if decoded:
                out.add(decoded)
                user, sep, password = decoded.partition(":")
                out.add(password if sep else user)
    return out


def _url_secrets(url: str) -> set[str]:
    """The password or lone token of a URL's userinfo and its query keys' values."""
    out: set[str] = set()
    m = _URL_AUTHORITY.search(url)
    if m and "@" in m.group("authority"):
        info = m.group("authority").rpartition("@")[0]
        user, sep, password = info.partition(":")
        for v in (password,) if sep else (user,):
            out |= {v, unquote(v)}
    for q in _QUERY_PARAM.finditer(url):
        if _is_secret_key(q.group("key")) and q.group("value"):
            v = q.group("value")
            out |= {v, unquote(v), unquote_plus(v)}
    return out


@dataclass(frozen=True)
class Secrets:
    """The secret values a client was given (never shown: ``repr`` leaves them out)."""

    values: frozenset[str] = field(default=frozenset(), repr=False)

    @classmethod
    def of(
        cls,
        *,
        urls: Iterable[str] = (),
        headers: Mapping[str, str] | None = None,
        api_key: str | None = None,
        values: Iterable[str] = (),
    ) -> Secrets:
        """Collect the secrets in ``urls`` (userinfo, query keys), every value of ``headers``
        but the client's own (Accept, Content-Type …), an API key and any other ``values``."""
        found: set[str] = set(values)
        for u in urls:
            found |= _url_secrets(u)
        for name, value in (headers or {}).items():
            if name.lower() not in _PLAIN_HEADERS:
                found |= _header_secrets(value)
        if api_key:
            found.add(api_key.strip())
        forms: set[str] = set()
        for v in found:
            forms |= _forms(v)
        return cls(frozenset(forms))

    def __or__(self, other: Secrets) -> Secrets:
        return Secrets(self.values | other.values)

    def __bool__(self) -> bool:
        return bool(self.values)

    def redact(self, text: str) -> str:
        """:func:`redact` with these secrets."""
        return redact(text, self)

    def redact_bytes(self, data: bytes) -> bytes:
        """``data`` (UTF-8, undecodable bytes kept as replacement characters) redacted."""
        text = data.decode("utf-8", "replace")
        clean = redact(text, self)
        return data if clean == text else clean.encode("utf-8")


def _authority(m: re.Match[str]) -> str:
    authority = m.group("authority")
    if "@" not in authority:
        return m.group(0)
    info, _, host = authority.rpartition("@")
    user, sep, _password = info.partition(":")
    shown = f"{user}:{REDACTED}" if sep else REDACTED
    return f"{m.group('scheme')}{shown}@{host}"


def _query(m: re.Match[str]) -> str:
    if not m.group("value") or not _is_secret_key(m.group("key")):
        return m.group(0)
    return m.group("name") + REDACTED


def redact(text: str, secrets: Secrets | None = None) -> str:
    """``text`` with every credential in a URL (userinfo password or token, query keys) and every
    value ``secrets`` holds replaced by ``<redacted>``. The one redaction: URLs, error bodies and
    exception messages all go through it before they are shown or written."""
    out = _URL_AUTHORITY.sub(_authority, text)
    out = _QUERY_PARAM.sub(_query, out)
    if secrets:
        # longest first: a key that contains another is replaced whole
        alternatives = sorted(secrets.values, key=len, reverse=True)
        out = re.sub("|".join(map(re.escape, alternatives)), REDACTED, out)
    return out


def redact_url(url: str) -> str:
    """A URL as it may be shown: ``http://user:<redacted>@host/?api_key=<redacted>``."""
    return redact(url)


def join_path(url: str, path: str) -> str:
    """``path`` appended to the URL's own path, its query string kept after it:
    ``http://h:8000/v1?api_key=K`` + ``/metrics`` → ``http://h:8000/v1/metrics?api_key=K``."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + path))


def redact_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Header names kept, every value replaced: a custom header may carry a token."""
    return {name: REDACTED for name in headers}


def strip_credentials(url: str) -> tuple[str, str | None, str | None]:
    """The URL without ``user:password@``, and the user and password it carried (decoded).
    Raises ValueError for a URL ``urllib`` cannot split (a bad port, an unclosed ``[``)."""
    parts = urlsplit(url)
    parts.port  # noqa: B018 — raises ValueError on a bad port
    if "@" not in parts.netloc:
        return url, None, None
    info, _, host = parts.netloc.rpartition("@")
    user, sep, password = info.partition(":")
    bare = urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    return bare, unquote(user), unquote(password) if sep else None


def credentials_header(user: str | None, password: str | None) -> str:
    """The ``Authorization`` value for URL credentials: Basic for ``user:password``, Bearer for
    a lone token (``http://TOKEN@host``)."""
    if password is None:
        return f"Bearer {user or ''}"
    token = base64.b64encode(f"{user or ''}:{password}".encode()).decode("ascii")
    return f"Basic {token}"


def split_credentials(url: str) -> tuple[str, dict[str, str]]:
    """The URL without userinfo, and the ``Authorization`` header its credentials become (empty
    without any). Raises :class:`ConfigError` (the URL redacted) for a URL that cannot be
    split."""
    try:
        bare, user, password = strip_credentials(url)
    except ValueError:
        raise ConfigError(f"{redact(url)!r} is not a valid URL") from None
    if user is None and password is None:
        return bare, {}
    if not (user or password):
        return bare, {}
    return bare, {"Authorization": credentials_header(user, password)}


def _unsendable(value: str) -> str | None:
    """Why HTTP cannot carry ``value`` in a header, or None."""
    if any((ord(c) < 32 and c != "\t") or ord(c) == 127 for c in value):
        return "a control character or line break"
    try:
        value.encode("latin-1")
    except UnicodeEncodeError:
        return "a character outside Latin-1 (a pasted '…' or curly quote?)"
    return None


def check_header(name: str, value: str) -> None:
    """Raise :class:`ConfigError` — never showing the value, nor a name that is not a header
    name — for a name that is not an HTTP token or a value HTTP cannot carry."""
    if not _HEADER_NAME.match(name):
        raise ConfigError(
            "a --header name is not a valid HTTP header name (NAME:VALUE; not shown: it may "
            "hold a secret)",
            "header",
        )
    why = _unsendable(value)
    if why is not None:
        raise ConfigError(
            f"the value of the --header {name!r} holds {why}, which an HTTP header cannot carry "
            "(NAME:VALUE; the value not shown)",
            "header",
        )


def auth_headers(
    header_flags: list[str], api_key: str | None, targets: tuple[tuple[str, str], ...]
) -> tuple[dict[str, str], tuple[tuple[str, str], ...]]:
    """``NAME:VALUE`` header flags, and URL credentials turned into an ``Authorization`` header.

    Returns the headers and the targets with their credentials removed (their query strings
    kept: a server may take its key there). Raises :class:`ConfigError` — never showing a
    secret — for a malformed header, an empty key, credentials given twice or differently for
    two targets, or a URL that is not http(s).
    """
    if api_key is not None and not api_key.strip():
        raise ConfigError(
            "the API key is empty; omit it (and unset ALPHAGATE_API_KEY) to send none", "api_key"
        )
    why = None if api_key is None else _unsendable(api_key.strip())
    if why is not None:
        raise ConfigError(
            f"the API key holds {why}, which an HTTP header cannot carry (the key not shown)",
            "api_key",
        )
    headers: dict[str, str] = {}
    for h in header_flags:
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            raise ConfigError(
                "a --header is not NAME:VALUE (its text not shown: it may hold a secret)", "header"
            )
        check_header(name.strip(), value.strip())
        headers[name.strip()] = value.strip()
    given_auth = any(k.lower() == "authorization" for k in headers)
    url_auth: str | None = None
    clean = []
    for name, url in targets:
        field = "url" if name == "default" else f"{name}_url"
        try:
            bare, auth = split_credentials(url)
        except ConfigError as exc:
            raise ConfigError(str(exc), field) from None
        if not bare.startswith(("http://", "https://")):
            raise ConfigError(f"the {name} URL must start with http:// or https://", field)
        if auth:
            if api_key is not None:
                raise ConfigError(
                    "give credentials in the URL or an API key (--api-key, $ALPHAGATE_API_KEY), "
                    "not both",
                    "api_key",
                )
            if given_auth:
                raise ConfigError(
                    "give credentials in the URL or an Authorization --header, not both", "header"
                )
            if url_auth is not None and url_auth != auth["Authorization"]:
                raise ConfigError(
                    "the URLs carry different credentials; the same headers go to every target",
                    field,
                )
            url_auth = auth["Authorization"]
        clean.append((name, bare))
    if url_auth is not None:
        headers["Authorization"] = url_auth
    return headers, tuple(clean)


def _is_loopback(host: str) -> bool:
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def plain_http_warning(
    url: str, headers: Mapping[str, str], api_key: str | None = None
) -> str | None:
    """Why sending ``headers`` (or the key) to ``url`` exposes it — plain http to a host that is
    not this machine — or None when it does not (https, loopback, nothing secret to send)."""
    if not api_key and not any(k.lower() not in _PLAIN_HEADERS for k in headers):
        return None
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    if parts.scheme != "http" or _is_loopback(parts.hostname or ""):
        return None
    return (
        f"the API key or credentials go to {parts.hostname} over plain http, readable on the "
        "network: use https://, or a server on this machine"
    )
