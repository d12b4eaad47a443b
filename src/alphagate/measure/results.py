"""The results of ``alphagate measure``: one type for every source (live /metrics, a Prometheus
server, server logs, offline replay), read back by ``plan --alpha-from``, ``gate`` and ``report``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from alphagate.core.errors import ConfigError
from alphagate.core.records import Frozen, Results
from alphagate.measure.engines import EngineInfo
from alphagate.measure.estimate import AcceptanceEstimate
from alphagate.measure.offline.results import OfflineDetails

__all__ = ["MeasureError", "MeasureResult", "SeriesPoint"]

MeasureVerb = Literal[
    "measure live", "measure prometheus", "measure logs", "measure offline", "measure bench"
]


class MeasureError(ConfigError):
    """A measurement that cannot be made. ``exit_code``: 2 for bad input or an unreachable or
    wrong source, 3 for a source that works but has not seen enough yet."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class SeriesPoint(Frozen):
    """Acceptance over one step of a time series (``measure prometheus --step``)."""

    end: float = Field(description="Unix time at the end of the step")
    instance: str | None = Field(default=None, description="the replica, when split by one")
    num_drafts: float
    draft_acceptance_rate: float | None
    mean_acceptance_length: float | None


class MeasureResult(Results):
    """Acceptance measured from one source over one window."""

    verb: MeasureVerb
    source: str = Field(description="where it came from: URLs, a Prometheus query, log files")
    window_start: float | None = Field(default=None, description="Unix time, when known")
    window_end: float | None = None
    window_s: float | None = None
    overall: AcceptanceEstimate | None = Field(description="all traffic in the window")
    classes: dict[str, AcceptanceEstimate] = Field(
        default_factory=dict, description="per traffic class, when the source can tell them apart"
    )
    series: list[SeriesPoint] = Field(default_factory=list)
    replicas: dict[str, AcceptanceEstimate] = Field(default_factory=dict)
    counter_reset: bool = False
    sources: int = 1
    promql: list[str] = Field(default_factory=list, description="the queries used, to reproduce")
    models: list[str] = Field(
        default_factory=list,
        description="the served model names the counters carried (model_name labels); empty "
        "when the source names none",
    )
    drafts_range: tuple[float, float] | None = Field(
        default=None, description="logs: the numbers of drafts the printed figures allow"
    )
    notes: list[str] = Field(default_factory=list)
    offline: OfflineDetails | None = Field(
        default=None, description="measure offline: every K, histograms, what was read and used"
    )
    engine: EngineInfo | None = Field(
        default=None,
        description="the engine and version the figures came from, and where that was read "
        "(None: a result written before it was recorded)",
    )
