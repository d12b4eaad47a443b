"""File output for the verbs: atomic writes (an old file survives a failed write) and a
records appender that writes whole lines only."""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from alphagate.cli._check import fail

__all__ = ["RecordsFile", "atomic_write_text", "replace_file", "sigterm_as_interrupt"]


def _umask() -> int:
    """The process umask, read without changing it where Linux allows (``/proc/self/status``)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def replace_file(path: Path, text: str | bytes) -> None:
    """Write ``text`` (UTF-8) or bytes to ``path`` via a temporary file in the same folder, then
    rename: on failure (a full disk, no permission) the previous file, if any, is untouched.
    A lone surrogate in ``text`` (a path whose bytes are not UTF-8, a ``\\udcff`` read from
    JSON), which UTF-8 cannot encode, is written as its escape ``\\udcff`` — in JSON the same
    string read back. Raises ``OSError``."""
    data = text.encode("utf-8", "backslashreplace") if isinstance(text, str) else text
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; a report is meant to be shared
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str, flag: str) -> None:
    """:func:`replace_file`, with a failure reported as an error of ``flag`` (exit 2)."""
    try:
        replace_file(path, text)
    except OSError as exc:
        fail(f"cannot write {path}: {exc.strerror or exc}", flag)


class RecordsFile:
    """``requests.jsonl``, appended one whole line per finished request.

    On open, a cut-off last line left by a crash is moved to ``requests.jsonl.partial-TIME`` (and
    said in :attr:`notes`), so that every line of the file is valid JSON. A write that fails (a
    full disk) is rolled back to the last whole line and raises ``OSError`` for the caller to stop.
    """

    def __init__(self, path: Path, flag: str) -> None:
        self.path = path
        self.notes: list[str] = []
        self._flag = flag
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._set_aside_partial_line()
            self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            fail(f"cannot write {path}: {exc.strerror or exc}", flag)
        self.earlier = self._count_runs()

    def _set_aside_partial_line(self) -> None:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        data = self.path.read_bytes()
        if data.endswith(b"\n"):
            return
        cut = data.rfind(b"\n") + 1
        aside = self.path.with_name(f"{self.path.name}.partial-{time.strftime('%Y%m%dT%H%M%S')}")
        aside.write_bytes(data[cut:])
        with self.path.open("r+b") as fh:
            fh.truncate(cut)
        whole = data[:cut].count(b"\n")
        self.notes.append(
            f"{self.path} ended in a cut-off line (a run that crashed mid-write); it was moved to "
            f"{aside} and the {whole} whole records before it are kept"
        )

    def _count_runs(self) -> int:
        if self.path.stat().st_size == 0:
            return 0
        runs = set()
        with self.path.open("rb") as fh:
            for line in fh:
                i = line.find(b'"run_id":"')
                if i >= 0:
                    runs.add(line[i + 10 : line.find(b'"', i + 10)])
        if runs:
            self.notes.append(
                f"{self.path} already holds records of {len(runs)} earlier run(s); this run's "
                "records are appended under a new run id"
            )
        return len(runs)

    def append(self, record: BaseModel) -> None:
        """Write one record as one line; a write that does not complete is taken back."""
        line = record.model_dump_json().encode() + b"\n"
        pos = os.lseek(self._fd, 0, os.SEEK_END)
        try:
            written = os.write(self._fd, line)
            if written != len(line):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, pos)
            raise

    def __enter__(self) -> RecordsFile:
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP (a closed terminal, a dropped ssh session) end a run as Ctrl-C does:
    records kept, summary written, exit 130. A SIGHUP that is ignored (``nohup``) stays
    ignored."""

    def handler(signum: int, frame: Any) -> None:
        # Whatever handles Ctrl-C now handles this signal too: inside an event loop that is
        # asyncio.Runner's, which cancels the main task and raises KeyboardInterrupt once the
        # loop is out of its callbacks. Raised here instead, the exception could land inside a
        # transport callback, which uvloop reports and survives, and the run went on (exit 0).
        on_sigint = signal.getsignal(signal.SIGINT)
        if callable(on_sigint):
            on_sigint(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt

    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach the main thread only
        return
    caught = [signal.SIGTERM]
    if signal.getsignal(signal.SIGHUP) is not signal.SIG_IGN:
        caught.append(signal.SIGHUP)
    previous = {s: signal.signal(s, handler) for s in caught}
    try:
        yield
    finally:
        for s, before in previous.items():
            signal.signal(s, before)
