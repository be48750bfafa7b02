"""A deliverer: threads that claim and work webhooks (``engine``), woken by the fan-out's hub.

``Runner`` starts ``ARTIFACTS_WEBHOOK_WORKERS`` sending threads and one thread with an event loop
whose fan-out hub (``fanout.hub``) is joined to every agent that has an active webhook: as an
agent's events commit — in this process (``events.publish``), or in another one through the
Redis layer — the hub offers them to the runner, which wakes its workers. Without a wake, workers
look at the table when the next retry comes due and at least every ``ARTIFACTS_WEBHOOK_POLL``.

The site's server starts one (``start_in_server``, the embedded profile's way) and stops it at exit;
``manage.py deliver_webhooks`` runs one in the foreground. Any number of them share the work
through the database.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from datetime import datetime

from channels.db import database_sync_to_async
from django.conf import settings
from django.db import close_old_connections, connections
from django.utils import timezone

from artifacts_app import event_schema, fanout, metrics
from artifacts_app.selectors import webhooks as webhook_reads
from artifacts_app.webhooks import engine
from artifacts_app.webhooks.transport import Sender

log = logging.getLogger(__name__)

PRUNE_EVERY = 600.0  # seconds between deletions of old delivery attempts
MEASURE_EVERY = 5.0  # seconds between measures of the backlog (metrics.WEBHOOK_BACKLOG)
IDLE_CLOSE = 0.5  # seconds of sleep from which a worker closes its database connection first


class _Waker:
    """The runner's subscriber to the hub: every event of a watched agent wakes the workers."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.session_sid: str | None = None  # the agent's stream: every event

    def offer(self, event: event_schema.Event, text: str) -> None:
        self.runner.wake()


