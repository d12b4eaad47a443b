"""Datasets: malformed lines reported with their line numbers, seeded order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from alphagate.bench.dataset import DatasetError, load_prompts


def test_malformed_lines_reported_with_line_numbers(tmp_path: Path) -> None:
    p = tmp_path / "d.jsonl"
    p.write_text(
        '{"prompt": "fine", "class": "chat"}\n{oops\n{"messages": "nope"}\n\n{"prompt": "also fine", "max_tokens": 5}\n'
    )
    prompts, problems = load_prompts(str(p), 4, seed=0)
    assert len(prompts) == 4 and {x.as_text() for x in prompts} == {"fine", "also fine"}
    assert problems[0].startswith(f"{p}:2:") and problems[1].startswith(f"{p}:3:")
    with pytest.raises(DatasetError, match=":2:"):
        load_prompts(str(p), 4, seed=0, strict=True)


def test_same_seed_same_prompts_in_same_order(tmp_path: Path) -> None:
    sharegpt = tmp_path / "sg.json"
    sharegpt.write_text(
        json.dumps(
            [
                {
                    "conversations": [
                        {"from": "human", "value": f"question {i}"},
                        {"from": "gpt", "value": "word " * (i + 1)},
                    ]
                }
                for i in range(10)
            ]
            + [{"conversations": [{"from": "human", "value": "lonely"}]}]
        )
    )
    a, probs = load_prompts(str(sharegpt), 15, seed=4)
    b, _ = load_prompts(str(sharegpt), 15, seed=4)
    c, _ = load_prompts(str(sharegpt), 15, seed=5)
    assert [x.as_text() for x in a] == [x.as_text() for x in b] != [x.as_text() for x in c]
    assert len(probs) == 1 and "entry 10" in probs[0]
