"""The twin's KV room (vLLM's ``--kv-cache-memory-bytes``): tokens from bytes, the drafter's KV
sharing them, admission while the running requests' whole lengths fit, and a room too small for
one request refused at start."""

from __future__ import annotations

import pytest

from alphagate.core.errors import ConfigError
from alphagate.sim.cost import build_cost_model
from alphagate.specs import DeploymentConfig, drafter_for, resolve_deployment
from alphagate.twin.config import TwinConfig
from alphagate.twin.engine import TwinEngine
from alphagate.twin.server import create_app

DRAFT = DeploymentConfig(model="llama-3.1-8b", drafter=drafter_for("draft_model"))


def test_room_in_tokens_and_the_drafters_share() -> None:
    r = resolve_deployment(DRAFT)
    per_target = r.target_footprint.kv_bytes_per_token  # 32 layers × 8 KV heads × 128 × 2 × 2 B
    assert per_target == 131_072
    assert r.draft_footprint is not None
    per_draft = r.draft_footprint.kv_bytes_per_token  # Llama-3.2-1B: 16 × 8 × 64 × 2 × 2 B
    assert per_draft == 32_768
    size = 100 * per_target
    base = TwinConfig(deployment=DRAFT, k=0, kv_cache_memory_bytes=size)
    cand = TwinConfig(deployment=DRAFT, k=4, kv_cache_memory_bytes=size)
    assert base.kv_room_tokens(r) == 100
    assert cand.kv_room_tokens(r) == 100 * per_target // (per_target + per_draft) == 80
    assert TwinConfig(deployment=DRAFT).kv_room_tokens(r) is None


def _engine(k: int, room: int) -> TwinEngine:
    cfg = TwinConfig(deployment=DRAFT, k=k, max_model_len=64)
    return TwinEngine(cfg, build_cost_model(resolve_deployment(DRAFT)), kv_room_tokens=room)


def test_admission_holds_whole_lengths_first_come_first_served() -> None:
    eng = _engine(k=2, room=102)
    # each holds prompt + 10 max tokens + the K = 2 drafts it verifies + vLLM's K lookahead slots
    for prompt in (20, 20, 20, 5):
        eng.submit(prompt, 10, True, 0, None)
    eng._step_plan()
    assert eng.n_running == 3 and eng.n_waiting == 1  # 3 × 34 = 102; a fourth of 19 would not fit
    eng._running.pop()  # one finishes
    eng._step_plan()
    assert eng.n_running == 3 and eng.n_waiting == 0
    tight = _engine(k=2, room=101)  # the draft and lookahead slots keep the third out
    for _ in range(3):
        tight.submit(20, 10, True, 0, None)
    tight._step_plan()
    assert tight.n_running == 2 and tight.n_waiting == 1
    free = _engine(k=2, room=10_000)
    for _ in range(5):
        free.submit(20, 10, True, 0, None)
    free._step_plan()
    assert free.n_running == 5


def test_a_room_below_one_request_is_refused_at_start() -> None:
    per_target = 131_072
    cfg = TwinConfig(
        deployment=DRAFT, k=0, max_model_len=1024, kv_cache_memory_bytes=1000 * per_target
    )
    with pytest.raises(ConfigError, match="fewer than one request of --max-model-len 1024"):
        create_app(cfg)
    create_app(cfg.model_copy(update={"max_model_len": 512}))
