"""A slow, obviously-correct per-token reference simulator (pure Python loops).

Same semantics as the vectorized engines, written the plain way: one Python object per running
sequence, a per-draft-token coin flip, FCFS admission and prefill in admission order. It only
exists to be compared statistically with ``alphagate.sim`` on small cases.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from alphagate.sim.cost import StepCostModel


@dataclass
class Seq:
    req: int
    prompt: int
    out: int
    alpha_by_pos: list[float]
    prefilled: int = 0
    generated: int = 0
    chunks: int = 0


@dataclass
class RefResult:
    arrival: list[float]
    first_token: list[float]
    finish: list[float]
    chunk_tokens: list[int]
    step_times: list[float]
    drafts: int
    draft_tokens: int
    accepted: int


def reference_simulate(
    cost: StepCostModel,
    prompts: list[int],
    outputs: list[int],
    alphas: list[list[float]],
    k: int,
    users: int | None,
    arrivals: list[float] | None,
    max_num_seqs: int,
    seed: int,
) -> RefResult:
    """Closed loop (``users``, think time 0) or open loop (``arrivals``), one step at a time."""
    rnd = random.Random(seed)
    n = len(prompts)
    arrival = [math.nan] * n
    if users is not None:
        for i in range(min(users, n)):
            arrival[i] = 0.0
        issued = min(users, n)
    else:
        assert arrivals is not None
        arrival = list(arrivals)
        issued = n
    first = [math.nan] * n
    finish = [math.nan] * n
    running: list[Seq] = []
    next_admit = 0
    clock = 0.0
    done = 0
    chunk_tokens: list[int] = []
    step_times: list[float] = []
    drafts = draft_tokens = accepted = 0
    budget_cap = cost.max_num_batched_tokens
    while done < n:
        # an arrival at the end of a step joins a busy engine one step later (see the engine)
        busy = bool(running)
        while (
            len(running) < max_num_seqs
            and next_admit < issued
            and (arrival[next_admit] < clock or (not busy and arrival[next_admit] <= clock))
        ):
            i = next_admit
            running.append(Seq(i, prompts[i], outputs[i], alphas[i]))
            next_admit += 1
        if not running:
            clock = arrival[next_admit]
            continue
        decoding = [s for s in running if s.prefilled == s.prompt]
        prefilling = [s for s in running if s.prefilled < s.prompt]
        budget = budget_cap - len(decoding) * (k + 1)
        p_tok = p_ctx = 0
        p_pairs = 0.0
        allocs: list[tuple[Seq, int]] = []
        for s in sorted(prefilling, key=lambda s: s.req):
            take = max(0, min(budget, s.prompt - s.prefilled))
            budget -= take
            if take:
                allocs.append((s, take))
                p_tok += take
                p_ctx += s.prefilled
                p_pairs += take * (s.prefilled + 0.5 * take)
        ctx_dec = sum(s.prompt + s.generated - 1 for s in decoding)  # KV already cached
        emitted: list[tuple[Seq, int]] = []
        for s in decoding:
            a = 0
            if k > 0:
                drafts += 1
                draft_tokens += k
                for j in range(k):  # per draft token: accept with the conditional probability
                    if rnd.random() < s.alpha_by_pos[j]:
                        a += 1
                    else:
                        break
                accepted += a
            emitted.append((s, min(a + 1, s.out - s.generated)))
        dt = cost.step_seconds(
            k=k,
            n_decode=len(decoding),
            ctx_decode=ctx_dec,
            prefill_tokens=p_tok,
            prefill_ctx=p_ctx,
            prefill_pairs=p_pairs,
            n_running=len(running),
        )
        clock += dt
        step_times.append(dt)
        for s, e in emitted:
            s.generated += e
            s.chunks += 1
            chunk_tokens.append(e)
        for s, take in allocs:
            s.prefilled += take
            if s.prefilled == s.prompt:
                first[s.req] = clock
                s.generated += 1
        for s in list(running):
            if s.prefilled == s.prompt and s.generated >= s.out:
                finish[s.req] = clock
                running.remove(s)
                done += 1
                if users is not None and issued < n:
                    arrival[issued] = clock
                    issued += 1
    return RefResult(
        arrival, first, finish, chunk_tokens, step_times, drafts, draft_tokens, accepted
    )
