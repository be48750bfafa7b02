"""Where a webhook may send: the URL rule and the address rule (API.md "Webhooks", "URLs").

A URL is ``https://`` (``http://`` only with ``ARTIFACTS_WEBHOOK_ALLOW_HTTP``), an ASCII host name
or an IP literal, no credentials, no fragment, the default port or one above 1023. An address is
allowed when it is public: never loopback, private, link-local (the clouds' metadata addresses),
multicast, unspecified, reserved, shared (100.64.0.0/10), "this network" (0.0.0.0/8), nor an IPv6
form that carries an IPv4 address (IPv4-mapped, NAT64, 6to4, Teredo) — unless it lies in one of
``ARTIFACTS_WEBHOOK_ALLOWED_NETWORKS`` (development, tests). The address rule is asked of the
address actually connected to, at every connection (``transport``), not only of the name at
creation: a name that later resolves elsewhere cannot lead a delivery inside.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

from artifacts_app.errors import ArtifactError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# IPv6 ranges that embed an IPv4 address: reaching them can reach that IPv4 address.
_EMBEDDING = tuple(
    ipaddress.ip_network(n)
    for n in ("::ffff:0:0/96", "64:ff9b::/96", "64:ff9b:1::/48", "2002::/16", "2001::/32", "::/96")
)
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
MAX_URL = 2048


class InvalidWebhookUrl(ArtifactError):
    def __init__(self, message: str) -> None:
        super().__init__("invalid_webhook_url", message)


@dataclass(frozen=True)
class Target:
    """A URL that passed the URL rule: what to connect to and what to ask for."""

    url: str
    scheme: str
    host: str  # a lower-case name, or an IP address's text (without brackets)
    port: int
    ip: IPAddress | None  # the host, when it is an IP literal


def allowed_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    return [
        ipaddress.ip_network(n, strict=False)
        for n in getattr(settings, "ARTIFACTS_WEBHOOK_ALLOWED_NETWORKS", [])
    ]


def address_problem(address: IPAddress) -> str | None:
    """Why a delivery may not connect to ``address``, or None when it may."""
    for network in allowed_networks():
        if address.version == network.version and address in network:
            return None
    if isinstance(address, ipaddress.IPv6Address):
        for network in _EMBEDDING:
            if address in network:
                return f"{address} is an IPv6 form of an IPv4 address ({network})"
    if address.is_multicast:
        return f"{address} is a multicast address"
    if not address.is_global:
        return f"{address} is not a public address (loopback, private, link-local or reserved)"
    return None


def parse(url: object) -> Target:
    """The URL rule (``InvalidWebhookUrl`` with the reason); no name is looked up here."""
    if not isinstance(url, str) or not url:
        raise InvalidWebhookUrl("`url` must be a non-empty string.")
    if len(url) > MAX_URL:
        raise InvalidWebhookUrl(f"`url` is longer than {MAX_URL} characters.")
    if not url.isascii() or any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise InvalidWebhookUrl(
            "`url` must be ASCII without spaces; internationalized names are not accepted."
        )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise InvalidWebhookUrl(f"`url` is not a valid URL: {exc}.") from None
    scheme = parts.scheme.lower()
    plain_ok = bool(getattr(settings, "ARTIFACTS_WEBHOOK_ALLOW_HTTP", False))
    if scheme != "https" and not (scheme == "http" and plain_ok):
        raise InvalidWebhookUrl("`url` must start with https://.")
    if "@" in parts.netloc or parts.username is not None:
        raise InvalidWebhookUrl("`url` must not carry credentials (user:password@).")
    if parts.fragment or url.endswith("#"):
        raise InvalidWebhookUrl("`url` must not have a fragment (#…).")
    host = (parts.hostname or "").lower()
    if not host:
        raise InvalidWebhookUrl("`url` has no host.")
    default = 443 if scheme == "https" else 80
    if port is None:
        port = default
    elif port != default and not 1024 <= port <= 65535:
        raise InvalidWebhookUrl(f"`url`'s port {port} is not allowed: use {default} or 1024–65535.")
    ip: IPAddress | None
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        ip = None
        labels = host.removesuffix(".").split(".")
        if len(host) > 253 or not all(_LABEL.match(label) for label in labels):
            raise InvalidWebhookUrl(f"`url`'s host {host!r} is not a valid host name.") from None
        if any(label.startswith("xn--") for label in labels):
            raise InvalidWebhookUrl(
                "`url`'s host is an internationalized name; it is not accepted."
            ) from None
        if labels[-1].isdigit():
            # 2130706433, 0x7f.1, 127.1: forms resolvers read as IPv4 addresses.
            raise InvalidWebhookUrl(f"`url`'s host {host!r} is not a valid host name.") from None
    return Target(url=url, scheme=scheme, host=host, port=port, ip=ip)


def resolve(target: Target) -> list[IPAddress]:
    """The addresses ``target``'s host stands for now (``OSError`` when it does not resolve)."""
    if target.ip is not None:
        return [target.ip]
    found = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    addresses: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in found:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in addresses:
            addresses.append(address)
    return addresses


def vetted(target: Target) -> tuple[list[IPAddress], list[str]]:
    """The addresses a delivery may connect to now, and why the others may not."""
    allowed, refused = [], []
    for address in resolve(target):
        problem = address_problem(address)
        if problem is None:
            allowed.append(address)
        else:
            refused.append(problem)
    return allowed, refused


def check(url: object) -> Target:
    """The URL rule, then the address rule on every address its host resolves to now: the check
    at creation (``InvalidWebhookUrl`` with the reason)."""
    target = parse(url)
    try:
        allowed, refused = vetted(target)
    except OSError:
        raise InvalidWebhookUrl(f"`url`'s host {target.host!r} does not resolve.") from None
    if refused or not allowed:
        raise InvalidWebhookUrl(
            "`url` leads to an address deliveries may not reach: "
            + "; ".join(refused or ["no address"])
            + "."
        )
    return target
