"""Settings for agent-artifacts: one file, driven by the environment.

With no environment at all this runs the embedded default: SQLite, the in-memory channel
layer and blobs on local disk, all under ``./var``. ``DATABASE_URL``, ``REDIS_URL`` and the
storage variables switch to the scale profile. Every variable is listed in docs/operations.md.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(
        f"{name} must be one of 1/0, true/false, yes/no, on/off; got {raw!r}."
    )


def env_int(name: str, default: int, *, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a whole number; got {raw!r}.") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}; got {value}.")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


# Seconds; docs/operations.md "When a dependency fails". The statement timeout is PostgreSQL's;
# the client's own bound (agent_site/postgresql) ends a wait for a server that stalls with a
# statement in flight. The connect timeout stays below daphne's websocket handshake timeout (5 s):
# a stream whose database cannot be reached is closed with 4503, not dropped at the handshake. The
# pool's wait is as long: at 4 s a handshake had 1 s for the rest, too little on a loaded machine.
DATABASE_CONNECT_TIMEOUT = env_int("DATABASE_CONNECT_TIMEOUT", 3, minimum=1)
DATABASE_STATEMENT_TIMEOUT = env_int("DATABASE_STATEMENT_TIMEOUT", 30, minimum=1)
DATABASE_CLIENT_TIMEOUT = env_int(
    "DATABASE_CLIENT_TIMEOUT", DATABASE_STATEMENT_TIMEOUT + 5, minimum=1
)
DATABASE_POOL_TIMEOUT = env_int("DATABASE_POOL_TIMEOUT", 3, minimum=1)


def database_from_url(url: str) -> dict:
    """Turn ``postgres://user:pass@host:port/name?opt=v`` or ``sqlite:///path`` into a DATABASES entry."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    options = dict(parse_qsl(parts.query))
    if scheme in {"postgres", "postgresql", "pgsql"}:
        name = unquote(parts.path.lstrip("/"))
        if not name:
            raise ImproperlyConfigured(
                "DATABASE_URL names no database: add /<name> after the host."
            )
        pool = options.pop("pool", "").lower() in {"1", "true", "yes", "on"}
        # Faults (docs/operations.md): a database that accepts and never answers must not hang a
        # request. connect_timeout bounds the connection (the handshake included), and the
        # server ends a statement past statement_timeout; both overridable in the URL.
        options.setdefault("connect_timeout", str(DATABASE_CONNECT_TIMEOUT))
        # A peer that vanishes (a host down, a dropped route) is noticed by TCP itself: keepalives
        # on an idle connection, and tcp_user_timeout for bytes sent and never acknowledged. A
        # server that stalls while its kernel still acknowledges (a stopped process) is caught
        # by DATABASE_CLIENT_TIMEOUT instead (agent_site/postgresql).
        for option, value in (
            ("keepalives", "1"),
            ("keepalives_idle", "30"),
            ("keepalives_interval", "5"),
            ("keepalives_count", "3"),
            ("tcp_user_timeout", str(DATABASE_CLIENT_TIMEOUT * 1000)),
        ):
            options.setdefault(option, value)
        statement = f"-c statement_timeout={DATABASE_STATEMENT_TIMEOUT * 1000}"
        if "statement_timeout" not in options.get("options", ""):
            options["options"] = f"{options.get('options', '')} {statement}".strip()
        config: dict = {
            # Django's backend, each wait for the server bounded by DATABASE_CLIENT_TIMEOUT.
            "ENGINE": "agent_site.postgresql",
            "NAME": name,
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(parts.port or ""),
            # DESIGN.md §10: a connection lives as long as its request thread (agent_site/asgi.py
            # reuses them), checked at the first query of each request; with ?pool=1, psycopg's
            # pool holds them instead (Django refuses persistent connections with a pool).
            "CONN_MAX_AGE": None,
            "CONN_HEALTH_CHECKS": True,
            "OPTIONS": options,
        }
        if pool:
            config["CONN_MAX_AGE"] = 0
            # Django builds psycopg's pool from these and adds its own `check` (the health check
            # of CONN_HEALTH_CHECKS): a connection the server dropped (a restart,
            # pg_terminate_backend) is replaced when it is taken from the pool, never handed to a
            # request. Passing `check` here too made every connection fail with a TypeError.
            config["OPTIONS"]["pool"] = {
                "min_size": 1,
                "max_size": env_int("DATABASE_POOL_SIZE", 10, minimum=1),
                # A request waits this long for a free connection, then fails (503), not forever.
                "timeout": DATABASE_POOL_TIMEOUT,
            }
        return config
    if scheme == "sqlite":
        path = unquote(parts.path)
        if path.startswith("/") and not url.startswith("sqlite:////"):
            path = path[1:]
        if not path:
            raise ImproperlyConfigured(
                "DATABASE_URL sqlite:/// needs a file path, e.g. sqlite:///var/db.sqlite3."
            )
        return sqlite_database(Path(path) if Path(path).is_absolute() else BASE_DIR / path)
    raise ImproperlyConfigured(
        f"DATABASE_URL scheme {scheme!r} is not supported: use postgres://… or sqlite:///…."
    )


