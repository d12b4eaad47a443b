"""Incremental Server-Sent Events parser (WHATWG HTML §9.2 "event stream interpretation").

Bytes arrive split anywhere — inside a UTF-8 sequence, a field name, or between ``\\r`` and
``\\n``. :class:`SSEParser` buffers partial lines and yields one :class:`SSEEvent` per dispatched
event (a blank line ends an event; several ``data:`` lines join with ``\\n``; ``:`` lines are
comments). It is tested with every split position.
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
