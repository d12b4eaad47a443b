"""Evidence a gate judges: acceptance (from measure results, bench summaries or live metrics) and
A/B comparisons (from bench summaries with their ``requests.jsonl``, or ``vllm bench serve`` JSON).

Every value comes with its 95% interval where the evidence allows one: acceptance from the
counts (:mod:`alphagate.measure.estimate`), A/B ratios from the spread between repeated runs
(:mod:`alphagate.bench.ab`; one run: a within-run interval, marked as such), error rates from a
Wilson interval.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from alphagate.bench.records import BenchResult, LevelSummary, RequestRecord
from alphagate.bench.slo import SLO
from alphagate.core.errors import ConfigError, invalid
from alphagate.gate.consistency import (
    DEFAULT_MAX_AGE_S,
    bench_started_at,
    check_estimate,
    check_records,
    window_problem,
)
from alphagate.measure.engines import definition
from alphagate.measure.estimate import AcceptanceEstimate, Interval, wilson
from alphagate.measure.results import MeasureResult

__all__ = [
    "ABSide",
    "Evidence",
    "Reading",
    "Value",
    "load_bench",
    "load_measure",
    "load_vllm_result",
    "read_bench",
]


@dataclass(frozen=True)
class Value:
    """A measured value, its 95% interval (None: a point estimate only) and its sample size."""

    value: float | None
    interval: Interval | None
    n: float
    unit: str  # "drafts" or "requests"
    missing: str = ""  # why there is no value, when there is none
    single_run: bool = False  # an A/B of one run per side: its interval is within the run
    basis: str = ""  # what the interval is made of
    distorted: tuple[str, ...] = ()  # why a run of the A/B measured the client, not the server


@dataclass(frozen=True)
class ABSide:
    """One side of an A/B at one level: its records (for the bootstrap) or its summary only."""

    label: str
    records: list[RequestRecord]
    level: LevelSummary | None
    point: dict[str, float] = field(default_factory=dict)  # vllm bench serve: means and p99s
    slo: SLO | None = None  # the bench run's --slo, for goodput
    source: str = ""  # the file it came from


@dataclass(frozen=True)
class Reading:
    """What a reading's acceptance means (:func:`alphagate.measure.engines.definition`) and the
    engine it came from, in words."""

    definition: str = "unknown"
    engine: str = "engine not recorded"

    @classmethod
    def of(cls, m: MeasureResult) -> Reading:
        return cls(definition(m.engine), m.engine.label() if m.engine else cls.engine)


@dataclass
class Evidence:
    """Everything the gate was given, by kind."""

    acceptance: dict[str | None, AcceptanceEstimate] = field(default_factory=dict)  # None = all
    acceptance_source: dict[str | None, str] = field(default_factory=dict)
    #: what each reading's ρ means (alphagate.measure.engines.definition), and its engine
    definition: dict[str | None, str] = field(default_factory=dict)
    engine: dict[str | None, str] = field(default_factory=dict)
    kind: dict[str | None, str] = field(default_factory=dict)  # "bench", "file" or "live"
    sides: dict[str, dict[int | None, ABSide]] = field(
        default_factory=lambda: {"baseline": {}, "candidate": {}}
    )
    sources: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the evidence could not tell
    #: (where, the served model it measured) of every file that names one
    models: list[tuple[str, str | None]] = field(default_factory=list)
    #: (where, the checkpoint its server reported behind the served name) where one did
    roots: list[tuple[str, str]] = field(default_factory=list)
    #: (where, failed, requests) of every bench level that was not a baseline: what an
    #: error-rate rule without an A/B (the default one beside acceptance rules) judges
    failures: list[tuple[str, int, int]] = field(default_factory=list)
    #: files left out as older than max_age_s (why, for the rules that then lack evidence)
    stale: list[str] = field(default_factory=list)
    max_age_s: float = DEFAULT_MAX_AGE_S
    now: float = field(default_factory=time.time)

    def add_acceptance(
        self,
        cls: str | None,
        est: AcceptanceEstimate,
        source: str,
        *,
        bench: bool = False,
        live: bool = False,
        reading: Reading | None = None,
    ) -> None:
        """Acceptance for ``cls`` (None: all traffic). Live evidence replaces any other; a
        measure file replaces what a bench run's counters said (among bench levels the one with
        the most drafts is kept); two measure files for the same traffic raise
        :class:`ConfigError` — the gate would otherwise judge whichever came last — and so do
        two readings whose figures are defined differently (:func:`_same_definition`)."""
        kind = "live" if live else "bench" if bench else "file"
        old_kind = self.kind.get(cls)
        old = self.acceptance.get(cls)
        reading = reading or Reading()
        if old is not None:
            _same_definition(
                cls,
                (self.acceptance_source[cls], self.definition[cls], self.engine[cls]),
                (source, reading.definition, reading.engine),
            )
        if (
            old is not None
            and old_kind is not None
            and kind != old_kind
            and "live"
            not in (
                kind,
                old_kind,
            )
        ):
            _no_contradiction(cls, old, self.acceptance_source[cls], est, source)
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
        self.definition[cls] = reading.definition
        self.engine[cls] = reading.engine

    def add_side(self, role: str, concurrency: int | None, side: ABSide) -> None:
        self.sides[role][concurrency] = side

    @property
    def ab(self) -> dict[int | None, tuple[ABSide, ABSide]]:
        """Baseline and candidate, by concurrency (None: an open-loop or unknown level)."""
        base, cand = self.sides["baseline"], self.sides["candidate"]
        return {c: (base[c], cand[c]) for c in cand if c in base}


def _same_definition(cls: str | None, a: tuple[str, str, str], b: tuple[str, str, str]) -> None:
    """Two readings of the same traffic whose acceptance is defined differently — a chain's ρ
    (accepted ÷ drafted) and an SGLang draft tree's (accepted ÷ every verified node) — are not
    the same quantity: refused, naming both (a definition not recorded is not refused)."""
    (a_src, a_def, a_eng), (b_src, b_def, b_eng) = a, b
    if "unknown" in (a_def, b_def) or a_def == b_def:
        return
    what = f"class {cls}" if cls else "all traffic"
    raise ConfigError(
        f"two readings of {what} define acceptance differently: {a_src} ({a_eng}; ρ = accepted "
        f"÷ {_PER[a_def]}) and {b_src} ({b_eng}; ρ = accepted ÷ {_PER[b_def]}): they cannot be "
        "compared or combined; give readings of one engine configuration, or gate on τ alone "
        "with each"
    )


#: what each definition of ρ divides the accepted drafts by
_PER = {"drafts": "drafted tokens", "tree nodes": "every verified node of a draft tree"}


def _no_contradiction(
    cls: str | None, a: AcceptanceEstimate, a_src: str, b: AcceptanceEstimate, b_src: str
) -> None:
    """Two measurements of the same traffic whose α intervals do not overlap contradict each
    other: one of them is not of this traffic (or not of this server)."""
    ia, ib = a.alpha_iid_ci, b.alpha_iid_ci
    if ia is None or ib is None:
        return
    if ia.high < ib.low or ib.high < ia.low:
        what = f"class {cls}" if cls else "all traffic"
        raise ConfigError(
            f"two measurements of {what} contradict each other: α {a.alpha_iid:.3f} "
            f"[{ia.low:.3f}, {ia.high:.3f}] from {a_src} and α {b.alpha_iid:.3f} "
            f"[{ib.low:.3f}, {ib.high:.3f}] from {b_src}"
        )


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
    for cls, est in [(None, m.overall), *m.classes.items()]:
        if est is not None:
            check_estimate(est, f"{path}" + (f" (class {cls})" if cls else ""))
    ev.sources.append(str(path))
    ev.models += [(str(path), name) for name in m.models]
    stale = window_problem(m.window_start, m.window_end, str(path), ev.max_age_s, ev.now)
    if stale is not None:
        ev.stale.append(stale)
        return
    how = Reading.of(m)
    if m.overall is not None:
        ev.add_acceptance(None, m.overall, f"{path.name} ({m.verb})", reading=how)
    for name, est in m.classes.items():
        ev.add_acceptance(name, est, f"{path.name} ({m.verb}, class {name})", reading=how)


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
    check_records(result, out, path)
    return out


def read_bench(path: Path) -> tuple[BenchResult, list[RequestRecord]]:
    """A bench summary and its run's records, checked (:func:`check_records`)."""
    data = _read_json(path, "bench summary")
    try:
        result = BenchResult.model_validate(data)
    except ValidationError as exc:
        raise invalid(path, "alphagate bench summary", exc) from None
    return result, _records(path, result)


