"""Markdown rendering of a rollout :class:`~alphagate.plan.build.Plan` (jinja2 template)."""

from __future__ import annotations

import json

import jinja2

from alphagate.plan.build import Plan

__all__ = ["render_plan_markdown"]


def _a2(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def _x2(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}×"


def _f1(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f}"


def _cross(x: float | None, search_max: int) -> str:
    if x is None:
        return f"beyond {search_max} (pays at every batch this deployment can hold)"
    if x <= 1.0:
        return "never pays"
    return f"≈{x:.0f}"


def _env() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("alphagate.plan", "templates"),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters.update(
        a2=_a2,
        x2=_x2,
        f1=_f1,
        g=lambda x: f"{x:g}",
        cross=_cross,
        count=lambda n: f"{n / 1e9:.3f} B" if n >= 1e9 else f"{n / 1e6:.1f} M",
        gb=lambda b: f"{b / 1e9:.2f} GB",
        kib=lambda b: f"{b / 1024:.0f} KiB",
        int_commas=lambda n: f"{int(n):,}",
        tojson=lambda o: json.dumps(o),
    )
    return env


def render_plan_markdown(plan: Plan) -> str:
    """The rollout plan as markdown."""
    return _env().get_template("plan.md.j2").render(p=plan)
