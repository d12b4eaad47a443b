"""The commands that produce a report's inputs, rebuilt from what each results file records.

A results file records its answer, not always the command line behind it: a plan and a sweep keep
the deployment, the classes and the loads but not the length distributions or the seed; a bench
summary keeps its configuration but not the dataset. So each command comes with the flags it could
not recover, and the caller's exact commands (``alphagate demo`` knows them) take precedence.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any

from alphagate.bench.records import BenchResult
from alphagate.plan.records import Plan
from alphagate.sim.sweep import SweepResult
from alphagate.specs.deployment import DeploymentSummary
from alphagate.specs.gpus import GPU_PRESETS
from alphagate.specs.models import MODEL_PRESETS

__all__ = ["Command", "bench_command", "model_command", "plan_command", "sweep_command"]


@dataclass(frozen=True, kw_only=True)
class Command:
    """A command line, the alphagate command it runs (``plan``, ``simulate``, ``bench``,
    ``model``), and the flags it could not recover from the file (empty: exact)."""

    text: str
    verb: str
    unrecorded: tuple[str, ...] = ()


def _preset(name: str, presets: dict[str, str]) -> str:
    return presets.get(name, name)


def _deployment_flags(d: DeploymentSummary) -> list[str]:
    models = {shape.name: key for key, shape in MODEL_PRESETS.items()}
    gpus = {spec.name: key for key, spec in GPU_PRESETS.items()}
    model = d.model_ref or _preset(d.model, models)
    flags = [
        f"--model {shlex.quote(model)}",
        f"--gpu {shlex.quote(_preset(d.gpu, gpus))}",
        f"--dtype {d.weight_dtype}",
        f"--kv-dtype {d.kv_dtype}",
        f"--method {d.method}",
    ]
    if not d.tp_was_chosen:
        flags.append(f"--tp {d.tp}")
    return flags


def _out(source: str) -> str:
    return f"> {shlex.quote(source)}"


def plan_command(p: Plan, source: str) -> Command:
    """``alphagate plan …`` from a plan's deployment, classes, loads and engine."""
    classes = []
    for c in p.classes:
        alpha = f":{c.alpha_label.replace(' ', '')}" if c.alpha_source == "given" else ""
        classes.append(f"--class {shlex.quote(f'{c.name}:{c.share:g}{alpha}')}")
    parts = ["alphagate plan", *_deployment_flags(p.deployment_detail), *classes]
    parts.append(f"--concurrency {p.concurrency}")
    if p.peak_concurrency != p.concurrency:
        parts.append(f"--peak-concurrency {p.peak_concurrency}")
    if p.engine != "vllm":
        parts.append(f"--engine {p.engine}")
    if p.engine_version:
        parts.append(f"--engine-version {p.engine_version}")
    if p.slo_p99_itl_ms is not None:
        parts.append(f"--slo-p99-itl-ms {p.slo_p99_itl_ms:g}")
    unrecorded = ["--prompt-len", "--output-len", "--seed", "--url", "--k and --draft (if given)"]
    if any(c.alpha_source == "measured" for c in p.classes):
        unrecorded.insert(0, "--alpha-from FILE (a class's α was measured; see its source)")
    return Command(
        text=" ".join([*parts, "--json", _out(source)]), verb="plan", unrecorded=tuple(unrecorded)
    )


def sweep_command(r: SweepResult, source: str) -> Command:
    """``alphagate simulate …`` from a sweep's deployment, K values, α values and loads."""
    parts = ["alphagate simulate", *_deployment_flags(r.deployment_detail)]
    parts.append(f"--k {','.join(str(k) for k in r.ks)}")
    alphas = [c.alpha for c in r.cells if c.k == r.ks[0] and c.load == r.rows[0].load]
    unrecorded = ["--prompt-len", "--output-len", "--seed", "--num-requests"]
    if all(a is not None for a in alphas):
        parts.append(f"--alpha {','.join(f'{a:g}' for a in alphas if a is not None)}")
    else:
        unrecorded.insert(0, "--class (the traffic mix is not recorded in a simulate result)")
    loads = ",".join(f"{row.load:g}" for row in r.rows)
    closed = r.rows[0].load_kind == "concurrency"
    parts.append(f"--concurrency {loads}" if closed else f"--rate {loads}")
    if not closed:
        unrecorded.append("--burstiness")
    return Command(
        text=" ".join([*parts, "--json", _out(source)]),
        verb="simulate",
        unrecorded=tuple(unrecorded),
    )


