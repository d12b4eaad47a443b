"""The offline replay's options, as option groups (:mod:`alphagate.cli._groups`): the logged
requests, the models, the sampling, and how the run is carried out — together the fields of one
:class:`~alphagate.measure.offline.config.OfflineConfig`."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from alphagate.cli._check import bounded

__all__ = ["ReplayModels", "ReplayRequests", "ReplayRun", "ReplaySampling"]


@dataclass(frozen=True)
class ReplayRequests:
    """The logged requests, their traffic classes, and a sample of them."""

    logs: Annotated[
        list[Path],
        typer.Option(
            "--log",
            help="Request log: `bench --save-text` requests.jsonl, OpenAI request/response "
            "JSONL, messages JSONL or ShareGPT JSON. Repeat for several files.",
        ),
    ]
    class_field: Annotated[
        str | None,
        typer.Option("--class-field", help="Class from this field (dotted path, e.g. meta.cls)."),
    ] = None
    class_rule: Annotated[
        list[str] | None,
        typer.Option(
            "--class-rule",
            help="NAME=REGEX over the prompt text; first match wins, else 'other'. Repeat.",
        ),
    ] = None
    sample_n: Annotated[
        int | None,
        typer.Option("--sample", min=1, help="Use a seeded subset of N requests."),
    ] = None

    def fields(self) -> dict[str, Any]:
        return {
            "logs": tuple(self.logs),
            "class_field": self.class_field,
            "class_rules": tuple(self.class_rule or ()),
            "sample": self.sample_n,
        }


@dataclass(frozen=True)
class ReplayModels:
    """The target and the candidate drafter, and where they run."""

    target: Annotated[
        str, typer.Option("--target", help="The target model: a local directory or cached id.")
    ]
    drafter: Annotated[
        str,
        typer.Option(
            "--drafter",
            help="ngram, ngram:MIN:MAX (prompt lookup window), draft_model:PATH, eagle3:PATH "
            "(a head in vLLM's LlamaForCausalLMEagle3 format), or suffix[:KEY=VALUE,…] "
            "(vLLM's suffix decoding through arctic-inference; keys max_tree_depth, "
            "max_cached_requests, max_spec_factor, min_token_prob).",
        ),
    ]
    tokenizer: Annotated[
        str | None, typer.Option("--tokenizer", help="Tokenizer (default: the target's).")
    ] = None
    device: Annotated[str, typer.Option("--device", help="auto, cpu, cuda, cuda:1 …")] = "auto"
    dtype: Annotated[
        Literal["auto", "float32", "bfloat16", "float16"],
        typer.Option("--dtype", help="auto: float32 on CPU, bfloat16 on GPU."),
    ] = "auto"
    max_model_len: Annotated[
        int | None,
        typer.Option("--max-model-len", min=8, help="The server's context limit."),
    ] = None
    threads: Annotated[
        int | None,
        typer.Option("--threads", min=1, help="CPU threads for torch (default: torch's)."),
    ] = None
    tree: Annotated[
        list[str] | None,
        typer.Option(
            "--tree",
            metavar="STEPS:TOPK:DRAFT_TOKENS",
            help="eagle3: also replay SGLang's draft tree of these --speculative-num-steps, "
            "--speculative-eagle-topk and --speculative-num-draft-tokens (greedy). Repeat.",
        ),
    ] = None

    def fields(self) -> dict[str, Any]:
        """The config's fields, the ``--drafter`` spec parsed (:class:`MeasureError`)."""
        from alphagate.measure.offline.config import parse_drafter

        drafter = parse_drafter(self.drafter)
        fields = {k: v for k, v in asdict(self).items() if k != "drafter"} | drafter
        return fields | {"tree": tuple(self.tree or ())}


@dataclass(frozen=True)
class ReplaySampling:
    """K, and the engine's sampling the replay reproduces."""

    k: Annotated[
        int | None,
        typer.Option(
            "--k",
            min=1,
            max=64,
            help="Draft tokens per step (default 3). Suffix decoding: its cap, vLLM's "
            "num_speculative_tokens (default: max_tree_depth).",
        ),
    ] = None
    k_max: Annotated[
        int | None,
        typer.Option("--k-max", min=1, max=32, help="Also every K up to this (one pass)."),
    ] = None
    temperature: Annotated[
        float,
        bounded(
            "--temperature", lo=0.0, hi=2.0, help="The engine's temperature (0: greedy, exact)."
        ),
    ] = 0.0
    top_p: Annotated[float, bounded("--top-p", lo=1e-6, hi=1.0)] = 1.0
    top_k: Annotated[int, typer.Option("--top-k", min=0, help="0: off.")] = 0
    draft_sampling: Annotated[
        Literal["greedy", "probabilistic"],
        typer.Option(
            "--draft-sampling",
            help="vLLM's draft_sample_method: greedy (its default) or probabilistic.",
        ),
    ] = "greedy"
    seed: Annotated[int, typer.Option("--seed", help="Seeds --sample, sampling, bootstrap.")] = 0
    regenerate: Annotated[
        bool,
        typer.Option(
            "--regenerate",
            help="Replace each logged output with the target's own continuation (exact when the "
            "log is not the target's trajectory).",
        ),
    ] = False

    def fields(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None or k != "k"}


@dataclass(frozen=True)
class ReplayRun:
    """Where the scored requests are kept, and on which machines they are scored."""

    checkpoint: Annotated[
        Path | None,
        typer.Option("--checkpoint", help="Append each scored request here; resume from it."),
    ] = None
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            metavar="local|ADDRESS",
            help="Score on Ray actors: `local` starts a Ray instance here for this run; an "
            "address (HOST:PORT of `ray start --head`) joins that cluster. "
            "Same numbers as without. Needs alphagate[ray].",
        ),
    ] = None
    ray_workers: Annotated[
        int | None,
        typer.Option(
            "--ray-workers", min=1, help="Ray actors (default: one per GPU, else per CPU)."
        ),
    ] = None
    no_progress: Annotated[bool, typer.Option("--no-progress", help="No progress bar.")] = False

    def fields(self) -> dict[str, Any]:
        return {"checkpoint": self.checkpoint, "ray": self.ray, "ray_workers": self.ray_workers}
