"""Requests the portal sends to a URL a user gave (a dataset to fetch, a webhook, a push
service), without letting that URL reach the portal's own network.

Every address a host name resolves to must be a public one, or inside the networks an admin
allows. The connection then goes to the address that was checked, with the host name kept
for the Host header and for TLS (SNI and certificate checks), so that a second DNS answer
cannot swap in another address. Plain http:// is only for the networks an admin allows.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import httpx

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class OutboundRefused(ValueError):
    """A URL the portal will not send to; the message says why."""


@dataclass(frozen=True)
class Target:
    """One request's way to a checked URL: by its address, with the name kept."""

    url: str
    headers: dict[str, str]
    extensions: dict[str, str]


def checked_url(url: str) -> str:
    """The URL, if its form is one the portal sends to (the address is checked later)."""
    text = url.strip()
    parts = urlsplit(text)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise OutboundRefused("Give an https:// URL.")
    if parts.username or parts.password:
        raise OutboundRefused("Leave credentials out of the URL.")
    if any(ord(character) < 33 for character in text):
        raise OutboundRefused("The URL holds spaces or control characters.")
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        raise OutboundRefused("The URL's port is not a number from 1 to 65535.")
    return urlunsplit(parts)


def allowed(address: Address, allow: Iterable[Network]) -> bool:
    if any(address in network for network in allow):
        return True
    return address.is_global and not address.is_multicast


def address_of(host: str, port: int, *, allow: Iterable[Network], setting: str) -> Address:
    """The address `host` resolves to, if every address it has may be reached."""
    allow = list(allow)
    try:
        answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise OutboundRefused(f"{host} cannot be found.") from None
    addresses = [ipaddress.ip_address(answer[4][0].split("%")[0]) for answer in answers]
    refused = [str(address) for address in addresses if not allowed(address, allow)]
    if refused or not addresses:
        raise OutboundRefused(
            f"{host} is at a private, loopback or link-local address ({', '.join(refused)}), "
            f"which the portal does not reach for its users. An admin can allow a network with "
            f"{setting}."
        )
    return addresses[0]


def target(url: str, *, allow: Iterable[Network], setting: str) -> Target:
    """How to send one request to `url` (already `checked_url`) by its checked address."""
    allow = list(allow)
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    address = address_of(parts.hostname, port, allow=allow, setting=setting)
    if parts.scheme == "http" and not any(address in network for network in allow):
        raise OutboundRefused(
            f"Plain http:// is only for networks an admin allows ({setting}); use https://."
        )
    literal = f"[{address}]" if address.version == 6 else str(address)
    netloc = f"{literal}:{port}"
    by_address = urlunsplit((parts.scheme, netloc, parts.path or "/", parts.query, ""))
    host = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
    return Target(by_address, {"Host": host}, {"sni_hostname": parts.hostname})


def post(
    url: str,
    *,
    content: bytes,
    headers: Mapping[str, str],
    allow: Iterable[Network],
    setting: str,
    timeout: float,
) -> httpx.Response:
    """POST `content` to `url` by its checked address; redirects are not followed.

    Raises OutboundRefused for a URL or address the portal does not send to, and
    httpx.HTTPError when the request fails on the way."""
    way = target(checked_url(url), allow=allow, setting=setting)
    with httpx.Client(timeout=timeout, follow_redirects=False, trust_env=False) as client:
        request = client.build_request(
            "POST",
            way.url,
            content=content,
            headers={**headers, **way.headers},
            extensions=way.extensions,
        )
        return client.send(request)
