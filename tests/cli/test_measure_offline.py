"""``alphagate measure offline`` from the command line: the workflow (bench --save-text →
measure offline → plan --alpha-from / gate --measure), its JSON, and every bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from tests.conftest import Cli
from tests.measure.offline.fixtures import Tiny, greedy_log


@pytest.fixture(scope="module")
def log(tiny: Tiny, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli-log") / "log.jsonl"
    prompts = ["def f(x):\n    ", "((((((((", "Dear reader,", "0000000000"]
    greedy_log(tiny, path, prompts, 16, ["a"] * 4)
    return path


def test_json_per_class_read_by_plan_and_gate(
    cli: Cli, tiny: Tiny, log: Path, tmp_path: Path
) -> None:
    out = tmp_path / "offline.json"
    d = cli.json(
        "measure", "offline", "--log", str(log), "--target", str(tiny.target),
        "--drafter", f"draft_model:{tiny.draft}", "--k", "2", "--k-max", "3",
        "--class-rule", "code=def |\\(", "--out", str(out),
    )  # fmt: skip
    assert d["verb"] == "measure offline" and set(d["classes"]) == {"code", "other"}
    assert d["offline"]["k"] == 2 and [r["k"] for r in d["offline"]["overall"]["by_k"]] == [1, 2, 3]
    assert d["overall"]["k"] == 2 and d["overall"]["draft_acceptance_rate_ci"] is not None
    assert json.loads(out.read_text()) == d
    plan = cli.json(
        "plan", "--class", "code:0.5", "--class", "other:0.5", "--concurrency", "16",
        "--alpha-from", str(out),
    )  # fmt: skip
    sources = {c["name"]: c["source"] for c in plan["classes"]}
    assert all(s.startswith("measured") for s in sources.values()), sources
    r = cli.run("gate", "--min-alpha", "0.01", "--measure", str(out), "--min-drafts", "1")
    assert r.exit_code in (0, 3), r.output
    assert "offline.json (measure offline" in r.output


def test_table_output(cli: Cli, tiny: Tiny, log: Path) -> None:
    r = cli.run(
        "measure", "offline", "--log", str(log), "--target", str(tiny.target),
        "--drafter", "ngram:2:3", "--k", "3", "--no-progress",
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    for text in ("Acceptance, all traffic", "Acceptance lengths", "requests used / read", "greedy"):
        assert text in r.output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--drafter", "eagle3"], "eagle3:PATH"),
        (["--drafter", "medusa:x"], "expected ngram"),
        (["--drafter", "ngram", "--k", "3", "--k-max", "2"], "--k-max 2 is below --k 3"),
        (["--drafter", "ngram", "--log", "missing.jsonl"], "missing.jsonl"),
        (["--drafter", "draft_model:/no/such/draft"], "/no/such/draft"),
        (["--drafter", "ngram", "--class-rule", "oops"], "NAME=REGEX"),
        (["--drafter", "ngram", "--class-field", "no.such"], "no request in the log has this"),
    ],
)
def test_bad_input_exits_2_naming_what(
    cli: Cli, tiny: Tiny, log: Path, args: list[str], needle: str
) -> None:
    base = ["measure", "offline", "--target", str(tiny.target), "--no-progress"]
    if "--log" not in args:
        base += ["--log", str(log)]
    r = cli.run(*base, *args)
    assert r.exit_code == 2, r.output
    assert needle in " ".join(r.output.split()), r.output


def test_bench_save_text_is_a_log(cli: Cli, tiny: Tiny, tmp_path: Path) -> None:
    """A bench run with --save-text against a server is a log measure offline reads."""
    from alphagate.specs import DeploymentConfig
    from alphagate.twin.background import twin_in_thread
    from alphagate.twin.config import TwinConfig

    cfg = TwinConfig(
        deployment=DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16"), k=0, time_scale=0.0
    )
    with twin_in_thread(cfg) as (url, _):
        r = cli.run(
            "bench", "--url", url, "--dataset", "synthetic:in=12,out=6", "--num-prompts", "3",
            "--concurrency", "1", "--save-text", "--out", str(tmp_path / "b"), "--no-progress",
        )  # fmt: skip
    assert r.exit_code == 0, r.output
    rec = json.loads((tmp_path / "b" / "requests.jsonl").read_text().splitlines()[0])
    assert rec["text"]["output"] and rec["text"]["temperature"] == 0.0
    d = cli.json(
        "measure", "offline", "--log", str(tmp_path / "b" / "requests.jsonl"),
        "--target", str(tiny.target), "--drafter", "ngram",
    )  # fmt: skip
    off = d["offline"]
    assert off["requests_used"] == 3 and off["retokenized"] == 3  # the twin sends text only
    # the twin's text is not this target's greedy output: said, with the exact alternative
    assert off["trajectory_agreement"] < 0.9 and any("--regenerate" in n for n in d["notes"])
