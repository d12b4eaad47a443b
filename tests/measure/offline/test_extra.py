"""Without the ``offline`` extra, ``measure offline`` says what to install (exit 2), not a
traceback (that the rest of the package imports no torch: tests/test_layering.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from alphagate.measure.offline.config import OfflineConfig
from alphagate.measure.offline.score import load
from alphagate.measure.results import MeasureError

MODEL_MODULES = ("models", "eagle3", "proposers", "replay")


@pytest.mark.parametrize("missing", ["torch", "transformers"])
def test_loading_the_models_without_the_extra_names_it(
    missing: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in MODEL_MODULES:
        monkeypatch.delitem(sys.modules, f"alphagate.measure.offline.{name}", raising=False)
    monkeypatch.setitem(sys.modules, missing, None)  # import raises ModuleNotFoundError
    cfg = OfflineConfig(logs=(tmp_path / "log.jsonl",), target=str(tmp_path), drafter="ngram")
    with pytest.raises(MeasureError, match=r"pip install 'alphagate\[offline\]'") as e:
        load(cfg)
    assert e.value.exit_code == 2
