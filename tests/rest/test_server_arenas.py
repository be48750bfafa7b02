"""The server process holds glibc's allocator to a few arenas (``agent_site.glibc``): a heap per
request thread, each kept at its largest, was the server's RSS growth under large bodies."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Eight threads allocate at once and hold their blocks; then glibc's malloc_stats (on stderr)
# lists one "Arena N:" per arena.
PROGRAM = """
import ctypes, ctypes.util, sys, threading
from agent_site import glibc
print(glibc.cap_arenas() if sys.argv[1] == "cap" else "uncapped", flush=True)
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype = ctypes.c_void_p
barrier = threading.Barrier(8)
held = []
def work():
    barrier.wait()
    held.extend(libc.malloc(300_000) for _ in range(20))
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
libc.malloc_stats()
"""


def arenas(mode: str, **env: str) -> tuple[str, int]:
    environ = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, mode],
        cwd=ROOT,
        env={**environ, "PYTHONPATH": str(ROOT), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return done.stdout.strip(), sum(line.startswith("Arena ") for line in done.stderr.splitlines())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator only")
def test_the_server_process_holds_malloc_to_two_arenas_across_its_threads():
    said, uncapped = arenas("plain")
    assert uncapped > 2  # glibc's own default: a new arena per thread, up to 8 per core
    said, capped = arenas("cap")
    assert said == "True" and capped <= 2


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator only")
def test_an_operators_malloc_arena_max_is_left_to_glibc():
    said, count = arenas("cap", MALLOC_ARENA_MAX="4")
    assert said == "False" and 2 < count <= 4
