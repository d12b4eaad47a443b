"""The ``alphagate`` command line: parse flags → typed config → call → render or dump JSON.

Only this module prints, reads the environment, writes files or sets exit codes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import nullcontext as _nullcontext
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel, SecretStr, ValidationError
from rich.console import Console, RenderableType
from rich.markdown import Markdown

from alphagate import __version__
from alphagate.bench.dataset import DatasetError, Prompt, load_prompts
from alphagate.bench.records import Comparison, LevelSummary, RequestRecord, compare, stats_of
from alphagate.bench.runner import BenchConfig, BenchRunner, Level
from alphagate.closed_form import (
    RESULTS_SCHEMA,
    Quantity,
    blend_answer,
    breakeven_answer,
    convert_answer,
    memory_answer,
    optimal_k_answer,
    required_answer,
    speedup_answer,
    table_answer,
)
from alphagate.config import (
    ConfigError,
    CostModel,
    TrafficClass,
    parse_traffic_class,
    validate_shares,
)
from alphagate.plan.build import PlanRequest, build_plan
from alphagate.plan.measured import MeasuredError, load_measured_alphas
from alphagate.quantities import TransformerShape
from alphagate.report import bench as bench_report
from alphagate.report import model as model_report
from alphagate.report import plots
from alphagate.report import simulate as sim_report
from alphagate.report.plan import render_plan_markdown
from alphagate.sim.cost import build_cost_model
from alphagate.sim.sweep import Mix, SweepConfig, run_sweep
from alphagate.sim.workload import (
    EmpiricalLength,
    FixedLength,
    LengthDist,
    LognormalLength,
    SimClass,
    UniformLength,
    WorkloadConfig,
    length_mean,
)
from alphagate.specs import (
    DeploymentConfig,
    DrafterConfig,
    DraftModelDrafter,
    Eagle3Drafter,
    EagleDrafter,
    MtpDrafter,
    NgramDrafter,
    SpecError,
    model_preset_names,
    resolve_deployment,
    resolve_model,
)
from alphagate.theory.memory import BYTES_PER_PARAM

app = typer.Typer(
    name="alphagate",
    help=(
        "Measure α before you flip the flag. Model, simulate, measure, benchmark, gate and plan "
        "speculative decoding (EAGLE-3, EAGLE, draft models, n-gram, MTP) for vLLM and SGLang.\n\n"
        "Acceptance quantities are never mixed: α = conditional per-token acceptance "
        "(Leviathan), ρ = draft acceptance rate = accepted ÷ drafted (vLLM), τ = mean "
        "acceptance length incl. the bonus token."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="markdown",
)
model_app = typer.Typer(
    help="Closed forms (no hardware needed): speedup, break-even α, α for a target, optimal K, "
    "traffic blends, α/ρ/τ conversions, draft memory.",
    no_args_is_help=True,
)
app.add_typer(model_app, name="model")

console = Console()
R = TypeVar("R", bound=BaseModel)


# ---------------------------------------------------------------- shared options
def _positive(value: float, flag: str) -> float:
    if not value > 0.0:
        raise typer.BadParameter(f"must be > 0, got {value:g}", param_hint=flag)
    return value


AlphaOpt = Annotated[
    float,
    typer.Option(
        "--alpha", "-a", min=0.0, max=1.0, help="α: conditional per-token acceptance, in [0, 1]."
    ),
]
KOpt = Annotated[
    int, typer.Option("--k", "-k", min=1, help="K: draft tokens proposed per step (>= 1).")
]
DraftCostOpt = Annotated[
    float,
    typer.Option(
        "--draft-cost", "-c", min=0.0, help="c: one draft forward ÷ one plain decode step (>= 0)."
    ),
]
VerifyCostOpt = Annotated[
    float,
    typer.Option(
        "--verify-cost",
        "-v",
        callback=lambda v: _positive(v, "--verify-cost"),
        help="v: verify pass over K+1 tokens ÷ one plain decode step (> 0; 1 = Leviathan's assumption).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object instead of tables.")]

# deployment options shared by simulate, plan and twin (defaults stay per command)
ModelOpt = Annotated[
    str,
    typer.Option(
        "--model",
        "-m",
        help="Target: a preset (llama-3.1-8b, llama-3.3-70b, llama-3.2-1b) or a config.json.",
    ),
]
GpuOpt = Annotated[
    str,
    typer.Option(
        "--gpu", "-g", help="GPU preset (h100, h200, a100-80gb, b200, mi300x) or a spec JSON file."
    ),
]
TpOpt = Annotated[
    int | None,
    typer.Option("--tp", min=1, help="Tensor-parallel degree (default: the smallest that fits)."),
]
DtypeOpt = Annotated[str, typer.Option("--dtype", help="Weight dtype: bf16, fp8, int4.")]
KvDtypeOpt = Annotated[str, typer.Option("--kv-dtype", help="KV-cache dtype: bf16, fp8.")]
MethodOpt = Annotated[
    str, typer.Option("--method", help="Drafter: eagle3, eagle, draft_model, ngram, mtp.")
]
DraftOpt = Annotated[
    str | None,
    typer.Option(
        "--draft",
        help="Draft model: a preset / config.json to model, or a repo id for the engine config.",
    ),
]


def _emit(verb: str, answer: R, as_json: bool, render: Callable[[R], RenderableType]) -> None:
    if as_json:
        payload = {"schema": RESULTS_SCHEMA, "verb": verb, **answer.model_dump(mode="json")}
        typer.echo(json.dumps(payload, indent=2))
    else:
        console.print(render(answer))


def _costs(draft_cost: float, verify_cost: float) -> CostModel:
    return CostModel(draft_cost=draft_cost, verify_cost=verify_cost)


def _float_list(
    text: str, flag: str, lo: float | None = None, hi: float | None = None
) -> list[float]:
    try:
        values = [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise typer.BadParameter(
            f"{text!r} is not a comma-separated list of numbers", param_hint=flag
        ) from None
    if not values:
        raise typer.BadParameter("the list is empty", param_hint=flag)
    for x in values:
        if (lo is not None and x < lo) or (hi is not None and x > hi):
            raise typer.BadParameter(f"{x:g} is outside [{lo}, {hi}]", param_hint=flag)
    return values


def _int_list(text: str, flag: str, lo: int = 1) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise typer.BadParameter(
            f"{text!r} is not a comma-separated list of integers", param_hint=flag
        ) from None
    if not values or min(values) < lo:
        raise typer.BadParameter(f"needs integers >= {lo}, got {text!r}", param_hint=flag)
    return values


def _version(value: bool) -> None:
    if value:
        typer.echo(f"alphagate {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Show the version and exit."
        ),
    ] = False,
) -> None:
    """alphagate command line."""


# ---------------------------------------------------------------- model
@model_app.command("speedup")
def model_speedup(
    alpha: AlphaOpt,
    k: KOpt,
    draft_cost: DraftCostOpt = 0.0,
    verify_cost: VerifyCostOpt = 1.0,
    as_json: JsonOpt = False,
) -> None:
    """Exact speedup S = E(α,K)/(K·c + v), with τ, ρ and the lesson's linear estimate beside it."""
    _emit(
        "model speedup",
        speedup_answer(alpha, k, _costs(draft_cost, verify_cost)),
        as_json,
        model_report.render_speedup,
    )


