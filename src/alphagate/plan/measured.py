"""Measured acceptance for ``alphagate plan --alpha-from``: α per class, or one overall figure.

Accepted inputs (all JSON):

- an alphagate results file with per-class figures, ``"classes": {"chat": {"alpha": 0.71},
  "code": {"draft_acceptance_rate": 0.31, "k": 5}}`` (α wins; otherwise ρ with K is inverted);
- an ``alphagate bench`` ``summary.json``, read back through
  :class:`~alphagate.bench.records.BenchResult`: the acceptance of the level with the most drafts.
  The server's counters cover all the traffic of the run, so this is one *overall* figure;
- an ``alphagate measure`` result (live, prometheus, logs or offline): per-class figures when
  the source tells classes apart, else one overall figure;
- a ``vllm bench serve --save-result`` file with ``spec_decode_acceptance_rate`` (percent) and
  ``spec_decode_per_position_acceptance_rates`` (K = their count): one overall figure.

A ``measure offline --drafter suffix`` result also carries each class's draft-length profile
(the share of steps drafting L tokens and accepting a) and the suffix trees' settings: the class
then becomes one whose drafts vary in length (:func:`alphagate.theory.lengths.profile_class`),
and ``plan --method suffix`` serves the settings that were measured.

A per-class figure applies to its class. An overall figure applies to every class only when the
user asks for it (``--alpha-overall``), and is labelled so.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from alphagate import theory
from alphagate.core.errors import ConfigError, invalid
from alphagate.core.records import Frozen
from alphagate.core.traffic import TrafficClass
from alphagate.specs.deployment import SuffixParams
from alphagate.theory.lengths import profile_class

__all__ = ["Measurement", "apply_measurement", "load_measurement", "merge_measurements"]

#: A class's draft-length profile: steps drafting L tokens and accepting a, row L, entry a.
Profile = list[list[float]]


class SuffixSetting(Frozen):
    """The suffix decoding a profile was measured with: the trees and the cap on a draft."""

    params: SuffixParams
    k: int


class Measurement(Frozen):
    """α per class and/or one overall α read from a file (and, for drafts of variable length,
    the profiles and the setting they were measured with)."""

    source: str
    per_class: dict[str, float]
    overall: float | None
    profiles: dict[str, Profile] = Field(default_factory=dict)
    overall_profile: Profile | None = None
    suffix: SuffixSetting | None = None


def _alpha_from_entry(entry: dict[str, Any], where: str, k_default: int | None) -> float:
    if entry.get("alpha") is not None:
        a = float(entry["alpha"])
    elif entry.get("draft_acceptance_rate") is not None:
        k = entry.get("k", k_default)
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ConfigError(
                f"{where}: draft_acceptance_rate needs an integer 'k' (drafts per step)"
            )
        a = float(theory.alpha_from_draft_acceptance_rate(float(entry["draft_acceptance_rate"]), k))
    else:
        raise ConfigError(f"{where}: needs 'alpha' or 'draft_acceptance_rate' with 'k'")
    if math.isnan(a) or not 0.0 <= a <= 1.0:
        raise ConfigError(f"{where}: acceptance outside [0, 1]")
    return a


def _from_bench(data: dict[str, Any], p: Path) -> float:
    from alphagate.bench.records import BenchResult

    try:
        result = BenchResult.model_validate(data)
    except ValidationError as exc:
        raise invalid(p, "bench summary", exc) from None
    measured = [
        lv.acceptance
        for lv in result.levels
        if lv.acceptance is not None and lv.acceptance.num_drafts > 0
    ]
    if not measured:
        raise ConfigError(f"{p}: no level of this bench summary saw speculative-decoding counters")
    best = max(measured, key=lambda a: a.num_drafts)
    if best.draft_acceptance_rate is None or best.k is None:
        raise ConfigError(f"{p}: the measured level has no draft acceptance rate")
    return _alpha_from_entry(
        {"draft_acceptance_rate": best.draft_acceptance_rate, "k": best.k}, str(p), None
    )


def _from_measure(data: dict[str, Any], p: Path) -> Measurement:
    """An ``alphagate measure`` result: per-class and overall i.i.d. α (from ρ at the measured K)."""
    from alphagate.measure.results import MeasureResult

    try:
        m = MeasureResult.model_validate(data)
    except ValidationError as exc:
        raise invalid(p, "measure result", exc) from None
    per = {name: e.alpha_iid for name, e in m.classes.items() if e.alpha_iid is not None}
    overall = m.overall.alpha_iid if m.overall is not None else None
    if not per and overall is None:
        raise ConfigError(f"{p}: the measurement saw no drafts")
    d = m.offline
    if d is None or d.suffix is None:
        return Measurement(source=p.name, per_class=per, overall=overall)
    return Measurement(
        source=p.name,
        per_class=per,
        overall=overall,
        profiles={
            n: c.acceptance_by_length for n, c in d.classes.items() if c.acceptance_by_length
        },
        overall_profile=d.overall.acceptance_by_length,
        suffix=SuffixSetting(params=d.suffix, k=d.k),
    )


def load_measurement(path: str | Path, k: int | None = None) -> Measurement:
    """Read a measurement file; raises :class:`ConfigError` naming the file and what is missing."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"measurement file not found (or not a file): {p}")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"{p}: not a UTF-8 text file") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{p}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: expected a JSON object")
    if data.get("verb") == "bench":
        return Measurement(source=p.name, per_class={}, overall=_from_bench(data, p))
    if str(data.get("verb", "")).startswith("measure"):
        return _from_measure(data, p)
    if isinstance(data.get("classes"), dict):
        per = {
            str(name): _alpha_from_entry(entry, f"{p}: classes.{name}", k)
            for name, entry in data["classes"].items()
            if isinstance(entry, dict)
        }
        return Measurement(source=p.name, per_class=per, overall=None)
    if data.get("schema") == "alphagate.bench/v1":
        raise ConfigError(
            f"{p}: a summary from an older alphagate (alphagate.bench/v1); re-run bench"
        )
    if "spec_decode_acceptance_rate" in data:
        per_pos = data.get("spec_decode_per_position_acceptance_rates") or []
        kk = len(per_pos) or k
        rho = float(data["spec_decode_acceptance_rate"]) / 100.0
        a = _alpha_from_entry({"draft_acceptance_rate": rho, "k": kk}, str(p), kk)
        return Measurement(source=p.name, per_class={}, overall=a)
    raise ConfigError(
        f"{p}: no per-class 'classes' object, no alphagate bench summary and no "
        "'spec_decode_acceptance_rate' (vllm bench serve) found"
    )


