"""``alphagate measure prometheus``: acceptance over a window, queried from a Prometheus server."""

from __future__ import annotations

from typing import Annotated

import typer

from alphagate.cli._check import fail
from alphagate.cli._groups import takes_groups
from alphagate.cli._paths import check_http_urls
from alphagate.cli.measure._common import KOpt, ResultsFlags, measure_app, measure_error

__all__ = ["prometheus"]


@measure_app.command("prometheus", short_help="Acceptance over a window from Prometheus.")
@takes_groups
def prometheus(
    url: Annotated[
        str, typer.Option("--url", help="The Prometheus server, e.g. http://prometheus:9090.")
    ],
    selector: Annotated[
        str, typer.Option("--selector", help="Label matchers, e.g. '{model_name=\"llama\"}'.")
    ] = "",
    window: Annotated[str, typer.Option("--window", help="How far back: 90s, 30m, 1h, 7d.")] = "1h",
    step: Annotated[
        str | None, typer.Option("--step", help="Also a series per step, e.g. 5m.")
    ] = None,
    by: Annotated[
        str | None, typer.Option("--by", help="Split by this label, e.g. instance.")
    ] = None,
    k: KOpt = None,
    results: ResultsFlags = ResultsFlags(),
) -> None:
    """Query a Prometheus server's HTTP API with increase() over vLLM's spec-decode counters.

    Prints the PromQL it used, so the numbers can be reproduced in Grafana.
    """
    from pydantic import ValidationError

    from alphagate.measure.prometheus import PrometheusQuery, measure_prometheus, parse_duration
    from alphagate.measure.results import MeasureError

    results.check([])
    check_http_urls([url], "--url")
    try:
        q = PrometheusQuery(
            url=url,
            selector=selector,
            window_s=parse_duration(window),
            step_s=parse_duration(step) if step else None,
            by=by,
            k=k,
        )
        result = measure_prometheus(q)
    except ValidationError as exc:
        fail(str(exc.errors()[0]["msg"]).removeprefix("Value error, "), "--selector/--by")
    except MeasureError as exc:
        measure_error(exc)
    results.finish(result)