@model_app.command("breakeven")
def model_breakeven(
    k: KOpt,
    draft_cost: DraftCostOpt = 0.0,
    verify_cost: VerifyCostOpt = 1.0,
    as_json: JsonOpt = False,
) -> None:
    """α at which speculation stops paying (S = 1), exact and per the linear rule overhead/K."""
    _emit(
        "model breakeven",
        breakeven_answer(k, _costs(draft_cost, verify_cost)),
        as_json,
        model_report.render_breakeven,
    )


@model_app.command("required")
def model_required(
    target_speedup: Annotated[
        float,
        typer.Option(
            "--speedup",
            "-s",
            callback=lambda v: _positive(v, "--speedup"),
            help="Target speedup (e.g. 2 for 2×).",
        ),
    ],
    k: KOpt,
    draft_cost: DraftCostOpt = 0.0,
    verify_cost: VerifyCostOpt = 1.0,
    as_json: JsonOpt = False,
) -> None:
    """Smallest α that reaches a target speedup (null with the reason when unreachable)."""
    ans = required_answer(target_speedup, k, _costs(draft_cost, verify_cost))
    _emit("model required", ans, as_json, model_report.render_required)


@model_app.command("optimal-k")
def model_optimal_k(
    alpha: AlphaOpt,
    draft_cost: DraftCostOpt = 0.0,
    verify_cost: VerifyCostOpt = 1.0,
    k_max: Annotated[int, typer.Option("--k-max", min=1, max=64, help="Largest K to try.")] = 10,
    as_json: JsonOpt = False,
) -> None:
    """Best K in 1..k-max; K = 0 means leave speculation off because nothing beats 1×."""
    ans = optimal_k_answer(alpha, _costs(draft_cost, verify_cost), k_max)
    _emit("model optimal-k", ans, as_json, model_report.render_optimal_k)


