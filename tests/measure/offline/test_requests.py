"""Request logs for measure offline: every format, classes, sampling and every bad line counted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from alphagate.measure.offline.requests import parse_class_rule, read_logs, sample
from alphagate.measure.results import MeasureError


def _write(path: Path, lines: list[object]) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


def test_every_format(tmp_path: Path) -> None:
    bench = {
        "run_id": "r", "id": 0, "target": "baseline", "level": "c1", "cls": "code",
        "chunk_times_s": [0.1], "error_type": None,
        "text": {"prompt": "def f():", "prompt_token_ids": [5, 6], "output": " return",
                 "output_token_ids": [7], "finish_reason": "length", "temperature": 0.0},
    }  # fmt: skip
    pair_chat = {
        "request": {"messages": [{"role": "user", "content": "hi"}]},
        "response": {"body": {"choices": [{"message": {"role": "assistant", "content": "yo"}}]}},
    }
    pair_comp = {
        "request": {"prompt": ["abc"]},
        "response": {"choices": [{"text": "def", "token_ids": [1, 2]}], "prompt_token_ids": [3]},
    }
    conv = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    log = _write(tmp_path / "a.jsonl", [bench, pair_chat, pair_comp, conv])
    share = tmp_path / "s.json"
    share.write_text(json.dumps([{"conversations": [
        {"from": "system", "value": "be brief"}, {"from": "human", "value": "why?"},
        {"from": "gpt", "value": "because"}]}]))  # fmt: skip
    read = read_logs([log, share])
    assert read.num_skipped == 0
    b, chat, comp, c, sg = read.requests
    assert (b.cls, b.prompt_token_ids, b.output_token_ids) == ("code", (5, 6), (7,))
    assert chat.messages == ({"role": "user", "content": "hi"},) and chat.output == "yo"
    assert (comp.prompt, comp.output_token_ids, comp.prompt_token_ids) == ("abc", (1, 2), (3,))
    assert c.messages == ({"role": "user", "content": "q"},) and c.output == "a"
    assert sg.messages is not None and [m["role"] for m in sg.messages] == ["system", "user"]
    assert sg.output == "because" and sg.where == "s.json:1"


def test_bad_lines_are_skipped_and_counted_with_their_numbers(tmp_path: Path) -> None:
    ok = {"request": {"prompt": "p"}, "response": {"choices": [{"text": "o"}]}}
    failed = {"run_id": "r", "chunk_times_s": [], "error_type": "http_500", "target": "default"}
    no_text = {"run_id": "r", "chunk_times_s": [], "error_type": None, "target": "default"}
    cand = {**no_text, "target": "candidate"}
    log = _write(
        tmp_path / "l.jsonl",
        [
            ok,
            "{not json",
            "[1, 2]",
            {"request": {"prompt": "p"}, "response": {}},
            failed,
            no_text,
            cand,
            ok,
        ],
    )
    read = read_logs([log])
    assert len(read.requests) == 2
    assert read.skipped["not a JSON object"] == ["l.jsonl:3"]
    assert read.skipped["response has no choices[0]"] == ["l.jsonl:4"]
    assert any(v == ["l.jsonl:2"] for k, v in read.skipped.items() if k.startswith("not JSON"))
    assert read.skipped["a bench record without text: run `alphagate bench --save-text`"] == [
        "l.jsonl:6"
    ]
    assert read.left_out == {"failed requests": 1, "A/B candidate side": 1}
    with pytest.raises(MeasureError, match=r"nope\.jsonl"):
        read_logs([tmp_path / "nope.jsonl"])


def test_classes_from_a_field_or_rules_and_a_seeded_sample(tmp_path: Path) -> None:
    lines = [
        {"request": {"prompt": f"def f{i}():" if i % 2 else f"Dear {i},", "meta": {"kind": "x"}},
         "response": {"choices": [{"text": "o"}]}}
        for i in range(10)
    ]  # fmt: skip
    log = _write(tmp_path / "c.jsonl", lines)
    assert {r.cls for r in read_logs([log], class_field="request.meta.kind").requests} == {"x"}
    rules = (parse_class_rule("code=^def "), parse_class_rule("mail=^Dear"))
    got = read_logs([log], class_rules=rules).requests
    assert [r.cls for r in got] == ["mail", "code"] * 5
    assert (
        read_logs([log], class_rules=(parse_class_rule("code=^def "),)).requests[0].cls == "other"
    )
    a, b = sample(got, 4, seed=3), sample(got, 4, seed=3)
    assert a == b and len(a) == 4 and [r.line for r in a] == sorted(r.line for r in a)
    assert sample(got, 4, seed=4) != a and sample(got, None, 0) == got
    with pytest.raises(MeasureError, match=r"NAME=REGEX"):
        parse_class_rule("code")
    with pytest.raises(MeasureError, match="regular expression"):
        parse_class_rule("code=(")