def sqlite_database(path: Path) -> dict:
    # DESIGN.md §2: SQLite as a real embedded database. IMMEDIATE makes concurrent writers queue
    # on the busy timeout instead of failing with "database is locked" on lock upgrade.
    # §10: connections live as long as their request thread; agent_site.sqlite's health check
    # replaces one whose file was replaced underneath it.
    return {
        "ENGINE": "agent_site.sqlite",
        "NAME": path,
        "CONN_MAX_AGE": None,
        "CONN_HEALTH_CHECKS": True,
        "OPTIONS": {
            "transaction_mode": "IMMEDIATE",
            "timeout": 30,
            # Checkpoints run on a thread of their own after each burst of commits
            # (agent_site/sqlite/checkpoint.py); the commit's own autocheckpoint, at 10,000 WAL
            # pages (~40 MiB) instead of SQLite's 1,000, is the safety net behind it. With
            # synchronous=NORMAL a commit is durable against a crash of the process, and the
            # database is never corrupted; a power loss can roll back the commits since the last
            # checkpoint. journal_size_limit truncates a WAL a long reader let grow past 64 MiB.
            "init_command": (
                "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                "PRAGMA wal_autocheckpoint=10000; PRAGMA journal_size_limit=67108864;"
            ),
        },
        "TEST": {
            "NAME": path.with_name(
                f"test_{path.stem}{os.environ.get('PYTEST_XDIST_WORKER', '')}.sqlite3"
            )
        },
    }


DATA_DIR = Path(os.environ.get("ARTIFACTS_DATA_DIR", BASE_DIR / "var")).resolve()
DATA_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DJANGO_DEBUG", True)
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY must be set when DJANGO_DEBUG is off: "
            "generate one with `python -c 'import secrets; print(secrets.token_urlsafe(50))'`."
        )
    SECRET_KEY = "insecure-dev-key-only-for-debug-on-localhost"
elif not DEBUG and (len(SECRET_KEY) < 32 or SECRET_KEY.startswith("insecure")):
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY is too weak for DJANGO_DEBUG off: use 32+ random characters."
    )

ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

# --- HTTPS (docs/operations.md "Production settings"; `manage.py check --deploy`) -------------
# Behind a proxy that ends TLS and sends X-Forwarded-Proto (docs/operations.md's nginx), Django
# learns that the request was HTTPS only from that header: trust it only when the proxy is the
# sole way in, since a client reaching daphne directly could send it too.
if env_bool("ARTIFACTS_BEHIND_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", False)
SECURE_HSTS_SECONDS = env_int("DJANGO_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_HSTS_INCLUDE_SUBDOMAINS", SECURE_HSTS_SECONDS > 0)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_HSTS_PRELOAD", False)
# Session and CSRF cookies only over HTTPS once DEBUG is off; DJANGO_SECURE_COOKIES=0 is for a
# production-like run on plain http:// (a browser would not send secure cookies there).
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", not DEBUG)

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "artifacts_app",
]