def load_bench(path: Path, ev: Evidence, role: str | None = None) -> None:
    """An ``alphagate bench`` summary. With baseline and candidate levels: A/B evidence per level;
    with ``role`` ("baseline"/"candidate"): one side of an A/B split over two runs. Acceptance
    per class from the replies' per-request counts, else the server's counters for all traffic
    (or for the one class a run sent): :func:`~alphagate.bench.acceptance.bench_acceptance`."""
    from alphagate.bench.acceptance import bench_acceptance

    result, records = read_bench(path)
    ev.sources.append(str(path))
    started = bench_started_at(result)
    stale = window_problem(started, result.ended_at, str(path), ev.max_age_s, ev.now)
    if stale is not None:
        ev.stale.append(stale)
        return
    ev.models.append((str(path), result.model))
    if result.served_model_root:
        ev.roots.append((str(path), result.served_model_root))
    for lv in result.levels:
        for est in (lv.acceptance, *(() if lv.request_acceptance is None else (
            lv.request_acceptance.overall, *lv.request_acceptance.classes.values()
        ))):  # fmt: skip
            if est is not None:
                check_estimate(est, f"{path} ({lv.target} {lv.level})")
    for lv in result.levels:
        if (lv.target if lv.target in ("baseline", "candidate") else role) != "baseline":
            ev.failures.append(
                (
                    f"{path.name} ({lv.target} {lv.level})",
                    lv.overall.failed,
                    lv.overall.failed + lv.overall.completed,
                )
            )
        side_role = lv.target if lv.target in ("baseline", "candidate") else role
        if side_role is not None:
            recs = [r for r in records if r.target == lv.target and r.level == lv.level]
            ev.add_side(
                side_role,
                lv.concurrency,
                ABSide(label=side_role, records=recs, level=lv, slo=result.slo, source=path.name),
            )
    measured = bench_acceptance(result, path.name)
    how = _bench_definition(records, path)
    if measured.overall is not None:
        ev.add_acceptance(None, measured.overall, measured.overall_source, bench=True, reading=how)
    for name, est in measured.classes.items():
        ev.add_acceptance(name, est, measured.class_source[name], bench=True, reading=how)
    ev.notes += measured.notes