def bench_command(b: BenchResult, source: str) -> Command:
    """``alphagate bench …`` from the configuration a bench summary records (secrets redacted)."""
    cfg = b.config
    targets = {lv.target: lv.url for lv in b.levels}
    parts = ["alphagate bench"]
    if "candidate" in targets:
        parts += [
            f"--baseline-url {shlex.quote(targets.get('baseline', ''))}",
            f"--candidate-url {shlex.quote(targets['candidate'])}",
        ]
    elif targets:
        parts.append(f"--url {shlex.quote(next(iter(targets.values())))}")
    conc = [lv.concurrency for lv in b.levels if lv.concurrency is not None]
    rates = {lv.rate for lv in b.levels if lv.rate is not None}
    if conc:
        parts.append(f"--concurrency {','.join(str(c) for c in dict.fromkeys(conc))}")
    if len(rates) == 1:
        parts.append(f"--rate {next(iter(rates)):g}")
    for key, flag in (
        ("endpoint", "--endpoint"),
        ("model", "--model"),
        ("dataset", "--dataset"),
        ("only_class", "--only-class"),
        ("num_prompts", "--num-prompts"),
        ("warmup", "--warmup"),
        ("seed", "--seed"),
        ("temperature", "--temperature"),
    ):
        value = cfg.get(key)
        if value not in (None, 0, 0.0, ""):
            parts.append(f"{flag} {shlex.quote(str(value))}")
    repeats = cfg.get("repeats")
    if isinstance(repeats, int) and repeats > 1:
        parts.append(f"--repeats {repeats}")
    parts.append(f"--out {shlex.quote(str(PurePath(source).parent))}")
    unrecorded: tuple[str, ...] = ("--api-key / --header (never written)",)
    if not cfg.get("dataset"):
        unrecorded = ("--dataset (not recorded in summary.json)", *unrecorded)
    return Command(text=" ".join(parts), verb="bench", unrecorded=unrecorded)


_MODEL_FLAGS: dict[str, tuple[tuple[str, str], ...]] = {
    "model speedup": (("alpha", "--alpha"), ("k", "--k")),
    "model breakeven": (("k", "--k"),),
    "model required": (("target_speedup", "--speedup"), ("k", "--k")),
    "model optimal-k": (("alpha", "--alpha"), ("k_max", "--k-max")),
    "model blend": (("k", "--k"),),
    "model convert": (("k", "--k"),),
}
_CONVERT_FLAGS = {
    "alpha": "--alpha",
    "draft_acceptance_rate": "--rho",
    "mean_acceptance_length": "--tau",
}


def _num(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _csv(values: Any) -> str:
    return ",".join(_num(v) for v in values)


def model_command(verb: str, fields: dict[str, Any], source: str) -> Command:
    """``alphagate model …`` from an answer's fields (every model answer records its inputs)."""
    parts = [f"alphagate {verb}"]
    parts += [f"{flag} {_num(fields[key])}" for key, flag in _MODEL_FLAGS.get(verb, ())]
    if verb == "model blend":
        parts += [f"--class {c['name']}:{c['share']:g}:{c['alpha']:g}" for c in fields["classes"]]
    if verb == "model convert":
        parts.append(f"{_CONVERT_FLAGS[fields['given']]} {_num(fields['given_value'])}")
    if verb == "model table":
        parts += [f"--alphas {_csv(fields['alphas'])}", f"--ks {_csv(fields['ks'])}"]
        parts.append(f"--verify-cost {_csv(fields['verify_costs'])}")
    if "draft_cost" in fields:
        parts.append(f"--draft-cost {_num(fields['draft_cost'])}")
    if "verify_cost" in fields:
        parts.append(f"--verify-cost {_num(fields['verify_cost'])}")
    unrecorded = ("--target", "--draft", "--draft-vocab-size") if verb == "model memory" else ()
    return Command(
        text=" ".join([*parts, "--json", _out(source)]), verb="model", unrecorded=unrecorded
    )