MIDDLEWARE = [
    # Outermost: every request gets its id, its count and timing, and its access line
    # (docs/operations.md "Metrics", "Logs"); the tag's lean road runs it too.
    "artifacts_app.monitoring.RequestMiddleware",
    # First: NUL in a path or query, and a wrong Host on the API, never reach a view (API.md "Errors").
    "artifacts_app.door.DoorMiddleware",
    # A view that fails on a dependency (database, storage) answers 503/507 with the envelope.
    "artifacts_app.health.FaultsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last (a system check keeps it last; add middleware above it): POST /<slug>/v1/artifacts,
    # the tag, answered here for every caller and body, before URL resolution.
    "artifacts_app.rest.lean.TagRouteMiddleware",
]

# The admin's and the playground's messages live in the session (server-side; every page that
# adds one has a logged-in user). Django's default also reads a signed messages cookie, and making
# its signer cost ~30 µs of CPU on every request of the site, API calls included (bench/middleware.py).
MESSAGE_STORAGE = "django.contrib.messages.storage.session.SessionStorage"

ROOT_URLCONF = "agent_site.urls"
# API.md: paths are exactly as written, with no trailing slash; never redirect to add one.
APPEND_SLASH = False

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

WSGI_APPLICATION = "agent_site.wsgi.application"
ASGI_APPLICATION = "agent_site.asgi.application"

DATABASE_URL = os.environ.get("DATABASE_URL", "").strip()
DATABASES = {
    "default": database_from_url(DATABASE_URL)
    if DATABASE_URL
    else sqlite_database(DATA_DIR / "db.sqlite3")
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = os.environ.get("REDIS_URL", "").strip()
if REDIS_URL:
    if not REDIS_URL.startswith(("redis://", "rediss://", "unix://")):
        raise ImproperlyConfigured("REDIS_URL must start with redis://, rediss:// or unix://.")
    REDIS_SOCKET_TIMEOUT = 15  # seconds; channels_redis blocks 5 s per BZPOPMIN
    REDIS_CONNECT_TIMEOUT = env_int("REDIS_CONNECT_TIMEOUT", 5, minimum=1)
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {
                # redis-py 8 reads with a 5 s socket timeout by default, the same 5 s that
                # channels_redis blocks in BZPOPMIN: receive() then fails every ~5 s with "Timeout
                # reading from …" (channels_redis#422). Longer than the block, so a read only times
                # out when Redis is really gone.
                "hosts": [
                    {
                        "address": REDIS_URL,
                        "socket_timeout": REDIS_SOCKET_TIMEOUT,
                        # A Redis that is gone fails a send in seconds, not at the OS's TCP timeout.
                        "socket_connect_timeout": REDIS_CONNECT_TIMEOUT,
                    }
                ],
                # pytest-xdist's workers (and the servers their tests start) each keep their own
                # groups, as they keep their own test database.
                "prefix": os.environ.get("ARTIFACTS_REDIS_PREFIX", "artifacts")
                + os.environ.get("PYTEST_XDIST_WORKER", ""),
                # Events: each process holds ONE layer channel (artifacts_app.fanout) receiving one
                # message per transaction, so capacity is batches waiting for a whole process — a
                # 10,000 burst fits; past it the layer drops and the hub refills from the stored
                # rows. Expiry: a batch older than 60 s is stale (its events are stored anyway).
                "capacity": env_int("ARTIFACTS_LAYER_CAPACITY", 10_000, minimum=1),
                "expiry": env_int("ARTIFACTS_LAYER_EXPIRY", 60, minimum=1),
                "group_expiry": 86400,  # hubs renew their groups every ARTIFACTS_WS_GROUP_REFRESH
            },
        }
    }
else:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels.layers.InMemoryChannelLayer",
            "CONFIG": {"capacity": env_int("ARTIFACTS_LAYER_CAPACITY", 1000, minimum=1)},
        }
    }

