"""Deployment resolution: the TP a model needs, the drafter dispatch, a local config, KV room
and the largest batch (the GPU presets: test_gpus.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from alphagate.core.errors import SpecError
from alphagate.specs import (
    DeploymentConfig,
    DraftModelDrafter,
    WorkloadConfig,
    drafter_for,
    resolve_deployment,
    resolve_model,
)


def test_tp_chosen_so_70b_fp8_fits_on_h100() -> None:
    # 70.6 GB of FP8 weights leave no KV room on one 80 GB H100 → TP = 2
    r = resolve_deployment(DeploymentConfig(weight_dtype="fp8"), WorkloadConfig(), 256)
    assert r.tp == 2 and r.tp_was_chosen
    assert r.weight_bytes_per_gpu / 1e9 == pytest.approx(35.3, abs=0.1)
    assert "TP=2" in r.describe()
    # BF16 weights (141 GB) need TP = 4 for the same KV room
    assert resolve_deployment(DeploymentConfig(weight_dtype="bf16"), WorkloadConfig(), 256).tp == 4


def test_model_that_does_not_fit_is_a_clear_error() -> None:
    with pytest.raises(SpecError, match="does not fit"):
        resolve_deployment(DeploymentConfig(weight_dtype="bf16", tp=1))


def test_draft_model_and_local_config(tmp_path: Path) -> None:
    cfg = {
        "hidden_size": 256,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "intermediate_size": 688,
        "vocab_size": 4096,
        "tie_word_embeddings": True,
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    r = resolve_deployment(
        DeploymentConfig(
            model="llama-3.1-8b",
            drafter=DraftModelDrafter(model=str(tmp_path)),
            weight_dtype="bf16",
        )
    )
    assert r.draft_shape is not None and r.draft_shape.num_key_value_heads == 4  # defaults to heads
    assert r.draft_shape.head_dim == 64
    bad = tmp_path / "broken"
    bad.mkdir()
    (bad / "config.json").write_text(json.dumps({**cfg, "hidden_size": "wide"}))
    with pytest.raises(SpecError, match="hidden_size"):
        resolve_model(str(bad))


def test_one_rule_for_kv_room_and_the_largest_batch() -> None:
    """The KV need is min(concurrency, max_num_seqs) sequences at full length; the largest batch
    is what the KV room holds, capped by max_num_seqs — the same numbers for every verb."""
    wl = WorkloadConfig()  # 512 + 256 tokens per sequence
    small = DeploymentConfig(weight_dtype="fp8", max_num_seqs=64)
    r = resolve_deployment(small, wl, 10_000)  # concurrency above max_num_seqs counts as 64
    assert r.tp == 2
    assert r.largest_batch(wl, k=0) == r.largest_batch(wl, k=3) == 64
    big = resolve_deployment(DeploymentConfig(weight_dtype="fp8", tp=2), wl, 256)
    assert big.largest_batch(wl, k=0) == min(256, big.kv_capacity_tokens_without_draft // 768)
    assert big.kv_capacity_tokens_without_draft > big.kv_capacity_tokens


def test_each_arm_holds_its_own_largest_batch() -> None:
    """The server without speculation has the whole KV room for the target's tokens; the
    speculative one shares it with a draft model's KV, and each of its sequences holds the K
    drafts it verifies and K lookahead slots more (vLLM's allocate_slots); n-gram keeps no KV
    and no lookahead slots, only the K drafts."""
    wl = WorkloadConfig()  # 512 + 256 tokens per sequence
    dep = DeploymentConfig(
        weight_dtype="fp8", tp=2, max_num_seqs=512, drafter=drafter_for("draft_model")
    )
    r = resolve_deployment(dep)
    assert (r.kv_capacity_tokens_without_draft, r.kv_capacity_tokens) == (204_609, 182_579)
    assert r.largest_batch(wl, k=0) == 266  # 204,609 // 768
    assert r.largest_batch(wl, k=1) == 237  # 182,579 // (768 + 1 + 1)
    assert r.largest_batch(wl, k=3) == 235  # 182,579 // (768 + 3 + 3)
    ngram = resolve_deployment(dep.model_copy(update={"drafter": drafter_for("ngram")}))
    assert ngram.kv_capacity_tokens == ngram.kv_capacity_tokens_without_draft == 204_609
    assert ngram.largest_batch(wl, k=3) == 265  # 204,609 // (768 + 3)
    capped = resolve_deployment(dep.model_copy(update={"max_num_seqs": 200}))
    assert capped.largest_batch(wl, k=0) == capped.largest_batch(wl, k=3) == 200
    summary = r.summary()
    assert (summary.kv_capacity_tokens, summary.kv_capacity_tokens_without_draft) == (
        182_579,
        204_609,
    )


def test_a_tp_whose_room_holds_the_load_only_without_the_drafter_is_taken() -> None:
    """At concurrency 256 of 768-token sequences (196,608 tokens) a draft model's KV leaves two
    H100s 182,579 tokens: the chosen TP is 4, where both arms hold 256; at a given TP = 2 the
    baseline holds them all and the speculative server queues 21 (it holds 235 at K = 3). A TP
    whose room holds the load even without the drafter is still refused."""
    wl = WorkloadConfig()
    dep = DeploymentConfig(weight_dtype="fp8", drafter=drafter_for("draft_model"))
    assert resolve_deployment(dep, wl, 256).tp == 4
    two = resolve_deployment(dep.model_copy(update={"tp": 2}), wl, 256)
    assert (two.largest_batch(wl, k=0), two.largest_batch(wl, k=3)) == (256, 235)
    with pytest.raises(SpecError, match="with room for 393,216 KV tokens"):
        resolve_deployment(dep.model_copy(update={"tp": 2, "max_num_seqs": 512}), wl, 512)


def test_drafter_for_is_the_one_dispatch() -> None:
    assert drafter_for("eagle3").method == "eagle3"
    assert drafter_for("ngram").method == "ngram"
    local = drafter_for("draft_model", "llama-3.2-1b")
    assert local.method == "draft_model" and local.model == "llama-3.2-1b"  # type: ignore[union-attr]
    hub = drafter_for("draft_model", "meta-llama/Llama-3.2-1B-Instruct")
    assert hub.model == "llama-3.2-1b" and hub.checkpoint == "meta-llama/Llama-3.2-1B-Instruct"  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="medusa"):
        drafter_for("medusa")


def test_tp_must_divide_the_heads() -> None:
    with pytest.raises(SpecError, match="does not divide"):
        resolve_deployment(DeploymentConfig(tp=3))
