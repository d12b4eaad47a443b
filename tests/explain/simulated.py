"""Bench A/B runs made by the simulator instead of servers: each side's requests through
:func:`alphagate.sim.engine.run_engine`, written as the records and the summary ``bench`` writes
— a run whose cause is known by construction, with no server and no wall clock."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from alphagate.bench.records import (
    BenchResult,
    RequestRecord,
    RequestSpecDecode,
    compare_levels,
    summarize_level,
)
from alphagate.core.traffic import TrafficClass
from alphagate.sim.cost import StepCostModel, build_cost_model
from alphagate.sim.engine import RunTrace, Scenario, run_engine
from alphagate.sim.kernel import acceptance_histogram
from alphagate.sim.workload import ClosedLoop, RequestSet, unconditional_table
from alphagate.specs import DeploymentConfig, resolve_deployment


@dataclass(frozen=True)
class Side:
    """One server: its K, acceptance, largest batch and deployment."""

    k: int
    deployment: DeploymentConfig
    alpha: tuple[float, ...] = (0.7,)
    cap: int = 256

    def cost(self) -> StepCostModel:
        return build_cost_model(resolve_deployment(self.deployment))


@dataclass(frozen=True)
class Traffic:
    """Closed-loop users sending ``n`` requests of uniform prompt lengths."""

    users: int
    n: int
    prompt: tuple[int, int]
    output: int  # the mean: lengths drawn from ¾ to 5⁄4 of it, so requests do not finish in step
    warmup: int = 0
    seed: int = 0
    long_every: int | None = None
    long_prompt: int = 0
    classes: dict[str, tuple[float, ...]] = field(default_factory=dict)

    def requests(self) -> RequestSet:
        rng = np.random.default_rng(self.seed)
        prompt = rng.integers(self.prompt[0], self.prompt[1] + 1, size=self.n)
        if self.long_every:
            prompt[self.long_every - 1 :: self.long_every] = self.long_prompt
        cls = np.arange(self.n) % max(len(self.classes), 1)
        output = rng.integers(self.output * 3 // 4, self.output * 5 // 4 + 1, size=self.n)
        return RequestSet(
            prompt.astype(np.int64),
            output.astype(np.int64),
            cls.astype(np.int64),
            np.full(self.n, np.nan),
        )


def _records(
    trace: RunTrace, reqs: RequestSet, target: str, traffic: Traffic, k: int, counts: bool
) -> list[RequestRecord]:
    order = np.argsort(trace.chunk_request, kind="stable")
    names = list(traffic.classes) or [None]
    out = []
    for i in range(reqs.n):
        sel = order[trace.chunk_request[order] == i]
        sent = float(trace.arrival_s[i])
        first = float(trace.first_token_s[i]) - sent
        times = [first, *(float(trace.step_end_s[s]) - sent for s in trace.chunk_step[sel])]
        tokens = [1, *(int(t) for t in trace.chunk_tokens[sel])]
        spec = None
        if k > 0 and counts:
            accepted = np.minimum(np.asarray(tokens[1:]) - 1, k)
            hist = acceptance_histogram(accepted, k)
            spec = RequestSpecDecode(
                num_drafts=len(tokens) - 1, num_draft_tokens=k * (len(tokens) - 1),
                num_accepted_tokens=int(accepted.sum()), acceptance_histogram=hist.tolist(), k=k,
            )  # fmt: skip
        out.append(
            RequestRecord(
                run_id="sim", id=i, target=target, level=f"c{traffic.users}",
                cls=names[int(reqs.class_idx[i]) % len(names)],
                prompt_tokens=int(reqs.prompt_len[i]), output_tokens=int(reqs.output_len[i]),
                send_s=sent, ttft_s=first, chunk_times_s=times, chunk_tokens=tokens,
                tokens_per_chunk_source="usage", e2e_s=float(trace.finish_s[i]) - sent,
                warmup=i < traffic.warmup, spec=spec,
            )
        )  # fmt: skip
    return out


def _classes(side: Side, traffic: Traffic) -> tuple[TrafficClass, ...]:
    alphas = traffic.classes or {"default": side.alpha}
    return tuple(
        TrafficClass(name=n, share=1 / len(alphas), alpha_by_pos=a) for n, a in alphas.items()
    )


def simulated_ab(
    base: Side, cand: Side, traffic: Traffic, *, counts: bool = True
) -> tuple[BenchResult, list[RequestRecord]]:
    """Both sides' requests through the simulator; the A/B as bench writes it (``counts``: with
    the candidate's per-request spec-decode counts, as vLLM's replies carry them)."""
    reqs = traffic.requests()
    records, levels = [], []
    for target, side in (("baseline", base), ("candidate", cand)):
        k = side.k
        table = unconditional_table(
            tuple(
                c.model_copy(update={"alpha_by_pos": (c.alpha_by_pos * 8)[: max(k, 1)]})
                for c in _classes(side, traffic)
            ),
            k,
        )
        sc = Scenario(k=k, arrivals=ClosedLoop(users=traffic.users), requests=reqs,
                      unconditional=table, max_num_seqs=side.cap)  # fmt: skip
        trace = run_engine(side.cost(), sc, np.random.default_rng([traffic.seed, k]),
                           record_chunks=True)  # fmt: skip
        recs = _records(trace, reqs, target, traffic, k, counts)
        records += recs
        levels.append(
            summarize_level(
                target, f"http://{target}", f"c{traffic.users}", traffic.users, None, recs, None
            )
        )
    result = BenchResult(run_id="sim", config={}, levels=levels, comparisons=compare_levels(levels))
    return result, records
