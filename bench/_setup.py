"""Shared set-up for benchmarks: a throw-away data dir and a migrated database, unless told otherwise."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def django_setup() -> None:
    sys.path.insert(0, str(ROOT))
    if "ARTIFACTS_DATA_DIR" not in os.environ:
        os.environ["ARTIFACTS_DATA_DIR"] = tempfile.mkdtemp(prefix="artifacts-bench-")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agent_site.settings")
    # Measure what production runs: DEBUG off (DEBUG wraps every cursor to log its SQL).
    os.environ.setdefault("DJANGO_DEBUG", "0")
    os.environ.setdefault("DJANGO_SECRET_KEY", "bench-" + "x" * 40)
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)


def rate(fn: Callable[[int], object], n: int) -> float:
    """Calls per second of ``fn(0)``…``fn(n-1)``, after one warm-up call ``fn(-1)`` (query plans,
    imports)."""
    fn(-1)
    start = time.perf_counter()
    for i in range(n):
        fn(i)
    return n / (time.perf_counter() - start)
