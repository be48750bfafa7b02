"""glibc's allocator, held to a few arenas in the server process.

glibc's ``malloc`` gives each thread that allocates while another holds the lock an arena of its
own, up to eight per core, and a freed block stays in its arena's heap for that thread's next
allocation. A server with a thread per request in flight (``agent_site.asgi``) that receives large
JSON bodies (each parsed, validated and dropped: a few copies of up to a few MiB) ends with a
heap per thread, each kept at its largest: under one agent tagging 400 KB records back to back the
server's RSS grew by ~55 MiB and stayed, while Python held none of it.

``cap_arenas`` sets glibc's ``M_ARENA_MAX`` (``mallopt``, glibc's public interface, reached through
ctypes) to ``ARENAS`` when the process starts, unless the environment sets ``MALLOC_ARENA_MAX``
(glibc then applies the operator's figure itself). Elsewhere than glibc it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_ARENA_MAX = -8  # glibc's malloc.h
ARENAS = 2


def cap_arenas(arenas: int = ARENAS) -> bool:
    """Hold glibc's allocator to ``arenas`` arenas; whether it was done here."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (musl, macOS): its allocator is left as it is
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(M_ARENA_MAX, arenas))
