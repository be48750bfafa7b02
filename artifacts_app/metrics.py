"""The service's Prometheus metrics, declared once (docs/operations.md "Metrics").

Every counter, histogram and gauge the site exports is an object here, so that any layer may count
(this module imports nothing of the app); ``artifacts_app.monitoring`` serves them at ``/metrics``.
Labels are bounded sets: a route is its URL pattern's name, never the path; a status is the
response's code; a transport, an outcome or an event type is one of a few words.

With ``PROMETHEUS_MULTIPROC_DIR`` set before the process starts (prometheus_client reads it at
import), the values live in files of that directory, one set per process, and a scrape of any
process answers the totals of all of them (``collect``). Without it, each process answers its own.
"""

from __future__ import annotations

import atexit
import os

from prometheus_client import (
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
    multiprocess,
)
from prometheus_client.registry import Collector

NAMESPACE = "artifacts"
# A "_created" timestamp beside every counter doubles the exposition and tells a scraper nothing
# it needs (multiprocess mode never has them).
disable_created_metrics()

# Seconds; the defaults of prometheus_client start at 5 ms, below which most API answers fall.
LATENCY_BUCKETS = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)

# --- HTTP (monitoring.RequestMiddleware; the MCP mount for /<slug>/mcp) --------------------------
HTTP_REQUESTS = Counter(
    "http_requests",
    "HTTP requests answered, by route (URL pattern name), method and status.",
    ["route", "method", "status"],
    namespace=NAMESPACE,
)
HTTP_LATENCY = Histogram(
    "http_request_duration_seconds",
    "Seconds from a request reaching the site to its response's headers, by route and method.",
    ["route", "method"],
    namespace=NAMESPACE,
    buckets=LATENCY_BUCKETS,
)

# --- the domain (counted once the transaction has committed: events.publish) --------------------
TAGS = Counter(
    "tags",
    "Artifacts tagged (artifact.tagged events committed: tags, content replacements, restores).",
    namespace=NAMESPACE,
)
EVICTIONS = Counter(
    "evictions",
    "Artifacts evicted past their agent's max (artifact.deleted events of reason evicted).",
    namespace=NAMESPACE,
)
EVENTS_PUBLISHED = Counter(
    "events_published",
    "Events committed and handed to the fan-out, by type.",
    ["type"],
    namespace=NAMESPACE,
)
UPLOAD_BYTES = Counter(
    "upload_bytes",
    "Bytes of contents received and stored (blobs.blob_put), identical contents included.",
    namespace=NAMESPACE,
)

# --- subscribers (websocket consumers, MCP watches) -----------------------------------------------
TRANSPORTS = ("websocket", "mcp")
EVENTS_DELIVERED = Counter(
    "events_delivered",
    "Events delivered to subscribers (one per subscriber an event reached), by transport; "
    "live events only, replayed ones are not counted.",
    ["transport"],
    namespace=NAMESPACE,
)
SUBSCRIBER_LAG = Histogram(
    "subscriber_lag_seconds",
    "Seconds the oldest event of a write waited between the fan-out handing it to a subscriber "
    "and its write to the stream, by transport (one observation per write).",
    ["transport"],
    namespace=NAMESPACE,
    buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0),
)
SUBSCRIBERS_DROPPED = Counter(
    "subscribers_dropped",
    "Streams closed for falling too far behind (websocket 4429; an MCP watch that overflowed "
    "and re-sent everything), by transport.",
    ["transport"],
    namespace=NAMESPACE,
)
SUBSCRIBERS = Gauge(
    "subscribers",
    "Open event streams, by transport (live processes only).",
    ["transport"],
    namespace=NAMESPACE,
    multiprocess_mode="livesum",
)

# --- webhooks (the event table as their outbox, DESIGN.md §16) ------------------------------------
WEBHOOK_OUTCOMES = ("delivered", "failed", "gave_up")
WEBHOOK_DELIVERIES = Counter(
    "webhook_deliveries",
    "Webhook delivery attempts, by outcome: delivered (2xx), failed (to be retried), gave_up.",
    ["outcome"],
    namespace=NAMESPACE,
)
WEBHOOK_DELIVERY_LATENCY = Histogram(
    "webhook_delivery_duration_seconds",
    "Seconds of one webhook delivery attempt (the POST to the receiver).",
    namespace=NAMESPACE,
    buckets=LATENCY_BUCKETS,
)
WEBHOOK_BACKLOG = Gauge(
    "webhook_backlog",
    "Events stored and not yet delivered to their webhooks, summed over webhooks (the newest "
    "count any process measured).",
    namespace=NAMESPACE,
    multiprocess_mode="mostrecent",
)

# --- dependencies: measured at each scrape (monitoring), not stored ------------------------------
DEPENDENCY_UP = f"{NAMESPACE}_dependency_up"


def multiprocess_dir() -> str | None:
    """The directory of the processes' shared values, or None (each process answers its own)."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def exposition(*extra: Collector) -> bytes:
    """The text exposition of every metric (all processes' totals in multiprocess mode), followed
    by ``extra`` collectors' (measured now, in this process)."""
    if multiprocess_dir():
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        text = generate_latest(registry)
    else:
        text = generate_latest(REGISTRY)
    if extra:
        registry = CollectorRegistry()
        for collector in extra:
            registry.register(collector)
        text += generate_latest(registry)
    return text


def _process_exit() -> None:
    # A process's "live" gauges (open streams) stop counting when it ends.
    directory = multiprocess_dir()
    if directory and os.path.isdir(directory):
        multiprocess.mark_process_dead(os.getpid(), directory)


atexit.register(_process_exit)
