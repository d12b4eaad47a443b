"""The base of every config and result record, and the results schema every verb writes."""

from __future__ import annotations

import math
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["RESULTS_SCHEMA", "Frozen", "Results", "finite", "results_payload"]

#: Every results JSON (``--json`` output, ``summary.json``, plans) carries this schema and a verb.
RESULTS_SCHEMA: Final = "alphagate.results/v1"


class Frozen(BaseModel):
    """Base for every config and result record: immutable, unknown fields rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def finite(x: float | None) -> float | None:
    """``x`` when it is a finite number, else None (JSON has no NaN or infinity)."""
    return x if x is not None and math.isfinite(x) else None


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
