"""Evidence a gate judges: acceptance (from measure results, bench summaries or live metrics) and
A/B comparisons (from bench summaries with their ``requests.jsonl``, or ``vllm bench serve`` JSON).

Every value comes with its 95% interval where the evidence allows one: acceptance from the
counts (:mod:`alphagate.measure.estimate`), A/B ratios from a bootstrap over requests (both sides
resampled, seeded), error rates from a Wilson interval.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
from pydantic import ValidationError

from alphagate.bench.records import BenchResult, LevelSummary, RequestRecord
from alphagate.bench.slo import SLO, missed_bounds
from alphagate.core.errors import ConfigError, invalid
from alphagate.measure.estimate import AcceptanceEstimate, Interval, wilson
from alphagate.measure.results import MeasureResult

__all__ = ["ABSide", "Evidence", "Value", "load_bench", "load_measure", "load_vllm_result"]

BOOTSTRAP = 400
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Value:
    """A measured value, its 95% interval (None: a point estimate only) and its sample size."""

    value: float | None
    interval: Interval | None
    n: float
    unit: str  # "drafts" or "requests"
    missing: str = ""  # why there is no value, when there is none


@dataclass(frozen=True)
class ABSide:
    """One side of an A/B at one level: its records (for the bootstrap) or its summary only."""

    label: str
    records: list[RequestRecord]
    level: LevelSummary | None
    point: dict[str, float] = field(default_factory=dict)  # vllm bench serve: means and p99s
    slo: SLO | None = None  # the bench run's --slo, for goodput


@dataclass
class Evidence:
    """Everything the gate was given, by kind."""

    acceptance: dict[str | None, AcceptanceEstimate] = field(default_factory=dict)  # None = all
    acceptance_source: dict[str | None, str] = field(default_factory=dict)
    kind: dict[str | None, str] = field(default_factory=dict)  # "bench", "file" or "live"
    sides: dict[str, dict[int | None, ABSide]] = field(
        default_factory=lambda: {"baseline": {}, "candidate": {}}
    )
    sources: list[str] = field(default_factory=list)

    def add_acceptance(
        self,
        cls: str | None,
        est: AcceptanceEstimate,
        source: str,
        *,
        bench: bool = False,
        live: bool = False,
    ) -> None:
        """Acceptance for ``cls`` (None: all traffic). Live evidence replaces any other; a
        measure file replaces what a bench run's counters said (among bench levels the one with
        the most drafts is kept); two measure files for the same traffic raise
        :class:`ConfigError` — the gate would otherwise judge whichever came last."""
        kind = "live" if live else "bench" if bench else "file"
        old_kind = self.kind.get(cls)
        old = self.acceptance.get(cls)
        if old is not None and old_kind is not None:
            rank = {"bench": 0, "file": 1, "live": 2}
            if rank[kind] < rank[old_kind]:
                return
            if kind == old_kind == "bench" and old.num_drafts >= est.num_drafts:
                return
            if kind == old_kind == "file":
                what = f"class {cls}" if cls else "all traffic"
                raise ConfigError(
                    f"two measurements of {what}: {self.acceptance_source[cls]} and {source}; "
                    "give one (the gate would judge whichever came last)"
                )
        self.acceptance[cls] = est
        self.acceptance_source[cls] = source
        self.kind[cls] = kind

    def add_side(self, role: str, concurrency: int | None, side: ABSide) -> None:
        self.sides[role][concurrency] = side

    @property
    def ab(self) -> dict[int | None, tuple[ABSide, ABSide]]:
        """Baseline and candidate, by concurrency (None: an open-loop or unknown level)."""
        base, cand = self.sides["baseline"], self.sides["candidate"]
        return {c: (base[c], cand[c]) for c in cand if c in base}


def _read_json(path: Path, what: str) -> dict[str, object]:
    if not path.is_file():
        raise ConfigError(f"{what} not found (or not a file): {path}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: not a JSON file ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a JSON object")
    return data


def load_measure(path: Path, ev: Evidence) -> None:
    """An ``alphagate measure`` results file: overall and per-class acceptance."""
    data = _read_json(path, "measure results")
    try:
        m = MeasureResult.model_validate(data)
    except ValidationError as exc:
        raise invalid(path, "alphagate measure result", exc) from None
    if m.overall is not None:
        ev.add_acceptance(None, m.overall, f"{path.name} ({m.verb})")
    for name, est in m.classes.items():
        ev.add_acceptance(name, est, f"{path.name} ({m.verb}, class {name})")
    ev.sources.append(str(path))


def _records(path: Path, result: BenchResult) -> list[RequestRecord]:
    f, looked = result.records_path(path)
    if f is None:
        where = " or ".join(str(p) for p in looked)
        raise ConfigError(
            f"{path}: its requests.jsonl is missing (looked for {where}); the A/B needs it"
        )
    out = []
    for line in f.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            rec = RequestRecord.model_validate_json(line)
        except ValidationError:
            continue  # a record of another version: skipped, counted by the sample size
        if rec.run_id == result.run_id:
            out.append(rec)
    return out


def load_bench(path: Path, ev: Evidence, role: str | None = None) -> None:
    """An ``alphagate bench`` summary. With baseline and candidate levels: A/B evidence per level;
    with ``role`` ("baseline"/"candidate"): one side of an A/B split over two runs. A level's
    acceptance (server counters) is acceptance evidence for all traffic."""
    data = _read_json(path, "bench summary")
    try:
        result = BenchResult.model_validate(data)
    except ValidationError as exc:
        raise invalid(path, "alphagate bench summary", exc) from None
    records = _records(path, result)
    for lv in result.levels:
        side_role = lv.target if lv.target in ("baseline", "candidate") else role
        if side_role is not None:
            recs = [r for r in records if r.target == lv.target and r.level == lv.level]
            ev.add_side(
                side_role,
                lv.concurrency,
                ABSide(label=side_role, records=recs, level=lv, slo=result.slo),
            )
        if lv.acceptance is not None and lv.acceptance.num_drafts > 0:
            ev.add_acceptance(
                None, lv.acceptance, f"{path.name} ({lv.target} {lv.level})", bench=True
            )
    ev.sources.append(str(path))


def load_vllm_result(path: Path, ev: Evidence, role: str) -> None:
    """A ``vllm bench serve --save-result`` JSON: point values (no per-request records)."""
    data = _read_json(path, "vllm bench serve result")
    if "mean_tpot_ms" not in data and "spec_decode_acceptance_rate" not in data:
        raise ConfigError(f"{path}: not a vllm bench serve result (no mean_tpot_ms)")
    point = {
        k: float(v)
        for k, v in data.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    }
    conc = data.get("max_concurrency")
    c = int(conc) if isinstance(conc, int) else None
    ev.add_side(role, c, ABSide(label=role, records=[], level=None, point=point))
    if "spec_decode_acceptance_rate" in data and role == "candidate":
        from alphagate.measure.estimate import estimate

        per = data.get("spec_decode_per_position_acceptance_rates") or []
        drafts = point.get("spec_decode_num_drafts", 0.0)
        k = len(per) if isinstance(per, list) and per else None
        ev.add_acceptance(
            None,
            estimate(
                drafts,
                point.get("spec_decode_draft_tokens", 0.0),
                point.get("spec_decode_accepted_tokens", 0.0),
                [float(x) * drafts for x in per if isinstance(x, int | float)]
                if isinstance(per, list)
                else [],
                k,
            ),
            f"{path.name} (vllm bench serve)",
            bench=True,
        )
    ev.sources.append(str(path))


# ---------------------------------------------------------------- A/B values with intervals
def _per_request(
    recs: list[RequestRecord],
) -> tuple[FloatArray, FloatArray, list[FloatArray], list[FloatArray]]:
    """Per request: output tokens, TPOT (NaN when undefined), per-token ITL values and weights."""
    tokens, tpot, vals, wts = [], [], [], []
    for r in recs:
        if not r.ok or r.warmup:
            continue
        tokens.append(float(r.output_tokens or 0))
        ok = (
            r.output_tokens and r.output_tokens > 1 and r.ttft_s is not None and r.e2e_s is not None
        )
        tpot.append((r.e2e_s - r.ttft_s) / (r.output_tokens - 1) if ok else np.nan)  # type: ignore[operator]
        v, w = r.itl_per_token_s()
        vals.append(v)
        wts.append(w)
    return np.asarray(tokens), np.asarray(tpot), vals, wts


def _p99(vals: list[FloatArray], wts: list[FloatArray], idx: npt.NDArray[np.int64]) -> float:
    v = np.concatenate([vals[i] for i in idx]) if len(idx) else np.zeros(0)
    w = np.concatenate([wts[i] for i in idx]) if len(idx) else np.zeros(0)
    if v.size == 0:
        return float("nan")
    order = np.argsort(v)
    cw = np.cumsum(w[order])
    return float(v[order][min(np.searchsorted(cw, 0.99 * cw[-1]), v.size - 1)])


def _bootstrap(
    stat: Callable[[npt.NDArray[np.int64], npt.NDArray[np.int64]], float], nb: int, nc: int
) -> tuple[float | None, Interval | None]:
    """The statistic on all requests, and its 95% percentile-bootstrap interval (both sides
    resampled, seeded: the same files give the same interval)."""
    rng = np.random.default_rng(0)
    point = stat(np.arange(nb), np.arange(nc))
    boots = np.array(
        [stat(rng.integers(0, nb, nb), rng.integers(0, nc, nc)) for _ in range(BOOTSTRAP)]
    )
    boots = boots[np.isfinite(boots)]
    interval = (
        Interval(low=float(np.quantile(boots, 0.025)), high=float(np.quantile(boots, 0.975)))
        if boots.size
        else None
    )
    return (point if np.isfinite(point) else None), interval


def _goodput_value(base: ABSide, cand: ABSide) -> Value:
    """Candidate ÷ baseline good requests per second under the runs' SLO (failed requests are
    never good)."""
    slo = cand.slo or base.slo
    if slo is None:
        return Value(None, None, 0.0, "requests", "the bench runs had no --slo: goodput needs one")
    if not base.records or not cand.records or base.level is None or cand.level is None:
        gb = base.level.goodput if base.level else None
        gc = cand.level.goodput if cand.level else None
        if gb is None or gc is None or gb.good_requests_per_s <= 0:
            return Value(None, None, 0.0, "requests")
        return Value(gc.good_requests_per_s / gb.good_requests_per_s, None, gc.requests, "requests")

    def good(side: ABSide) -> FloatArray:
        return np.asarray(
            [float(missed_bounds(r, slo) == []) for r in side.records if not r.warmup]
        )

    g_b, g_c = good(base), good(cand)
    d_b, d_c = base.level.overall.duration_s, cand.level.overall.duration_s

    def stat(bi: npt.NDArray[np.int64], ci: npt.NDArray[np.int64]) -> float:
        den = g_b[bi].sum() / d_b
        return float((g_c[ci].sum() / d_c) / den) if den > 0 else float("nan")

    if g_b.size == 0 or g_c.size == 0:
        return Value(None, None, 0.0, "requests")
    if g_b.sum() == 0:
        return Value(
            None,
            None,
            float(min(g_b.size, g_c.size)),
            "requests",
            f"no baseline request met the SLO ({g_c.sum():.0f} of {g_c.size} candidate requests "
            "did): the ratio is unbounded",
        )
    point, interval = _bootstrap(stat, g_b.size, g_c.size)
    return Value(point, interval, float(min(g_b.size, g_c.size)), "requests")


def ab_value(metric: str, base: ABSide, cand: ABSide) -> Value:
    """Candidate vs baseline on ``metric`` with a bootstrap interval over requests."""
    if metric == "goodput_speedup":
        return _goodput_value(base, cand)
    if metric == "error_rate":
        recs = [r for r in cand.records if not r.warmup]
        if not recs:
            failed = cand.point.get("failed", 0.0)
            total = failed + cand.point.get("completed", 0.0)
            return Value(
                failed / total if total else None, wilson(failed, total), total, "requests"
            )
        failed = float(sum(not r.ok for r in recs))
        return Value(failed / len(recs), wilson(failed, len(recs)), len(recs), "requests")
    if not base.records or not cand.records:
        return _point_ab(metric, base, cand)
    b, c = _per_request(base.records), _per_request(cand.records)
    n = float(min(b[0].size, c[0].size))

    def stat(bi: npt.NDArray[np.int64], ci: npt.NDArray[np.int64]) -> float:
        if metric == "throughput_speedup":
            db = base.level.overall.duration_s if base.level else 1.0
            dc = cand.level.overall.duration_s if cand.level else 1.0
            return float((c[0][ci].sum() / dc) / (b[0][bi].sum() / db))
        if metric == "tpot_speedup":
            return float(np.nanmean(b[1][bi]) / np.nanmean(c[1][ci]))
        return _p99(b[2], b[3], bi) / _p99(c[2], c[3], ci)

    nb, nc = b[0].size, c[0].size
    if nb == 0 or nc == 0:
        return Value(None, None, n, "requests")
    point, interval = _bootstrap(stat, nb, nc)
    return Value(point, interval, n, "requests")


def _point_ab(metric: str, base: ABSide, cand: ABSide) -> Value:
    """Summaries without records: the point ratio only (no interval)."""

    def get(side: ABSide, key: str, stats_attr: str, sub: str) -> float | None:
        if side.point:
            v = side.point.get(key)
            return None if v is None else float(v)
        if side.level is None:
            return None
        s = getattr(side.level.overall, stats_attr)
        v = s if sub == "" else getattr(s, sub)
        return None if v is None else float(v)

    pairs = {
        "throughput_speedup": ("output_throughput", "output_tokens_per_s", "", False),
        "tpot_speedup": ("mean_tpot_ms", "tpot_ms", "mean", True),
        "itl_per_token_p99_speedup": ("p99_itl_ms", "itl_per_token_ms", "p99", True),
    }
    if metric == "itl_per_token_p99_speedup" and (base.point or cand.point):
        return Value(
            None,
            None,
            0.0,
            "requests",
            "vllm bench serve reports ITL per chunk, not per token (one chunk carries every "
            "token a verify step accepts): judge TPOT, or give alphagate bench summaries",
        )
    key, attr, sub, inverse = pairs[metric]
    vb, vc = get(base, key, attr, sub), get(cand, key, attr, sub)
    if vb is None or vc is None or vb <= 0 or vc <= 0:
        return Value(None, None, 0.0, "requests")
    ratio = vb / vc if inverse else vc / vb
    n = (
        float(cand.point.get("completed", 0.0))
        if cand.point
        else float(cand.level.overall.completed if cand.level else 0)
    )
    return Value(ratio, None, n, "requests")
