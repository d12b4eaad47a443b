"""The one redaction, and credentials turned into headers: what each function keeps and what it
replaces, by hand (the whole tool's outputs are searched for a canary in tests/test_secrets.py)."""

from __future__ import annotations

import base64

import pytest

from alphagate.core.errors import ConfigError
from alphagate.core.secrets import (
    REDACTED,
    Secrets,
    auth_headers,
    check_header,
    credentials_header,
    join_path,
    plain_http_warning,
    redact,
    redact_headers,
    split_credentials,
    strip_credentials,
)


def test_urls_in_text_lose_their_passwords_tokens_and_query_keys() -> None:
    text = (
        "GET http://bob:HUNTER2@h:8000/v1?api_key=K3Y&region=eu failed; "
        "retry https://T0KEN@h/x?Access-Token=abc&key=&page=2"
    )
    assert redact(text) == (
        f"GET http://bob:{REDACTED}@h:8000/v1?api_key={REDACTED}&region=eu failed; "
        f"retry https://{REDACTED}@h/x?Access-Token={REDACTED}&key=&page=2"
    )
    assert (
        redact("http://h:8000/v1 and user@example.com") == "http://h:8000/v1 and user@example.com"
    )


def test_a_secret_is_found_in_every_form_a_server_echoes() -> None:
    key = 's3cr/et key+"x"'
    s = Secrets.of(api_key=key)
    for echoed in (
        key,
        "s3cr%2Fet%20key%2B%22x%22",
        "s3cr%2Fet+key%2B%22x%22",
        's3cr/et key+\\"x\\"',
    ):
        assert redact(f"bad key: {echoed}!", s) == f"bad key: {REDACTED}!", echoed
    assert repr(s) == "Secrets()"  # never shown
    assert not Secrets.of(api_key="ab")  # too short to search for in free text


def test_header_values_and_their_parts_are_secrets_but_the_clients_own_are_not() -> None:
    basic = base64.b64encode(b"alice:pa55word").decode()
    s = Secrets.of(
        headers={
            "Authorization": f"Basic {basic}",
            "X-Team": "Bearer t0k3n",
            "Accept": "text/plain",
        }
    )
    text = f"{basic} alice:pa55word pa55word t0k3n text/plain"
    assert redact(text, s).split() == [REDACTED] * 4 + ["text/plain"]
    u = Secrets.of(urls=["http://u:p%40ss1@h/?token=abcd%2B1"])
    assert redact("p@ss1 p%40ss1 abcd+1", u) == f"{REDACTED} {REDACTED} {REDACTED}"
    both = u | Secrets.of(values=["zzzz"])
    assert redact("zzzz p@ss1", both) == f"{REDACTED} {REDACTED}"


def test_a_longer_secret_is_replaced_whole() -> None:
    s = Secrets.of(values=["abcd", "abcdefgh"])
    assert redact("abcdefgh", s) == REDACTED


def test_bytes_are_redacted_and_returned_untouched_when_clean() -> None:
    s = Secrets.of(values=["s3cret"])
    assert s.redact_bytes(b"key s3cret \xff") == f"key {REDACTED} \ufffd".encode()
    clean = b"nothing \xff here"
    assert s.redact_bytes(clean) is clean


def test_url_credentials_become_an_authorization_header() -> None:
    assert strip_credentials("http://u%3Ax:p%40w@h:1/v1?q=1") == ("http://h:1/v1?q=1", "u:x", "p@w")
    assert strip_credentials("http://h/v1") == ("http://h/v1", None, None)
    assert credentials_header("u", "p") == "Basic " + base64.b64encode(b"u:p").decode()
    assert credentials_header("tok", None) == "Bearer tok"
    assert split_credentials("http://tok@h/") == ("http://h/", {"Authorization": "Bearer tok"})
    assert split_credentials("http://@h/") == ("http://h/", {})
    with pytest.raises(ConfigError, match=f"'http://u:{REDACTED}@h:x/' is not a valid URL"):
        split_credentials("http://u:secret@h:x/")


def test_paths_join_before_the_query_and_headers_hide_their_values() -> None:
    assert (
        join_path("http://h:8000/v1/?api_key=K", "/metrics") == "http://h:8000/v1/metrics?api_key=K"
    )
    assert redact_headers({"X-A": "1", "Authorization": "B"}) == {
        "X-A": REDACTED,
        "Authorization": REDACTED,
    }


def test_a_header_http_cannot_carry_is_refused_without_its_value() -> None:
    check_header("X-Ok", "value\twith tab")
    with pytest.raises(ConfigError, match="not a valid HTTP header name") as info:
        check_header("bad name", "v")
    assert info.value.field == "header"
    with pytest.raises(ConfigError, match="control character") as info:
        check_header("X-A", "s3cret\r\nX-Evil: 1")
    assert "s3cret" not in str(info.value)
    with pytest.raises(ConfigError, match="outside Latin-1"):
        check_header("X-A", "tok…")


def test_auth_headers_merge_flags_and_url_credentials_once() -> None:
    headers, targets = auth_headers(
        ["X-Team: blue"], None,
        (("baseline", "http://u:p@a:1/v1?k=1"), ("candidate", "https://u:p@b/v1")),
    )  # fmt: skip
    assert headers == {"X-Team": "blue", "Authorization": credentials_header("u", "p")}
    assert targets == (("baseline", "http://a:1/v1?k=1"), ("candidate", "https://b/v1"))


@pytest.mark.parametrize(
    ("flags", "key", "targets", "field", "says"),
    [
        ([], " ", (("default", "http://h"),), "api_key", "the API key is empty"),
        ([], "k\x01y", (("default", "http://h"),), "api_key", "control character"),
        (["novalue"], None, (("default", "http://h"),), "header", "not NAME:VALUE"),
        ([], "k", (("default", "http://u:p@h"),), "api_key", "not both"),
        (["Authorization: x"], None, (("default", "http://u:p@h"),), "header", "not both"),
        (
            [],
            None,
            (("a", "http://u:p@h"), ("b", "http://u:q@h")),
            "b_url",
            "different credentials",
        ),
        ([], None, (("default", "ftp://h"),), "url", "must start with http:// or https://"),
    ],
)
def test_auth_headers_refuse_naming_the_field(
    flags: list[str], key: str | None, targets: tuple[tuple[str, str], ...], field: str, says: str
) -> None:
    with pytest.raises(ConfigError, match=says) as info:
        auth_headers(flags, key, targets)
    assert info.value.field == field


def test_plain_http_to_another_host_is_warned_of_only_with_something_to_expose() -> None:
    auth = {"Authorization": "Bearer t"}
    assert plain_http_warning("http://10.0.0.5:8000", auth) is not None
    assert "10.0.0.5 over plain http" in str(plain_http_warning("http://10.0.0.5", {}, "key"))
    for url in (
        "https://10.0.0.5",
        "http://127.0.0.1:8000",
        "http://[::1]:8000",
        "http://a.localhost",
    ):
        assert plain_http_warning(url, auth) is None, url
    assert plain_http_warning("http://10.0.0.5", {"Accept": "x"}) is None  # nothing secret
