"""Evidence checked before it is judged: a gate is what a CI job trusts, so evidence that
contradicts itself, counts the same records twice, compares two different workloads, or was
measured on another deployment or long ago is refused — never judged.

- **self-consistency** (:func:`check_estimate`): every figure of an acceptance record must follow
  from its own counts (ρ, τ and α recomputed with :func:`~alphagate.measure.estimate.estimate`),
  lie inside its own interval, and be finite;
- **records** (:func:`check_records`): a bench run's ``requests.jsonl`` holds each request once,
  and as many as its summary counts;
- **an A/B that is one** (:func:`check_pair`): a baseline and a candidate from two different runs
  (not the same file, not the two halves of other A/Bs) on the same workload — dataset, request
  counts, endpoint, sampling, and the prompt and output lengths the servers reported;
- **the deployment** (:func:`check_deployment`): evidence that names the model it measured must
  name the plan's;
- **definitions** (:func:`check_definitions`): a rule on ρ, or on the α it implies, is not
  judged on an SGLang draft tree's acceptance (accepted ÷ every verified node: not a chain's ρ);
  two readings of one traffic defined differently are refused where they meet
  (:meth:`~alphagate.gate.evidence.Evidence.add_acceptance`);
- **time** (:func:`window_problem`): a window that ends before it starts or after now is
  impossible (refused); one older than ``--max-age`` is stale (not enough evidence: measure
  again).

Each refusal is a :class:`~alphagate.core.errors.ConfigError` naming the files and the figures
(exit 2).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING

from alphagate.bench.records import BenchResult, RequestRecord, stats_of
from alphagate.core.errors import ConfigError
from alphagate.measure.estimate import AcceptanceEstimate, Interval, estimate

if TYPE_CHECKING:
    from alphagate.gate.rules import Rule

__all__ = [
    "DEFAULT_MAX_AGE_S",
    "bench_started_at",
    "check_checkpoint",
    "check_definitions",
    "check_deployment",
    "check_estimate",
    "check_pair",
    "check_records",
    "window_problem",
]

#: evidence older than this is stale by default (``gate --max-age``)
DEFAULT_MAX_AGE_S = 7 * 86_400.0
#: a window may end this far past the gate's clock (clocks of two machines differ)
CLOCK_SKEW_S = 300.0
#: relative difference in mean prompt or output tokens that makes two runs different workloads
LENGTH_TOLERANCE = 0.10
_TOL = 1e-6


def _inside(value: float | None, ci: Interval | None) -> bool:
    if value is None or ci is None:
        return True
    return ci.low - _TOL <= value <= ci.high + _TOL


def check_estimate(est: AcceptanceEstimate, where: str) -> None:
    """Refuse an acceptance record whose figures do not follow from its own counts."""
    for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
        v = getattr(est, name)
        if not math.isfinite(v) or v < 0:
            raise ConfigError(f"{where}: {name} = {v} is not a count")
    figures = {
        "draft_acceptance_rate": est.draft_acceptance_rate,
        "mean_acceptance_length": est.mean_acceptance_length,
        "alpha_iid": est.alpha_iid,
    }
    for name, v in figures.items():
        if v is not None and not math.isfinite(v):
            raise ConfigError(f"{where}: {name} is {v}")
    try:
        again = estimate(
            est.num_drafts,
            est.num_draft_tokens,
            est.num_accepted_tokens,
            list(est.accepted_per_pos),
            est.k,
        )
    except ValueError as exc:
        raise ConfigError(f"{where}: counts no speculative decoder produces: {exc}") from None
    for name, stated in figures.items():
        recomputed = getattr(again, name)
        if (stated is None) != (recomputed is None) or (
            stated is not None and recomputed is not None and abs(stated - recomputed) > 1e-6
        ):
            raise ConfigError(
                f"{where}: {name} {stated} does not follow from its own counts (they give "
                f"{recomputed}): the file was edited, or written by something else"
            )
    for name, ci in (
        ("draft_acceptance_rate", est.draft_acceptance_rate_ci),
        ("mean_acceptance_length", est.mean_acceptance_length_ci),
        ("alpha_iid", est.alpha_iid_ci),
    ):
        if ci is not None and (not math.isfinite(ci.low) or not math.isfinite(ci.high)):
            raise ConfigError(f"{where}: the interval of {name} is not finite")
        if not _inside(figures[name], ci):
            assert ci is not None
            raise ConfigError(
                f"{where}: {name} {figures[name]} lies outside its own interval "
                f"[{ci.low:.4g}, {ci.high:.4g}]"
            )


def check_records(result: BenchResult, records: list[RequestRecord], path: Path) -> None:
    """Each request of the run once, and as many as the summary counts."""
    twice = [key for key, n in Counter((r.run_id, r.id) for r in records).items() if n > 1]
    if twice:
        raise ConfigError(
            f"{path}: {len(twice)} requests of run {result.run_id} appear more than once in its "
            "requests.jsonl (a file joined to itself?): a gate would count them twice"
        )
    counted = sum(lv.overall.completed + lv.overall.failed for lv in result.levels)
    measured = sum(not r.warmup for r in records)
    if measured != counted:
        raise ConfigError(
            f"{path}: its requests.jsonl holds {measured} measured requests of run "
            f"{result.run_id}, its summary counts {counted}: the two do not describe one run"
        )
    for lv in result.levels:
        mine = [r for r in records if r.target == lv.target and r.level == lv.level]
        again = stats_of(mine, lv.overall.duration_s)
        for name, stated, recounted in (
            ("completed requests", lv.overall.completed, again.completed),
            ("failed requests", lv.overall.failed, again.failed),
            ("output tokens", lv.overall.output_tokens, again.output_tokens),
            ("mean TPOT (ms)", lv.overall.tpot_ms.mean, again.tpot_ms.mean),
            ("P99 ITL per token (ms)", lv.overall.itl_per_token_ms.p99, again.itl_per_token_ms.p99),
        ):
            if not _same(stated, recounted):
                raise ConfigError(
                    f"{path}: {lv.target} {lv.level}: the summary says {stated} {name}, its "
                    f"records give {recounted}: one of the two was edited"
                )


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))


def bench_started_at(result: BenchResult) -> float | None:
    """When a bench run started (Unix time): its provenance, else its run id
    (``YYYYmmddTHHMMSS-…``, local time); None when neither tells."""
    if result.started_at is not None:
        return result.started_at
    stamp = result.run_id.split("-", 1)[0]
    try:
        return time.mktime(time.strptime(stamp, "%Y%m%dT%H%M%S"))
    except ValueError:
        return None


def window_problem(
    start: float | None, end: float | None, where: str, max_age_s: float, now: float
) -> str | None:
    """Why evidence over ``[start, end]`` is stale (None: it is not). Raises
    :class:`ConfigError` for a window no measurement can have."""
    for name, t in (("start", start), ("end", end)):
        if t is not None and not math.isfinite(t):
            raise ConfigError(f"{where}: its window {name} is {t}")
    if start is not None and end is not None and end < start:
        raise ConfigError(f"{where}: its window ends {start - end:,.0f} s before it starts")
    last = end if end is not None else start
    if last is None:
        return None
    if last > now + CLOCK_SKEW_S:
        raise ConfigError(
            f"{where}: its window ends {time.strftime('%Y-%m-%d %H:%M', time.localtime(last))}, "
            "in the future"
        )
    age = now - last
    if age > max_age_s:
        return (
            f"{where} was measured {age / 86_400:.1f} days ago, more than --max-age "
            f"({max_age_s / 86_400:g} days): measure again"
        )
    return None


def _mean_tokens(records: list[RequestRecord], field: str) -> float | None:
    vals = [getattr(r, field) for r in records if r.ok and not r.warmup and getattr(r, field)]
    return sum(vals) / len(vals) if vals else None


def check_pair(
    base: tuple[Path, BenchResult, list[RequestRecord]],
    cand: tuple[Path, BenchResult, list[RequestRecord]],
) -> None:
    """A baseline run and a candidate run given apart are one A/B only if they are two runs of
    one workload."""
    (bp, b, brecs), (cp, c, crecs) = base, cand
    if bp.resolve() == cp.resolve() or b.run_id == c.run_id:
        raise ConfigError(
            f"--baseline and --candidate are the same run ({bp}, {cp}): an A/B needs one run "
            "of each server"
        )
    for path, result, flag in ((bp, b, "--baseline"), (cp, c, "--candidate")):
        targets = {lv.target for lv in result.levels}
        if {"baseline", "candidate"} <= targets:
            raise ConfigError(
                f"{path} is an A/B of its own (baseline and candidate): give it with --bench, "
                f"not {flag} — halves of two A/Bs are not one"
            )
    drafts = [lv.acceptance.num_drafts for lv in c.levels if lv.acceptance is not None]
    counted = drafts or [
        lv.request_acceptance.overall.num_drafts
        for lv in c.levels
        if lv.request_acceptance is not None
    ]
    if counted and not any(counted):
        raise ConfigError(
            f"the candidate ({cp}) drafted no tokens: it ran without speculation, so this is no "
            "A/B of speculative decoding"
        )
    b_urls = {lv.url for lv in b.levels}
    if not counted and b_urls and b_urls == {lv.url for lv in c.levels}:
        raise ConfigError(
            f"the baseline ({bp}) and the candidate ({cp}) measured the same server "
            f"({', '.join(sorted(b_urls))}) and the candidate shows no speculation (no drafts "
            "counted): run the candidate against the speculative replica, with its /metrics"
        )
    for what, mb_, mc_ in (
        ("model", b.model, c.model),
        ("checkpoint", b.served_model_root, c.served_model_root),
    ):
        if mb_ and mc_ and mb_ != mc_:
            raise ConfigError(
                f"the baseline ({bp}) and the candidate ({cp}) measured different deployments: "
                f"{what} {mb_!r} vs {mc_!r} — an A/B compares one model with and without "
                "speculation"
            )
    keys = ("endpoint", "dataset", "only_class", "num_prompts", "temperature", "repeats")
    for key in keys:
        vb, vc = b.config.get(key), c.config.get(key)
        if vb != vc and vb is not None and vc is not None:
            raise ConfigError(
                f"the baseline ({bp}) and the candidate ({cp}) ran different workloads: "
                f"{key} {vb!r} vs {vc!r}"
            )
    for field, what in (("prompt_tokens", "prompt"), ("output_tokens", "output")):
        mb, mc = _mean_tokens(brecs, field), _mean_tokens(crecs, field)
        if mb and mc and abs(mb - mc) > LENGTH_TOLERANCE * max(mb, mc):
            raise ConfigError(
                f"the baseline ({bp}) and the candidate ({cp}) ran different workloads: mean "
                f"{what} {mb:,.0f} vs {mc:,.0f} tokens (the servers' usage counts)"
            )


def _checkpoint_name(ref: str) -> str:
    """A checkpoint's name whatever the folder or hub org it is loaded from:
    ``/models/Llama-3.1-8B-Instruct/`` and ``meta-llama/Llama-3.1-8B-Instruct`` are one."""
    return ref.rstrip("/").rpartition("/")[2].lower()


def check_checkpoint(checkpoint: str, evidence: list[tuple[str, str]]) -> None:
    """Evidence whose server reports the checkpoint behind its served name (vLLM's ``root`` at
    ``/v1/models``) must report the plan's: a served name can be an alias of anything."""
    for where, root in evidence:
        if _checkpoint_name(root) != _checkpoint_name(checkpoint):
            raise ConfigError(
                f"{where} measured a server of checkpoint {root!r}; the plan is for "
                f"{checkpoint!r}: evidence of another deployment says nothing about this one "
                "(re-plan with --model set to the checkpoint the server loads)"
            )


