"""``alphagate measure offline --ray``: the log's requests scored by Ray actors (Moritz et al.
2018, "Ray: A Distributed Framework for Emerging AI Applications", OSDI), on this machine or on a
cluster of many.

Each actor loads the target and the drafter once (``num_gpus=1`` each when the cluster has
GPUs) and scores batches of requests with :func:`~alphagate.measure.offline.score_batch` — the
same code as a single-process run. Batches are handed out as actors free up (a slow node takes
fewer), and every request comes back with its own counters (:class:`~alphagate.measure.offline.
RequestCounts`: counts per position and acceptance-length histograms, not averages). A
request's counters depend only on the request, the models, the settings and the seed (each
request draws from its own generator, keyed by its place in the log), so the driver, which puts
them back in log order and summarises them, gets exactly the single-process numbers, bootstrap
intervals included — at the same ``--threads`` (an actor runs ``--threads`` torch threads, 1 by
default): torch's CPU reductions split differently over another number of threads, which can
move a sampled run's expected counts in their last digits.

``local`` starts a Ray instance on 127.0.0.1 for this run (no dashboard; this machine's CPUs, or
``--ray-workers`` × ``--threads``) and stops it at the end; an address (``HOST:PORT`` of a head
started with ``ray start --head``, or ``auto``) joins that cluster — the driver disconnects at
the end and leaves it running — whose nodes must reach the models at the same path (or hold
them in their Hugging Face cache) and have alphagate installed.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import Any

from alphagate.measure.offline.config import OfflineConfig
from alphagate.measure.offline.requests import LoggedRequest
from alphagate.measure.offline.score import RequestCounts, load, score_batch
from alphagate.measure.results import MeasureError

__all__ = ["Scorer", "dispatch", "score_on_ray"]

#: requests per task: small enough that actors finish together, large enough that a task's
#: overhead (milliseconds) is nothing beside scoring it
_TASK = 16


class Scorer:
    """A Ray actor's state: the models, loaded once, and the run's settings."""

    def __init__(self, cfg: OfflineConfig) -> None:
        self.cfg = cfg
        self.models = load(cfg)

    def ready(self) -> bool:
        """Returns once the models are loaded."""
        return True

    def score(self, part: list[LoggedRequest]) -> list[RequestCounts]:
        return score_batch(self.models, part, self.cfg)


def dispatch(
    ray: Any,
    actors: list[Any],
    requests: list[LoggedRequest],
    finished: Callable[[list[RequestCounts]], None],
) -> None:
    """Hand ``requests`` to ``actors`` (of :class:`Scorer`) in tasks of up to ``_TASK``, the next
    task to whichever actor finishes first; ``finished`` receives each task's counts."""
    size = max(1, min(_TASK, math.ceil(len(requests) / max(len(actors), 1))))
    queue = iter([requests[i : i + size] for i in range(0, len(requests), size)])
    pending: dict[Any, Any] = {}
    for a in actors:
        t = next(queue, None)
        if t is not None:
            pending[a.score.remote(t)] = a
    while pending:
        (ref,), _ = ray.wait(list(pending), num_returns=1)
        actor = pending.pop(ref)
        try:
            part = ray.get(ref)
        except Exception as exc:  # an actor's error, raised again in the driver
            raise _unwrap(exc) from None
        finished(part)
        t = next(queue, None)
        if t is not None:
            pending[actor.score.remote(t)] = actor


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise MeasureError(
            "--ray needs Ray: pip install 'alphagate[ray]' (on every node of the cluster)"
        ) from None
    return ray


#: a local Ray start that times out (Ray waits a fixed 30 s for its raylet to register with the
#: GCS, which a loaded machine can miss) is cleaned up and tried once more
_LOCAL_TRIES = 2


def _connect(ray: Any, cfg: OfflineConfig) -> None:
    kw: dict[str, Any] = {"logging_level": "warning", "log_to_driver": False}
    address = cfg.ray or "local"
    if address == "local":
        _start_local(ray, cfg, kw)
        return
    try:
        ray.init(address=address, **kw)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise MeasureError(
            f"--ray {address}: cannot join Ray ({exc}); a cluster that uses token "
            "authentication needs RAY_AUTH_MODE=token here and the head's token "
            "(`ray get-auth-token` there) in RAY_AUTH_TOKEN or ~/.ray/auth_token"
        ) from None


