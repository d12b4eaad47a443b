"""``alphagate model memory``: weights and KV cache per token of a target and its drafter."""

from __future__ import annotations

from typing import Annotated

import typer

from alphagate.cli._app import JsonOpt, show
from alphagate.cli._check import flag_errors
from alphagate.cli._options import DEFAULT_DTYPE, DEFAULT_KV_DTYPE, DtypeOpt, KvDtypeOpt
from alphagate.cli.model._common import model_app

__all__ = ["memory"]


@model_app.command("memory", short_help="Weights and KV per token: target vs drafter.")
def memory(
    target: Annotated[
        str,
        typer.Option(
            "--target",
            "-t",
            help="Target: a preset (llama-3.3-70b-fp8, llama-3.3-70b, llama-3.1-8b, "
            "llama-3.1-8b-fp8, llama-3.2-1b) or config.json.",
        ),
    ],
    draft: Annotated[
        str,
        typer.Option(
            "--draft",
            "-d",
            help="Drafter: eagle3, eagle, mtp, or a draft model preset / config.json.",
        ),
    ],
    dtype: DtypeOpt = DEFAULT_DTYPE,
    kv_dtype: KvDtypeOpt = DEFAULT_KV_DTYPE,
    draft_vocab_size: Annotated[
        int,
        typer.Option(
            "--draft-vocab-size", min=1, max=10_000_000, help="EAGLE-3 draft vocabulary size."
        ),
    ] = 32_000,
    as_json: JsonOpt = False,
) -> None:
    """Parameters, weight bytes and KV bytes per token of a target and its drafter, compared."""
    from alphagate.report.model import render_memory
    from alphagate.specs.memory import memory_answer

    with flag_errors("--target/--draft"):
        ans = memory_answer(target, draft, dtype, kv_dtype, draft_vocab_size)
    show("model memory", ans, as_json, render_memory)
