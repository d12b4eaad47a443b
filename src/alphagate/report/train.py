"""Rich rendering of ``alphagate train-head`` results (80 columns): held-out α per class with the
starting head and the new one, then the training's own figures, labelled as what they are."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from alphagate.report._fmt import fmt_alpha, fmt_ci
from alphagate.report._tables import add_columns, new_table
from alphagate.train.results import TrainResult

__all__ = ["render_train", "training_line"]


def _gains(r: TrainResult) -> RenderableType:
    t = add_columns(
        new_table(),
        "class",
        "start head",
        "95% interval",
        "new head",
        "95% interval",
        "×",
    )
    rows = [g for g in r.gains if g.name != "all"] if len(r.gains) == 2 else r.gains
    for g in rows:
        t.add_row(
            g.name,
            fmt_alpha(g.alpha_start),
            fmt_ci(g.alpha_start_ci),
            fmt_alpha(g.alpha),
            fmt_ci(g.alpha_ci),
            "—" if g.ratio is None else f"{g.ratio:.2f}×",
        )
    title = f"α on {r.requests_held_out} held-out requests (measure offline, K={r.k})"
    return Group(Text(title, style="bold"), t)


def _evals(r: TrainResult) -> RenderableType:
    names = sorted({n for e in r.evals for n in e.alpha})
    if len(names) == 2 and "all" in names:  # one class: "all" is the same requests
        names.remove("all")
    t = add_columns(new_table(), "step", *(f"α {n}" for n in names))
    for e in r.evals:
        t.add_row(str(e.step), *(fmt_alpha(e.alpha.get(n)) for n in names))
    return Group(Text("Held-out α during training (--eval-every)", style="bold"), t)


def training_line(r: TrainResult) -> str:
    """The training's own figures: time, speed, loss and teacher-forced agreement — not α."""
    s = r.training
    if s is None:
        return ""
    rate = f", {s.tokens_per_s:,.0f} tokens/s" if s.tokens_per_s else ""
    resumed = f" ({s.steps - s.steps_run} resumed)" if s.steps_run < s.steps else ""
    loss = (
        f"; loss {s.loss_first:.3f} → {s.loss_last:.3f} (KL to the target, summed over "
        f"{s.ttt_steps} TTT steps)"
        if s.loss_first is not None and s.loss_last is not None
        else ""
    )
    agree = " · ".join(f"{a:.2f}" for a in s.agreement)
    return (
        f"Trained {s.steps} steps of {s.tokens_per_step:,} tokens{resumed} in {s.seconds:.0f} s"
        f"{rate}{loss}; teacher-forced top-1 agreement on the train split {agree} at TTT steps "
        f"1–{s.ttt_steps} (a training figure, not α)"
    )


def render_train(r: TrainResult) -> RenderableType:
    parts: list[RenderableType] = [
        Text(
            f"{r.target}: {r.requests_train} requests trained on, {r.requests_held_out} held "
            f"out ({', '.join(r.classes) or 'all classes'}); start: {r.start}",
            style="dim",
        )
    ]
    if r.capture is not None:
        c = r.capture
        rate = f", {c.tokens_per_s:,.0f} tokens/s" if c.tokens_per_s else ""
        parts.append(
            Text(
                f"Captured {c.tokens:,} tokens' hidden states in {c.seconds:.0f} s"
                f"{rate} ({c.captured_here} requests here, the rest resumed)"
            )
        )
    if r.skipped:
        parts.append(
            Text(
                "Left out: " + "; ".join(f"{k} ({n})" for k, n in r.skipped.items()), style="yellow"
            )
        )
    if r.training is not None:
        parts.append(Text(training_line(r)))
    if r.evals:
        parts.append(_evals(r))
    if r.gains:
        parts.append(_gains(r))
    elif r.before is not None and r.before.overall is not None:
        e = r.before.overall
        parts.append(
            Text(
                f"Start head on the held-out requests: α {fmt_alpha(e.alpha_iid)} "
                f"{fmt_ci(e.alpha_iid_ci)} (K={r.k})"
            )
        )
    parts += [Text(n, style="yellow") for n in r.notes]
    return Group(*parts)
