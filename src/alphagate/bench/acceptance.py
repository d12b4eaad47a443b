"""Acceptance a bench run measured, per traffic class: the evidence ``measure bench``, ``gate``
and ``plan --alpha-from`` read from a bench summary.

Two sources, in order of preference for a class:

1. the server's **per-request counts** (vLLM ``--per-request-spec-decode-metrics``; SGLang
   ``meta_info``), which bench records with each request and its dataset class: per class, with
   intervals cluster-robust over requests;
2. the server's **counters** over the level (``/metrics`` before and after): all traffic — and,
   when every request of the level was of one class (``bench --only-class``, or a dataset of one
   class), that class, said so.

A level's per-request counts must not exceed its counters' increase over the same window (the
counters count every request the server served, these and any other client's): counts that do are
refused. Among the levels of a run (and the runs merged in one level), a class's figure comes from
the level with the most drafts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import ValidationError

from alphagate.bench.records import BenchResult, LevelSummary
from alphagate.core.errors import ConfigError, invalid
from alphagate.measure.estimate import AcceptanceEstimate
from alphagate.measure.results import MeasureError, MeasureResult

__all__ = ["ClassAcceptance", "bench_acceptance", "check_against_counters", "measure_bench"]

#: per-request counts may exceed the counters by this share before they are refused (rounding)
_TOLERANCE = 1e-6


@dataclass
class ClassAcceptance:
    """The acceptance a bench run measured: all traffic, per class, and where each came from."""

    overall: AcceptanceEstimate | None = None
    overall_source: str = ""
    classes: dict[str, AcceptanceEstimate] = field(default_factory=dict)
    class_source: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def offer(self, cls: str | None, est: AcceptanceEstimate, source: str) -> None:
        """Keep ``est`` for ``cls`` (None: all traffic) if it has more drafts than what is kept."""
        if cls is None:
            if self.overall is None or est.num_drafts > self.overall.num_drafts:
                self.overall, self.overall_source = est, source
            return
        old = self.classes.get(cls)
        if old is None or est.num_drafts > old.num_drafts:
            self.classes[cls] = est
            self.class_source[cls] = source


def check_against_counters(lv: LevelSummary, where: str) -> None:
    """Refuse a level whose per-request counts exceed the counters' increase over its window."""
    ra, counters = lv.request_acceptance, lv.acceptance
    if ra is None or counters is None:
        return
    for name, mine, theirs in (
        ("drafts", ra.overall.num_drafts, counters.num_drafts),
        ("draft tokens", ra.overall.num_draft_tokens, counters.num_draft_tokens),
        ("accepted tokens", ra.overall.num_accepted_tokens, counters.num_accepted_tokens),
    ):
        if mine > theirs * (1 + _TOLERANCE) + 0.5:
            raise ConfigError(
                f"{where}: the replies' per-request counts sum to {mine:,.0f} {name}, more than "
                f"the {theirs:,.0f} the server's counters grew by over the same window: one of "
                "the two is wrong, and neither can be trusted as evidence"
            )


def _one_class(lv: LevelSummary) -> str | None:
    """The class every request of the level had, if they all had the same one."""
    names = set(lv.classes)
    total = lv.overall.completed + lv.overall.failed
    if len(names) == 1:
        (name,) = names
        s = lv.classes[name]
        if s.completed + s.failed == total:
            return name
    return None


def bench_acceptance(result: BenchResult, source: str) -> ClassAcceptance:
    """What a bench run measured of acceptance (see the module docstring); raises
    :class:`ConfigError` on per-request counts that contradict the counters."""
    out = ClassAcceptance()
    for lv in result.levels:
        if lv.target == "baseline":
            continue
        where = f"{source} ({lv.target} {lv.level})"
        check_against_counters(lv, where)
        ra = lv.request_acceptance
        if ra is not None and ra.overall.num_drafts > 0:
            # this run's requests only (the counters also count any other client's)
            out.offer(None, ra.overall, f"{where}: per-request counts")
            for name, est in ra.classes.items():
                if est.num_drafts > 0:
                    out.offer(name, est, f"{where}: per-request counts of class {name}")
            if ra.requests_with_counts < ra.requests:
                out.notes.append(
                    f"{where}: {ra.requests - ra.requests_with_counts} of {ra.requests} replies "
                    "carried no per-request counts (failed, or cut short)"
                )
            continue
        if lv.acceptance is not None and lv.acceptance.num_drafts > 0:
            out.offer(None, lv.acceptance, f"{where}: the server's counters")
        one = _one_class(lv)
        if one is not None and lv.acceptance is not None and lv.acceptance.num_drafts > 0:
            out.offer(
                one,
                lv.acceptance,
                f"{where}: the server's counters over a run of class {one} only (labelled as "
                "that class: the server returned no per-request counts)",
            )
    if out.overall is not None and not out.classes and any(lv.classes for lv in result.levels):
        out.notes.append(
            f"{source}: the server returned no per-request counts and the run mixed classes: its "
            "counters measure all traffic only (vLLM ≥ 0.32: --per-request-spec-decode-metrics "
            "summary; otherwise bench each class in a run of its own, --only-class)"
        )
    return out


def measure_bench(path: Path) -> MeasureResult:
    """``alphagate measure bench``: a bench summary's acceptance as a measure result (per class
    where the run can tell classes apart). Raises :class:`MeasureError` for a file that is not a
    bench summary, or a run that saw no drafts (exit 3)."""
    if not path.is_file():
        raise MeasureError(f"bench summary not found (or not a file): {path}")
    try:
        result = BenchResult.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MeasureError(f"{path}: not a JSON file ({exc})") from None
    except ValidationError as exc:
        raise MeasureError(str(invalid(path, "alphagate bench summary", exc))) from None
    measured = bench_acceptance(result, path.name)
    if measured.overall is None:
        raise MeasureError(
            f"{path}: no level saw speculative-decoding counts (speculation off, or --no-metrics)",
            exit_code=3,
        )
    targets = sorted({lv.url for lv in result.levels if lv.target != "baseline"})
    return MeasureResult(
        verb="measure bench",
        source=f"{path.name} (bench run {result.run_id}: {', '.join(targets)})",
        overall=measured.overall,
        classes=measured.classes,
        notes=[
            *measured.notes,
            f"all traffic: {measured.overall_source}",
            *(f"{c}: {src}" for c, src in measured.class_source.items()),
        ],
    )
