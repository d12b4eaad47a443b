"""``measure offline --ray``: a local Ray instance with two workers gives exactly the numbers of
the single-process run — counts, rates, intervals (same seed, same bootstrap) and the JSON — and
a missing ``ray`` extra is a clear error."""

from __future__ import annotations

import builtins
import json
import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

from alphagate.measure.offline.config import OfflineConfig
from alphagate.measure.offline.run import measure_offline
from alphagate.measure.results import MeasureError
from tests.conftest import Cli
from tests.measure.offline.fixtures import Tiny, greedy_log


@pytest.fixture(scope="module")
def log(tiny: Tiny, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ray-log") / "log.jsonl"
    prompts = ["def f(x):\n    ", "((((((((", "Dear reader,", "0000000000", "import os\n", "aaaa"]
    greedy_log(tiny, path, prompts, 24, ["code", "code", "prose", "other", "code", "other"])
    return path


def _numbers(payload: dict[str, Any]) -> dict[str, Any]:
    """Everything but the wall time."""
    out = json.loads(json.dumps(payload))
    out["offline"].pop("wall_s")
    return out  # type: ignore[no-any-return]


def test_two_local_workers_give_the_single_process_numbers(
    cli: Cli, tiny: Tiny, log: Path, tmp_path: Path
) -> None:
    pytest.importorskip(
        "ray", reason="the `ray` extra is not installed (pip install 'alphagate[ray]')"
    )
    args = [
        "measure", "offline", "--log", str(log), "--target", str(tiny.target),
        "--drafter", f"eagle3:{tiny.eagle3}", "--k", "2", "--k-max", "3",
        "--temperature", "0.7", "--draft-sampling", "probabilistic", "--seed", "7",
        "--threads", "1", "--class-field", "request.meta.cls",
    ]  # fmt: skip
    one = cli.json(*args)
    ck = tmp_path / "ray.ckpt"
    ray = cli.json(*args, "--ray", "local", "--ray-workers", "2", "--checkpoint", str(ck))
    assert _numbers(ray) == _numbers(one)
    assert set(one["classes"]) == {"code", "prose", "other"}
    assert one["overall"]["draft_acceptance_rate_ci"] is not None  # the bootstrap ran
    # the driver wrote every request to the checkpoint, and a resumed run reads them back
    assert len(ck.read_text().splitlines()) == 1 + 6
    again = cli.json(*args, "--checkpoint", str(ck))
    assert _numbers(again) == _numbers(one)


def test_greedy_counts_on_ray_equal_the_single_process_counts(tiny: Tiny, log: Path) -> None:
    pytest.importorskip(
        "ray", reason="the `ray` extra is not installed (pip install 'alphagate[ray]')"
    )
    base: dict[str, Any] = {
        "logs": (log,),
        "target": str(tiny.target),
        "drafter": "draft_model",
        "drafter_path": str(tiny.draft),
        "k": 3,
        "threads": 1,
        "class_rules": ("code=def |import|\\(",),
    }
    one = measure_offline(OfflineConfig(**base))
    ray = measure_offline(OfflineConfig(**base, ray="local", ray_workers=2))
    assert _numbers(ray.payload()) == _numbers(one.payload())


def test_a_local_start_that_times_out_leaves_nothing_running_and_is_tried_again(
    tiny: Tiny, log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ray waits a fixed 30 s for its raylet to register; a loaded machine can miss that, and Ray
    then raises from its node's constructor with the GCS and raylet still running. The first
    start here misses it (Ray's clock jumps past the window while the raylet is not yet seen):
    its processes are stopped, and the second start scores the log."""
    pytest.importorskip(
        "ray", reason="the `ray` extra is not installed (pip install 'alphagate[ray]')"
    )
    import inspect
    import time

    import ray._private.node as ray_node
    import ray._private.services as services

    real_get_node = services.get_node
    started: list[int] = []  # the first node's process ids

    class Clock:
        """Ray's ``time`` module, whose monotonic clock leaps 31 s a reading."""

        def __init__(self) -> None:
            self.t = time.monotonic()

        def monotonic(self) -> float:
            self.t += 31.0
            return self.t

        def __getattr__(self, name: str) -> Any:
            return getattr(time, name)

    def get_node(*a: Any, **kw: Any) -> Any:
        if not started:  # the first node: note its processes, then say it is not there yet
            node = inspect.stack()[1].frame.f_locals["self"]
            started.extend(p.process.pid for ps in node.all_processes.values() for p in ps)
            monkeypatch.setattr(ray_node, "time", Clock())
            raise RuntimeError("node info not available yet")
        monkeypatch.setattr(ray_node, "time", time)
        return real_get_node(*a, **kw)

    monkeypatch.setattr(services, "get_node", get_node)
    base: dict[str, Any] = {"logs": (log,), "target": str(tiny.target), "drafter": "ngram"}
    one = measure_offline(OfflineConfig(**base))
    ray = measure_offline(OfflineConfig(**base, ray="local", ray_workers=1))
    assert _numbers(ray.payload()) == _numbers(one.payload())
    assert started, "the first start did not reach Ray's wait for its raylet"
    for pid in started:  # stopped and reaped: no such process any more
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_missing_ray_extra_is_a_clear_error(
    tiny: Tiny, log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = builtins.__import__

    def no_ray(name: str, *a: Any, **kw: Any) -> Any:
        if name == "ray" or name.startswith("ray."):
            raise ImportError(name)
        return real(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    cfg = OfflineConfig(
        logs=(log,), target=str(tiny.target), drafter="ngram", ray="local", ray_workers=2
    )
    with pytest.raises(MeasureError, match=r"pip install 'alphagate\[ray\]'"):
        measure_offline(cfg)


def test_ray_workers_need_ray(cli: Cli, tiny: Tiny, log: Path) -> None:
    r = cli.run(
        "measure", "offline", "--log", str(log), "--target", str(tiny.target),
        "--drafter", "ngram", "--ray-workers", "2",
    )  # fmt: skip
    assert r.exit_code == 2 and "--ray-workers needs --ray" in r.output, r.output