# --- failed authentications per client address (artifacts_app.throttle; operations.md) ---------
ARTIFACTS_AUTH_FAILURE_LIMIT = env_int("ARTIFACTS_AUTH_FAILURE_LIMIT", 20, minimum=1)
ARTIFACTS_AUTH_FAILURE_WINDOW = env_int("ARTIFACTS_AUTH_FAILURE_WINDOW", 60, minimum=1)
# Peers whose X-Forwarded-For names the client (IPs or CIDRs): the proxies in front, nothing else.
ARTIFACTS_TRUSTED_PROXIES = env_list("ARTIFACTS_TRUSTED_PROXIES", [])
for _proxy in ARTIFACTS_TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_proxy, strict=False)
    except ValueError:
        raise ImproperlyConfigured(
            f"ARTIFACTS_TRUSTED_PROXIES holds IP addresses or CIDRs, comma-separated; got {_proxy!r}."
        ) from None
# The counts live in Django's cache: in the process, or in Redis so that every process behind the
# proxy counts the same failures (short timeouts: a Redis outage leaves failures uncounted).
if REDIS_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": REDIS_URL,
            "KEY_PREFIX": os.environ.get("ARTIFACTS_REDIS_PREFIX", "artifacts")
            + os.environ.get("PYTEST_XDIST_WORKER", ""),
            "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
        }
    }
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "LOCATION": "artifacts",
            "OPTIONS": {"MAX_ENTRIES": 10_000},
        }
    }
# /healthz's details (each dependency's state) for a monitor without a staff session.
ARTIFACTS_HEALTH_TOKEN = os.environ.get("ARTIFACTS_HEALTH_TOKEN", "").strip()
if ARTIFACTS_HEALTH_TOKEN and len(ARTIFACTS_HEALTH_TOKEN) < 32:
    raise ImproperlyConfigured(
        "ARTIFACTS_HEALTH_TOKEN must be 32+ random characters (it is not throttled): generate one "
        "with `python -c 'import secrets; print(secrets.token_urlsafe(32))'`."
    )

# /metrics for Prometheus without a staff session (docs/operations.md "Metrics").
ARTIFACTS_METRICS_TOKEN = os.environ.get("ARTIFACTS_METRICS_TOKEN", "").strip()
if ARTIFACTS_METRICS_TOKEN and len(ARTIFACTS_METRICS_TOKEN) < 32:
    raise ImproperlyConfigured(
        "ARTIFACTS_METRICS_TOKEN must be 32+ random characters: generate one with "
        "`python -c 'import secrets; print(secrets.token_urlsafe(32))'`."
    )

# prometheus_client's multiprocess mode (docs/operations.md "Metrics"): each process writes its
# values in this directory, which must exist and be writable before the first metric is touched.
PROMETHEUS_MULTIPROC_DIR = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
if PROMETHEUS_MULTIPROC_DIR and not (
    os.path.isdir(PROMETHEUS_MULTIPROC_DIR) and os.access(PROMETHEUS_MULTIPROC_DIR, os.W_OK)
):
    raise ImproperlyConfigured(
        f"PROMETHEUS_MULTIPROC_DIR names {PROMETHEUS_MULTIPROC_DIR!r}, which is not a writable "
        "directory: create it (empty) before the server processes start."
    )

STORAGES = {
    "default": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": DATA_DIR / "media"},
    },
    "staticfiles": {
        "BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"
        if not DEBUG
        else "django.contrib.staticfiles.storage.StaticFilesStorage",
    },
    "artifacts": {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": DATA_DIR / "blobs"},
    },
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = DATA_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "static"]

# --- ui: people log in at /accounts/login/ (the admin's own login refuses non-staff users) ----
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/playground/"
LOGOUT_REDIRECT_URL = "/accounts/login/"

# --- logs (docs/operations.md "Logs") ------------------------------------------------------
# "plain": a readable line each (the default with DEBUG on, as bin/run serves); "json": one JSON
# object per line for a log collector (the default with DEBUG off).
ARTIFACTS_LOG_FORMAT = os.environ.get("ARTIFACTS_LOG_FORMAT", "").strip().lower() or (
    "plain" if DEBUG else "json"
)
if ARTIFACTS_LOG_FORMAT not in {"plain", "json"}:
    raise ImproperlyConfigured(
        f"ARTIFACTS_LOG_FORMAT is 'plain' or 'json'; got {ARTIFACTS_LOG_FORMAT!r}."
    )