class Runner:
    def __init__(self, workers: int | None = None, *, watch: bool = True) -> None:
        self.workers = workers or int(settings.ARTIFACTS_WEBHOOK_WORKERS)
        self.watch = watch
        self.stopping = threading.Event()
        self._cond = threading.Condition()
        self._wakes = 0
        self._threads: list[threading.Thread] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_stop: asyncio.Event | None = None
        self._next_prune = time.monotonic() + PRUNE_EVERY
        self._next_measure = time.monotonic()

    # --- control -------------------------------------------------------------------------------

    def start(self) -> Runner:
        with _running_lock:
            _running.add(self)
        for n in range(self.workers):
            thread = threading.Thread(target=self._work_forever, name=f"webhooks-{n}", daemon=True)
            thread.start()
            self._threads.append(thread)
        if self.watch:
            ready = threading.Event()
            thread = threading.Thread(
                target=self._watch_forever, args=(ready,), name="webhooks-watch", daemon=True
            )
            thread.start()
            self._threads.append(thread)
            ready.wait(5)
        return self

    def wake(self) -> None:
        """From any thread: look at the table now."""
        with self._cond:
            self._wakes += 1
            self._cond.notify_all()

    def stop(self, timeout: float = 15.0) -> bool:
        """Stop: workers end after the attempt they are in (its progress written); True when every
        thread ended within ``timeout``."""
        self.stopping.set()
        with _running_lock:
            _running.discard(self)
        self.wake()
        if self._loop is not None and self._loop_stop is not None:
            try:
                self._loop.call_soon_threadsafe(self._loop_stop.set)
            except RuntimeError:
                pass
        deadline = time.monotonic() + timeout
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        alive = [t.name for t in self._threads if t.is_alive()]
        if alive:
            log.warning("webhook deliverer threads did not stop in time: %s", ", ".join(alive))
        return not alive

    # --- the workers ---------------------------------------------------------------------------

    def _work_forever(self) -> None:
        sender = Sender()
        try:
            while not self.stopping.is_set():
                with self._cond:
                    seen = self._wakes
                wait = self._turn(sender)
                if wait <= 0:
                    continue
                if wait >= IDLE_CLOSE:
                    # Idle: give the connection back (a pool's, at scale) rather than hold it.
                    connections.close_all()
                with self._cond:
                    if self._wakes == seen and not self.stopping.is_set():
                        self._cond.wait(wait)
        finally:
            sender.close()
            connections.close_all()

    def _turn(self, sender: Sender) -> float:
        """One claim and its work; answers how long to sleep (0: look again at once)."""
        poll = float(settings.ARTIFACTS_WEBHOOK_POLL)
        try:
            close_old_connections()
            claimed = engine.claim(limit=engine.CLAIM_MANY)
            if claimed:
                engine.work(claimed, sender, stopping=self.stopping)
                return 0
            self._prune_sometimes()
            self._measure_sometimes()
            due = engine.next_due()
        except Exception:
            log.exception("the webhook deliverer failed; trying again in %.1f s", poll)
            connections.close_all()  # a broken connection is opened anew
            return poll
        return _until(due, poll)

    def _measure_sometimes(self) -> None:
        if time.monotonic() < self._next_measure:
            return
        self._next_measure = time.monotonic() + MEASURE_EVERY
        metrics.WEBHOOK_BACKLOG.set(engine.backlog())

    def _prune_sometimes(self) -> None:
        if time.monotonic() < self._next_prune:
            return
        self._next_prune = time.monotonic() + PRUNE_EVERY
        deleted = engine.prune_log()
        if deleted:
            log.info("deleted %d webhook delivery attempt(s) past the event retention", deleted)

    # --- the wake-ups: the hub ------------------------------------------------------------------

    def _watch_forever(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._watch(ready))
        except Exception:
            log.exception("the webhook deliverer's watch of the events stopped")
        finally:
            ready.set()
            loop.close()

    async def _watch(self, ready: threading.Event) -> None:
        self._loop_stop = asyncio.Event()
        hub = fanout.hub()
        waker = _Waker(self)
        joined: set[int] = set()
        poll = max(float(settings.ARTIFACTS_WEBHOOK_POLL), 0.05)
        try:
            while not self.stopping.is_set():
                try:
                    wanted = set(await database_sync_to_async(webhook_reads.webhook_agent_ids)())
                    for agent_id in wanted - joined:
                        await hub.join(agent_id, waker)
                        joined.add(agent_id)
                        self.wake()  # events may have come before the join
                    for agent_id in joined - wanted:
                        hub.leave(agent_id, waker)
                        joined.discard(agent_id)
                except Exception:
                    log.warning("watching the events for webhooks failed; retrying", exc_info=True)
                ready.set()
                try:
                    await asyncio.wait_for(self._loop_stop.wait(), poll)
                except TimeoutError:
                    pass
        finally:
            await hub.close()
            await database_sync_to_async(connections.close_all)()


def _until(due: datetime | None, poll: float) -> float:
    if due is None:
        return poll
    left = (due - timezone.now()).total_seconds()
    return min(poll, max(left, 0.005))


_running: set[Runner] = set()
_running_lock = threading.Lock()
_server_runner: Runner | None = None
_server_lock = threading.Lock()


def start_in_server() -> Runner | None:
    """Start this process's deliverer when ``ARTIFACTS_WEBHOOK_DELIVER_IN_SERVER`` says the server
    delivers (once per process); stopped by ``stop_in_server`` (at exit)."""
    global _server_runner
    if not settings.ARTIFACTS_WEBHOOK_DELIVER_IN_SERVER:
        return None
    with _server_lock:
        if _server_runner is None:
            _server_runner = Runner().start()
        return _server_runner


def stop_in_server(timeout: float = 15.0) -> None:
    global _server_runner
    with _server_lock:
        runner, _server_runner = _server_runner, None
    if runner is not None:
        runner.stop(timeout)


def wake_local() -> None:
    """Wake this process's deliverers, if it runs any (a webhook created, replayed, reactivated)."""
    with _running_lock:
        runners = list(_running)
    for runner in runners:
        runner.wake()
