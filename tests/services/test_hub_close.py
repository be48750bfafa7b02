"""``Hub.close`` stops the hub's layer reader even when a cancellation is swallowed below it.

The scale profile's websocket tests hung in teardown (pytest-timeout) while asyncio's runner
cancelled the loop's tasks once: the Redis client under ``layer.receive`` can take a cancellation
back (``uncancel``, or turn it into its own error), after which the reader's retry loop went on.
These layers are stand-ins for that client behaviour — real in-memory layers that swallow
cancellations the way the client does — not mocks of the hub.
"""

from __future__ import annotations

import asyncio

import pytest
from channels.layers import InMemoryChannelLayer

from artifacts_app import fanout

pytestmark = pytest.mark.django_db(transaction=True)


class Swallows(InMemoryChannelLayer):
    """The first ``limit`` cancellations of a receive are caught and taken back (a client that
    retries a cancelled read); the receive waits on."""

    limit = 2
    swallowed = 0
    receiving = False

    async def receive(self, channel):
        type(self).receiving = True
        while True:
            try:
                return await super().receive(channel)
            except asyncio.CancelledError:
                if type(self).swallowed >= self.limit:
                    raise
                type(self).swallowed += 1
                task = asyncio.current_task()
                assert task is not None
                task.uncancel()


class TurnsIntoError(InMemoryChannelLayer):
    """Every cancellation of a receive comes out as the client's own error, taken back (as
    redis-py does on a cancelled read): ``cancelling()`` then reads 0 in the reader."""

    turned = 0

    async def receive(self, channel):
        try:
            return await super().receive(channel)
        except asyncio.CancelledError:
            type(self).turned += 1
            task = asyncio.current_task()
            assert task is not None
            while task.cancelling():
                task.uncancel()
            raise ConnectionError("read cancelled") from None


class Quiet:
    session_sid = None

    def offer(self, event: dict, text: str) -> None:  # no events in these tests
        pass


def _use_layer(settings, backend: type) -> None:
    layers = dict(settings.CHANNEL_LAYERS)
    layers["default"] = {"BACKEND": f"{backend.__module__}.{backend.__qualname__}"}
    settings.CHANNEL_LAYERS = layers
    settings.ARTIFACTS_WS_LAYER_WATCH = 0.05  # the watcher is busy too while the hub closes


async def _until(condition, timeout: float = 10) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.01)


async def test_close_stops_a_reader_whose_cancellation_was_swallowed(settings, freeform):
    _use_layer(settings, Swallows)
    Swallows.swallowed, Swallows.receiving = 0, False
    hub = fanout.hub()
    assert hub.remote
    await hub.join(freeform.pk, Quiet())
    reader, watcher = hub.reader, hub.layer_watch.task
    assert reader is not None and watcher is not None
    await _until(lambda: Swallows.receiving)

    assert await hub.close(timeout=10) is True
    assert Swallows.swallowed == Swallows.limit  # more than one cancellation was taken back
    assert reader.done() and watcher.done()
    assert not [t for t in asyncio.all_tasks() if "receive" in t.get_coro().__qualname__]
    assert fanout.hub() is not hub  # left the registry: the next use builds a fresh hub
    assert hub.feeds == {}


async def test_close_stops_a_reader_whose_cancellation_became_an_error(settings, freeform):
    _use_layer(settings, TurnsIntoError)
    TurnsIntoError.turned = 0
    hub = fanout.hub()
    await hub.join(freeform.pk, Quiet())
    reader = hub.reader
    assert reader is not None
    await asyncio.sleep(0.05)

    assert await hub.close(timeout=10) is True
    assert TurnsIntoError.turned >= 1  # the reader did see the cancellation as an error
    assert reader.done() and hub.layer_watch.task is None


async def test_close_hub_without_a_hub_does_nothing():
    assert await fanout.close_hub() is True