# One line per request (artifacts_app.monitoring), logger artifacts.access at INFO.
ARTIFACTS_ACCESS_LOG = env_bool("ARTIFACTS_ACCESS_LOG", True)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "artifacts_app.logs.RequestIdFilter"}},
    "formatters": {
        "plain": {
            "()": "logging.Formatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s",
            "defaults": {"request_id": "-"},
        },
        "json": {"()": "artifacts_app.logs.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "filters": ["request_id"],
            "formatter": ARTIFACTS_LOG_FORMAT,
        }
    },
    "root": {"handlers": ["console"], "level": os.environ.get("DJANGO_LOG_LEVEL", "WARNING")},
    "loggers": {
        # A malformed multipart body is the client's: it gets its 400, and the request log its
        # line (django.request); python-multipart's own warning for it would be a second line.
        "python_multipart": {"level": "ERROR"},
        "artifacts.access": {"level": "INFO" if ARTIFACTS_ACCESS_LOG else "WARNING"},
    },
}

# --- agent-artifacts -----------------------------------------------------------------------
# Agents declared in Python: slug -> module that holds `artifacts = define_artifacts(...)`.
ARTIFACTS_AGENTS = {"reviewer": "agent_site.agents.reviewer"}

ARTIFACTS_MAX_DATA_BYTES = env_int("ARTIFACTS_MAX_DATA_BYTES", 1024 * 1024, minimum=1)
ARTIFACTS_MAX_CONTENT_BYTES = env_int("ARTIFACTS_MAX_CONTENT_BYTES", 100 * 1024 * 1024, minimum=1)
# How much of a text content (text/*, application/json) search reads as words: its first bytes,
# kept as they stream to storage (API.md "Search").
ARTIFACTS_SEARCH_CONTENT_BYTES = env_int("ARTIFACTS_SEARCH_CONTENT_BYTES", 1024 * 1024, minimum=0)
ARTIFACTS_MAX_JSON_BODY_BYTES = env_int(
    "ARTIFACTS_MAX_JSON_BODY_BYTES", 10 * 1024 * 1024, minimum=1
)
# Milliseconds of JSON Schema validation one tag may spend on a kind declared over HTTP (defaults
# filled in, then checked); past it the tag is refused with 400 `schema_too_costly` (jsonschemas).
ARTIFACTS_MAX_VALIDATION_MS = env_int("ARTIFACTS_MAX_VALIDATION_MS", 200, minimum=1)
# Milliseconds of JSON Schema validation CPU each agent may spend per second, per process (a
# bucket of one second's allowance, or of one tag's budget if more): an agent past it has its
# next tag wait, up to 2 s, else refused 400 `schema_too_costly` (registry.SchemaKind.parse).
# A typical kind costs ~0.3 ms a tag: 100 ms is ~300 tags a second of one agent, about what the
# whole process answers; one agent takes at most a tenth of the process's core on validation.
ARTIFACTS_VALIDATION_SHARE_MS = env_int("ARTIFACTS_VALIDATION_SHARE_MS", 100, minimum=1)
# Seconds a view reading a streamed request body waits for its next bytes before it gives up with
# 408 `body_timeout` (agent_site/body.py): a client that stalls mid-body frees its request thread.
# Keep it under Twisted's 60 s request idle timeout, which closes a silent connection (no answer).
ARTIFACTS_BODY_IDLE_SECONDS = env_int("ARTIFACTS_BODY_IDLE_SECONDS", 30, minimum=1)
# Seconds from a request's headers to its body's last byte, however steadily it trickles; past
# it, 408 `body_timeout` (agent_site/server.py). Bodies streaming at once per process (each holds
# a request thread); past it, 503 `busy` with Retry-After, the body unread.
ARTIFACTS_BODY_DEADLINE_SECONDS = env_int("ARTIFACTS_BODY_DEADLINE_SECONDS", 300, minimum=1)
ARTIFACTS_MAX_BODY_STREAMS = env_int("ARTIFACTS_MAX_BODY_STREAMS", 64, minimum=1)
# Resumable uploads (tus, /<slug>/v1/uploads; API.md "Large contents"): the largest
# Upload-Length taken (default 10 GiB), and seconds an unfinished or unused upload is kept
# (default 24 h; `gc_blobs` removes the expired ones).
ARTIFACTS_MAX_UPLOAD_BYTES = env_int("ARTIFACTS_MAX_UPLOAD_BYTES", 10 * 1024**3, minimum=1)
ARTIFACTS_UPLOAD_EXPIRY = env_int("ARTIFACTS_UPLOAD_EXPIRY", 24 * 3600, minimum=1)
# Seconds that stored events stay available for `?after=` replay (default 7 days).
ARTIFACTS_EVENT_RETENTION = env_int("ARTIFACTS_EVENT_RETENTION", 7 * 24 * 3600, minimum=60)
# How many server processes share this database; more than one needs the Redis channel layer.
# --- websocket events (artifacts_app.consumers / fanout; docs/architecture.md "Events") ---
# Unsent events a socket may hold before it is dropped with 4429 (reconnect with ?after=).
ARTIFACTS_WS_BUFFER = env_int("ARTIFACTS_WS_BUFFER", 1000, minimum=1)
# How long an event past a seq hole waits for the hole before it is read from the stored rows.
ARTIFACTS_WS_GAP_WAIT = env_int("ARTIFACTS_WS_GAP_WAIT_MS", 500, minimum=1) / 1000
ARTIFACTS_WS_GROUP_REFRESH = 3600  # seconds; below the layer's group_expiry
# Seconds between the fan-out's looks at Redis (its server id): a restart or an outage is noticed
# within this, groups are re-added and feeds caught up from the stored events (docs/operations.md).
ARTIFACTS_WS_LAYER_WATCH = env_int("ARTIFACTS_WS_LAYER_WATCH_MS", 2000, minimum=50) / 1000
# Seconds /healthz waits for each dependency's answer before it reports it unavailable.
ARTIFACTS_HEALTH_TIMEOUT = env_int("ARTIFACTS_HEALTH_TIMEOUT_MS", 3000, minimum=50) / 1000
ARTIFACTS_WS_PUBLISH_BACKLOG = 10_000  # layer sends waiting in one process before drops (logged)
# Seconds between each process's looks at the credentials of its open streams (websockets, MCP):
# a revoked token, a deactivated user or a lost session closes them within this and one query.
ARTIFACTS_STREAM_RECHECK = env_int("ARTIFACTS_STREAM_RECHECK_MS", 500, minimum=50) / 1000

