"""Rich rendering of ``alphagate measure offline`` results (80 columns)."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text

from alphagate.measure.offline.results import OfflineClass, OfflineDetails
from alphagate.measure.results import MeasureResult
from alphagate.report._fmt import fmt_alpha, fmt_ci, fmt_pct
from alphagate.report._tables import add_columns, new_table
from alphagate.report.measure import estimate_table

__all__ = ["render_offline"]

_TREE_NOTE = (
    "trees: τ = 1 + drafts accepted per verify pass; SGLang's EAGLE draft phase (top-k children of the top-k nodes at each step) and the "
    "draft_tokens − 1 nodes of highest cumulative draft probability, verified greedily: τ counts "
    "the longest root path of logged tokens, plus the bonus token; SGLang's accept rate divides "
    "the accepted drafts by every verified node (draft_tokens − 1 per pass), so a tree's is not "
    "comparable with a chain's ρ."
)


def _by_k(title: str, c: OfflineClass, k: int) -> RenderableType:
    t = add_columns(
        new_table(title), "K", "drafts", "ρ", "95% interval", "τ", "95% interval", "α i.i.d."
    )
    for row in c.by_k:
        t.add_row(
            f"{row.k}{'*' if row.k == k else ''}",
            f"{row.num_drafts:,.0f}",
            fmt_alpha(row.draft_acceptance_rate),
            fmt_ci(row.draft_acceptance_rate_ci),
            fmt_alpha(row.mean_acceptance_length),
            fmt_ci(row.mean_acceptance_length_ci),
            fmt_alpha(row.alpha_iid),
        )
    return t


def _histogram(c: OfflineClass) -> RenderableType:
    total = sum(c.acceptance_length_histogram) or 1.0
    t = add_columns(new_table(), "tokens per step", "steps", "share")
    for j, n in enumerate(c.acceptance_length_histogram):
        t.add_row(str(j + 1), f"{n:,.1f}" if n % 1 else f"{n:,.0f}", f"{n / total:.3f}")
    title = Text("Acceptance lengths at K (bonus token included)", style="bold")
    return Group(title, t)


def _trees(title: str, c: OfflineClass) -> RenderableType:
    """Each SGLang draft tree beside the chain of its steps: τ, drafts accepted per verify pass,
    SGLang's accept rate and the nodes each pass verifies."""
    t = add_columns(
        new_table(title), "tree", "passes", "τ", "95% interval", "chain τ", "÷ chain", "SGLang rate"
    )
    for tr in c.trees:
        tau, chain = tr.mean_acceptance_length, tr.chain_mean_acceptance_length
        ratio = tau / chain if tau is not None and chain else None
        t.add_row(
            tr.shape.label(),
            f"{tr.verify_passes:,.0f}",
            fmt_alpha(tau),
            fmt_ci(tr.mean_acceptance_length_ci),
            fmt_alpha(chain),
            "—" if ratio is None else f"{ratio:.2f}×",
            fmt_alpha(tr.accept_rate),
        )
    return t


def _used(d: OfflineDetails) -> RenderableType:
    t = add_columns(new_table("What was measured"), "", "value")
    t.add_row("requests used / read", f"{d.requests_used:,} / {d.requests_read:,}")
    t.add_row("prompt / output tokens", f"{d.prompt_tokens:,} / {d.output_tokens:,}")
    if d.semantics == "greedy":
        agree = d.trajectory_agreement
        t.add_row("log = target's greedy choice", fmt_pct(agree, ".2f"))
    t.add_row("truncated / re-tokenized", f"{d.truncated:,} / {d.retokenized:,}")
    for s in d.skipped:
        where = ", ".join(x for x in s.first if x != "(left out)")
        t.add_row(f"left out: {s.reason}", f"{s.count:,}" + (f" ({where})" if where else ""))
    t.add_row("wall time", f"{d.wall_s:,.1f} s")
    return t


def render_offline(m: MeasureResult) -> RenderableType:
    """The acceptance at K per class and overall, every K up to k_max, the histogram, the inputs."""
    d = m.offline
    if d is None:
        raise ValueError("not a measure offline result")
    head = Text.assemble(
        ("measure offline: ", "bold"),
        f"{d.drafter} on {d.target}, K = {d.k}",
        f", {d.semantics}" + (f" (T = {d.temperature:g})" if d.semantics == "sampling" else ""),
        f"\nlog: {m.source}",
    )
    parts: list[RenderableType] = [head]
    if m.overall is not None:
        parts.append(estimate_table("Acceptance, all traffic", m.overall))
    for name, est in m.classes.items():
        parts.append(estimate_table(f"Acceptance, class {name}", est))
    if d.k_max > 1:
        parts.append(_by_k("Every K, all traffic (* = --k)", d.overall, d.k))
        for name, c in d.classes.items():
            parts.append(_by_k(f"Every K, class {name}", c, d.k))
    parts.append(_histogram(d.overall))
    if d.overall.trees:
        parts.append(
            _trees(
                "SGLang draft trees (steps/topk/draft tokens) vs the chain of as many steps, all traffic",
                d.overall,
            )
        )
        for name, c in d.classes.items():
            parts.append(_trees(f"SGLang draft trees, class {name}", c))
        parts.append(Text(_TREE_NOTE, style="dim"))
    parts.append(_used(d))
    for n in m.notes:
        parts.append(Text(n, style="dim"))
    return Group(*parts)
