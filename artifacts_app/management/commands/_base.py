"""Shared shape of our commands: parse, call one service, print; refusals become CommandError."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from django.core.management.base import CommandError

from artifacts_app import faults
from artifacts_app.errors import ArtifactError

T = TypeVar("T")


def run_service(call: Callable[[], T]) -> T:
    """Call a service; an ``ArtifactError`` — a dependency failure too (``faults``) — exits
    non-zero with its sentence, never a traceback."""
    try:
        return call()
    except ArtifactError as exc:
        raise CommandError(exc.message) from None
    except Exception as exc:
        fault = faults.classify(exc)
        if fault is None:
            raise
        raise CommandError(f"{fault.message} ({type(exc).__name__}: {exc})".strip()) from None