ARTIFACTS_PROCESSES = env_int("ARTIFACTS_PROCESSES", 1, minimum=1)

# --- webhooks (artifacts_app.webhooks; API.md "Webhooks", docs/operations.md "Webhooks") ---


def env_seconds(name: str, default: str, *, minimum: float) -> float:
    return seconds(name, os.environ.get(name) or default, minimum=minimum)


def seconds(name: str, raw: str, *, minimum: float) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number of seconds; got {raw!r}.") from None
    if not value >= minimum or value == float("inf"):
        raise ImproperlyConfigured(f"{name} must be at least {minimum:g} seconds; got {raw!r}.")
    return value


def env_networks(name: str) -> list[str]:
    found = env_list(name, [])
    for item in found:
        try:
            ipaddress.ip_network(item, strict=False)
        except ValueError:
            raise ImproperlyConfigured(
                f"{name} is a comma-separated list of networks (CIDRs); {item!r} is not one."
            ) from None
    return found


# Seconds a receiver has to answer one delivery (connect, send, answer), all told.
ARTIFACTS_WEBHOOK_TIMEOUT = env_seconds("ARTIFACTS_WEBHOOK_TIMEOUT", "10", minimum=0.05)
# Seconds a failing receiver is retried before its webhook is deactivated (default 3 days).
ARTIFACTS_WEBHOOK_GIVE_UP = env_seconds("ARTIFACTS_WEBHOOK_GIVE_UP", str(3 * 24 * 3600), minimum=1)
# Seconds between the tries of one event: 1 s, 5 s, 30 s, 2 min, 10 min, 30 min, then the last.
ARTIFACTS_WEBHOOK_RETRY_DELAYS = [
    seconds("ARTIFACTS_WEBHOOK_RETRY_DELAYS", x, minimum=0.01)
    for x in env_list(
        "ARTIFACTS_WEBHOOK_RETRY_DELAYS", ["1", "5", "30", "120", "600", "1800", "3600"]
    )
]
# Development and tests only: plain http://, and networks (CIDRs) let through the address rule.
ARTIFACTS_WEBHOOK_ALLOW_HTTP = env_bool("ARTIFACTS_WEBHOOK_ALLOW_HTTP", False)
ARTIFACTS_WEBHOOK_ALLOWED_NETWORKS = env_networks("ARTIFACTS_WEBHOOK_ALLOWED_NETWORKS")
ARTIFACTS_WEBHOOK_MAX_PER_AGENT = env_int("ARTIFACTS_WEBHOOK_MAX_PER_AGENT", 20, minimum=1)
# Whether the site's own server process delivers (the embedded profile's way; at scale the
# daphnes and any `manage.py deliver_webhooks` share the work), with how many sending threads.
ARTIFACTS_WEBHOOK_DELIVER_IN_SERVER = env_bool("ARTIFACTS_WEBHOOK_DELIVER_IN_SERVER", True)
ARTIFACTS_WEBHOOK_WORKERS = env_int("ARTIFACTS_WEBHOOK_WORKERS", 4, minimum=1)
# Seconds a deliverer holds a webhook it works on; a process that dies is taken over after it.
ARTIFACTS_WEBHOOK_LEASE = env_int("ARTIFACTS_WEBHOOK_LEASE_MS", 30_000, minimum=100) / 1000
# Seconds between a deliverer's looks at the table when nothing woke it (events of other
# processes without Redis, retries that come due).
ARTIFACTS_WEBHOOK_POLL = env_int("ARTIFACTS_WEBHOOK_POLL_MS", 1000, minimum=10) / 1000

