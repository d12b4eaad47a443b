"""Trace files: the JSONL (Mooncake) format and the Azure CSV, malformed lines by number."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alphagate.bench.dataset import DatasetError
from alphagate.bench.trace import load_trace


def _write(path: Path, lines: list[object]) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


def test_jsonl_trace_in_timestamp_order_with_lengths(tmp_path: Path) -> None:
    p = _write(
        tmp_path / "t.jsonl",
        [
            {"timestamp": 1500, "input_length": 7, "output_length": 3, "hash_ids": [1, 2]},
            {"timestamp": 1000, "prompt": "hello there", "max_tokens": 5, "class": "chat"},
            {"timestamp": 1250.5, "messages": [{"role": "user", "content": "hi"}]},
        ],
    )
    prompts, problems = load_trace(str(p), None, seed=0)
    assert problems == []
    assert [x.arrival_s for x in prompts] == pytest.approx([0.0, 0.2505, 0.5])
    first, second, third = prompts
    assert first.prompt == "hello there" and first.max_tokens == 5 and first.ignore_eos
    assert first.cls == "chat"
    assert second.messages == [{"role": "user", "content": "hi"}] and second.max_tokens is None
    assert not second.ignore_eos
    assert third.prompt is not None and len(third.prompt.split()) == 7
    assert third.max_tokens == 3 and third.ignore_eos
    # -n keeps the first N by time; the same seed draws the same synthetic text
    two, _ = load_trace(str(p), 2, seed=0)
    assert [x.arrival_s for x in two] == pytest.approx([0.0, 0.2505])
    assert load_trace(str(p), None, seed=0)[0][2].prompt == third.prompt


def test_malformed_lines_are_reported_by_number_and_skipped(tmp_path: Path) -> None:
    p = _write(
        tmp_path / "t.jsonl",
        [
            {"timestamp": 0, "input_length": 4, "output_length": 2},
            "{not json",
            {"input_length": 4},
            {"timestamp": 5, "output_length": 2},
            {"timestamp": 6, "input_length": 0},
            {"timestamp": 7, "input_length": 3, "output_length": 2, "max_tokens": 9},
            {"timestamp": 9, "input_length": 4, "output_length": 2},
        ],
    )
    prompts, problems = load_trace(str(p), None, seed=0)
    assert len(prompts) == 2
    assert [x.split(": ")[0].rsplit(":", 1)[1] for x in problems] == ["2", "3", "4", "5", "6"]
    assert "'timestamp' (ms)" in problems[1] and "disagree" in problems[4]
    with pytest.raises(DatasetError, match=r"t\.jsonl:2"):
        load_trace(str(p), None, seed=0, strict=True)


def test_azure_csv_trace(tmp_path: Path) -> None:
    p = tmp_path / "AzureLLMInferenceTrace_conv.csv"
    p.write_text(
        "TIMESTAMP,ContextTokens,GeneratedTokens\n"
        "2023-11-16 18:15:46.6805900,374,44\n"
        "2023-11-16 18:15:50.9951690,396,109\n"
        "2023-11-16 18:15:51,abc,3\n"
        "2023-11-16 18:15:51.6645000,879,31\n"
    )
    prompts, problems = load_trace(str(p), None, seed=0)
    assert [x.arrival_s for x in prompts] == pytest.approx([0.0, 4.314579, 4.98391], abs=1e-6)
    assert [x.max_tokens for x in prompts] == [44, 109, 31]
    assert [len((x.prompt or "").split()) for x in prompts] == [374, 396, 879]
    assert len(problems) == 1 and ":4: ContextTokens must be an integer" in problems[0]
    bad = tmp_path / "other.csv"
    bad.write_text("time,in,out\n1,2,3\n")
    with pytest.raises(DatasetError, match="TIMESTAMP, ContextTokens, GeneratedTokens"):
        load_trace(str(bad), None, seed=0)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
LINE = st.fixed_dictionaries(
    {},
    optional={
        key: JSON
        for key in (
            "timestamp", "input_length", "output_length", "max_tokens", "prompt", "messages",
            "class",
        )
    },
).map(json.dumps) | st.text(st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), max_size=20)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(LINE, max_size=6), st.booleans())
def test_any_trace_line_is_a_request_or_a_numbered_problem(lines: list[str], strict: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        p = Path(tmp) / "t.jsonl"
        p.write_text("\n".join(lines) + "\n", encoding="utf-8")
        try:
            prompts, problems = load_trace(str(p), None, seed=0, strict=strict)
        except DatasetError as exc:
            assert "t.jsonl" in str(exc)
            return
        assert all(x.arrival_s is not None and x.arrival_s >= 0 for x in prompts)
        assert all("t.jsonl:" in x for x in problems)
        assert len(prompts) + len(problems) == sum(1 for x in lines if x.strip())
