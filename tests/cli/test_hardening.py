"""Bad input a careless user or a broken server can produce: a clear message and exit code, no
traceback, no secret written, nothing complete lost."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from alphagate.specs import DeploymentConfig
from alphagate.twin.config import TwinConfig
from tests.conftest import Cli
from tests.servers import serve, twin

FAST = TwinConfig(
    deployment=DeploymentConfig(model="llama-3.1-8b", weight_dtype="bf16"), k=2, time_scale=0.0
)
SECRET = "sk-topsecret-4242"


def _files_text(folder: Path) -> str:
    return "\n".join(f.read_text(errors="replace") for f in folder.rglob("*") if f.is_file())


def test_secrets_are_never_written(cli: Cli, tmp_path: Path) -> None:
    with twin(FAST) as (url, _):
        host = url.split("//")[1]
        r = cli.run(
            "bench",
            "--url",
            f"http://user:{SECRET}@{host}",
            "--header",
            f"Authorization2: Bearer {SECRET}",
            "--header",
            f"X-Api-Key: {SECRET}",
            "--num-prompts",
            "3",
            "--dataset",
            "synthetic:in=4,out=4",
            "--out",
            str(tmp_path / "o"),
            "--json",
        )
    assert r.exit_code == 0, r.output
    assert SECRET not in r.output and SECRET not in _files_text(tmp_path / "o")
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert s["config"]["headers"] == {
        "Authorization2": "<redacted>",
        "X-Api-Key": "<redacted>",
        "Authorization": "<redacted>",
    }
    assert s["levels"][0]["overall"]["completed"] == 3


def test_url_credentials_and_a_key_together_are_refused(cli: Cli, tmp_path: Path) -> None:
    r = cli.run(
        "bench", "--url", f"http://u:{SECRET}@127.0.0.1:9", "--api-key", "k", "--out", str(tmp_path)
    )
    assert r.exit_code == 2 and "not both" in r.output and SECRET not in r.output


@pytest.mark.parametrize(
    ("args", "env", "flag", "words"),
    [
        (["twin", "--api-key", ""], {}, "--api-key", "empty"),
        (["twin"], {"ALPHAGATE_API_KEY": ""}, "--api-key", "empty"),
        (["bench", "--url", "http://x"], {"ALPHAGATE_API_KEY": ""}, "--api-key", "empty"),
        (["twin", "--host", ""], {}, "--host", "empty"),
        (["bench", "--url", "http://x", "--api-key", " "], {}, "--api-key", "empty"),
        (
            ["bench", "--url", "http://x", "--warmup", "5", "-n", "2"],
            {},
            "--warmup",
            "leaves no request",
        ),
        (
            ["bench", "--url", "http://x", "--metrics-url", "notaurl"],
            {},
            "--metrics-url",
            "not an http",
        ),
        (["bench", "--url", "ftp://x"], {}, "--url", "http://"),
        (["bench", "--url", "http://x", "--duration", "0"], {}, "--duration", "smallest"),
        (["bench", "--url", "http://x", "--rate", "nan"], {}, "--rate", "finite"),
        (["simulate", "--alpha", "nan"], {}, "--alpha", "finite"),
        (["simulate", "--rate", "nan"], {}, "--rate", "finite"),
        (["simulate", "--seed", "-1"], {}, "--seed", "0"),
        (["simulate", "--k", "100000000000"], {}, "--k", "outside"),
        (["simulate", "--prompt-len", "lognormal:inf"], {}, "--prompt-len", "finite"),
        (["simulate", "--prompt-len", "lognormal:512:-1"], {}, "--prompt-len", "sigma"),
        (["simulate", "--tp", "3"], {}, "--model", "does not divide"),
        (["model", "speedup", "--alpha", "inf", "--k", "5"], {}, "--alpha", "finite"),
        (["model", "speedup", "--alpha", "0.7", "--k", "100000000000"], {}, "--k", "64"),
        (
            ["plan", "--class", "a:1:0.7", "--concurrency", "8", "--engine-version", "banana"],
            {},
            "--engine-version",
            "MAJOR",
        ),
    ],
)
def test_bad_values_name_the_flag(
    cli: Cli,
    tmp_path: Path,
    args: list[str],
    env: dict[str, str],
    flag: str,
    words: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    extra = ["--out", str(tmp_path / "o")] if args[0] == "bench" else []
    r = cli.run(*args, *extra)
    assert r.exit_code == 2, r.output
    assert flag in r.output and words in r.output, r.output
    assert "Traceback" not in r.output


def _not_utf8(tmp_path: Path) -> Path:
    p = tmp_path / "latin1.jsonl"
    p.write_bytes(b'{"prompt": "caf\xe9"}\n')
    return p


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["bench", "--url", "http://x", "--dataset", "{dir}"], "--dataset"),
        (["bench", "--url", "http://x", "--dataset", "{latin1}"], "--dataset"),
        (["model", "memory", "--target", "{dir}", "--draft", "eagle3"], "--target"),
        (["simulate", "--gpu", "{dir}"], "--model/--gpu"),
        (["simulate", "--output-len", "file:{dir}"], "--output-len"),
        (["simulate", "--output-len", "file:{latin1}"], "--output-len"),
        (["plan", "--class", "a:1", "--concurrency", "8", "--alpha-from", "{dir}"], "--alpha-from"),
        (
            ["plan", "--class", "a:1", "--concurrency", "8", "--alpha-from", "{latin1}"],
            "--alpha-from",
        ),
        (["plan", "--class", "a:1:0.7", "--concurrency", "8", "--out", "/dev/null"], "--out"),
        (["plan", "--class", "a:1:0.7", "--concurrency", "8", "--out", "/proc/plan.md"], "--out"),
        (["plan", "--class", "a:1:0.7", "--concurrency", "8", "--out", "{dir}"], "--out"),
        (["simulate", "--plot", "{file}"], "--plot"),
        (["bench", "--url", "http://x", "--out", "{file}"], "--out"),
    ],
)
def test_bad_paths_are_refused_before_any_work(
    cli: Cli, tmp_path: Path, args: list[str], flag: str
) -> None:
    d = tmp_path / "a-folder"
    d.mkdir()
    f = tmp_path / "a-file"
    f.write_text("x")
    subs = {"{dir}": str(d), "{latin1}": str(_not_utf8(tmp_path)), "{file}": str(f)}
    argv = [next((a.replace(k, v) for k, v in subs.items() if k in a), a) for a in args]
    r = cli.run(*argv)
    assert r.exit_code == 2, r.output
    assert flag in r.output and "Traceback" not in r.output


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_read_only_output_folder(cli: Cli, tmp_path: Path) -> None:  # pragma: no cover - non-root
    ro = tmp_path / "ro"
    ro.mkdir(mode=0o500)
    r = cli.run("plan", "--class", "a:1:0.7", "--concurrency", "8", "--out", str(ro / "p.md"))
    assert r.exit_code == 2 and "cannot be written" in r.output


def test_port_in_use_and_unknown_host(cli: Cli) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = cli.run("twin", "--port", str(port), "--model", "llama-3.1-8b", "--dtype", "bf16")
    assert r.exit_code == 2 and "cannot listen" in r.output and "Traceback" not in r.output
    r = cli.run(
        "twin", "--host", "no-such-host.invalid", "--model", "llama-3.1-8b", "--dtype", "bf16"
    )
    assert r.exit_code == 2 and "cannot listen" in r.output


def test_json_errors_and_no_nan_in_json(cli: Cli) -> None:
    r = cli.run("model", "speedup", "--alpha", "2", "--k", "5", "--json")
    assert r.exit_code == 2
    err = json.loads(r.stdout)["error"]
    assert err["param"] == "--alpha" and "above the largest allowed value, 1" in err["message"]
    d = cli.run("model", "required", "--speedup", "100", "--k", "1", "--json")

    def refuse(x: str) -> float:
        raise AssertionError(f"non-JSON number {x}")

    data = json.loads(d.stdout, parse_constant=refuse)
    assert data["alpha_required"] is None and data["reason"]


def test_uppercase_jsonl_is_jsonl(tmp_path: Path) -> None:
    from alphagate.bench.dataset import load_prompts

    p = tmp_path / "X.JSONL"
    p.write_text('{"prompt": "hello", "max_tokens": 3}\n')
    prompts, problems = load_prompts(str(p), 2, 0)
    assert [x.prompt for x in prompts] == ["hello", "hello"] and problems == []


def test_a_cut_off_last_line_is_set_aside_and_runs_kept_apart(cli: Cli, tmp_path: Path) -> None:
    out = tmp_path / "o"
    with twin(FAST) as (url, _):
        args = [
            "bench",
            "--url",
            url,
            "-n",
            "3",
            "--dataset",
            "synthetic:in=4,out=4",
            "--out",
            str(out),
            "--json",
        ]
        assert cli.run(*args).exit_code == 0
        first = json.loads((out / "summary.json").read_text())["run_id"]
        with (out / "requests.jsonl").open("a") as fh:
            fh.write('{"run_id": "crashed", "id": 9, "tar')  # a crash mid-write
        r = cli.run(*args)
    assert r.exit_code == 0, r.output
    assert "cut-off line" in r.stderr and "earlier run" in r.stderr
    aside = list(out.glob("requests.jsonl.partial-*"))
    assert len(aside) == 1 and aside[0].read_text().startswith('{"run_id": "crashed"')
    lines = (out / "requests.jsonl").read_text().splitlines()
    recs = [json.loads(x) for x in lines]  # every line is whole JSON
    second = json.loads((out / "summary.json").read_text())["run_id"]
    assert second != first
    assert [r["run_id"] for r in recs] == [first] * 3 + [second] * 3
    assert (out / f"summary-{first}.json").exists() and (out / f"summary-{second}.json").exists()
    assert json.loads((out / "summary.json").read_text())["levels"][0]["overall"]["completed"] == 3


def _odd_server(payloads: list[bytes]):  # type: ignore[no-untyped-def]
    """A server whose stream for prompt "i" sends payloads[i] as its second chunk."""
    from aiohttp import web

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        i = int(str(body["prompt"]).split()[0])
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        good = {
            "choices": [{"index": 0, "text": " a"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1},
        }
        await resp.write(b"data: " + json.dumps(good).encode() + b"\n\n")
        await resp.write(b"data: " + payloads[i] + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        return resp

    async def models(request: web.Request) -> web.Response:
        return web.json_response(["not", "an", "object"])  # an odd /v1/models body

    app = web.Application()
    app.router.add_post("/v1/completions", completions)
    app.router.add_get("/v1/models", models)
    return app


ODD = [
    b'{"choices": ["oops"]}',
    b'{"choices": "a string"}',
    b'{"choices": {"an": "object"}}',
    b'{"choices": [{"delta": "a string"}]}',
    b'{"choices": [{"text": 42}]}',
    b'{"choices": [], "usage": 7}',
    b'{"choices": [], "usage": {"prompt_tokens": 1}}',
    b'{"choices": [{"text": " b"}], "usage": {"prompt_tokens": 1, "completion_tokens": 0}}',
]


def test_odd_replies_are_bad_responses_and_the_run_goes_on(cli: Cli, tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text(
        "\n".join(json.dumps({"prompt": f"{i} x", "max_tokens": 2}) for i in range(len(ODD)))
    )
    with serve(_odd_server(ODD)) as url:
        r = cli.run(
            "bench",
            "--url",
            url,
            "--dataset",
            str(data),
            "-n",
            str(len(ODD)),
            "--concurrency",
            "1,2",
            "--no-metrics",
            "--out",
            str(tmp_path / "o"),
            "--json",
        )
    assert r.exit_code == 1, r.output  # every request failed
    assert "Traceback" not in r.output
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert [lv["level"] for lv in s["levels"]] == ["c1", "c2"]  # the first level's summary is kept
    for lv in s["levels"]:
        assert lv["overall"]["failed_by_type"] == {"bad_response": len(ODD)}
    msgs = {
        json.loads(x)["error_message"]
        for x in (tmp_path / "o" / "requests.jsonl").read_text().splitlines()
    }
    assert any("went down from 1 to 0" in m for m in msgs)
    assert any(m.startswith("choices") for m in msgs) and any(m.startswith("usage") for m in msgs)


def test_written_files_follow_the_umask(tmp_path: Path) -> None:
    """Summaries, plans and reports are written through a temporary file and a rename; the file
    gets the usual mode for the user's umask (not mkstemp's owner-only 0600)."""
    import os

    from alphagate.cli._files import replace_file

    old = os.umask(0o022)
    try:
        replace_file(tmp_path / "a.txt", "x")
        os.umask(0o077)
        replace_file(tmp_path / "b.txt", "x")
    finally:
        os.umask(old)
    assert (tmp_path / "a.txt").stat().st_mode & 0o777 == 0o644
    assert (tmp_path / "b.txt").stat().st_mode & 0o777 == 0o600