# Django's own cap on request bodies held in memory; the JSON cap above is enforced by the API.
DATA_UPLOAD_MAX_MEMORY_SIZE = ARTIFACTS_MAX_JSON_BODY_BYTES + 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
FILE_UPLOAD_TEMP_DIR = str(DATA_DIR / "tmp")
(DATA_DIR / "tmp").mkdir(parents=True, exist_ok=True)

# --- scale profile: S3-compatible blob storage (docs/operations.md) -------------------------------


def s3_storage_from_env() -> dict:
    """The ``artifacts`` storage for ``ARTIFACTS_STORAGE=s3`` (django-storages' S3Storage, its
    sessions sharing one botocore data loader: agent_site/s3.py).

    Credentials come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or an instance role), as
    boto3 reads them; the rest from ARTIFACTS_S3_* variables.
    """
    import importlib.util

    # The variables first, the package second: a wrong value is reported the same way whether or
    # not the scale extras are installed.
    bucket = os.environ.get("ARTIFACTS_S3_BUCKET", "").strip()
    if not bucket:
        raise ImproperlyConfigured(
            "ARTIFACTS_STORAGE=s3 needs ARTIFACTS_S3_BUCKET (the bucket name)."
        )
    endpoint = os.environ.get("ARTIFACTS_S3_ENDPOINT_URL", "").strip() or None
    if endpoint is not None and not endpoint.startswith(("http://", "https://")):
        raise ImproperlyConfigured("ARTIFACTS_S3_ENDPOINT_URL must start with http:// or https://.")
    if importlib.util.find_spec("storages") is None or importlib.util.find_spec("boto3") is None:
        raise ImproperlyConfigured(
            "ARTIFACTS_STORAGE=s3 needs django-storages with boto3: pip install -e '.[scale]'."
        )
    from boto3.s3.transfer import TransferConfig
    from botocore.config import Config

    s3_config = {"addressing_style": "path"} if endpoint else {}

    return {
        "BACKEND": "agent_site.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": bucket,
            "endpoint_url": endpoint,
            "region_name": os.environ.get("ARTIFACTS_S3_REGION", "").strip() or None,
            "location": os.environ.get("ARTIFACTS_S3_PREFIX", "blobs").strip("/"),
            # Content-addressed: the same name always holds the same bytes.
            "file_overwrite": True,
            "default_acl": None,
            "querystring_auth": True,
            "querystring_expire": env_int("ARTIFACTS_S3_REDIRECT_EXPIRY", 300, minimum=1),
            # Path-style works with every S3-compatible server (MinIO, moto, Ceph); AWS accepts it.
            "addressing_style": "path" if endpoint else None,
            # Bounded calls (faults): a storage that stalls fails a request with 503 in seconds.
            # Given here, the client config must carry the addressing style itself.
            # Each read of a streamed download waits at most the read timeout; a storage that
            # accepts and never answers fails a call after the attempts × the read timeout (+
            # the standard mode's backoff, under 1 s for one retry): ~21 s by default, answered
            # 503 before a proxy's own 60 s gives up with a 504. Not less: moto takes 4.4 s to
            # answer the CompleteMultipartUpload of 256 MiB (AWS and MinIO send whitespace while
            # they complete one, so a long completion does not look silent there).
            "client_config": Config(
                s3=s3_config,
                connect_timeout=env_int("ARTIFACTS_S3_CONNECT_TIMEOUT", 3, minimum=1),
                read_timeout=env_int("ARTIFACTS_S3_READ_TIMEOUT", 10, minimum=1),
                # total_max_attempts counts the first call; botocore's max_attempts counts the
                # retries only (max_attempts=3 was four calls of 30 s: the 120 s seen).
                retries={
                    "total_max_attempts": env_int("ARTIFACTS_S3_MAX_ATTEMPTS", 2, minimum=1),
                    "mode": "standard",
                },
            ),
            # Multipart uploads of 8 MiB parts, two at a time: memory stays bounded per upload.
            "transfer_config": TransferConfig(
                multipart_threshold=8 * 1024 * 1024,
                multipart_chunksize=8 * 1024 * 1024,
                max_concurrency=2,
            ),
        },
    }


