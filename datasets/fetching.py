"""Fetching a dataset from a URL on the portal, without letting a URL reach the portal's
own network.

Every address a host name resolves to must be a public one, or inside the networks an
admin allows (NIGHTSHIFT_DATASET_URL_ALLOW). The connection then goes to the address that
was checked, with the host name kept for the Host header and for TLS (SNI and certificate
checks), so that a second DNS answer cannot swap in another address. Redirects are followed
by hand, a few at most, and each new target is checked the same way.
"""

from __future__ import annotations

import hashlib
import ipaddress
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urljoin, urlsplit, urlunsplit

import httpx
from django.conf import settings

MOST_REDIRECTS = 3
TIMEOUT = httpx.Timeout(30.0, read=120.0)


class FetchError(ValueError):
    """A URL the portal will not fetch, or a fetch that failed; the message says why."""


@dataclass(frozen=True)
class Fetched:
    path: Path
    size: int
    sha256: str
    final_url: str


def _allowed(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if any(address in network for network in settings.DATASET_URL_ALLOW):
        return True
    return address.is_global and not address.is_multicast


def checked_url(url: str) -> str:
    """The URL, if its form is one the portal fetches (the address is checked at fetch time)."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise FetchError("Give an https:// URL.")
    if parts.username or parts.password:
        raise FetchError("Leave credentials out of the URL.")
    if any(ord(character) < 33 for character in url.strip()):
        raise FetchError("The URL holds spaces or control characters.")
    return urlunsplit(parts)


def _address_of(host: str, port: int) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    try:
        answers = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise FetchError(f"{host} cannot be found.") from None
    addresses = [ipaddress.ip_address(answer[4][0].split("%")[0]) for answer in answers]
    refused = [str(address) for address in addresses if not _allowed(address)]
    if refused or not addresses:
        raise FetchError(
            f"{host} is at a private, loopback or link-local address ({', '.join(refused)}), "
            "which datasets may not be fetched from here. An admin can allow a network with "
            "NIGHTSHIFT_DATASET_URL_ALLOW."
        )
    return addresses[0]


def _target(url: str) -> tuple[str, dict, dict]:
    """(the URL by address, headers, extensions) for one request to `url`."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    address = _address_of(parts.hostname, port)
    if parts.scheme == "http" and not any(address in n for n in settings.DATASET_URL_ALLOW):
        raise FetchError("Plain http:// is only for networks an admin allows; use https://.")
    literal = f"[{address}]" if address.version == 6 else str(address)
    by_address = urlunsplit((parts.scheme, f"{literal}:{port}", parts.path or "/", parts.query,
                             ""))  # fmt: skip
    host = parts.hostname if parts.port is None else f"{parts.hostname}:{parts.port}"
    return by_address, {"Host": host}, {"sni_hostname": parts.hostname}


def file_name_of(url: str) -> str:
    name = PurePosixPath(unquote(urlsplit(url).path)).name
    return name if name and name not in (".", "..") else "download"


def fetch(
    url: str, folder: Path, *, max_bytes: int, progress: Callable[[int, int | None], None]
) -> Fetched:
    """Downloads `url` into `folder`, hashing as it goes, within `max_bytes`."""
    for _ in range(MOST_REDIRECTS + 1):
        by_address, headers, extensions = _target(url)
        try:
            with httpx.Client(timeout=TIMEOUT, follow_redirects=False, trust_env=False) as client:
                request = client.build_request("GET", by_address, headers=headers,
                                               extensions=extensions)  # fmt: skip
                response = client.send(request, stream=True)
                if response.is_redirect:
                    url = checked_url(urljoin(url, response.headers.get("location", "")))
                    continue
                if response.status_code != 200:
                    raise FetchError(f"The server answered {response.status_code} "
                                     f"{response.reason_phrase}.")  # fmt: skip
                return _save(response, url, folder, max_bytes, progress)
        except httpx.HTTPError as exc:
            raise FetchError(f"The download failed: {exc}.") from None
    raise FetchError(f"More than {MOST_REDIRECTS} redirects.")


def _save(response: httpx.Response, url: str, folder: Path, max_bytes: int, progress) -> Fetched:
    declared = response.headers.get("content-length")
    total = int(declared) if declared and declared.isdigit() else None
    if total is not None and total > max_bytes:
        raise FetchError(f"The file is {total / 2**30:.1f} GB, over the limit for a dataset.")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / file_name_of(url)
    digest, size = hashlib.sha256(), 0
    with open(path, "xb") as out:
        for chunk in response.iter_bytes(1 << 20):
            size += len(chunk)
            if size > max_bytes:
                raise FetchError("The file is larger than the limit for a dataset.")
            digest.update(chunk)
            out.write(chunk)
            progress(size, total)
    return Fetched(path, size, digest.hexdigest(), url)
