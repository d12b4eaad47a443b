"""User errors: the field at fault travels with the error, and pydantic's problems read as
``field.path: message`` with a count of the rest."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, Field, ValidationError

from alphagate.core.errors import ConfigError, SpecError, invalid, validation_problem


class _Inner(BaseModel):
    k: int = Field(ge=1)


class _Outer(BaseModel):
    name: str
    inner: _Inner


def _problem(data: object) -> ValidationError:
    with pytest.raises(ValidationError) as info:
        _Outer.model_validate(data)
    return info.value


def test_the_field_at_fault_travels_with_the_error() -> None:
    e = ConfigError("--api-key: empty", field="api_key")
    assert e.field == "api_key" and str(e) == "--api-key: empty"
    assert ConfigError("x").field is None
    assert isinstance(SpecError("no such preset"), ConfigError)  # the CLI catches one type


def test_the_first_problem_is_named_by_its_path_and_the_rest_counted() -> None:
    one = _problem({"name": "a", "inner": {"k": 0}})
    assert validation_problem(one) == "inner.k: Input should be greater than or equal to 1"
    two = _problem({"inner": {"k": 0}})
    assert validation_problem(two).endswith(" (and 1 more)")
    assert validation_problem(two).startswith("name: Field required")


def test_a_problem_without_a_path_is_placed_where_the_caller_says() -> None:
    with pytest.raises(ValidationError) as info:
        _Outer.model_validate([1, 2])
    assert validation_problem(info.value, "the file") == (
        "the file: Input should be a valid dictionary or instance of _Outer"
    )


def test_a_value_errors_prefix_is_dropped() -> None:
    class Checked(BaseModel):
        x: int

        def model_post_init(self, context: object) -> None:
            if self.x < 0:
                raise ValueError("x must not be negative")

    with pytest.raises(ValidationError) as info:
        Checked(x=-1)
    assert validation_problem(info.value) == "the top level: x must not be negative"


def test_invalid_names_the_source_and_the_record() -> None:
    e = invalid("plan.json", "plan", _problem({"name": "a", "inner": {"k": "x"}}))
    assert isinstance(e, ConfigError)
    assert str(e).startswith("plan.json: not a valid plan (inner.k: Input should be a valid")
