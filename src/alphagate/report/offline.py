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


def _shown(xs: list[float]) -> list[float]:
    """``xs`` without its trailing zeros (drafts of variable length seldom reach K)."""
    end = max((i for i, x in enumerate(xs) if x), default=0)
    return xs[: end + 1]


def _count(n: float) -> str:
    return f"{n:,.1f}" if n % 1 else f"{n:,.0f}"


def _histogram(c: OfflineClass) -> RenderableType:
    total = sum(c.acceptance_length_histogram) or 1.0
    t = add_columns(new_table(), "tokens per step", "steps", "share")
    rows = c.acceptance_length_histogram
    for j, n in enumerate(_shown(rows) if c.acceptance_by_length is not None else rows):
        t.add_row(str(j + 1), _count(n), f"{n / total:.3f}")
    title = Text("Acceptance lengths at K (bonus token included)", style="bold")
    return Group(title, t)


def _lengths(c: OfflineClass) -> RenderableType | None:
    """Drafts of variable length: every engine step by the tokens it drafted, and what it
    accepted of them."""
    joint, steps = c.acceptance_by_length, c.draft_length_histogram
    if joint is None or steps is None:
        return None
    total = sum(steps) or 1.0
    t = add_columns(new_table(), "drafted", "steps", "share", "accepted (mean)", "all accepted")
    for n, row in enumerate(joint[: len(_shown(steps))]):
        k = sum(row)
        mean = sum(a * x for a, x in enumerate(row)) / k if k else None
        t.add_row(
            str(n), _count(k), f"{k / total:.3f}", fmt_alpha(mean, 2),
            fmt_pct(row[n] / k if k and n else None, ".0f"),
        )  # fmt: skip
    title = Text("Draft lengths (every engine step; 0: no draft, not counted by vLLM)", "bold")
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
    if len(d.overall.by_k) > 1:
        parts.append(_by_k("Every K, all traffic (* = --k)", d.overall, d.k))
        for name, c in d.classes.items():
            parts.append(_by_k(f"Every K, class {name}", c, d.k))
    lengths = _lengths(d.overall)
    if lengths is not None:
        parts.append(lengths)
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
