"""Evals: did the agent tag what it should have during a turn?

    with capture_turn("reviewer", turn_id="t-3") as turn:
        run_the_agent_turn()
    assert turn.tagged_artifact("reviewed-pr", lambda r: r.source == "model")

The capture reads the stored ``artifact.tagged`` events of the agent with a ``seq`` after the one
in force when the turn began, so tags made through any entry point (HTTP, tool, Python API, another
thread) count. With ``turn_id`` only tags of that turn count; the Python API fills that turn into
tags made inside the block that name none.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from artifacts_app import selectors
from artifacts_app.records import ArtifactRecord

_current: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar(
    "artifacts_turn", default=None
)


def current_turn_id(agent: str) -> str | None:
    """The turn of an enclosing ``capture_turn`` of this agent, if any."""
    current = _current.get()
    if current is not None and current[0] == agent:
        return current[1]
    return None


class CapturedTurn:
    def __init__(self, agent: str, turn_id: str | None, start_seq: int, agent_id: int) -> None:
        self.agent = agent
        self.turn_id = turn_id
        self.start_seq = start_seq
        self.agent_id = agent_id

    @property
    def records(self) -> list[ArtifactRecord]:
        """The records as tagged during the turn, in tag order (a re-tag appears again)."""
        return selectors.turn_records(
            agent_id=self.agent_id, after=self.start_seq, turn_id=self.turn_id
        )

    def tagged_artifact(
        self, kind: str | None = None, predicate: Callable[[ArtifactRecord], bool] | None = None
    ) -> bool:
        """True when at least one artifact of ``kind`` (any when None) matching ``predicate`` was tagged."""
        return any(
            (kind is None or record.kind == kind) and (predicate is None or predicate(record))
            for record in self.records
        )


@contextmanager
def capture_turn(agent: str, *, turn_id: str | None = None) -> Iterator[CapturedTurn]:
    """Capture the artifacts ``agent`` tags inside the block (of ``turn_id`` when given)."""
    found = selectors.agent_get(agent)
    start_seq = selectors.agent_last_seq(found.pk)
    token = _current.set((agent, turn_id)) if turn_id is not None else None
    try:
        yield CapturedTurn(agent, turn_id, start_seq, found.pk)
    finally:
        if token is not None:
            _current.reset(token)