def merge_measurements(parts: list[Measurement]) -> Measurement:
    """Several measurement files as one: their per-class figures together (a class measured in
    two files is refused: which would the plan believe?), and the overall figure of a single
    file."""
    if len(parts) == 1:
        return parts[0]
    per: dict[str, float] = {}
    where: dict[str, str] = {}
    for m in parts:
        for name, a in m.per_class.items():
            if name in per:
                raise ConfigError(
                    f"class {name} is measured in both {where[name]} and {m.source}: give one"
                )
            per[name], where[name] = a, m.source
    settings = {m.suffix for m in parts if m.suffix is not None}
    if len(settings) > 1:
        raise ConfigError("the files measured suffix decoding with different settings: give one")
    return Measurement(
        source=", ".join(m.source for m in parts),
        per_class=per,
        overall=None,
        profiles={n: x for m in parts for n, x in m.profiles.items()},
        suffix=next(iter(settings), None),
    )


def apply_measurement(
    classes: tuple[TrafficClass, ...], m: Measurement, *, overall: bool
) -> tuple[TrafficClass, ...]:
    """Fill the classes that have no α from ``m``; an α typed on the command line stays."""
    missing = [c.name for c in classes if not c.has_alpha and c.name not in m.per_class]
    if m.overall is not None and missing and not overall:
        raise ConfigError(
            f"{m.source} holds one overall α ({m.overall:.3f}, from server-wide counters), not a "
            f"figure per class; pass --alpha-overall to apply it to {', '.join(missing)}"
        )
    out = []
    for c in classes:
        if c.has_alpha:
            out.append(c)
        elif c.name in m.profiles:
            out.append(profile_class(c.name, c.share, m.profiles[c.name], f"measured ({m.source})"))
        elif m.overall_profile is not None and overall:
            src = f"measured overall ({m.source}), applied to every class"
            out.append(profile_class(c.name, c.share, m.overall_profile, src))
        elif c.name in m.per_class:
            out.append(
                c.model_copy(
                    update={"alpha": m.per_class[c.name], "source": f"measured ({m.source})"}
                )
            )
        elif m.overall is not None and overall:
            src = f"measured overall ({m.source}), applied to every class"
            out.append(c.model_copy(update={"alpha": m.overall, "source": src}))
        else:
            out.append(c)
    return tuple(out)
