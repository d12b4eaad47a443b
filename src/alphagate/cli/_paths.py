"""Checks of the paths and URLs a verb is given, before any long work starts: an output that
cannot be written, one that would overwrite an input, a URL that is not http(s)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from alphagate.cli._check import fail

__all__ = ["check_http_urls", "check_no_overwrite", "check_output_path", "check_outputs"]

#: an output: (path or None when not asked for, its flag, whether it is a folder)
Output = tuple[Path | None, str, bool]


def check_http_urls(urls: Sequence[str], flag: str) -> None:
    """Refuse a URL that is not http(s), shown with its credentials redacted."""
    from alphagate.core.secrets import redact

    for u in urls:
        if not u.startswith(("http://", "https://")):
            fail(f"{redact(u)!r} is not an http(s) URL", flag)


def check_output_path(path: Path, flag: str, *, directory: bool) -> None:
    """Refuse an output path that cannot be written, before any long work starts."""
    target = path if directory else path.parent
    if directory and path.exists() and not path.is_dir():
        fail(f"{path} exists and is not a folder", flag)
    if not directory and path.exists() and not path.is_file():
        kind = "a folder" if path.is_dir() else "not a regular file"
        fail(f"{path} is {kind}; give a file path", flag)
    probe = target
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        fail(f"{target} cannot be written (no permission, or a read-only file system)", flag)
    if str(path.resolve()).startswith(("/proc/", "/sys/")):
        fail(f"{path} is not a place for output", flag)


#: what a folder output holds (bench --out, calibrate --bench-out, --plot): an input among these
#: names inside it would be overwritten
_FOLDER_FILES = ("requests.jsonl", "summary.json", "requests.csv", "levels.csv")


def _inputs_with_records(inputs: list[Path]) -> list[Path]:
    """The inputs, and for a bench summary the records file it reads beside it."""
    out = []
    for p in inputs:
        out.append(p)
        if p.name.startswith("summary") and p.suffix == ".json":
            out.append(p.with_name("requests.jsonl"))
    return out


def check_no_overwrite(outputs: Sequence[Output], inputs: Sequence[Path | None]) -> None:
    """Refuse, before any work, an output that would overwrite one of the command's inputs (or a
    bench summary's records): ``outputs`` are (path, flag, is a folder). Paths are compared
    resolved, symlinks followed."""
    ins = {p.resolve(): p for p in _inputs_with_records([i for i in inputs if i is not None])}
    for path, flag, folder in outputs:
        if path is None:
            continue
        target = path.resolve()
        hits = (
            [ins[t] for t in ins if t.parent == target and t.name.startswith(_FOLDER_FILES)]
            if folder
            else [ins[target]]
            if target in ins
            else []
        )
        if hits:
            fail(
                f"{path} would overwrite the input {hits[0]}: write the output elsewhere",
                flag,
            )


def check_outputs(outputs: Sequence[Output], inputs: Sequence[Path | None]) -> None:
    """Each output writable (:func:`check_output_path`), and none of them an input
    (:func:`check_no_overwrite`)."""
    for path, flag, folder in outputs:
        if path is not None:
            check_output_path(path, flag, directory=folder)
    check_no_overwrite(outputs, inputs)