def _start_local(ray: Any, cfg: OfflineConfig, kw: dict[str, Any]) -> None:
    """A Ray instance on 127.0.0.1: this machine's CPUs, or what ``--ray-workers`` ×
    ``--threads`` asks for. A start that fails leaves no process behind."""
    want = cfg.ray_workers * (cfg.threads or 1) if cfg.ray_workers else None
    for attempt in range(1, _LOCAL_TRIES + 1):
        try:
            ray.init(
                address="local",
                num_cpus=want or os.cpu_count() or 1,
                include_dashboard=False,
                _node_ip_address="127.0.0.1",
                **kw,
            )
            return
        except Exception as exc:  # Ray raises a bare Exception when its node times out
            _kill_half_started(exc)
            ray.shutdown()
            if attempt == _LOCAL_TRIES:
                raise MeasureError(
                    f"--ray local: cannot start Ray on this machine ({exc}); tried "
                    f"{_LOCAL_TRIES} times. A loaded machine can miss Ray's 30 s start-up "
                    "window: try again when it is quieter, or leave out --ray (the "
                    "single-process run gives the same numbers)"
                ) from None


def _kill_half_started(exc: BaseException) -> None:
    """Stop the processes of a Ray node whose start raised ``exc``. Ray's ``Node`` raises from
    its constructor, so ``ray.init`` never keeps it and ``ray.shutdown`` cannot reach its GCS
    and raylet; the traceback still holds the node (``self`` in its frames)."""
    tb = exc.__traceback__
    while tb is not None:
        node: Any = tb.tb_frame.f_locals.get("self")
        if type(node).__name__ == "Node" and hasattr(node, "kill_all_processes"):
            node.kill_all_processes(check_alive=False, allow_graceful=False, wait=True)
            return
        tb = tb.tb_next


def _actor_options(ray: Any, cfg: OfflineConfig, workers: int | None) -> tuple[int, dict[str, Any]]:
    """How many actors, and what each asks for: a GPU each when the cluster has GPUs and the
    run may use them (``--device`` auto or cuda), else ``--threads`` CPUs (1 by default)."""
    res = ray.cluster_resources()
    gpus = int(res.get("GPU", 0))
    cpus = cfg.threads or 1
    if gpus and not cfg.device.startswith("cpu"):
        n = min(workers or gpus, gpus)  # an actor that can never be placed would wait forever
        return n, {"num_gpus": 1, "num_cpus": min(cpus, max(int(res.get("CPU", 1)) // n, 1))}
    room = max(int(res.get("CPU", 1)) // cpus, 1)
    return min(workers or room, room), {"num_cpus": cpus}


def _unwrap(exc: Exception) -> MeasureError:
    """A worker's error as the single-process run would have said it."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, MeasureError):
        return cause
    text = str(exc)
    mark = "MeasureError: "  # an actor that failed to start carries its error as text
    if mark in text:
        return MeasureError(text.split(mark, 1)[1].strip().splitlines()[0])
    last = text.strip().splitlines()
    return MeasureError(f"a Ray worker failed: {last[-1] if last else type(exc).__name__}")


def score_on_ray(
    cfg: OfflineConfig,
    requests: list[LoggedRequest],
    finished: Callable[[list[RequestCounts]], None],
) -> None:
    """Score ``requests`` on Ray (see the module docstring); ``finished`` receives each batch
    as it comes back, in whatever order the actors finish."""
    ray = _import_ray()
    assert cfg.ray is not None
    _connect(ray, cfg)
    try:
        n, opts = _actor_options(ray, cfg, cfg.ray_workers)
        n = min(n, len(requests))  # no actor without a request to score
        remote = ray.remote(**opts)(Scorer)
        # settings travel without the driver's checkpoint path (the driver writes it)
        wcfg = cfg.model_copy(
            update={
                "checkpoint": None,
                "ray": None,
                "ray_workers": None,
                "threads": opts["num_cpus"],
            }
        )
        actors = [remote.remote(wcfg) for _ in range(n)]
        dispatch(ray, actors, requests, finished)
        for a in actors:
            ray.kill(a)
    finally:
        ray.shutdown()
