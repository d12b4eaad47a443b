"""The split of a log into the requests trained on and those held out: by request, seeded, and
written back as the log's own lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from alphagate.measure.offline.requests import LoggedRequest, read_logs
from alphagate.train.config import TrainError
from alphagate.train.split import (
    MIN_HELD_OUT_REQUESTS,
    MIN_TRAIN_TOKENS,
    check_sizes,
    class_requests,
    distinct,
    log_lines,
    split_requests,
)


def _reqs(n: int, cls: str | None = "code") -> list[LoggedRequest]:
    return [LoggedRequest("log.jsonl", i + 1, cls, prompt=f"p{i}", output="o") for i in range(n)]


def test_the_split_is_by_request_seeded_and_of_the_share_asked() -> None:
    reqs = _reqs(100)
    a = split_requests(reqs, 0.2, seed=0)
    assert len(a.held_out) == 20 and len(a.train) == 80
    assert {r.where for r in a.train}.isdisjoint(r.where for r in a.held_out)
    assert {r.where for r in a.train} | {r.where for r in a.held_out} == {r.where for r in reqs}
    # log order kept in each part
    assert [r.line for r in a.train] == sorted(r.line for r in a.train)
    assert split_requests(reqs, 0.2, seed=0) == a
    b = split_requests(reqs, 0.2, seed=1)
    assert {r.where for r in b.held_out} != {r.where for r in a.held_out}


def test_a_class_with_no_requests_names_the_classes_there() -> None:
    reqs = _reqs(3, "chat") + _reqs(2, "rag")
    assert class_requests(reqs, "rag", "log.jsonl") == reqs[3:]
    with pytest.raises(
        TrainError,
        match=r"--class code: no request of this class in log\.jsonl "
        r"\(its classes: chat \(3\), rag \(2\)\)",
    ):
        class_requests(reqs, "code", "log.jsonl")
    with pytest.raises(TrainError, match="no request there carries a class"):
        class_requests(_reqs(4, None), "code", "log.jsonl")


def test_too_few_tokens_say_how_many_are_needed() -> None:
    with pytest.raises(TrainError, match=f"training needs at least {MIN_TRAIN_TOKENS:,}"):
        check_sizes(train_tokens=MIN_TRAIN_TOKENS - 1, held_out_tokens=10_000, held_out_requests=50)
    with pytest.raises(TrainError, match=f"at least {MIN_HELD_OUT_REQUESTS} requests"):
        check_sizes(train_tokens=10_000, held_out_tokens=10_000, held_out_requests=3)
    check_sizes(train_tokens=MIN_TRAIN_TOKENS, held_out_tokens=10_000, held_out_requests=50)


def test_held_out_lines_are_the_logs_own(tmp_path: Path) -> None:
    pairs = [
        {
            "messages": [
                {"role": "user", "content": f"q{i}"},
                {"role": "assistant", "content": f"a{i}"},
            ]
        }
        for i in range(6)
    ]
    jsonl = tmp_path / "a.jsonl"
    jsonl.write_text(json.dumps(pairs[0]) + "\n\n" + "\n".join(json.dumps(p) for p in pairs[1:3]))
    array = tmp_path / "b.json"
    array.write_text(json.dumps(pairs[3:]))
    reqs = read_logs([jsonl, array]).requests
    lines = log_lines(reqs, (jsonl, array))
    assert [json.loads(x) for x in lines] == pairs
    # read back, they are the same requests
    again = tmp_path / "again.jsonl"
    again.write_text("\n".join(lines) + "\n")
    assert [r.messages for r in read_logs([again]).requests] == [r.messages for r in reqs]


def test_a_request_logged_twice_is_kept_once() -> None:
    a, b = _reqs(2)
    again = LoggedRequest("log.jsonl", 9, "code", prompt="p0", output="o")
    other = LoggedRequest("log.jsonl", 10, "code", prompt="p0", output="another")
    assert distinct([a, b, again, other]) == [a, b, other]
