"""`alphagate bench` CLI against the twin: secrets, classes, open loop, flags."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from alphagate.specs import DeploymentConfig
from alphagate.twin.config import TwinConfig
from tests.conftest import Cli
from tests.servers import twin

FAST = TwinConfig(
    deployment=DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16"), k=2, time_scale=0.0
)


def test_api_key_is_never_written(cli: Cli, tmp_path: Path) -> None:
    cfg = FAST.model_copy(update={"api_key": "topsecret-123"})
    with twin(cfg) as (url, _):
        r = cli.run(
            "bench",
            "--url",
            url,
            "--api-key",
            "topsecret-123",
            "--num-prompts",
            "4",
            "--dataset",
            "synthetic:in=8,out=8",
            "--out",
            str(tmp_path),
            "--json",
        )
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["levels"][0]["overall"]["completed"] == 4
        bad = cli.run(
            "bench",
            "--url",
            url,
            "--api-key",
            "wrong",
            "--num-prompts",
            "2",
            "--model",
            "alphagate-twin",
            "--dataset",
            "synthetic:in=8,out=8",
            "--out",
            str(tmp_path / "bad"),
            "--json",
        )
        assert json.loads(bad.stdout)["levels"][0]["overall"]["failed_by_type"] == {"http_401": 2}
    for f in tmp_path.rglob("*"):
        if f.is_file():
            assert "topsecret-123" not in f.read_text()
    assert "topsecret-123" not in r.stdout


def test_chat_endpoint_classes_and_open_loop(cli: Cli, tmp_path: Path) -> None:
    data = tmp_path / "c.jsonl"
    data.write_text(
        "\n".join(
            json.dumps(
                {
                    "messages": [{"role": "user", "content": f"hi {i}"}],
                    "class": "chat" if i % 2 else "code",
                    "max_tokens": 12,
                }
            )
            for i in range(12)
        )
    )
    with twin(FAST) as (url, _):
        r = cli.run(
            "bench",
            "--url",
            url,
            "--endpoint",
            "chat",
            "--dataset",
            str(data),
            "--num-prompts",
            "12",
            "--rate",
            "200",
            "--out",
            str(tmp_path / "o"),
            "--json",
        )
    assert r.exit_code == 0, r.output
    lv = json.loads(r.stdout)["levels"][0]
    assert lv["level"] == "r200" and lv["overall"]["completed"] == 12
    assert set(lv["classes"]) == {"chat", "code"}
    assert lv["acceptance"]["k"] == 2


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--num-prompts", "2"], "--url"),
        (["--url", "http://x", "--baseline-url", "http://y"], "--url"),
        (["--url", "http://x", "--endpoint", "embeddings"], "--endpoint"),
        (["--url", "http://x", "--dataset", "/nope.jsonl"], "--dataset"),
        (["--url", "http://x", "--dataset", "synthetic:in=0,out=3"], "--dataset"),
        (["--url", "http://x", "--header", "novalue"], "--header"),
        (["--url", "http://x", "--concurrency", "0"], "--concurrency"),
    ],
)
def test_bad_bench_flags(cli: Cli, args: list[str], flag: str, tmp_path: Path) -> None:
    r = cli.run("bench", *args, "--out", str(tmp_path))
    assert r.exit_code == 2, r.output
    assert flag in r.output and "Traceback" not in r.output
