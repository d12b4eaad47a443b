"""What bench sends, as an option group (:mod:`alphagate.cli._groups`): a dataset, synthetic
prompts or a trace replayed at its own times — and the prompts they give."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from alphagate.cli._app import err_console
from alphagate.cli._check import bounded, fail, flag_errors

if TYPE_CHECKING:
    from alphagate.bench.dataset import Prompt

__all__ = ["PromptFlags"]

_TRACE_HELP = (
    "Replay a trace: JSONL, one request per line — timestamp (ms, Mooncake/AIPerf convention), "
    "input_length or prompt or messages, output_length (or max_tokens), class — or the Azure LLM "
    "inference trace CSV (TIMESTAMP, ContextTokens, GeneratedTokens). Requests are sent at their "
    "timestamps (× --time-scale) against each target; -n keeps the first N. A replay longer than "
    "24 h of wall time is refused unless --max-duration (or --duration) ends it sooner."
)
#: the prompts sent when no dataset is given
DEFAULT_DATASET = "synthetic:in=512,out=256"


@dataclass(frozen=True)
class PromptFlags:
    """A dataset (ShareGPT, JSONL, synthetic) or a trace, and the classes sent."""

    dataset: Annotated[
        str | None,
        typer.Option(
            "--dataset",
            "--dataset-path",
            help="ShareGPT .json, .jsonl (prompt|messages, class, max_tokens) or synthetic:in=N,out=M "
            "(default synthetic:in=512,out=256).",
        ),
    ] = None
    dataset_name: Annotated[
        Literal["random", "sharegpt", "custom"] | None,
        typer.Option(
            "--dataset-name",
            help="vLLM-style: random (with --random-input-len/--random-output-len), or sharegpt/custom with --dataset-path.",
        ),
    ] = None
    random_input_len: Annotated[int, typer.Option("--random-input-len", min=1, max=1_048_576)] = (
        1024
    )
    random_output_len: Annotated[int, typer.Option("--random-output-len", min=1, max=1_048_576)] = (
        128
    )
    class_field: Annotated[
        str | None,
        typer.Option(
            "--class-field",
            help="The JSONL field naming each line's traffic class (default: class); records "
            "keep it, and acceptance is reported per class where the server returns "
            "per-request counts.",
        ),
    ] = None
    only_class: Annotated[
        str | None,
        typer.Option(
            "--only-class",
            help="Send only this class's lines: the server's counters then measure that class "
            "(for servers without per-request counts).",
        ),
    ] = None
    trace: Annotated[Path | None, typer.Option("--trace", help=_TRACE_HELP)] = None
    time_scale: Annotated[
        float,
        bounded(
            "--time-scale",
            lo=0.001,
            hi=1000.0,
            help="--trace: wall seconds per trace second (0.1 replays ten times faster).",
        ),
    ] = 1.0
    strict: Annotated[
        bool, typer.Option("--strict", help="A malformed dataset or trace line is fatal.")
    ] = False

    @property
    def source(self) -> str | None:
        """The dataset asked for (``--dataset-name random`` as its synthetic spec), or None."""
        if self.dataset_name == "random":
            return f"synthetic:in={self.random_input_len},out={self.random_output_len}"
        return self.dataset

    @property
    def dataset_file(self) -> Path | None:
        """The dataset's file, when it is one (not synthetic prompts)."""
        spec = self.source
        return Path(spec) if spec is not None and not spec.startswith("synthetic:") else None

    @property
    def recorded_dataset(self) -> str | None:
        """What the results name as the dataset: None for a trace."""
        return None if self.trace is not None else self.source or DEFAULT_DATASET

    def load(self, num_prompts: int | None, seed: int) -> tuple[list[Prompt], list[str]]:
        """The prompts (a trace's with their arrival times), and the lines skipped."""
        from alphagate.bench.dataset import DatasetError, load_prompts

        if self.trace is not None:
            if self.class_field is not None or self.only_class is not None:
                fail(
                    "a trace's class is its 'class' field; drop --class-field/--only-class",
                    "--trace",
                )
            from alphagate.bench.trace import load_trace

            try:
                return load_trace(str(self.trace), num_prompts, seed, strict=self.strict)
            except DatasetError as exc:
                fail(str(exc), "--trace")
        try:
            return load_prompts(
                self.source or DEFAULT_DATASET,
                num_prompts or 200,
                seed,
                strict=self.strict,
                class_field=self.class_field,
                only_class=self.only_class,
            )
        except DatasetError as exc:
            fail(str(exc), exc.flag)

    def check_replay(
        self, prompts: list[Prompt], limits: tuple[float | None, float | None], *, quiet: bool
    ) -> None:
        """A trace's replay: refused past a day of wall time with no limit that ends it sooner
        (``limits``: --max-duration, --duration); one of over a minute says how long it takes."""
        from alphagate.bench.config import check_replay

        if self.trace is None:
            return
        with flag_errors():
            span, limit = check_replay(
                prompts, self.time_scale, max_duration_s=limits[0], duration_s=limits[1]
            )
        if span > 60 and not quiet:
            ends = (
                f"; --max-duration/--duration ends it after {limit:,.0f} s" if limit < span else ""
            )
            err_console.print(
                f"trace replay: {len(prompts):,} requests over {span:,.0f} s of wall time "
                f"(--time-scale {self.time_scale:g}){ends}"
            )
