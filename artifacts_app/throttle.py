"""Failed authentications, counted per client address (API.md "Limits on what a caller can make
the server do"): the one rule for the API's bearer credentials, websockets, MCP and the two login
pages.

A credential that does not authenticate (an unknown or revoked token, a wrong password) is counted
with ``failure(address)``; an address may fail ``ARTIFACTS_AUTH_FAILURE_LIMIT`` times in its window
of ``ARTIFACTS_AUTH_FAILURE_WINDOW`` seconds, and each further failure raises
``TooManyAttemptsError`` (429 ``too_many_attempts`` with ``Retry-After``; a websocket closes with
4408) instead of the 401. The window opens at an address's first failure and closes that many
seconds later.

Where the check comes first differs, because what a guess can win differs:

- **Bearer tokens** (REST, MCP, websockets) are checked first: a token that authenticates goes on
  whatever its address has done, and only one that fails is counted. A token is a 256-bit random
  secret that no rate of guessing finds, so the limit has nothing to protect there but the
  server's work, and checking first keeps a good agent going beside a guesser at the same address
  (a NAT, an office).
- **Passwords** (the login pages) are not checked at all once ``exceeded(address)`` says the
  address has used up its failures: the page answers 429 until the window ends, a right password
  included. A password can be guessed, and a guesser who ignores the 429s would otherwise learn
  which guess was right. The cost: the people behind a shared address cannot log in for the rest
  of that window (``ARTIFACTS_TRUSTED_PROXIES`` gives each the address a proxy saw); people already
  logged in keep their session and never post the form.

``exceeded`` reads the count without counting; ``failure`` counts. A login that read the count
just before another reached the limit is still checked, so the overshoot is bounded by how many
logins the servers run at once, not by the guesser's rate.

Counts live in Django's ``default`` cache, through its public API: in the process
(``LocMemCache``) in the embedded default, in Redis (Django's ``RedisCache``) at scale, so that
every process behind a proxy counts the same failures. A cache that fails is logged and counts
nothing (and refuses nothing): refusing with 401 is still right, and a Redis outage must not turn
bad credentials into 500s.

The address is the peer's, or, when the peer is one of ``ARTIFACTS_TRUSTED_PROXIES``, the rightmost
address of ``X-Forwarded-For`` that is not a trusted proxy (the one the outermost trusted proxy saw;
what a client writes to the left of it is not believed). IPv6 addresses count per /64, the block
one host is usually given.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import time
from collections.abc import Iterable
from functools import lru_cache

from django.conf import settings
from django.core.cache import caches

from artifacts_app.errors import TooManyAttemptsError

log = logging.getLogger(__name__)

UNKNOWN = "unknown"  # no peer address (an in-process test client without one)
_IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@lru_cache(maxsize=8)
def _networks(entries: tuple[str, ...]) -> tuple[_Network, ...]:
    return tuple(ipaddress.ip_network(entry.strip(), strict=False) for entry in entries)


def trusted_networks() -> tuple[_Network, ...]:
    return _networks(tuple(getattr(settings, "ARTIFACTS_TRUSTED_PROXIES", ())))


def _parse(text: str) -> _IPAddress | None:
    """An address as a proxy or the server writes it: bare, ``[v6]``, ``v4:port``, ``[v6]:port``."""
    text = text.strip()
    if not text or len(text) > 64:
        return None
    if text.startswith("["):
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:  # v4:port (a bare IPv6 address has several colons)
        text = text.partition(":")[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _trusted(address: _IPAddress, networks: Iterable[_Network]) -> bool:
    return any(address in network for network in networks)


def _key_of(address: _IPAddress) -> str:
    if isinstance(address, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


def client_address(peer: str | None, forwarded_for: Iterable[str] = ()) -> str:
    """The address failures are counted under: ``peer`` (the TCP peer), or what a trusted proxy
    says in ``forwarded_for`` (the ``X-Forwarded-For`` header values, in the order received)."""
    address = _parse(peer) if peer else None
    if address is None:
        return UNKNOWN if not peer else peer[:64]
    networks = trusted_networks()
    if networks and _trusted(address, networks):
        hops = [hop for value in forwarded_for for hop in value.split(",")]
        for hop in reversed(hops):
            forwarded = _parse(hop)
            if forwarded is None:
                break  # not written by a proxy we trust: the last trusted hop is what we know
            address = forwarded
            if not _trusted(forwarded, networks):
                break
    return _key_of(address)


def request_address(request: object) -> str:
    """``client_address`` of a Django request (WSGI/ASGI ``META``)."""
    meta = getattr(request, "META", {})
    forwarded = meta.get("HTTP_X_FORWARDED_FOR")
    return client_address(meta.get("REMOTE_ADDR"), [forwarded] if forwarded else [])


def scope_address(scope: dict) -> str:
    """``client_address`` of an ASGI scope (websockets, MCP)."""
    client = scope.get("client")
    peer = str(client[0]) if client else None
    forwarded = [
        value.decode("latin-1")
        for key, value in scope.get("headers", ())
        if key.lower() == b"x-forwarded-for"
    ]
    return client_address(peer, forwarded)


def _keys(address: str) -> tuple[str, str]:
    key = f"artifacts:authfail:{address}"
    return key, key + ":until"


def _past_limit(failures: int) -> bool:
    """The rule: an address may fail ``ARTIFACTS_AUTH_FAILURE_LIMIT`` times in its window."""
    return failures > int(settings.ARTIFACTS_AUTH_FAILURE_LIMIT)


def _refusal(until: object, now: float) -> TooManyAttemptsError:
    """The refusal of an address past the limit, until ``until`` (its window's end)."""
    window = int(settings.ARTIFACTS_AUTH_FAILURE_WINDOW)
    wait = math.ceil(until - now) if isinstance(until, int | float) else window
    return TooManyAttemptsError(max(1, min(wait, window)))


def failure(address: str) -> None:
    """Count one failed authentication from ``address``; past the limit, raise
    ``TooManyAttemptsError`` (the entry point answers it instead of its 401)."""
    window = int(settings.ARTIFACTS_AUTH_FAILURE_WINDOW)
    count_key, until_key = _keys(address)
    cache = caches["default"]
    try:
        now = time.time()
        if cache.add(count_key, 1, timeout=window):
            cache.set(until_key, now + window, timeout=window)
            count = 1
        else:
            try:
                count = cache.incr(count_key)
            except ValueError:  # the window closed between the two calls: a new one
                cache.set(count_key, 1, timeout=window)
                cache.set(until_key, now + window, timeout=window)
                count = 1
            if count == 1:
                # Redis' INCR recreated a key that expired in between, without a timeout: give
                # it one, or the address would stay counted for ever.
                cache.touch(count_key, timeout=window)
        if not _past_limit(count):
            return
        until = cache.get(until_key)
    except Exception as exc:
        log.warning("failed authentications are not counted: the cache failed: %r", exc)
        return
    raise _refusal(until, now)


def exceeded(address: str) -> TooManyAttemptsError | None:
    """The refusal ``address`` has earned, without counting anything: when it has used up its
    failures in the window (its next failure would be refused), the ``TooManyAttemptsError`` to
    answer; otherwise None. The login pages ask this before they check a password."""
    count_key, until_key = _keys(address)
    try:
        now = time.time()
        values = caches["default"].get_many([count_key, until_key])
    except Exception as exc:
        log.warning("failed authentications are not read: the cache failed: %r", exc)
        return None
    count = values.get(count_key)
    if not isinstance(count, int) or not _past_limit(count + 1):
        return None
    return _refusal(values.get(until_key), now)


def forget(address: str) -> None:
    """Drop the count of ``address`` (an operator's reset; tests)."""
    caches["default"].delete_many(list(_keys(address)))
