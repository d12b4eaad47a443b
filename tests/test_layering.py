"""Layer rules from DESIGN.md: theory/ imports neither torch nor any HTTP library."""

from __future__ import annotations

import re
import subprocess
import sys

FORBIDDEN = [
    "torch",
    "transformers",
    "tokenizers",
    "aiohttp",
    "httpx",
    "requests",
    "urllib3",
    "http.client",
]


def test_theory_and_sim_import_no_torch_or_http() -> None:
    code = (
        "import sys, alphagate.theory, alphagate.specs, alphagate.sim.sweep, alphagate.sim.closed_loop; "
        f"bad = [m for m in {FORBIDDEN!r} if m in sys.modules]; "
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"alphagate.theory pulled in: {out.stdout.strip()}"


def test_theory_does_not_print_or_open_files() -> None:
    import inspect

    import alphagate.theory as theory_pkg

    for name in theory_pkg.__all__:
        obj = getattr(theory_pkg, name)
        if inspect.isfunction(obj):
            src = inspect.getsource(obj)
            assert not re.search(r"(?<![\w.])(print|open)\(", src), name