def check_deployment(served_model: str, evidence: list[tuple[str, str | None]]) -> None:
    """Evidence that names the model it measured must name the plan's (its served name)."""
    for where, model in evidence:
        if model is not None and model != served_model:
            raise ConfigError(
                f"{where} measured model {model!r}; the plan is for {served_model!r}: evidence "
                "of another deployment says nothing about this one (re-plan with --served-model "
                "if the name is an alias)"
            )


def check_definitions(
    rules: list[Rule],
    *,
    definition: dict[str | None, str],
    source: dict[str | None, str],
    engine: dict[str | None, str],
) -> None:
    """A ρ or α rule whose reading (per class: what its ρ means, the file, the engine) is an
    SGLang draft tree's: refused (exit 2), naming both."""
    for rule in rules:
        if rule.metric not in ("draft_acceptance_rate", "alpha"):
            continue
        if definition.get(rule.cls) != "tree nodes":
            continue
        raise ConfigError(
            f"{rule.describe()} cannot be judged on {source[rule.cls]} "
            f"({engine.get(rule.cls, '')}): an SGLang draft tree's accept rate divides the "
            "accepted drafts by every verified node, not by a chain's drafts, and implies no α; "
            "gate the tree on τ (--min-mean-acceptance-length, or the τ gate of a plan made "
            "with --engine sglang)"
        )
