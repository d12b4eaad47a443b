"""Where bench sends its requests, as option groups (:mod:`alphagate.cli._groups`): the
targets, their credentials and metrics, and the limits a run keeps to."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import typer

from alphagate.cli._check import bounded, config_error, fail
from alphagate.cli._options import API_KEY_ENV, api_key_option
from alphagate.cli._paths import check_http_urls

__all__ = ["LimitFlags", "TargetFlags"]


@dataclass(frozen=True)
class TargetFlags:
    """One endpoint, or a baseline and a candidate; the API, model and credentials."""

    url: Annotated[
        str | None, typer.Option("--url", "--base-url", help="Endpoint base URL (one target).")
    ] = None
    baseline_url: Annotated[
        str | None, typer.Option("--baseline-url", help="A/B: the no-speculation server.")
    ] = None
    candidate_url: Annotated[
        str | None, typer.Option("--candidate-url", help="A/B: the speculative server.")
    ] = None
    endpoint: Annotated[
        Literal["completions", "chat"], typer.Option("--endpoint", help="API to call.")
    ] = "completions"
    model: Annotated[
        str | None, typer.Option("--model", help="Model name (default: first of /v1/models).")
    ] = None
    api_key: Annotated[
        str | None,
        api_key_option("Bearer key (or $ALPHAGATE_API_KEY); never written out."),
    ] = None
    header: Annotated[
        list[str] | None,
        typer.Option(
            "--header", help="Extra header NAME:VALUE, repeated (values never written out)."
        ),
    ] = None
    metrics_url: Annotated[
        list[str] | None,
        typer.Option(
            "--metrics-url", help="Prometheus endpoints to diff (replicas); default <url>/metrics."
        ),
    ] = None
    no_metrics: Annotated[bool, typer.Option("--no-metrics", help="Do not scrape /metrics.")] = (
        False
    )

    def check_environment(self) -> None:
        """An empty ``$ALPHAGATE_API_KEY`` is a mistake, not "no key"."""
        if os.environ.get(API_KEY_ENV) == "" and self.api_key is None:
            fail("ALPHAGATE_API_KEY is set but empty; unset it to send no key", "--api-key")

    def config_fields(self) -> dict[str, Any]:
        """The :class:`~alphagate.bench.config.BenchConfig` fields these flags give."""
        from pydantic import SecretStr

        from alphagate.bench.config import targets_for
        from alphagate.bench.secrets import auth_headers
        from alphagate.core.errors import ConfigError

        try:
            targets = targets_for(self.url, self.baseline_url, self.candidate_url)
            headers, clean = auth_headers(self.header or [], self.api_key, targets)
        except ConfigError as exc:
            config_error(exc)
        check_http_urls(self.metrics_url or [], "--metrics-url")
        return {
            "targets": clean,
            "api_key": SecretStr(self.api_key) if self.api_key else None,
            "headers": headers,
            "metrics_urls": tuple(self.metrics_url) if self.metrics_url else None,
            "endpoint": self.endpoint,
            "model": self.model,
            "scrape_metrics": not self.no_metrics,
        }


@dataclass(frozen=True)
class LimitFlags:
    """How long a request may take, and when a run stops early."""

    timeout: Annotated[
        float,
        bounded(
            "--timeout",
            lo=0.001,
            hi=86_400.0,
            help="Seconds without data before a stream counts as stalled.",
        ),
    ] = 60.0
    request_timeout: Annotated[
        float | None,
        bounded(
            "--request-timeout",
            lo=0.001,
            hi=86_400.0,
            help="The most seconds one request may take in all, however its bytes come (a server "
            "that trickles never stalls); it then fails as request_timeout. Default: --timeout + "
            "1 s per max_tokens token (4,096 when a request has none).",
        ),
    ] = None
    max_errors: Annotated[
        int | None, typer.Option("--max-errors", min=1, help="Stop after N failed requests.")
    ] = None
    max_error_rate: Annotated[
        float,
        bounded(
            "--max-error-rate",
            lo=0.0,
            hi=1.0,
            help="Stop (and exit 1) when failures ÷ requests of a level exceed this.",
        ),
    ] = 0.05
    max_duration: Annotated[
        float | None,
        bounded("--max-duration", lo=0.001, help="Stop sending after this many seconds in all."),
    ] = None

    def config_fields(self) -> dict[str, Any]:
        """The :class:`~alphagate.bench.config.BenchConfig` fields these flags give."""
        return {
            "timeout_s": self.timeout,
            "request_timeout_s": self.request_timeout,
            "max_errors": self.max_errors,
            "max_error_rate": self.max_error_rate,
            "max_duration_s": self.max_duration,
        }
