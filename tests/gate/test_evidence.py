"""The evidence a rollout's gate reads: per-class acceptance from a bench run against a twin that
returns per-request counts, one class per run when it does not, saved /metrics scrapes, and the
refusals — counts that contradict the counters, a distorted A/B, an interrupted A/B (its
completed pairs kept and used), a plan of another version."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from alphagate.core.traffic import TrafficClass
from alphagate.measure.estimate import estimate
from alphagate.specs import DeploymentConfig, WorkloadConfig
from alphagate.twin.config import TwinConfig
from tests.conftest import Cli
from tests.servers import twin

#: wall-clock behaviour: `make test` runs these alone (see the Makefile)
pytestmark = pytest.mark.timing

DEP = DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16")
MIX = (
    TrafficClass(name="chat", share=0.5, alpha=0.8),
    TrafficClass(name="code", share=0.5, alpha=0.3),
)


def _cfg(k: int, per_request: bool = True, time_scale: float = 0.0) -> TwinConfig:
    return TwinConfig(
        deployment=DEP,
        workload=WorkloadConfig(classes=MIX),
        k=k,
        time_scale=time_scale,
        per_request_spec_decode_metrics="summary" if per_request else "none",
    )


def _dataset(path: Path, n: int = 40) -> Path:
    lines = [
        json.dumps(
            {"prompt": f"p{i} a b c d", "max_tokens": 48, "class": "chat" if i % 2 else "code"}
        )
        for i in range(n)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _bench(cli: Cli, url: str, data: Path, out: Path, *extra: str) -> dict[str, object]:
    r = cli.run(
        "bench", "--url", url, "--dataset", str(data), "-c", "4", "-n", "40", "--out", str(out),
        "--no-progress", *extra,
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    return json.loads((out / "summary.json").read_text())  # type: ignore[no-any-return]


def test_per_class_acceptance_from_per_request_counts_is_each_class_s_own(
    cli: Cli, tmp_path: Path
) -> None:
    data = _dataset(tmp_path / "t.jsonl")
    with twin(_cfg(3)) as (url, _):
        summary = _bench(cli, url, data, tmp_path / "b")
    (lv,) = summary["levels"]  # type: ignore[misc]
    ra = lv["request_acceptance"]
    assert ra["requests_with_counts"] == 40
    assert (ra["overall"]["num_drafts"], ra["overall"]["num_accepted_tokens"]) == (
        lv["acceptance"]["num_drafts"],
        lv["acceptance"]["num_accepted_tokens"],
    )  # the twin counts its counters where it counts each request's, as vLLM's scheduler
    m = cli.json(
        "measure", "bench", str(tmp_path / "b" / "summary.json"), "--min-drafts", "100",
        "--out", str(tmp_path / "m.json"),
    )  # fmt: skip
    chat, code = m["classes"]["chat"], m["classes"]["code"]
    for est, true in ((chat, 0.8), (code, 0.3)):
        assert est["alpha_iid_ci"]["low"] <= true <= est["alpha_iid_ci"]["high"]
        assert "requests (cluster-robust)" in est["interval_basis"]
    g = cli.json(
        "gate", "--bench", str(tmp_path / "b" / "summary.json"), "--min-alpha", "0.5",
        "--class", "code", "--min-drafts", "100", exit_code=1,
    )  # fmt: skip
    assert g["results"][0]["result"] == "fail" and "class code" in g["results"][0]["evidence"]
    plan = cli.json(
        "plan", "--model", "llama-3.1-8b", "--class", "chat:0.5", "--class", "code:0.5",
        "-c", "16", "--alpha-from", str(tmp_path / "m.json"),
    )  # fmt: skip
    measured = {c["name"]: c["alpha"] for c in plan["classes"]}
    assert measured == pytest.approx({"chat": chat["alpha_iid"], "code": code["alpha_iid"]})


def test_without_per_request_counts_one_class_per_run_is_that_class(
    cli: Cli, tmp_path: Path
) -> None:
    data = _dataset(tmp_path / "t.jsonl")
    with twin(_cfg(3, per_request=False)) as (url, _):
        mixed = tmp_path / "mixed"
        _bench(cli, url, data, mixed)
        code = tmp_path / "code"
        _bench(cli, url, data, code, "--only-class", "code")
    g = cli.run("gate", "--bench", str(mixed / "summary.json"), "--min-alpha", "0.1", "--class", "code",
                "--min-drafts", "100")  # fmt: skip
    assert g.exit_code == 3 and "no measurement of class code" in g.output
    assert "--only-class code" in g.output  # what to do about it
    g = cli.json("gate", "--bench", str(code / "summary.json"), "--min-alpha", "0.1", "--class", "code",
                 "--min-drafts", "100")  # fmt: skip
    assert g["decision"] == "pass"
    assert "labelled as that class" in g["results"][0]["evidence"]
    m = cli.json(
        "measure",
        "bench",
        str(code / "summary.json"),
        "--min-drafts",
        "100",
        "--out",
        str(tmp_path / "code.json"),
    )
    assert set(m["classes"]) == {"code"}


def test_counts_that_exceed_the_counters_are_refused(cli: Cli, tmp_path: Path) -> None:
    data = _dataset(tmp_path / "t.jsonl")
    with twin(_cfg(3)) as (url, _):
        _bench(cli, url, data, tmp_path / "b")
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    lv = summary["levels"][0]
    # counters that saw 10% less than the replies report: each figure consistent on its own
    a = lv["acceptance"]
    fewer = estimate(
        a["num_drafts"] * 0.9, a["num_draft_tokens"] * 0.9, a["num_accepted_tokens"] * 0.9,
        [x * 0.9 for x in a["accepted_per_pos"]], a["k"],
    )  # fmt: skip
    lv["acceptance"] = {**fewer.model_dump(), "counter_reset": False, "sources": 1}
    (tmp_path / "b" / "summary.json").write_text(json.dumps(summary))
    r = cli.run("gate", "--bench", str(tmp_path / "b" / "summary.json"), "--min-alpha", "0.1")
    assert r.exit_code == 2 and "more than the" in r.output and "counters grew by" in r.output
    r = cli.run("measure", "bench", str(tmp_path / "b" / "summary.json"))
    assert r.exit_code == 2 and "neither can be trusted" in r.output


def test_saved_scrapes_are_evidence_with_the_live_delta_rules(cli: Cli, tmp_path: Path) -> None:
    data = _dataset(tmp_path / "t.jsonl")
    with twin(_cfg(3)) as (url, _):
        before = urllib.request.urlopen(url + "/metrics").read()
        summary = _bench(cli, url, data, tmp_path / "b")
        after = urllib.request.urlopen(url + "/metrics").read()
    (tmp_path / "before.txt").write_bytes(before)
    (tmp_path / "after.txt").write_bytes(after)
    m = cli.json(
        "measure", "live", "--from-file", str(tmp_path / "before.txt"),
        "--from-file", str(tmp_path / "after.txt"), "--min-drafts", "10",
    )  # fmt: skip
    acc = summary["levels"][0]["acceptance"]  # type: ignore[index]
    assert m["overall"]["num_drafts"] == acc["num_drafts"]
    assert m["overall"]["num_accepted_tokens"] == acc["num_accepted_tokens"]
    g = cli.json(
        "gate", "--min-alpha", "0.1", "--measure", str(tmp_path / "before.txt"),
        "--measure", str(tmp_path / "after.txt"), "--min-drafts", "10",
    )  # fmt: skip
    assert g["decision"] == "pass" and "saved scrapes" in g["results"][0]["evidence"]
    one = cli.run("measure", "live", "--from-file", str(tmp_path / "after.txt"))
    assert one.exit_code == 2 and "at least two files" in one.output
    (tmp_path / "junk.txt").write_text("# not\nexposition {{{\n")
    junk = cli.run(
        "measure",
        "live",
        "--from-file",
        str(tmp_path / "junk.txt"),
        "--from-file",
        str(tmp_path / "after.txt"),
    )
    assert junk.exit_code == 2 and "junk.txt" in junk.output and "Traceback" not in junk.output


def _interrupted_ab(tmp_path: Path, data: Path, out: Path) -> tuple[int, str]:
    """An 8-repeat A/B, SIGINT once five runs' records are in: (exit code, its output)."""
    # real-time twins (at a time scale near 0 a client on two cores reads the chunks in bunches,
    # and the gate rightly refuses the A/B as distorted)
    with (
        twin(_cfg(0, per_request=False, time_scale=1.0)) as (b, _),
        twin(_cfg(3, time_scale=1.0)) as (c, _),
    ):
        proc = subprocess.Popen(
            [sys.executable, "-m", "alphagate", "bench", "--baseline-url", b, "--candidate-url", c,
             "--dataset", str(data), "-c", "4", "-n", "16", "--repeats", "8", "--out", str(out),
             "--no-progress"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        records = out / "requests.jsonl"
        while time.monotonic() < deadline:
            if records.exists() and len(records.read_text().splitlines()) >= 16 * 5:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        text, _ = proc.communicate(timeout=60)
    return proc.returncode, text.decode()


def test_an_interrupted_ab_keeps_its_completed_pairs_and_the_gate_uses_them(tmp_path: Path) -> None:
    """SIGINT in the middle of a 4-repeat A/B: the summary holds the runs that completed (and the
    partial one), and the gate judges the pairs complete on both sides. An A/B the loaded machine
    distorted (the gate's "rerun" with exit 3) is run again, up to twice, as a user would."""
    data = _dataset(tmp_path / "t.jsonl")
    for attempt in range(3):
        out = tmp_path / f"ab{attempt}"
        code, text = _interrupted_ab(tmp_path, data, out)
        assert code == 130, text
        summary = json.loads((out / "summary.json").read_text())
        assert summary["interrupted"] is True
        by = {lv["target"]: lv for lv in summary["levels"]}
        done_b = {r["repeat"] for r in by["baseline"]["runs"]}
        done_c = {r["repeat"] for r in by["candidate"]["runs"]}
        assert len(done_b & done_c) >= 2
        judged = Cli().run(
            "gate", "--bench", str(out / "summary.json"), "--min-tpot-speedup", "0.1",
            "--min-requests", "10", "--ignore-errors", "--json",
        )  # fmt: skip
        g = json.loads(judged.stdout)
        if "falling behind" not in (g["results"][0]["why"] or ""):
            break
    assert judged.exit_code == 0, judged.output
    assert g["results"][0]["sample"] >= 16 * 2
    tpot = g["results"][0]
    assert tpot["result"] == "pass", tpot
    assert "alternated runs" in tpot["basis"]


def test_a_plan_of_another_version_is_refused_by_name(cli: Cli, tmp_path: Path) -> None:
    d = cli.json("plan", "--model", "llama-3.1-8b", "--class", "chat:1:0.7", "-c", "16")
    del d["serve_candidate"], d["p99"]
    (tmp_path / "old.json").write_text(json.dumps(d))
    r = cli.run("gate", "--plan", str(tmp_path / "old.json"), "--min-alpha", "0.5")
    assert r.exit_code == 2 and "another version of alphagate" in r.output


@pytest.mark.parametrize("field", ["--class-field", "--only-class"])
def test_class_flags_on_data_without_classes_say_so(cli: Cli, tmp_path: Path, field: str) -> None:
    (tmp_path / "plain.jsonl").write_text(json.dumps({"prompt": "a", "max_tokens": 4}) + "\n")
    with twin(_cfg(3)) as (url, _):
        r = cli.run(
            "bench", "--url", url, "--dataset", str(tmp_path / "plain.jsonl"), field, "kind"
        )
    assert r.exit_code == 2 and field in r.output and "Traceback" not in r.output


def test_a_watch_whose_server_dies_ends_as_not_enough_evidence_naming_it(tmp_path: Path) -> None:
    """A canary watch against a server that is killed: the next scrape fails, and the watch
    ends there — exit 3, the source named — instead of judging its stale counters as PASS."""
    import threading

    from tests.servers import traffic

    out = tmp_path / "gate.json"
    lines: list[str] = []
    passed = threading.Event()
    with twin(_cfg(3, time_scale=1.0)) as (url, _):
        proc = subprocess.Popen(
            [sys.executable, "-m", "alphagate", "gate", "--min-alpha", "0.1", "--url", url,
             "--watch", "--interval", "1", "--duration", "120", "--min-drafts", "10",
             "--out", str(out)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip

        def read() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.append(line)
                if " PASS " in line:
                    passed.set()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        with traffic(url, concurrency=2):
            assert passed.wait(90), "".join(lines)  # judged while the server answers
    proc.wait(60)
    reader.join(10)
    assert proc.stdout is not None
    proc.stdout.close()
    text = "".join(lines)
    assert proc.returncode == 3, text
    assert "stopped answering" in text and url.split("//")[1] in text
    assert json.loads(out.read_text())["decision"] == "insufficient"


def test_evidence_of_another_deployment_is_refused_however_it_is_named(
    cli: Cli, tmp_path: Path
) -> None:
    """The servers' own word decides: the served name each bench recorded, the checkpoint behind
    it (``root`` at /v1/models, as vLLM reports it) and the ``model_name`` of live counters — a
    plan made for 70B with the twins' served name as an alias is still refused on 8B evidence,
    and the two sides of an A/B must be one model."""
    data = _dataset(tmp_path / "d.jsonl")
    small = _cfg(3).model_copy(
        update={"deployment": DeploymentConfig(model="llama-3.2-1b", weight_dtype="bf16"),
                "served_model_name": "other-model"}
    )  # fmt: skip
    with twin(_cfg(0)) as (b_url, _), twin(small) as (c_url, _), twin(_cfg(3)) as (s_url, _):
        base = _bench(cli, b_url, data, tmp_path / "b")
        _bench(cli, c_url, data, tmp_path / "c")
        assert base["served_model"] == "alphagate-twin"
        assert base["served_model_root"] == "meta-llama/Llama-3.1-8B-Instruct"
        r = cli.run("gate", "--baseline", str(tmp_path / "b" / "summary.json"), "--candidate",
                    str(tmp_path / "c" / "summary.json"), "--min-throughput-speedup", "1.1")  # fmt: skip
        assert r.exit_code == 2 and "measured different deployments" in r.output, r.output
        # a 70B plan whose served name is the twins' alias
        plan = tmp_path / "plan.md"
        r = cli.run("plan", "--class", "chat:1:0.7", "-c", "4", "--served-model",
                    "alphagate-twin", "--out", str(plan))  # fmt: skip
        assert r.exit_code == 0, r.output
        r = cli.run("gate", "--plan", str(plan.with_suffix(".json")), "--bench",
                    str(tmp_path / "b" / "summary.json"))  # fmt: skip
        assert r.exit_code == 2 and "checkpoint 'meta-llama/Llama-3.1-8B-Instruct'" in r.output
        # live counters of a server whose model_name is not the plan's
        other = tmp_path / "plan8.md"
        r = cli.run("plan", "--class", "chat:1:0.7", "-c", "4", "--model", "llama-3.1-8b",
                    "--served-model", "someone-else", "--out", str(other))  # fmt: skip
        assert r.exit_code == 0, r.output
        _bench(cli, s_url, data, tmp_path / "s")
        r = cli.run("gate", "--plan", str(other.with_suffix(".json")), "--url", s_url,
                    "--window", "1s")  # fmt: skip
        assert r.exit_code == 2 and "measured model 'alphagate-twin'" in r.output, r.output


def test_two_runs_of_one_server_without_speculation_are_no_ab(cli: Cli, tmp_path: Path) -> None:
    """A "candidate" run that drafted nothing — here the baseline server benched twice — is no
    A/B of speculative decoding, whatever its TPOT ratio; a candidate that did speculate is."""
    data = _dataset(tmp_path / "d.jsonl")
    with twin(_cfg(0)) as (b_url, _), twin(_cfg(3)) as (c_url, _):
        _bench(cli, b_url, data, tmp_path / "b")
        _bench(cli, b_url, data, tmp_path / "b2")
        _bench(cli, c_url, data, tmp_path / "c")
    args = ["--min-tpot-speedup", "0.5", "--min-requests", "10", "--allow-single-run",
            "--ignore-errors"]  # fmt: skip
    r = cli.run("gate", "--baseline", str(tmp_path / "b" / "summary.json"), "--candidate",
                str(tmp_path / "b2" / "summary.json"), *args)  # fmt: skip
    assert r.exit_code == 2, r.output
    assert "measured the same server" in r.output or "drafted no tokens" in r.output, r.output
    r = cli.run("gate", "--baseline", str(tmp_path / "b" / "summary.json"), "--candidate",
                str(tmp_path / "c" / "summary.json"), *args)  # fmt: skip
    assert r.exit_code in (0, 3), r.output  # an A/B: judged (3 only if the machine distorted it)
