"""The seam without a network: request heads, the reply rules every transport follows (as the
mock applies them), ``get``'s timeout, and one HTTP client in ``src/``."""

from __future__ import annotations

import ast
import asyncio
import re
from pathlib import Path

import pytest

from alphagate.net.mock import MockTransport, Request, Response
from alphagate.net.transport import StreamTruncated, endpoint, get

SRC = Path(__file__).resolve().parents[2] / "src" / "alphagate"
CLIENT_IMPORT = re.compile(
    r"^\s*(?:import|from)\s+(?:aiohttp|urllib\.request|http\.client|httpx|requests)\b", re.M
)


@pytest.mark.parametrize(
    ("url", "headers", "why"),
    [
        ("ftp://127.0.0.1/x", {}, "not an http"),
        ("http:///x", {}, "not an http"),
        ("http://127.0.0.1:8000", {"X-Bad": "a\r\nInjected: yes"}, "X-Bad"),
        ("http://127.0.0.1:8000", {"X-Key": "clé€"}, "Latin-1"),
    ],
)
def test_bad_urls_and_headers_are_refused_before_sending(
    url: str, headers: dict[str, str], why: str
) -> None:
    with pytest.raises(ValueError, match=why):
        endpoint(url, headers)


def test_the_request_head() -> None:
    ep = endpoint("http://example.org/v1/chat/completions?x=1", {"Accept": "text/x"})
    assert ep.key == ("http", "example.org", 80)
    assert ep.head == (
        b"POST /v1/chat/completions?x=1 HTTP/1.1\r\nHost: example.org\r\nAccept: text/x\r\n"
    )
    ep = endpoint("https://[::1]:8443/", {})
    assert ep.key == ("https", "::1", 8443)
    assert b"Host: [::1]:8443\r\n" in ep.head and b"Accept: */*\r\n" in ep.head
    assert "Bearer k" not in repr(endpoint("http://h/", {"Authorization": "Bearer k"}))


def _sse(*events: bytes) -> Response:
    return Response(200, chunks=events, content_type="text/event-stream")


def test_a_stream_goes_to_the_sink_one_read_at_a_time_until_it_says_stop() -> None:
    reads = (b"data: 1\n\n", b"data: [DONE]\n\n", b"never read")
    mock = MockTransport(lambda req: _sse(*reads))
    got: list[bytes] = []

    def sink(data: bytes, t: float) -> bool:
        assert t > 0
        got.append(data)
        return b"[DONE]" in data

    reply = asyncio.run(mock.request(endpoint("http://h/v1", {"X-A": "b"}), b"{}", sink))
    assert reply.stopped and reply.status == 200 and reply.body == b""
    assert got == list(reads[:2])
    (req,) = mock.requests
    assert req == Request("POST", "http://h/v1", {"X-A": "b"}, b"{}") and req.path == "/v1"


@pytest.mark.parametrize(
    ("response", "kept"),
    [
        (Response(500, b"boom"), b"boom"),
        (Response(307, location="http://elsewhere/"), b""),
        (Response.json(b'{"choices": []}'), b'{"choices": []}'),
    ],
)
def test_errors_redirects_and_json_bodies_come_back_whole(response: Response, kept: bytes) -> None:
    got: list[bytes] = []
    mock = MockTransport(lambda req: response)
    reply = asyncio.run(mock.request(endpoint("http://h/", {}), b"{}", lambda d, t: bool(got)))
    assert not reply.stopped and reply.body == kept and got == []
    assert reply.location == response.location


def test_a_kept_body_and_location_are_redacted() -> None:
    key = "sk-canary-1234"
    mock = MockTransport(
        lambda req: Response(401, f"bad key {key}".encode(), location=f"http://h/?token={key}")
    )
    ep = endpoint("http://h/", {"Authorization": f"Bearer {key}"})
    reply = asyncio.run(mock.request(ep))
    assert key not in reply.body.decode() and key not in reply.location


def test_a_2xx_body_is_the_callers_data_as_sent() -> None:
    """A page that names a URL with a key is data (a /metrics label, a Prometheus answer): not
    rewritten; the caller redacts what of it it shows."""
    page = b'build_info{source="http://host/?token=sk-canary-1234"} 1\n'
    mock = MockTransport(lambda req: Response(200, page))
    ep = endpoint("http://h/metrics", {"Authorization": "Bearer sk-canary-1234"}, "GET")
    assert asyncio.run(mock.request(ep)).body == page


def test_a_stream_cut_short_raises_after_its_reads() -> None:
    got: list[bytes] = []
    resp = Response(200, chunks=(b"data: 1\n\n",), error=StreamTruncated("cut"))

    async def go() -> None:
        await MockTransport(lambda req: resp).request(
            endpoint("http://h/", {}), b"{}", lambda d, t: got.append(d) is not None
        )

    with pytest.raises(StreamTruncated, match="cut"):
        asyncio.run(go())
    assert got == [b"data: 1\n\n"]


def test_get_is_bounded_by_its_timeout() -> None:
    async def slow(req: Request) -> Response:
        await asyncio.Event().wait()  # never replies: the timeout is the only way out
        return Response(200)

    async def go() -> None:
        await get(MockTransport(slow), "http://h/metrics", timeout_s=0.01)

    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(go())


def test_get_sends_a_get_with_the_headers_given() -> None:
    mock = MockTransport(lambda req: Response.text("x 1\n"))
    reply = asyncio.run(
        get(mock, "http://h:9/metrics?k=v", {"Authorization": "Basic a"}, timeout_s=1)
    )
    assert reply.body == b"x 1\n"
    (req,) = mock.requests
    assert (req.method, req.url, dict(req.headers)) == (
        "GET", "http://h:9/metrics?k=v", {"Authorization": "Basic a"},
    )  # fmt: skip


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
    return out


def test_one_http_client_in_src() -> None:
    """Requests go through the seam: aiohttp only serves (the twin, its background thread), and
    nothing opens URLs with ``urllib.request`` or ``http.client``."""
    wrong = []
    for path in SRC.rglob("*.py"):
        rel = path.relative_to(SRC).as_posix()
        if not CLIENT_IMPORT.search(path.read_text(encoding="utf-8")):
            continue  # parsed only where an import line names a client
        mods = _imports(path)
        if any(m == "aiohttp" or m.startswith("aiohttp.") for m in mods) and not rel.startswith(
            "twin/"
        ):
            wrong.append(f"{rel} imports aiohttp")
        if mods & {"urllib.request", "http.client", "httpx", "requests"}:
            wrong.append(f"{rel} opens URLs itself")
    assert not wrong, wrong
