"""The base of every config and result record, and the results schema every verb writes."""

from __future__ import annotations

import math
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["RESULTS_SCHEMA", "Frozen", "Interval", "Results", "finite", "results_payload"]

#: Every results JSON (``--json`` output, ``summary.json``, plans) carries this schema and a verb.
RESULTS_SCHEMA: Final = "alphagate.results/v1"


class Frozen(BaseModel):
    """Base for every config and result record: immutable, unknown fields rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def finite(x: float | None) -> float | None:
    """``x`` when it is a finite number, else None (JSON has no NaN or infinity)."""
    return x if x is not None and math.isfinite(x) else None


class Interval(Frozen):
    """The range a prediction spans over its uncertain inputs (``low`` ≤ ``high``; None: beyond
    what the quantity can take there, e.g. no α pays, or it pays at every batch)."""

    low: float | None
    high: float | None

    def straddles(self, x: float) -> bool:
        """Whether ``x`` lies strictly inside (an open end counts as beyond ``x``)."""
        lo = -math.inf if self.low is None else self.low
        hi = math.inf if self.high is None else self.high
        return lo < x < hi

    def text(self, fmt: str = ".2f", suffix: str = "") -> str:
        """``[1.15–1.42×]``; an open end is shown as ``…``."""
        lo = "…" if self.low is None else f"{self.low:{fmt}}"
        hi = "…" if self.high is None else f"{self.high:{fmt}}"
        return f"[{lo}–{hi}{suffix}]"


class Results(Frozen):
    """A results file: ``{"schema": "alphagate.results/v1", "verb": ..., ...}``.

    Subclasses fix ``verb`` with a ``Literal``; :meth:`payload` is what gets written and printed,
    and ``model_validate`` of the same JSON reads it back.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    schema_: Literal["alphagate.results/v1"] = Field(default=RESULTS_SCHEMA, alias="schema")

    def payload(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


def results_payload(verb: str, record: BaseModel) -> dict[str, Any]:
    """The results JSON of a record that does not carry its own schema and verb."""
    return {"schema": RESULTS_SCHEMA, "verb": verb, **record.model_dump(mode="json")}