ARTIFACTS_STORAGE = os.environ.get("ARTIFACTS_STORAGE", "local").strip().lower() or "local"
if ARTIFACTS_STORAGE == "s3":
    STORAGES["artifacts"] = s3_storage_from_env()
elif ARTIFACTS_STORAGE != "local":
    raise ImproperlyConfigured(f"ARTIFACTS_STORAGE is 'local' or 's3'; got {ARTIFACTS_STORAGE!r}.")
# Content downloads answer a short-lived presigned redirect to S3 instead of streaming the bytes.
ARTIFACTS_S3_REDIRECT = env_bool("ARTIFACTS_S3_REDIRECT", False)
if ARTIFACTS_S3_REDIRECT and ARTIFACTS_STORAGE != "s3":
    raise ImproperlyConfigured("ARTIFACTS_S3_REDIRECT needs ARTIFACTS_STORAGE=s3.")

# --- REST API --------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "artifacts_app.rest.auth.BearerAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [],  # access.py decides, per route (DESIGN.md §7)
    "DEFAULT_PARSER_CLASSES": ["artifacts_app.rest.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["artifacts_app.rest.parsers.ORJSONRenderer"],
    "EXCEPTION_HANDLER": "artifacts_app.rest.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "agent-artifacts",
    "DESCRIPTION": "Artifacts for agents: tag, list, download, sessions. Every 4xx answers "
    '{"error": {"code", "message", "details"?}}.',
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "SCHEMA_PATH_PREFIX": r"/[^/]+/v1",
    # Bounds, patterns, closed bodies, content headers and error codes (artifacts_app/rest/schema.py).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "artifacts_app.rest.schema.postprocess",
    ],
}
