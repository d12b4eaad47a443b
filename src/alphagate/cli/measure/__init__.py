"""``alphagate measure``: acceptance (α, ρ, τ with 95% intervals) from running servers, a
Prometheus server, server logs, or offline from request logs and the models. Exit codes: 0
measured; 2 bad input or an unreachable or wrong source; 3 the source works but has not seen
enough drafts yet; 130 interrupted.

One module per sub-verb; importing this package registers them all on ``alphagate measure``.
"""

from __future__ import annotations

from alphagate.cli.measure import bench, live, logs, offline, prometheus
from alphagate.cli.measure._common import measure_app

__all__ = ["bench", "live", "logs", "measure_app", "offline", "prometheus"]
