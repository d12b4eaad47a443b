"""How late the measured chunks came, around what the engine's steps gave: the client reading
late and the server waking late, from the A/B's validity figures (:mod:`alphagate.bench.validity`:
the client event loop's lateness, sampled all through the run, and a twin's mean lateness behind
its modelled clock).

A chunk read ε late after one read on time makes that gap ε longer and the next ε shorter, so a
measured gap is the step's plus ε_i − ε_(i−1), with ε the client's lateness (drawn from its
measured percentiles) plus the server's (exponential, of its measured mean). The replays' gaps
plus such draws are what the client would have measured of them; a replay of another
configuration (a remedy) streams chunks at another rate, and gets the two runs' lateness mixed
by where its rate falls between theirs. The module also says which of
a request's gaps held another request's first token — a prefill chunk that shared the step
(chunked prefill: a new request's first token comes out of the step that finished its prompt).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from alphagate.bench.records import RequestRecord
from alphagate.bench.validity import RunValidity
from alphagate.sim.results import Distribution

__all__ = ["first_tokens", "gap_lateness", "mixed_lateness", "stalled_gaps", "with_lateness"]

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


def first_tokens(records: list[RequestRecord]) -> dict[int, FloatArray]:
    """Each run's first-token arrival times (seconds since the run started), sorted."""
    out: dict[int, list[float]] = {}
    for r in records:
        if r.ttft_s is not None:
            out.setdefault(r.repeat, []).append(r.send_s + r.ttft_s)
    return {run: np.sort(np.asarray(ts, dtype=np.float64)) for run, ts in out.items()}


def stalled_gaps(r: RequestRecord, firsts: FloatArray) -> BoolArray:
    """Which of ``r``'s chunk gaps (shape ``[n_chunks - 1]``) held another request's first
    token: a prefill chunk shared that step."""
    at = r.send_s + np.asarray(r.chunk_times_s, dtype=np.float64)
    if at.size < 2:
        return np.zeros(0, dtype=bool)
    lo = np.searchsorted(firsts, at[:-1], side="right")
    hi = np.searchsorted(firsts, at[1:], side="right")
    return np.asarray(hi > lo)


def _quantile_draws(d: Distribution, u: FloatArray) -> FloatArray:
    """Draws (ms) from a distribution known by its percentiles: piecewise linear between them."""
    qs = [0.0, 0.5, 0.9, 0.99, 0.999, 1.0]
    vals = [0.0, d.p50, d.p90, d.p99, d.p99_9, d.p99_9]
    if any(v is None for v in vals):
        return np.zeros(u.size)
    return np.interp(u, qs, np.maximum.accumulate(np.asarray(vals, dtype=np.float64)))


def gap_lateness(validity: RunValidity | None, n: int = 20_000, seed: int = 0) -> FloatArray:
    """``n`` draws of the lateness one measured gap carries, in seconds (see the module
    docstring); empty without validity figures."""
    if validity is None or (validity.client_lag_ms is None and validity.server_lag_ms is None):
        return np.zeros(0)
    rng = np.random.default_rng(seed)

    def late() -> FloatArray:
        ms = np.zeros(n)
        if validity.client_lag_ms is not None:
            ms += _quantile_draws(validity.client_lag_ms, rng.random(n))
        if validity.server_lag_ms:
            ms += rng.exponential(validity.server_lag_ms, n)
        return ms * 1e-3

    return late() - late()


def mixed_lateness(
    rates: tuple[float, float], lateness: tuple[FloatArray, FloatArray], rate: float
) -> FloatArray:
    """The lateness a run streaming ``rate`` chunks per second would see, between the two
    measured runs' (``rates``, ``lateness``: baseline, candidate): a client reads late in
    proportion to how busy it is, so a mix of the two by where ``rate`` falls between theirs
    (in logs), each alone beyond them."""
    (r0, r1), (l0, l1) = rates, lateness
    if min(r0, r1, rate) <= 0 or l0.size == 0 or l1.size == 0 or r0 == r1:
        return l1 if l1.size else l0
    w = float(np.clip(np.log(rate / r1) / np.log(r0 / r1), 0.0, 1.0))
    n = min(l0.size, l1.size)
    return np.concatenate([l0[: round(w * n)], l1[: round((1 - w) * n)]])


def with_lateness(gaps: FloatArray, lateness: FloatArray | None, seed: int = 0) -> FloatArray:
    """``gaps`` as the client would have measured them: each plus a draw from ``lateness``
    (none: as they are), never below a tenth of itself."""
    if lateness is None or lateness.size == 0:
        return gaps
    rng = np.random.default_rng(seed)
    late = lateness[rng.integers(0, lateness.size, size=gaps.size)]
    return np.maximum(gaps + late, 0.1 * gaps)
