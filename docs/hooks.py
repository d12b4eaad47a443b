"""MkDocs hooks: the reference pages are generated from the code at build time
(``alphagate.cli._reference``), so that they cannot drift from it."""

from __future__ import annotations

from typing import Any

from mkdocs.structure.files import File, Files

GENERATED = {
    "reference/cli.md": "cli_reference",
    "reference/results.md": "results_reference",
}


def on_files(files: Files, config: Any) -> Files:
    from alphagate.cli import _reference

    for uri, func in GENERATED.items():
        old = files.get_file_from_path(uri)
        if old is not None:
            files.remove(old)
        files.append(File.generated(config, uri, content=getattr(_reference, func)()))
    return files
