"""Measured α folded into the traffic classes (plan/fold.py), as simulate and plan --alpha-from
and the Python API do it: per class, one overall figure only when asked, a typed α kept, and
each refusal naming its field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from alphagate.core.errors import ConfigError
from alphagate.core.traffic import TrafficClass
from alphagate.plan.fold import fold_measurements

CHAT = TrafficClass(name="chat", share=0.7)
CODE = TrafficClass(name="code", share=0.3)


def _file(tmp_path: Path, name: str, payload: dict[str, object]) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(payload), encoding="utf-8")
    return path


def test_each_class_takes_its_measured_alpha_and_a_typed_one_stays(tmp_path: Path) -> None:
    f = _file(tmp_path, "m.json", {"classes": {"chat": {"alpha": 0.71}, "code": {"alpha": 0.3}}})
    typed = CODE.model_copy(update={"alpha": 0.5})
    chat, code = fold_measurements((CHAT, typed), [f])
    assert (chat.alpha, chat.source) == (0.71, "measured (m.json)")
    assert code.alpha == 0.5


def test_files_that_measure_other_classes_are_merged(tmp_path: Path) -> None:
    a = _file(tmp_path, "a.json", {"classes": {"chat": {"alpha": 0.7}}})
    b = _file(tmp_path, "b.json", {"classes": {"code": {"draft_acceptance_rate": 0.5, "k": 3}}})
    chat, code = fold_measurements((CHAT, CODE), [a, b])
    assert chat.alpha == 0.7 and code.alpha is not None and 0.0 < code.alpha < 1.0


def test_an_overall_figure_applies_only_when_asked_and_from_one_file(tmp_path: Path) -> None:
    vllm = _file(tmp_path, "vllm.json", {"spec_decode_acceptance_rate": 60.0,
                                         "spec_decode_per_position_acceptance_rates": [0.8, 0.6]})  # fmt: skip
    with pytest.raises(ConfigError, match="--alpha-overall") as err:
        fold_measurements((CHAT, CODE), [vllm])
    assert err.value.field == "alpha_from"
    both = fold_measurements((CHAT, CODE), [vllm], overall=True)
    assert both[0].alpha == both[1].alpha is not None
    with pytest.raises(ConfigError, match="give one --alpha-from") as err:
        fold_measurements((CHAT, CODE), [vllm, vllm], overall=True)
    assert err.value.field == "alpha_overall"


def test_a_class_left_without_alpha_is_refused_when_every_class_needs_one(tmp_path: Path) -> None:
    f = _file(tmp_path, "m.json", {"classes": {"chat": {"alpha": 0.71}}})
    assert fold_measurements((CHAT, CODE), [f])[1].alpha is None  # a plan gives it a prior
    with pytest.raises(ConfigError, match="has no α for code") as err:
        fold_measurements((CHAT, CODE), [f], require_all=True)
    assert err.value.field == "alpha_from"
