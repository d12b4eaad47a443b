"""What a plan is asked for, and the plan read back: engine versions parsed strictly, server
URLs kept without their credentials, the staging replica on the next port, the peak never below
the target, per-request counts from vLLM 0.32 on."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from alphagate.plan.records import Plan, PlanRequest, parse_engine_version
from alphagate.specs import WorkloadConfig
from tests.plans import PlanRun

WL = WorkloadConfig()


def _request(**kw: object) -> PlanRequest:
    return PlanRequest(workload=WL, concurrency=64, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "version"), [("0.11", (0, 11)), ("v0.32.1", (0, 32)), (" 1.2 ", (1, 2))]
)
def test_engine_versions_parse_to_major_and_minor(text: str, version: tuple[int, int]) -> None:
    assert parse_engine_version(text) == version


@pytest.mark.parametrize("text", ["0.11rc1", "banana", "0", "v0.11x", "0.11.2.3"])
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not MAJOR\.MINOR\[\.PATCH\]"):
        parse_engine_version(text)


def test_urls_lose_their_credentials_and_keep_the_rest() -> None:
    r = _request(url="http://bob:s3cret@10.0.0.5:8000/v1?api_key=K&region=eu&Access-Token=T")
    assert r.url == "http://10.0.0.5:8000/v1?region=eu"
    with pytest.raises(ValidationError, match="is not an http\\(s\\) URL with a host") as info:
        _request(url="ftp://bob:s3cret@h/")
    assert "s3cret" not in info.value.errors()[0]["msg"]  # the message the CLI prints
    with pytest.raises(ValidationError, match="not an http"):
        _request(url="http://h/ x")


@pytest.mark.parametrize(
    ("url", "staging"),
    [
        ("http://127.0.0.1:8000", "http://127.0.0.1:8001"),
        ("https://llm.internal/v1", "https://llm.internal:444/v1"),
        ("http://[::1]:9000/v1", "http://[::1]:9001/v1"),
    ],
)
def test_the_staging_replica_is_the_next_port_unless_given(url: str, staging: str) -> None:
    assert _request(url=url).staging_url == staging
    assert _request(url=url, candidate_url="http://s:1").staging_url == "http://s:1"


def test_the_peak_is_never_below_the_target() -> None:
    assert _request().peak == 64 and _request(peak_concurrency=256).peak == 256
    with pytest.raises(ValidationError, match="peak concurrency 8 is below the target 64"):
        _request(peak_concurrency=8)


def test_per_request_counts_come_from_vllm_0_32_on() -> None:
    assert _request().per_request_counts  # a current build
    assert _request(engine_version="0.32").per_request_counts
    assert not _request(engine_version="0.31.9").per_request_counts
    assert not _request(engine="sglang").per_request_counts
    with pytest.raises(ValidationError, match=r"MAJOR\.MINOR"):
        _request(engine_version="latest")


def test_a_plan_reads_back_from_its_json(chat_code_plan: PlanRun) -> None:
    data = chat_code_plan.json
    plan = Plan.model_validate(data)
    assert plan.payload() == data
