"""Where a gate's evidence comes from: files and live sources (its rules come from
:mod:`alphagate.gate.rules`).

Everything here raises (:class:`~alphagate.core.errors.ConfigError` for a bad file,
:class:`~alphagate.measure.results.MeasureError` for a bad source) and prints nothing; the CLI
turns the errors into exit codes.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import NamedTuple

from alphagate.core.errors import ConfigError
from alphagate.gate.consistency import (
    DEFAULT_MAX_AGE_S,
    check_checkpoint,
    check_deployment,
    check_pair,
)
from alphagate.gate.evidence import (
    Evidence,
    Reading,
    load_bench,
    load_measure,
    load_vllm_result,
    read_bench,
)
from alphagate.gate.rules import RuleSet
from alphagate.measure.live import (
    LiveConfig,
    LiveWindow,
    looks_like_exposition,
    measure_live,
    measure_scrape_files,
)
from alphagate.measure.prometheus import PrometheusQuery, measure_prometheus
from alphagate.measure.results import MeasureError, MeasureResult

__all__ = ["EvidenceFiles", "LiveSource"]


class EvidenceFiles(NamedTuple):
    """The evidence files a gate was given, and what they must be evidence of."""

    measure: list[Path]
    bench: list[Path]
    baseline: Path | None
    candidate: Path | None
    vllm_baseline: Path | None
    vllm_candidate: Path | None
    served_model: str | None = None  # the plan's: evidence naming another model is refused
    checkpoint: str | None = None  # the plan's: evidence of a server of another is refused
    max_age_s: float = DEFAULT_MAX_AGE_S

    def load(self) -> Evidence:
        """Read every file (again: a watching gate sees files that are rewritten), checked
        (:mod:`alphagate.gate.consistency`). Saved ``/metrics`` scrapes among the measure files
        are one server's, in the order given."""
        for one, other, flag in (
            (self.baseline, self.candidate, "--baseline"),
            (self.candidate, self.baseline, "--candidate"),
            (self.vllm_baseline, self.vllm_candidate, "--vllm-baseline"),
            (self.vllm_candidate, self.vllm_baseline, "--vllm-candidate"),
        ):
            if one is not None and other is None:
                raise ConfigError(
                    f"{flag} {one} alone is half an A/B: give the other side too (or a bench A/B "
                    "summary with --bench)"
                )
        if self.baseline is not None and self.candidate is not None:
            check_pair(
                (self.baseline, *read_bench(self.baseline)),
                (self.candidate, *read_bench(self.candidate)),
            )
        everything = [*self.measure, *self.bench, self.baseline, self.candidate]
        paths = [p.resolve() for p in everything if p is not None]
        twice = sorted({str(p) for p in paths if paths.count(p) > 1})
        if twice:
            raise ConfigError(f"the same evidence given twice: {', '.join(twice)}")
        ev = Evidence(max_age_s=self.max_age_s)
        scrapes = [p for p in self.measure if looks_like_exposition(p)]
        if scrapes:
            m = measure_scrape_files(scrapes)
            if m.overall is not None and m.overall.num_drafts > 0:
                ev.add_acceptance(None, m.overall, m.source, reading=Reading.of(m))
            ev.sources += [str(p) for p in scrapes]
        for p in self.measure:
            if p not in scrapes:
                load_measure(p, ev)
        for p in self.bench:
            load_bench(p, ev)
        if self.baseline is not None:
            load_bench(self.baseline, ev, role="baseline")
        if self.candidate is not None:
            load_bench(self.candidate, ev, role="candidate")
        if self.vllm_baseline is not None:
            load_vllm_result(self.vllm_baseline, ev, "baseline")
        if self.vllm_candidate is not None:
            load_vllm_result(self.vllm_candidate, ev, "candidate")
        if self.served_model is not None:
            check_deployment(self.served_model, ev.models)
        if self.checkpoint is not None:
            check_checkpoint(self.checkpoint, ev.roots)
        return ev


class LiveSource:
    """Live acceptance: a Prometheus window, or replicas' ``/metrics``. Checked when built
    (``ValidationError`` / :class:`MeasureError`). Watching ``/metrics``, the counters are
    scraped every evaluation and judged over the last ``window_s`` (a sliding window from the
    scrape at or before its start); once, the window ends early as soon as the rules have the
    drafts they need."""

    def __init__(
        self, urls: list[str], prometheus: str | None, selector: str, window_s: float, rs: RuleSet
    ) -> None:
        self.window_s = window_s
        self.query = (
            PrometheusQuery(url=prometheus, selector=selector, window_s=window_s)
            if prometheus
            else None
        )
        self.cfg = (
            LiveConfig(
                urls=tuple(urls),
                min_drafts=rs.min_drafts,
                duration_s=window_s,
                interval_s=min(2.0, window_s),
            )
            if urls
            else None
        )
        self.window = LiveWindow(self.cfg) if self.cfg is not None else None

    @property
    def accumulates(self) -> bool:
        """True when evidence comes from scrapes taken here (``/metrics``), not a query."""
        return self.window is not None

    @property
    def flag(self) -> str:
        return "--prometheus" if self.query is not None else "--url"

    def start(self) -> None:
        """The first scrape of every replica: the start of a watching window."""
        if self.window is not None:
            asyncio.run(self.window.scrape())

    def measure(self, watching: bool) -> MeasureResult | None:
        """The acceptance now; None when the source has seen no drafts yet."""
        try:
            if self.query is not None:
                return measure_prometheus(self.query)
            assert self.cfg is not None and self.window is not None
            if watching:
                seen = len(self.window.notes)
                asyncio.run(self.window.scrape())
                failed = self.window.notes[seen:]
                if failed:  # a replica that does not answer: its stale counters are no evidence
                    raise MeasureError(
                        "the live source stopped answering: " + "; ".join(failed), exit_code=3
                    )
                return self.window.result(window_s=self.window_s)
            return measure_live(self.cfg)
        except MeasureError as exc:
            if exc.exit_code == 2 or watching:
                raise
            return None

    def add_to(self, ev: Evidence, watching: bool) -> None:
        """Add the acceptance measured now to ``ev`` (left out without drafts: insufficient)."""
        m = self.measure(watching)
        if m is not None:
            ev.models += [(m.source, name) for name in m.models]
        if m is not None and m.overall is not None and m.overall.num_drafts > 0:
            window = f" over {m.window_s:,.0f} s" if m.window_s else ""
            ev.add_acceptance(None, m.overall, m.source + window, live=True, reading=Reading.of(m))
