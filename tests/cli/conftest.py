"""Fixtures the CLI tests share with the report tests: the session's results files."""

from tests.report.conftest import results

__all__ = ["results"]
