"""Secrets in bench configuration: never written out, never printed.

The redaction and the URL-credentials-to-header rule live at the lowest layer,
:mod:`alphagate.core.secrets`, so that ``measure``, ``calibrate`` and ``gate`` share them; this
module keeps bench's names. Every header value, the API key, a password or token inside a URL
and a key in a URL's query are replaced by ``<redacted>`` in ``summary.json``, ``--json`` output
and messages. Credentials in a URL (``http://user:password@host``, ``http://TOKEN@host``)
become an ``Authorization`` header (Basic, or Bearer for a lone token), so a URL carries no
secret past the command line.
"""

from __future__ import annotations

from alphagate.core.secrets import (
    REDACTED,
    Secrets,
    auth_headers,
    credentials_header,
    redact,
    redact_headers,
    redact_url,
    strip_credentials,
)

__all__ = [
    "REDACTED",
    "Secrets",
    "auth_headers",
    "credentials_header",
    "redact",
    "redact_headers",
    "redact_url",
    "strip_credentials",
]
