"""Matplotlib figures for simulations. Pure: records in, :class:`~matplotlib.figure.Figure` out."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

from matplotlib.figure import Figure

from alphagate.sim.results import CDF_LEVELS
from alphagate.sim.sweep import SweepResult

__all__ = ["itl_cdf_figure", "p99_itl_figure", "speedup_figure"]


def _series(r: SweepResult, k: int, mix: str, attr: str) -> tuple[list[float], list[float]]:
    xs, ys = [], []
    for c in r.cells:
        if c.k == k and c.mix == mix:
            value = (
                c.speedup.throughput_speedup
                if attr == "speedup"
                else getattr(c.spec.itl_per_token_ms, attr)
            )
            if value is not None:
                xs.append(c.load)
                ys.append(value)
    return xs, ys


def speedup_figure(r: SweepResult) -> Figure:
    """Throughput speedup against load, one panel per K, one line per acceptance setting."""
    fig = Figure(figsize=(4.2 * len(r.ks), 3.8), layout="constrained")
    axes = fig.subplots(1, len(r.ks), sharey=True, squeeze=False)[0]
    for ax, k in zip(axes, r.ks, strict=True):
        for m in r.mixes:
            xs, ys = _series(r, k, m, "speedup")
            ax.plot(xs, ys, marker="o", label=m)
        ax.axhline(1.0, color="black", lw=0.8, ls="--")
        ax.set_xscale("log", base=2)
        ax.set_title(f"K = {k}")
        ax.set_xlabel(r.rows[0].load_kind if r.rows else "load")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("throughput speedup (spec ÷ off)")
    axes[-1].legend(fontsize=8)
    fig.suptitle(r.deployment, fontsize=8)
    return fig


def p99_itl_figure(r: SweepResult) -> Figure:
    """P99 ITL per token against load: no speculation vs each acceptance setting, per K."""
    fig = Figure(figsize=(4.2 * len(r.ks), 3.8), layout="constrained")
    axes = fig.subplots(1, len(r.ks), sharey=True, squeeze=False)[0]
    loads = [row.load for row in r.rows]
    base = [row.baseline.itl_per_token_ms.p99 or 0.0 for row in r.rows]
    for ax, k in zip(axes, r.ks, strict=True):
        ax.plot(loads, base, color="black", lw=2, marker="s", label="off")
        for m in r.mixes:
            xs, ys = _series(r, k, m, "p99")
            ax.plot(xs, ys, marker="o", label=m)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"P99 ITL per token, K = {k}")
        ax.set_xlabel(r.rows[0].load_kind if r.rows else "load")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("ms")
    axes[-1].legend(fontsize=8)
    return fig


def itl_cdf_figure(r: SweepResult, k: int | None = None) -> Figure:
    """Per-token ITL CDF at the lowest and highest load: off vs each acceptance setting."""
    kk = k if k is not None else r.ks[-1]
    picks = [r.rows[0], r.rows[-1]] if len(r.rows) > 1 else r.rows
    fig = Figure(figsize=(4.6 * len(picks), 3.8), layout="constrained")
    axes = fig.subplots(1, len(picks), squeeze=False)[0]
    for ax, row in zip(axes, picks, strict=True):
        ax.plot(row.baseline.itl_per_token_cdf_ms, CDF_LEVELS, color="black", lw=2, label="off")
        for c in r.cells:
            if c.load == row.load and c.k == kk:
                ax.plot(c.spec.itl_per_token_cdf_ms, CDF_LEVELS, label=c.mix)
        ax.set_xscale("log")
        ax.set_title(f"ITL per token CDF, {row.load_kind} {row.load:g}, K = {kk}", fontsize=9)
        ax.set_xlabel("ms")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("fraction of tokens")
    axes[-1].legend(fontsize=8)
    return fig
