"""Incremental Server-Sent Events parser (WHATWG HTML §9.2 "event stream interpretation").

Bytes arrive split anywhere — inside a UTF-8 sequence, a field name, or between ``\\r`` and
``\\n``. :class:`SSEParser` buffers partial lines and yields one :class:`SSEEvent` per dispatched
event (a blank line ends an event; several ``data:`` lines join with ``\\n``; ``:`` lines are
comments; an event without a ``data:`` line — ``event: ping`` alone — is not dispatched, as the
standard says: "If the data buffer is an empty string, … return"). It is tested with every split
position.

A stream that never ends its event — no blank line, or one line of 64 MB — would be buffered
whole (and re-joined at every read). An event whose pending bytes exceed :data:`MAX_EVENT_BYTES`
(4 MiB; a streamed chunk is a few hundred bytes, a few kB with token ids) raises
:class:`EventTooLong`, which the client turns into a failed request (``malformed_sse``).

:meth:`SSEParser.payloads` is the client's hot path: it splits bytes on the blank line that ends
an event (``b"\\n\\n"``) and hands back an event that is one ``data: `` line as the bytes after
the prefix (orjson parses bytes; no decoding, no event object). Anything else — other fields,
comments, several lines, a ``\\r`` anywhere — goes through the general parser, with the same
result.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

__all__ = ["MAX_EVENT_BYTES", "EventTooLong", "SSEEvent", "SSEParser"]

#: the most bytes one event (its lines up to the blank line that ends it) may hold
MAX_EVENT_BYTES = 4 * 1024 * 1024


class EventTooLong(ValueError):
    """An event (or one line) past :data:`MAX_EVENT_BYTES` without the blank line ending it."""

    def __init__(self, size: int) -> None:
        super().__init__(
            f"an SSE event is longer than {MAX_EVENT_BYTES:,} bytes (4 MiB) without the blank "
            f"line that ends it ({size:,} bytes pending): not a stream of chunks"
        )


@dataclass(frozen=True)
class SSEEvent:
    data: str
    event: str = "message"
    id: str | None = None


class SSEParser:
    """Feed bytes, get complete events."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._buf = ""
        self._pending_cr = False
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None
        self._has_data = False  # a data: line since the last dispatch (WHATWG: else no event)
        self._pending = 0  # characters of the event being read (data kept + the partial line)
        self._raw = b""  # payloads(): bytes after the last complete event
        self._general = False  # payloads(): a \r was seen, every byte goes through feed()

    def payloads(self, chunk: bytes) -> list[bytes | str]:
        """The ``data`` of each event that ``chunk`` completes: bytes (UTF-8, maybe invalid)
        for a single ``data: `` line, else the str that :meth:`feed` gives. Use either this or
        :meth:`feed` on one stream, not both."""
        if self._general or b"\r" in chunk:
            if not self._general:
                self._general = True
                chunk, self._raw = self._raw + chunk, b""
            return [ev.data for ev in self.feed(chunk)]
        blocks = (self._raw + chunk if self._raw else chunk).split(b"\n\n")
        self._raw = blocks.pop()
        if len(self._raw) > MAX_EVENT_BYTES:
            raise EventTooLong(len(self._raw))
        out: list[bytes | str] = []
        for block in blocks:
            if len(block) > MAX_EVENT_BYTES:  # whole, but as long as a stream that never ends
                raise EventTooLong(len(block))
            if block.startswith(b"data: ") and b"\n" not in block:
                out.append(block[6:])  # the common event: one data line
            elif block:
                # whole lines followed by the blank line that dispatches them; splitting on
                # \n never cuts a UTF-8 sequence, so decoding per block is decoding the stream
                for line in [*block.decode("utf-8", "replace").split("\n"), ""]:
                    ev = self._line(line)
                    if ev is not None:
                        out.append(ev.data)
        return out

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        text = self._decoder.decode(chunk)
        if self._pending_cr and text.startswith("\n"):
            text = text[1:]  # the \n of a \r\n split across chunks
        self._pending_cr = False
        if "\r" not in text and "\r" not in self._buf:
            # fast path: \n line endings only (what vLLM, SGLang and the twin send)
            lines = (self._buf + text).split("\n")
            self._buf = lines.pop()
            out: list[SSEEvent] = []
            data = self._data
            for line in lines:
                if line.startswith("data:"):  # the common line, handled inline
                    value = line[6:] if line.startswith("data: ") else line[5:]
                    data.append(value)
                    self._has_data = True
                    self._pending += len(value)
                    continue
                ev = self._line(line)
                if ev is not None:
                    out.append(ev)
                data = self._data  # a blank line starts a new event's list
            self._check_size()
            return out
        self._buf += text
        events: list[SSEEvent] = []
        while True:
            i_n = self._buf.find("\n")
            i_r = self._buf.find("\r")
            if i_n < 0 and i_r < 0:
                break
            if i_r >= 0 and (i_n < 0 or i_r < i_n):
                line = self._buf[:i_r]
                if i_r + 1 < len(self._buf):
                    rest = self._buf[i_r + 1 :]
                    self._buf = rest[1:] if rest.startswith("\n") else rest
                else:
                    self._buf = ""
                    self._pending_cr = True
            else:
                line, self._buf = self._buf[:i_n], self._buf[i_n + 1 :]
            ev = self._line(line)
            if ev is not None:
                events.append(ev)
        self._check_size()
        return events

    def _check_size(self) -> None:
        size = self._pending + len(self._buf)
        if size > MAX_EVENT_BYTES:
            raise EventTooLong(size)

    def _line(self, line: str) -> SSEEvent | None:
        if line == "":
            data, has_data, event = self._data, self._has_data, self._event
            self._data, self._event, self._has_data, self._pending = [], "", False, 0
            if not has_data:  # WHATWG: no data buffer, no event (the event type is reset)
                return None
            return SSEEvent("\n".join(data), event or "message", self._id)
        if line.startswith(":"):
            return None
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
            self._has_data = True
            self._pending += len(value)
        elif field == "event":
            self._event = value
        elif field == "id":
            self._id = value
        return None
