"""Section 9 of the report: the commands that reproduce the page — the caller's exact commands
when it knows them (``alphagate demo`` does), else each input's command rebuilt from its file
(:mod:`alphagate.report.reproduce`) with the flags the file does not record — the command that
renders the page, and the inputs it read.
"""

from __future__ import annotations

from alphagate.report import reproduce
from alphagate.report.blocks import Block, Bullets, Code, Prose, Table, cells
from alphagate.report.inputs import (
    BenchInput,
    ExplainInput,
    FieldsInput,
    GateInput,
    Input,
    MeasureInput,
    ModelInput,
    PlanInput,
    ReportInputs,
    SweepInput,
)

__all__ = ["reproduce_section"]


def _command(item: Input) -> reproduce.Command | None:
    if isinstance(item, PlanInput):
        return reproduce.plan_command(item.plan, item.source)
    if isinstance(item, SweepInput):
        return reproduce.sweep_command(item.result, item.source)
    if isinstance(item, BenchInput):
        return reproduce.bench_command(item.result, item.source)
    if isinstance(item, ModelInput):
        return reproduce.model_command(item.verb, item.answer.model_dump(), item.source)
    return None


def _rebuilt(inp: ReportInputs) -> list[Block]:
    """Each input's command rebuilt from its file, and what the files do not record."""
    cmds = [c for item in inp.inputs if (c := _command(item)) is not None]
    out: list[Block] = []
    if cmds:
        out.append(
            Code("Produce the inputs (rebuilt from the files)", "\n".join(c.text for c in cmds))
        )
        gaps = [f"{c.verb}: {', '.join(c.unrecorded)}" for c in cmds if c.unrecorded]
        if gaps:
            out.append(Prose("Not recorded in the files, so left at their defaults above:", "note"))
            out.append(Bullets(tuple(gaps)))
    kinds = MeasureInput | GateInput | ExplainInput | FieldsInput
    other = [i.source for i in inp.inputs if isinstance(i, kinds)]
    if other:
        out.append(
            Prose(
                "Re-run the measure, gate, explain or calibrate command that wrote "
                + ", ".join(other)
                + ".",
                "note",
            )
        )
    return out


def _what(i: Input) -> str:
    """An input in a few words: its verb and what it holds."""
    if isinstance(i, PlanInput):
        return f"plan ({i.plan.verdict})"
    if isinstance(i, SweepInput):
        r = i.result
        return (
            f"simulate ({len(r.rows)} loads × {len(r.ks)} K × {len(r.mixes)} acceptance settings)"
        )
    if isinstance(i, BenchInput):
        recs = (
            "no records" if i.records is None else f"{len(i.records)} records in {i.records_source}"
        )
        return f"bench run {i.result.run_id} ({recs})"
    if isinstance(i, MeasureInput | GateInput | ExplainInput):
        return i.result.verb
    return str(i.verb)


def reproduce_section(inp: ReportInputs) -> list[Block]:
    out: list[Block] = []
    if inp.produced_by:
        out.append(Code("Produce the inputs", "\n".join(inp.produced_by)))
    else:
        out += _rebuilt(inp)
    if inp.command:
        out.append(Code("Render this page", inp.command))
    out.append(
        Table("Inputs", ("file", "results"), tuple(cells(i.source, _what(i)) for i in inp.inputs))
    )
    return out