def _bench_definition(records: list[RequestRecord], path: Path) -> Reading:
    """What a bench run's acceptance means: its replies' per-request counts say (SGLang's key
    names date them), else the server's counters (vLLM's /metrics: drafted tokens). One run
    whose replies define it two ways is refused."""
    specs = [r.spec for r in records if r.spec is not None]
    if not specs:
        return Reading("drafts", "the server's vLLM counters")
    defs = {s.definition for s in specs} - {"unknown"}
    if len(defs) > 1:
        raise ConfigError(
            f"{path}: its replies' spec-decode counts define acceptance two ways "
            f"({', '.join(sorted(defs))}): two engine configurations behind one run"
        )
    first = specs[0]
    versions = sorted({s.version for s in specs if s.version})
    engine = {"vllm": "vLLM", "sglang": "SGLang"}[first.source] + (
        f" {', '.join(versions)}" if versions else ""
    )
    return Reading(defs.pop() if defs else "unknown", engine + " (per-request counts)")


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
#: a baseline that failed more of its requests than this is no reference for a ratio
BASELINE_MAX_ERRORS = 0.05


def ab_value(metric: str, base: ABSide, cand: ABSide) -> Value:
    """Candidate vs baseline on ``metric`` from the two sides' records
    (:func:`alphagate.bench.ab.ab_value`: between-run intervals when the runs repeat), or the
    point ratio of two summaries without records."""
    from alphagate.bench.ab import ab_value as measured

    if not base.records or not cand.records:
        if metric == "error_rate" and not cand.records:
            failed = cand.point.get("failed", 0.0)
            total = failed + cand.point.get("completed", 0.0)
            return Value(
                failed / total if total else None, wilson(failed, total), total, "requests"
            )
        if metric == "goodput_speedup":
            return _goodput_point(base, cand)
        return _point_ab(metric, base, cand)
    if metric != "error_rate":
        ran = [r for r in base.records if not r.warmup]
        failed = sum(not r.ok for r in ran)
        if ran and failed > BASELINE_MAX_ERRORS * len(ran):
            return Value(
                None,
                None,
                float(len(ran)),
                "requests",
                f"the baseline failed {failed} of its {len(ran)} requests ({base.source}): its "
                "speed is not the deployment's, and no ratio to it is evidence",
            )
    v = measured(metric, base.records, cand.records, cand.slo or base.slo)
    distorted = tuple(
        f"{side.label} ({side.source}): {why}"
        for side in (base, cand)
        if side.level is not None and side.level.validity is not None
        for why in side.level.validity.reasons
        if side.level.validity.distorted
    )
    return Value(
        v.value,
        v.interval,
        v.requests,
        "requests",
        v.missing,
        single_run=v.single_run and metric != "error_rate",
        basis=v.basis,
        distorted=distorted if metric != "error_rate" else (),
    )


def _goodput_point(base: ABSide, cand: ABSide) -> Value:
    gb = base.level.goodput if base.level else None
    gc = cand.level.goodput if cand.level else None
    if gb is None or gc is None or gb.good_requests_per_s <= 0:
        return Value(None, None, 0.0, "requests", "the bench runs had no --slo: goodput needs one")
    return Value(gc.good_requests_per_s / gb.good_requests_per_s, None, gc.requests, "requests")


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