def _parse_classes(values: list[str], require_alpha: bool) -> list[TrafficClass]:
    try:
        return [parse_traffic_class(v, require_alpha=require_alpha) for v in values]
    except (ConfigError, ValidationError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--class") from None


@model_app.command("blend")
def model_blend(
    classes: Annotated[
        list[str],
        typer.Option(
            "--class",
            help="NAME:SHARE:ALPHA, repeated; SHARE = fraction of output tokens (sum to 1).",
        ),
    ],
    k: KOpt,
    draft_cost: DraftCostOpt = 0.0,
    verify_cost: VerifyCostOpt = 1.0,
    as_json: JsonOpt = False,
) -> None:
    """Blend classes by time per token (not by averaging α); shows the naive mean α beside it."""
    parsed = _parse_classes(classes, require_alpha=True)
    try:
        ans = blend_answer(parsed, k, _costs(draft_cost, verify_cost))
    except (ConfigError, ValueError) as exc:
        raise typer.BadParameter(str(exc), param_hint="--class") from None
    _emit("model blend", ans, as_json, model_report.render_blend)


@model_app.command("convert")
def model_convert(
    k: KOpt,
    alpha: Annotated[
        float | None, typer.Option("--alpha", "-a", min=0.0, max=1.0, help="Given α (conditional).")
    ] = None,
    rho: Annotated[
        float | None,
        typer.Option(
            "--draft-acceptance-rate",
            "--rho",
            min=0.0,
            max=1.0,
            help="Given ρ = accepted ÷ drafted.",
        ),
    ] = None,
    tau: Annotated[
        float | None,
        typer.Option(
            "--mean-acceptance-length", "--tau", min=1.0, help="Given τ (incl. bonus token)."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Express one acceptance figure as all three: α, ρ and τ (i.i.d. α assumed)."""
    given = [
        (n, v)
        for n, v in (
            ("alpha", alpha),
            ("draft_acceptance_rate", rho),
            ("mean_acceptance_length", tau),
        )
        if v is not None
    ]
    if len(given) != 1:
        raise typer.BadParameter(
            "give exactly one of --alpha, --draft-acceptance-rate, --mean-acceptance-length",
            param_hint="--alpha/--draft-acceptance-rate/--mean-acceptance-length",
        )
    name, value = given[0]
    if name == "mean_acceptance_length" and value > k + 1:
        raise typer.BadParameter(
            f"τ = {value:g} exceeds K + 1 = {k + 1}", param_hint="--mean-acceptance-length"
        )
    quantity: Quantity = name  # type: ignore[assignment]
    _emit("model convert", convert_answer(quantity, value, k), as_json, model_report.render_convert)


def _resolve(name: str, flag: str) -> TransformerShape:
    try:
        return resolve_model(name)
    except SpecError as exc:
        raise typer.BadParameter(str(exc), param_hint=flag) from None


@model_app.command("memory")
def model_memory(
    target: Annotated[
        str,
        typer.Option(
            "--target",
            "-t",
            help=f"Target: a preset ({', '.join(model_preset_names())}) or config.json.",
        ),
    ],
    draft: Annotated[
        str,
        typer.Option(
            "--draft", "-d", help="Drafter: eagle3, eagle, or a draft model preset / config.json."
        ),
    ],
    dtype: Annotated[
        str, typer.Option("--dtype", help="Weight and KV dtype: bf16, fp16, fp8, int4.")
    ] = "bf16",
    draft_vocab_size: Annotated[
        int, typer.Option("--draft-vocab-size", min=1, help="EAGLE-3 draft vocabulary size.")
    ] = 32_000,
    as_json: JsonOpt = False,
) -> None:
    """Parameters, weight bytes and KV bytes per token of a target and its drafter, compared."""
    if dtype not in BYTES_PER_PARAM:
        raise typer.BadParameter(
            f"unknown dtype {dtype!r}; use one of {', '.join(BYTES_PER_PARAM)}",
            param_hint="--dtype",
        )
    t = _resolve(target, "--target")
    d_key = draft.strip().lower()
    d = d_key if d_key in ("eagle3", "eagle") else _resolve(draft, "--draft")
    ans = memory_answer(t, d, dtype, draft_vocab_size)  # type: ignore[arg-type]
    _emit("model memory", ans, as_json, model_report.render_memory)


@model_app.command("table")
def model_table(
    alphas: Annotated[
        str, typer.Option("--alphas", help="Comma-separated α values.")
    ] = "0.4,0.5,0.55,0.6,0.7,0.8,0.9",
    ks: Annotated[str, typer.Option("--ks", help="Comma-separated K values.")] = "1,2,3,4,5,6,8",
    draft_cost: DraftCostOpt = 0.05,
    verify_costs: Annotated[
        str,
        typer.Option(
            "--verify-cost", "-v", help="Comma-separated verify cost ratios (sensitivity)."
        ),
    ] = "1.0",
    linear: Annotated[
        bool, typer.Option("--linear", help="Show the lesson's linear estimate in each cell.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Speedup grid over α × K with the break-even α per K, for one or more verify costs."""
    ans = table_answer(
        _float_list(alphas, "--alphas", 0.0, 1.0),
        _int_list(ks, "--ks"),
        draft_cost,
        _float_list(verify_costs, "--verify-cost", 1e-9, None),
    )
    _emit("model table", ans, as_json, lambda a: model_report.render_table(a, show_linear=linear))


# ---------------------------------------------------------------- simulate
def _length(text: str, flag: str) -> LengthDist:
    """``fixed:N``, ``uniform:LO:HI``, ``lognormal:MEAN[:SIGMA]`` or ``file:PATH`` (one length per line)."""
    kind, _, rest = text.partition(":")
    parts = rest.split(":") if rest else []
    try:
        if kind == "fixed" and len(parts) == 1:
            return FixedLength(value=int(parts[0]))
        if kind == "uniform" and len(parts) == 2:
            return UniformLength(low=int(parts[0]), high=int(parts[1]))
        if kind == "lognormal" and len(parts) in (1, 2):
            return LognormalLength(
                mean=float(parts[0]), **({"sigma": float(parts[1])} if len(parts) == 2 else {})
            )
        if kind == "file" and rest:
            return EmpiricalLength(values=tuple(_read_lengths(Path(rest), flag)))
    except (ValueError, ValidationError) as exc:
        raise typer.BadParameter(f"{text!r}: {exc}", param_hint=flag) from None
    raise typer.BadParameter(
        f"{text!r} is not fixed:N, uniform:LO:HI, lognormal:MEAN[:SIGMA] or file:PATH",
        param_hint=flag,
    )


def _read_lengths(path: Path, flag: str) -> list[int]:
    if not path.exists():
        raise typer.BadParameter(f"length file not found: {path}", param_hint=flag)
    values: list[int] = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        try:
            v = int(line)
        except ValueError:
            raise typer.BadParameter(
                f"{path}:{lineno}: {line!r} is not an integer length", param_hint=flag
            ) from None
        if v < 1:
            raise typer.BadParameter(f"{path}:{lineno}: length {v} must be >= 1", param_hint=flag)
        values.append(v)
    if not values:
        raise typer.BadParameter(f"{path}: no lengths found", param_hint=flag)
    return values


def _check_deployment_flags(dtype: str, kv_dtype: str, method: str) -> None:
    """One clear error for the deployment flags shared by simulate, plan and twin."""
    if dtype not in ("bf16", "fp8", "int4"):
        raise typer.BadParameter(
            f"unknown dtype {dtype!r}; use bf16, fp8 or int4", param_hint="--dtype"
        )
    if kv_dtype not in ("bf16", "fp8"):
        raise typer.BadParameter(
            f"unknown KV dtype {kv_dtype!r}; use bf16 or fp8", param_hint="--kv-dtype"
        )
    if method not in ("eagle3", "eagle", "draft_model", "ngram", "mtp"):
        raise typer.BadParameter(
            f"unknown method {method!r}; use eagle3, eagle, draft_model, ngram or mtp",
            param_hint="--method",
        )


def _drafter(method: str, draft: str | None) -> DrafterConfig:
    m = method.strip().lower()
    if m == "eagle3":
        return Eagle3Drafter()
    if m == "eagle":
        return EagleDrafter()
    if m == "mtp":
        return MtpDrafter()
    if m == "ngram":
        return NgramDrafter()
    if m == "draft_model":
        return DraftModelDrafter(model=draft or "llama-3.2-1b")
    raise typer.BadParameter(
        f"unknown method {method!r}; use eagle3, eagle, draft_model, ngram or mtp",
        param_hint="--method",
    )


@app.command("simulate")
def simulate_cmd(
    model: ModelOpt = "llama-3.3-70b",
    gpu: GpuOpt = "h100",
    tp: TpOpt = None,
    dtype: DtypeOpt = "fp8",
    kv_dtype: KvDtypeOpt = "bf16",
    method: MethodOpt = "eagle3",
    draft: DraftOpt = None,
    ks: Annotated[
        str, typer.Option("--k", "-k", help="Comma-separated K values to compare.")
    ] = "1,3,5",
    alphas: Annotated[
        str, typer.Option("--alpha", "-a", help="Comma-separated α values (one class each).")
    ] = "0.4,0.5,0.55,0.6,0.7,0.8",
    classes: Annotated[
        list[str] | None,
        typer.Option(
            "--class", help="NAME:SHARE:ALPHA, repeated: one traffic mix (replaces --alpha)."
        ),
    ] = None,
    concurrency: Annotated[
        str | None, typer.Option("--concurrency", "-c", help="Closed-loop users, comma-separated.")
    ] = None,
    rate: Annotated[
        str | None, typer.Option("--rate", help="Open-loop request rates (req/s), comma-separated.")
    ] = None,
    burstiness: Annotated[
        float,
        typer.Option("--burstiness", min=0.01, help="Gamma shape of open-loop gaps (1 = Poisson)."),
    ] = 1.0,
    think_time: Annotated[
        float, typer.Option("--think-time", min=0.0, help="Closed-loop think time (s).")
    ] = 0.0,
    prompt_len: Annotated[
        str,
        typer.Option(
            "--prompt-len", help="fixed:N | uniform:LO:HI | lognormal:MEAN[:SIGMA] | file:PATH"
        ),
    ] = "lognormal:512",
    output_len: Annotated[
        str, typer.Option("--output-len", help="Same forms as --prompt-len.")
    ] = "lognormal:256",
    num_requests: Annotated[
        int | None,
        typer.Option(
            "--num-requests",
            "-n",
            min=1,
            help="Requests per load level (default: 8 per user, >= 100).",
        ),
    ] = None,
    disable_above: Annotated[
        int | None,
        typer.Option(
            "--disable-above-batch", min=1, help="Turn speculation off above this batch size."
        ),
    ] = None,
    max_num_seqs: Annotated[int, typer.Option("--max-num-seqs", min=1)] = 256,
    max_batched: Annotated[int, typer.Option("--max-num-batched-tokens", min=1)] = 8192,
    bw_eff: Annotated[float | None, typer.Option("--bw-efficiency", min=0.01, max=1.0)] = None,
    compute_eff: Annotated[
        float | None, typer.Option("--compute-efficiency", min=0.01, max=1.0)
    ] = None,
    step_overhead_ms: Annotated[float, typer.Option("--step-overhead-ms", min=0.0)] = 1.0,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    no_breakeven_sim: Annotated[
        bool, typer.Option("--no-breakeven-sim", help="Skip the simulator bisection for α_be.")
    ] = False,
    plot: Annotated[
        Path | None, typer.Option("--plot", help="Write PNG plots into this folder.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Continuous-batching simulation: where speculation pays, where it stops, and what P99 ITL does.

    With no arguments: Llama-3.3-70B FP8 on H100, EAGLE-3, K ∈ {1, 3, 5}, α ∈ {0.4 … 0.8},
    concurrency ∈ {1, 16, 64, 256}, each paired with a no-speculation run on the same requests.
    """
    _check_deployment_flags(dtype, kv_dtype, method)
    k_list = _int_list(ks, "--k", lo=1)
    if classes:
        parsed = _parse_classes(classes, require_alpha=True)
        try:
            validate_shares(parsed)
        except ConfigError as exc:
            raise typer.BadParameter(str(exc), param_hint="--class") from None
        mixes: tuple[Mix, ...] = (
            Mix(
                label="mix",
                classes=tuple(SimClass(name=c.name, share=c.share, alpha=c.alpha) for c in parsed),
            ),
        )
    else:
        mixes = tuple(
            Mix(label=f"α={a:g}", classes=(SimClass(name="all", share=1.0, alpha=a),))
            for a in _float_list(alphas, "--alpha", 0.0, 1.0)
        )
    if concurrency and rate:
        raise typer.BadParameter("give --concurrency or --rate, not both", param_hint="--rate")
    conc = (
        tuple(_int_list(concurrency, "--concurrency"))
        if concurrency
        else (None if rate else (1, 16, 64, 256))
    )
    rates = tuple(_float_list(rate, "--rate", 1e-9, None)) if rate else None
    try:
        workload = WorkloadConfig(
            prompt_len=_length(prompt_len, "--prompt-len"),
            output_len=_length(output_len, "--output-len"),
        )
        dep = DeploymentConfig(
            model=model,
            gpu=gpu,
            tp=tp,
            weight_dtype=dtype,
            kv_dtype=kv_dtype,
            bw_efficiency=bw_eff,
            compute_efficiency=compute_eff,
            step_overhead_ms=step_overhead_ms,
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_batched,
            drafter=_drafter(method, draft),
        )
        cfg = SweepConfig(
            deployment=dep,
            workload=workload,
            mixes=mixes,
            ks=tuple(k_list),
            concurrencies=conc,
            rates=rates,
            burstiness=burstiness,
            think_time_s=think_time,
            num_requests=num_requests,
            disable_above_batch=disable_above,
            seed=seed,
            simulate_breakeven=not no_breakeven_sim,
        )
    except ValidationError as exc:
        raise typer.BadParameter(str(exc.errors()[0]["msg"])) from None
    peak = min(max(conc) if conc else max_num_seqs, max_num_seqs)
    need = int(peak * (length_mean(workload.prompt_len) + length_mean(workload.output_len)))
    try:
        resolved = resolve_deployment(dep, need_kv_tokens=need)
    except SpecError as exc:
        raise typer.BadParameter(str(exc), param_hint="--model/--gpu/--tp/--dtype") from None
    cost = build_cost_model(resolved)
    with console.status("simulating…", spinner="dots") if not as_json else _nullcontext():
        result = run_sweep(cfg, resolved, cost)
    if plot is not None:
        plot.mkdir(parents=True, exist_ok=True)
        for name, fig in (
            ("speedup_vs_load.png", plots.speedup_figure(result)),
            ("p99_itl_per_token.png", plots.p99_itl_figure(result)),
            ("itl_per_token_cdf.png", plots.itl_cdf_figure(result)),
        ):
            fig.savefig(plot / name, dpi=120)
    _emit("simulate", result, as_json, sim_report.render_sweep)
    if plot is not None and not as_json:
        console.print(f"plots written to {plot}/")


# ---------------------------------------------------------------- plan
@app.command("plan")
def plan_cmd(
    classes: Annotated[
        list[str],
        typer.Option(
            "--class",
            help="NAME:SHARE[:ALPHA], repeated; a class without ALPHA gets a documented prior.",
        ),
    ],
    concurrency: Annotated[
        int, typer.Option("--concurrency", "-c", min=1, help="Target concurrency.")
    ],
    model: ModelOpt = "llama-3.3-70b",
    gpu: GpuOpt = "h100",
    tp: TpOpt = None,
    dtype: DtypeOpt = "bf16",
    kv_dtype: KvDtypeOpt = "bf16",
    method: MethodOpt = "eagle3",
    draft: DraftOpt = None,
    peak: Annotated[
        int | None, typer.Option("--peak-concurrency", min=1, help="Peak concurrency.")
    ] = None,
    slo: Annotated[
        float | None, typer.Option("--slo-p99-itl-ms", min=0.0, help="P99 ITL SLO (ms).")
    ] = None,
    engine: Annotated[str, typer.Option("--engine", help="vllm or sglang.")] = "vllm",
    engine_version: Annotated[
        str | None,
        typer.Option("--engine-version", help="e.g. 0.11 (no batch-size schedule before 0.32)."),
    ] = None,
    k: Annotated[
        int | None,
        typer.Option(
            "--k",
            "-k",
            min=1,
            help="Drafts per step (default: the simulator's best at the target).",
        ),
    ] = None,
    alpha_from: Annotated[
        Path | None,
        typer.Option(
            "--alpha-from", help="Measured α: an alphagate summary or vllm bench serve JSON."
        ),
    ] = None,
    prompt_len: Annotated[
        str,
        typer.Option(
            "--prompt-len", help="fixed:N | uniform:LO:HI | lognormal:MEAN[:SIGMA] | file:PATH"
        ),
    ] = "lognormal:512",
    output_len: Annotated[
        str, typer.Option("--output-len", help="Same forms as --prompt-len.")
    ] = "lognormal:256",
    url: Annotated[
        str, typer.Option("--url", help="Server URL used in the emitted commands.")
    ] = "http://127.0.0.1:8000",
    seed: Annotated[int, typer.Option("--seed")] = 0,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the markdown plan here.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Staged rollout plan: verdict, predicted table, per-class gains, memory, engine config, stages, risks."""
    _check_deployment_flags(dtype, kv_dtype, method)
    parsed = _parse_classes(classes, require_alpha=False)
    try:
        validate_shares(parsed)
    except ConfigError as exc:
        raise typer.BadParameter(str(exc), param_hint="--class") from None
    sources: dict[str, str] = {}
    if alpha_from is not None:
        try:
            measured = load_measured_alphas(alpha_from, k)
        except MeasuredError as exc:
            raise typer.BadParameter(str(exc), param_hint="--alpha-from") from None
        updated = []
        for c in parsed:
            a = measured.get(c.name, measured.get("*"))
            if a is not None and c.alpha is None:
                c = c.model_copy(update={"alpha": a})
                sources[c.name] = f"measured ({alpha_from.name})"
            updated.append(c)
        parsed = updated
    if engine not in ("vllm", "sglang"):
        raise typer.BadParameter(
            f"unknown engine {engine!r}; use vllm or sglang", param_hint="--engine"
        )
    try:
        req = PlanRequest(
            model=model,
            gpu=gpu,
            tp=tp,
            dtype=dtype,
            kv_dtype=kv_dtype,
            method=method,
            draft=draft,
            classes=tuple(parsed),
            measured_source=sources,
            concurrency=concurrency,
            peak_concurrency=peak,
            slo_p99_itl_ms=slo,
            engine=engine,
            engine_version=engine_version,
            k=k,
            prompt_len=_length(prompt_len, "--prompt-len"),
            output_len=_length(output_len, "--output-len"),
            url=url,
            seed=seed,
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        raise typer.BadParameter(
            f"{'.'.join(str(x) for x in first['loc'])}: {first['msg']}"
        ) from None
    try:
        with console.status("planning…", spinner="dots") if not as_json else _nullcontext():
            plan = build_plan(req)
    except SpecError as exc:
        raise typer.BadParameter(str(exc), param_hint="--model/--gpu/--tp/--dtype") from None
    markdown = render_plan_markdown(plan)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(markdown, encoding="utf-8")
    if as_json:
        typer.echo(
            json.dumps(
                {"schema": RESULTS_SCHEMA, "verb": "plan", **plan.model_dump(mode="json")}, indent=2
            )
        )
    else:
        console.print(Markdown(markdown))
        if out is not None:
            console.print(f"plan written to {out}")


# ---------------------------------------------------------------- twin
def _mixes_or_classes(alpha: float, classes: list[str] | None) -> tuple[SimClass, ...]:
    if classes:
        parsed = _parse_classes(classes, require_alpha=True)
        try:
            validate_shares(parsed)
        except ConfigError as exc:
            raise typer.BadParameter(str(exc), param_hint="--class") from None
        return tuple(SimClass(name=c.name, share=c.share, alpha=c.alpha) for c in parsed)
    return (SimClass(name="default", share=1.0, alpha=alpha),)


@app.command("twin")
def twin_cmd(
    model: ModelOpt = "llama-3.1-8b",
    gpu: GpuOpt = "h100",
    tp: TpOpt = None,
    dtype: DtypeOpt = "bf16",
    kv_dtype: KvDtypeOpt = "bf16",
    method: MethodOpt = "eagle3",
    draft: DraftOpt = None,
    k: Annotated[
        int, typer.Option("--k", "-k", min=0, help="Drafts per step; 0 = no speculation.")
    ] = 3,
    alpha: Annotated[
        float, typer.Option("--alpha", "-a", min=0.0, max=1.0, help="α of the single class.")
    ] = 0.7,
    classes: Annotated[
        list[str] | None, typer.Option("--class", help="NAME:SHARE:ALPHA, repeated.")
    ] = None,
    output_len: Annotated[
        str, typer.Option("--output-len", help="Output length when max_tokens does not cap it.")
    ] = "lognormal:256",
    time_scale: Annotated[
        float,
        typer.Option(
            "--time-scale", min=0.0, help="Wall s per simulated s; 0 = as fast as possible."
        ),
    ] = 1.0,
    max_num_seqs: Annotated[int, typer.Option("--max-num-seqs", min=1)] = 256,
    max_batched: Annotated[int, typer.Option("--max-num-batched-tokens", min=1)] = 8192,
    max_model_len: Annotated[int, typer.Option("--max-model-len", min=2)] = 8192,
    host: Annotated[
        str, typer.Option("--host", help="Bind address (loopback by default).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535)] = 8000,
    served: Annotated[str, typer.Option("--served-model-name")] = "alphagate-twin",
    api_key: Annotated[
        str | None,
        typer.Option("--api-key", envvar="ALPHAGATE_API_KEY", help="Require this Bearer key."),
    ] = None,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    emit_send_time: Annotated[bool, typer.Option("--emit-send-time", hidden=True)] = False,
) -> None:
    """A vLLM-like OpenAI endpoint on the simulator, with or without speculative decoding.

    Step timing comes from the simulator's roofline model for MODEL on GPU, acceptance from α,
    and /metrics uses vLLM's metric names. A request's class is its `alphagate_class` body field,
    else the suffix of `model` ("NAME:CLASS"), else drawn by the class shares.
    """

    from aiohttp import web

    _check_deployment_flags(dtype, kv_dtype, method)

    from alphagate.twin.config import TwinConfig
    from alphagate.twin.server import create_app

    try:
        cfg = TwinConfig(
            deployment=DeploymentConfig(
                model=model,
                gpu=gpu,
                tp=tp,
                weight_dtype=dtype,
                kv_dtype=kv_dtype,
                max_num_seqs=max_num_seqs,
                max_num_batched_tokens=max_batched,
                drafter=_drafter(method, draft),
            ),
            k=k,
            classes=_mixes_or_classes(alpha, classes),
            output_len=_length(output_len, "--output-len"),
            served_model_name=served,
            time_scale=time_scale,
            max_model_len=max_model_len,
            api_key=api_key,
            seed=seed,
            emit_send_time=emit_send_time,
        )
        application = create_app(cfg)
    except ValidationError as exc:
        raise typer.BadParameter(str(exc.errors()[0]["msg"])) from None
    except SpecError as exc:
        raise typer.BadParameter(str(exc), param_hint="--model/--gpu/--tp/--dtype") from None
    spec = (
        f"K={k}, α per class {[(c.name, c.alpha) for c in cfg.classes]}" if k else "no speculation"
    )
    console.print(
        f"alphagate twin: {served} on http://{host}:{port} — {model} on {gpu}, {spec}, time scale {time_scale:g}"
    )
    web.run_app(application, host=host, port=port, print=None, access_log=None)


# ---------------------------------------------------------------- bench
@app.command("bench")
def bench_cmd(
    url: Annotated[
        str | None, typer.Option("--url", help="Endpoint base URL (one target).")
    ] = None,
    baseline_url: Annotated[
        str | None, typer.Option("--baseline-url", help="A/B: the no-speculation server.")
    ] = None,
    candidate_url: Annotated[
        str | None, typer.Option("--candidate-url", help="A/B: the speculative server.")
    ] = None,
    endpoint: Annotated[
        str, typer.Option("--endpoint", help="completions or chat.")
    ] = "completions",
    model: Annotated[
        str | None, typer.Option("--model", help="Model name (default: first of /v1/models).")
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option(
            "--api-key",
            envvar="ALPHAGATE_API_KEY",
            help="Bearer key (or $ALPHAGATE_API_KEY); never written out.",
        ),
    ] = None,
    header: Annotated[
        list[str] | None, typer.Option("--header", help="Extra header NAME:VALUE, repeated.")
    ] = None,
    dataset: Annotated[
        str,
        typer.Option(
            "--dataset",
            help="ShareGPT .json, .jsonl (prompt|messages, class, max_tokens) or synthetic:in=N,out=M.",
        ),
    ] = "synthetic:in=512,out=256",
    concurrency: Annotated[
        str | None, typer.Option("--concurrency", "-c", help="Closed-loop levels, e.g. 1,16,64.")
    ] = None,
    rate: Annotated[
        float | None,
        typer.Option(
            "--rate",
            min=0.0,
            help="Open-loop request rate (req/s); with --concurrency it caps in-flight requests.",
        ),
    ] = None,
    burstiness: Annotated[float, typer.Option("--burstiness", min=0.01)] = 1.0,
    num_prompts: Annotated[int, typer.Option("--num-prompts", "-n", min=1)] = 200,
    duration: Annotated[
        float | None,
        typer.Option("--duration", min=0.0, help="Stop sending after this many seconds per level."),
    ] = None,
    warmup: Annotated[
        int,
        typer.Option(
            "--warmup", min=0, help="First N requests per level excluded from statistics."
        ),
    ] = 0,
    seed: Annotated[int, typer.Option("--seed")] = 0,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout", min=0.001, help="Seconds without data before a stream counts as stalled."
        ),
    ] = 60.0,
    metrics_url: Annotated[
        list[str] | None,
        typer.Option(
            "--metrics-url", help="Prometheus endpoints to diff (replicas); default <url>/metrics."
        ),
    ] = None,
    no_metrics: Annotated[
        bool, typer.Option("--no-metrics", help="Do not scrape /metrics.")
    ] = False,
    strict: Annotated[
        bool, typer.Option("--strict", help="A malformed dataset line is fatal.")
    ] = False,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Folder for requests.jsonl and summary.json.")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Benchmark an OpenAI-compatible endpoint (vLLM, SGLang, the twin) — or baseline vs candidate."""
    if url and (baseline_url or candidate_url):
        raise typer.BadParameter(
            "give --url, or --baseline-url with --candidate-url", param_hint="--url"
        )
    if url:
        targets: tuple[tuple[str, str], ...] = (("default", url),)
    elif baseline_url and candidate_url:
        targets = (("baseline", baseline_url), ("candidate", candidate_url))
    else:
        raise typer.BadParameter(
            "give --url, or both --baseline-url and --candidate-url", param_hint="--url"
        )
    if endpoint not in ("completions", "chat"):
        raise typer.BadParameter("use completions or chat", param_hint="--endpoint")
    headers: dict[str, str] = {}
    for h in header or []:
        name, sep, value = h.partition(":")
        if not sep or not name.strip():
            raise typer.BadParameter(f"{h!r} is not NAME:VALUE", param_hint="--header")
        headers[name.strip()] = value.strip()
    levels = _bench_levels(concurrency, rate)
    try:
        prompts, problems = load_prompts(dataset, num_prompts, seed, strict=strict)
    except DatasetError as exc:
        raise typer.BadParameter(str(exc), param_hint="--dataset") from None
    cfg = BenchConfig(
        targets=targets,
        endpoint=endpoint,
        model=model,
        api_key=SecretStr(api_key) if api_key else None,
        headers=headers,
        levels=levels,
        num_prompts=num_prompts,
        duration_s=duration,
        burstiness=burstiness,
        warmup=warmup,
        seed=seed,
        timeout_s=timeout,
        metrics_urls=tuple(metrics_url) if metrics_url else None,
        scrape_metrics=not no_metrics,
    )
    out_dir = out or Path("results") / time.strftime("bench-%Y%m%d-%H%M%S")
    out_dir.mkdir(parents=True, exist_ok=True)
    if not as_json:
        for p in problems:
            console.print(f"[yellow]skipped:[/yellow] {p}", highlight=False)
    summary, interrupted = _run_bench(cfg, prompts, out_dir, quiet=as_json)
    summary["dataset_problems"] = problems
    summary["interrupted"] = interrupted
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    if as_json:
        typer.echo(json.dumps(summary, indent=2))
    else:
        levels_out = [LevelSummary.model_validate(x) for x in summary["levels"]]
        comps = [Comparison.model_validate(x) for x in summary["comparisons"]]
        console.print(bench_report.render_bench(levels_out, comps))
        console.print(
            f"records: {out_dir / 'requests.jsonl'}   summary: {out_dir / 'summary.json'}"
        )
    if interrupted:
        raise typer.Exit(130)


def _bench_levels(concurrency: str | None, rate: float | None) -> tuple[Level, ...]:
    conc = _int_list(concurrency, "--concurrency") if concurrency else None
    if rate is not None and rate <= 0:
        raise typer.BadParameter("must be > 0", param_hint="--rate")
    if rate is not None:
        if conc:
            return tuple(Level(label=f"r{rate:g}-c{c}", concurrency=c, rate=rate) for c in conc)
        return (Level(label=f"r{rate:g}", rate=rate),)
    return tuple(Level(label=f"c{c}", concurrency=c) for c in (conc or [1]))


def _run_bench(
    cfg: BenchConfig, prompts: list[Prompt], out_dir: Path, *, quiet: bool
) -> tuple[dict[str, Any], bool]:
    """Run the levels with a live display; on Ctrl-C keep every completed record and summarise them."""
    import asyncio

    import aiohttp

    records_path = out_dir / "requests.jsonl"
    fh = records_path.open("a", encoding="utf-8")
    results: list[LevelSummary] = []
    state: dict[str, Any] = {"runner": None}
    live_rows: list[RequestRecord] = []

    def sink(rec: RequestRecord) -> None:
        fh.write(rec.model_dump_json() + "\n")
        fh.flush()

    async def main(live: Any) -> None:
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(connector=connector) as session:

            def on_record(rec: RequestRecord) -> None:
                live_rows.append(rec)
                if live is not None and len(live_rows) % 5 == 0:
                    live.update(_progress(live_rows, len(prompts)))

            runner = BenchRunner(cfg, prompts, session, sink=sink, on_record=on_record)
            state["runner"] = runner
            for level in cfg.levels:
                for name, url in cfg.targets:
                    live_rows.clear()
                    results.append(await runner.run_level(name, url, level))

    interrupted = False
    try:
        if quiet:
            asyncio.run(main(None))
        else:
            from rich.live import Live

            with Live(console=console, refresh_per_second=4, transient=True) as live:
                asyncio.run(main(live))
    except KeyboardInterrupt:
        interrupted = True
    finally:
        fh.close()
    runner = state["runner"]
    if interrupted and runner is not None:
        done_levels = {(r.target, r.level) for r in results}
        for name, url in cfg.targets:
            for level in cfg.levels:
                recs = [r for r in runner.records if r.target == name and r.level == level.label]
                if recs and (name, level.label) not in done_levels:
                    results.append(
                        LevelSummary(
                            target=name,
                            url=url,
                            level=level.label,
                            concurrency=level.concurrency,
                            rate=level.rate,
                            overall=stats_of(recs),
                            classes={},
                            acceptance=None,
                        )
                    )
    comps = []
    by = {(r.target, r.level): r for r in results}
    for level in cfg.levels:
        b, c = by.get(("baseline", level.label)), by.get(("candidate", level.label))
        if b is not None and c is not None:
            comps.append(compare(b, c))
    summary = {
        "schema": "alphagate.bench/v1",
        "config": cfg.model_dump(mode="json"),
        "levels": [r.model_dump(mode="json") for r in results],
        "comparisons": [c.model_dump(mode="json") for c in comps],
    }
    return summary, interrupted


def _progress(rows: list[RequestRecord], total: int) -> RenderableType:
    s = stats_of(rows)
    last = rows[-1]
    return bench_report.progress_table(
        last.level,
        last.target,
        s.completed,
        s.failed,
        s.output_tokens_per_s,
        s.itl_per_token_ms.p99,
        total,
    )


# ---------------------------------------------------------------- demo
@app.command("demo")
def demo() -> None:
    """Run the whole workflow on its embedded defaults (no GPU, no network)."""
    console.rule("[bold]alphagate demo — measure α before you flip the flag")
    grid = table_answer(
        [0.4, 0.5, 0.55, 0.6, 0.7, 0.8, 0.9], [1, 2, 3, 4, 5, 6, 8], 0.05, [1.0, 1.15]
    )
    console.print(model_report.render_table(grid))
    console.print(model_report.render_linear_gap(grid))
    lesson = speedup_answer(0.7, 5, CostModel(draft_cost=0.02, verify_cost=1.0))
    console.print(
        f"The lesson's worked case, K=5, α=0.7, overhead 0.1: linear (1+K·α)/(1+0.1) = "
        f"{4.5 / 1.1:.2f}×; exact E = {lesson.expected_tokens_per_pass:.3f} tokens/pass → "
        f"{lesson.expected_tokens_per_pass / 1.1:.2f}× (1+K·α overstates E by "
        f"{(lesson.linear_overestimate_ratio - 1) * 100:.0f}%)."
    )
    console.rule("[bold]The lesson's experiment, simulated: Llama-3.3-70B FP8 on H100, EAGLE-3")
    simulate_cmd()
    console.rule(
        "[bold]The rollout plan for the lesson's traffic: 70% chat at α 0.7, 30% code at α 0.4"
    )
    out = Path("demo-output") / "rollout-plan.md"
    for concurrency in (64, 256):
        plan = build_plan(
            PlanRequest(
                model="llama-3.3-70b",
                gpu="h100",
                dtype="fp8",
                concurrency=concurrency,
                peak_concurrency=256,
                classes=(
                    TrafficClass(name="chat", share=0.7, alpha=0.7),
                    TrafficClass(name="code", share=0.3, alpha=0.4),
                ),
            )
        )
        console.print(
            f"concurrency {concurrency}: [bold]{plan.verdict.upper()}[/bold] — {plan.reason}"
        )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_plan_markdown(plan), encoding="utf-8")
    console.print(f"full plan (concurrency 256, K = {plan.k}) written to {out}")
    _demo_measure()


def _demo_measure() -> None:
    """Stage 0–2 on two local twins: baseline vs EAGLE-3 (α = 0.7), measured, not assumed."""
    from alphagate.twin.background import twin_in_thread
    from alphagate.twin.config import TwinConfig

    console.rule(
        "[bold]Measure α before you flip the flag: two local twins, baseline vs EAGLE-3 (K = 3, α = 0.7)"
    )
    dep = DeploymentConfig(model="llama-3.1-8b")
    cls = (SimClass(name="chat", share=1.0, alpha=0.7),)
    base_cfg = TwinConfig(deployment=dep, k=0, classes=cls, time_scale=0.5)
    cand_cfg = TwinConfig(deployment=dep, k=3, classes=cls, time_scale=0.5)
    out_dir = Path("demo-output") / "bench"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "requests.jsonl").unlink(missing_ok=True)
    prompts, _ = load_prompts("synthetic:in=256,out=96", 48, seed=0)
    with twin_in_thread(base_cfg) as (b_url, _), twin_in_thread(cand_cfg) as (c_url, _):
        cfg = BenchConfig(
            targets=(("baseline", b_url), ("candidate", c_url)),
            levels=(Level(label="c1", concurrency=1), Level(label="c16", concurrency=16)),
            num_prompts=len(prompts),
        )
        summary, _ = _run_bench(cfg, prompts, out_dir, quiet=False)
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    levels = [LevelSummary.model_validate(x) for x in summary["levels"]]
    comps = [Comparison.model_validate(x) for x in summary["comparisons"]]
    console.print(bench_report.render_bench(levels, comps))
    cand = [
        lv.acceptance for lv in levels if lv.target == "candidate" and lv.acceptance is not None
    ]
    if cand and cand[-1].draft_acceptance_rate is not None:
        a = cand[-1]
        console.print(
            f"measured ρ = {a.draft_acceptance_rate:.3f}, τ = {a.mean_acceptance_length:.3f} → implied α = "
            f"{a.implied_alpha_iid:.3f} (configured 0.7); records and summary in {out_dir}/"
        )


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
