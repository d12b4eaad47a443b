"""Incremental Server-Sent Events parser (WHATWG HTML §9.2 "event stream interpretation").

Bytes arrive split anywhere — inside a UTF-8 sequence, a field name, or between ``\\r`` and
``\\n``. :class:`SSEParser` buffers partial lines and yields one :class:`SSEEvent` per dispatched
event (a blank line ends an event; several ``data:`` lines join with ``\\n``; ``:`` lines are
comments). It is tested with every split position.

:meth:`SSEParser.payloads` is the client's hot path: it splits bytes on the blank line that ends
an event (``b"\\n\\n"``) and hands back an event that is one ``data: `` line as the bytes after
the prefix (orjson parses bytes; no decoding, no event object). Anything else — other fields,
comments, several lines, a ``\\r`` anywhere — goes through the general parser, with the same
result.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

__all__ = ["SSEEvent", "SSEParser"]


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
        self._has_field = False
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
        out: list[bytes | str] = []
        for block in blocks:
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
                    data.append(line[6:] if line.startswith("data: ") else line[5:])
                    self._has_field = True
                    continue
                ev = self._line(line)
                if ev is not None:
                    out.append(ev)
                    data = self._data
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
        return events

    def _line(self, line: str) -> SSEEvent | None:
        if line == "":
            if not self._has_field:
                return None
            ev = SSEEvent("\n".join(self._data), self._event or "message", self._id)
            self._data, self._event, self._has_field = [], "", False
            return ev
        if line.startswith(":"):
            return None
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
            self._has_field = True
        elif field == "event":
            self._event = value
            self._has_field = True
        elif field == "id":
            self._id = value
        return None
