"""Measured acceptance for ``alphagate plan --alpha-from``: α per class from a results file.

Accepted inputs (all JSON):

- an alphagate results file with ``classes``: ``{"chat": {"alpha": 0.71}, "code":
  {"draft_acceptance_rate": 0.31, "k": 5}}`` (α wins; otherwise ρ with K is inverted);
- a ``vllm bench serve --save-result`` file with ``spec_decode_acceptance_rate`` (percent) and
  ``spec_decode_per_position_acceptance_rates`` (K = their count): one α for all traffic;
- an ``alphagate bench`` ``summary.json`` (schema ``alphagate.bench/v1``): the acceptance of the
  level with the most drafts (server-wide counters, so one α for all traffic).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from alphagate import theory

__all__ = ["MeasuredError", "load_measured_alphas"]

OVERALL = "*"


class MeasuredError(ValueError):
    """The file cannot be read as a measurement; the message says what is missing and where."""


def _alpha_from_entry(entry: dict[str, Any], where: str, k_default: int | None) -> float:
    if "alpha" in entry and entry["alpha"] is not None:
        a = float(entry["alpha"])
    elif "draft_acceptance_rate" in entry:
        k = entry.get("k", k_default)
        if not isinstance(k, int) or k < 1:
            raise MeasuredError(
                f"{where}: draft_acceptance_rate needs an integer 'k' (drafts per step)"
            )
        a = float(theory.alpha_from_draft_acceptance_rate(float(entry["draft_acceptance_rate"]), k))
    else:
        raise MeasuredError(f"{where}: needs 'alpha' or 'draft_acceptance_rate' with 'k'")
    if math.isnan(a) or not 0.0 <= a <= 1.0:
        raise MeasuredError(f"{where}: acceptance outside [0, 1]")
    return a


def load_measured_alphas(path: str | Path, k: int | None = None) -> dict[str, float]:
    """Class name → measured α; the key ``"*"`` holds one α for all classes."""
    p = Path(path)
    if not p.exists():
        raise MeasuredError(f"measurement file not found: {p}")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise MeasuredError(f"{p}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise MeasuredError(f"{p}: expected a JSON object")
    if isinstance(data.get("classes"), dict):
        return {
            str(name): _alpha_from_entry(entry, f"{p}: classes.{name}", k)
            for name, entry in data["classes"].items()
            if isinstance(entry, dict)
        }
    if data.get("schema") == "alphagate.bench/v1":
        measured = [
            lv["acceptance"]
            for lv in data.get("levels", [])
            if isinstance(lv, dict) and lv.get("acceptance")
        ]
        measured = [a for a in measured if a.get("num_drafts")]
        if not measured:
            raise MeasuredError(
                f"{p}: no level of this bench summary saw speculative-decoding counters"
            )
        best = max(measured, key=lambda a: a["num_drafts"])
        return {
            OVERALL: _alpha_from_entry(
                {"draft_acceptance_rate": best["draft_acceptance_rate"], "k": best["k"]}, str(p), k
            )
        }
    if "spec_decode_acceptance_rate" in data:
        per_pos = data.get("spec_decode_per_position_acceptance_rates") or []
        kk = len(per_pos) or k
        rho = float(data["spec_decode_acceptance_rate"]) / 100.0
        return {OVERALL: _alpha_from_entry({"draft_acceptance_rate": rho, "k": kk}, str(p), kk)}
    raise MeasuredError(
        f"{p}: no 'classes' object and no 'spec_decode_acceptance_rate' (vllm bench serve) found"
    )
