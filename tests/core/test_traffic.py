"""Traffic classes: ``NAME:SHARE[:ALPHA]`` parsed in one place, α per position extended by its
last value, and every refusal naming what is wrong."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from alphagate.core.errors import ConfigError
from alphagate.core.traffic import TrafficClass, parse_traffic_class, validate_classes


def test_the_three_forms_parse() -> None:
    assert parse_traffic_class("chat:0.7:0.7", require_alpha=True) == TrafficClass(
        name="chat", share=0.7, alpha=0.7
    )
    code = parse_traffic_class(" code :0.3", require_alpha=False)
    assert code.name == "code" and code.share == 0.3 and not code.has_alpha
    eagle = parse_traffic_class("chat:1:0.8,0.7,0.6", require_alpha=True)
    assert eagle.alpha is None and eagle.alpha_by_pos == (0.8, 0.7, 0.6)


@pytest.mark.parametrize(
    ("text", "require", "says"),
    [
        ("chat", False, "is not NAME:SHARE[:ALPHA]"),
        ("chat:0.5", True, "is not NAME:SHARE:ALPHA"),
        ("a:b:c:d", False, "is not NAME:SHARE[:ALPHA]"),
        (":0.5", False, "NAME is empty"),
        ("chat:half", False, "SHARE 'half' is not a number"),
        ("chat:nan", False, "SHARE must be a finite number"),
        ("chat:0", False, "SHARE 0 must be in (0, 1]"),
        ("chat:1.5", False, "SHARE 1.5 must be in (0, 1]"),
        ("chat:1:1.2", False, "ALPHA 1.2 is outside [0, 1]"),
        ("chat:1:0.8,x", False, "ALPHA 'x' is not a number"),
    ],
)
def test_each_bad_class_is_refused_naming_the_part(text: str, require: bool, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_traffic_class(text, require_alpha=require)
    assert says in str(info.value)


def test_alpha_by_position_repeats_its_last_value_and_cumulates() -> None:
    c = TrafficClass(name="a", share=1.0, alpha_by_pos=(0.8, 0.5))
    assert c.conditional(4).tolist() == [0.8, 0.5, 0.5, 0.5]
    assert c.conditional(1).tolist() == [0.8]
    np.testing.assert_allclose(c.unconditional(3), [0.8, 0.4, 0.2])
    iid = TrafficClass(name="b", share=1.0, alpha=0.6)
    np.testing.assert_allclose(iid.unconditional(3), [0.6, 0.36, 0.216])
    with pytest.raises(ConfigError, match="'c' has no α"):
        TrafficClass(name="c", share=1.0).conditional(2)


def test_alpha_labels_print_what_was_given() -> None:
    assert TrafficClass(name="a", share=1.0, alpha=0.7).alpha_label() == "0.70"
    assert TrafficClass(name="a", share=1.0, alpha_by_pos=(0.8, 0.65)).alpha_label() == "0.80,0.65"
    assert TrafficClass(name="a", share=1.0).alpha_label() == "—"


def test_a_class_is_one_alpha_a_name_without_colon_and_values_in_range() -> None:
    with pytest.raises(ValidationError, match="not both"):
        TrafficClass(name="a", share=1.0, alpha=0.5, alpha_by_pos=(0.5,))
    with pytest.raises(ValidationError, match="must not contain ':'"):
        TrafficClass(name="a:b", share=1.0)
    with pytest.raises(ValidationError, match=r"must lie in \[0, 1\]"):
        TrafficClass(name="a", share=1.0, alpha_by_pos=(0.5, 1.5))


def test_a_mix_needs_classes_unique_names_and_shares_that_sum_to_one() -> None:
    a, b = TrafficClass(name="a", share=0.6), TrafficClass(name="b", share=0.4)
    validate_classes([a, b])
    validate_classes([a, b.model_copy(update={"share": 0.4009})])  # within 0.001
    with pytest.raises(ConfigError, match="at least one"):
        validate_classes([])
    with pytest.raises(ConfigError, match="unique, got a, a"):
        validate_classes([a, a.model_copy(update={"share": 0.4})])
    with pytest.raises(ConfigError, match=r"sum to 1, got 0\.9"):
        validate_classes([a, b.model_copy(update={"share": 0.3})])
