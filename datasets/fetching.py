"""Fetching a dataset from a URL on the portal, without letting a URL reach the portal's
own network.

plumbing.outbound checks each address and pins the connection to it; the networks an admin
allows are NIGHTSHIFT_DATASET_URL_ALLOW. Redirects are followed by hand, a few at most, and
each new target is checked the same way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import unquote, urljoin, urlsplit

import httpx
from django.conf import settings

from plumbing import outbound

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


def checked_url(url: str) -> str:
    """The URL, if its form is one the portal fetches (the address is checked at fetch time)."""
    try:
        return outbound.checked_url(url)
    except outbound.OutboundRefused as exc:
        raise FetchError(str(exc)) from None


def _target(url: str) -> outbound.Target:
    try:
        return outbound.target(
            url, allow=settings.DATASET_URL_ALLOW, setting="NIGHTSHIFT_DATASET_URL_ALLOW"
        )
    except outbound.OutboundRefused as exc:
        raise FetchError(str(exc)) from None


def file_name_of(url: str) -> str:
    name = PurePosixPath(unquote(urlsplit(url).path)).name
    return name if name and name not in (".", "..") else "download"


def fetch(
    url: str, folder: Path, *, max_bytes: int, progress: Callable[[int, int | None], None]
) -> Fetched:
    """Downloads `url` into `folder`, hashing as it goes, within `max_bytes`."""
    for _ in range(MOST_REDIRECTS + 1):
        way = _target(url)
        try:
            with httpx.Client(timeout=TIMEOUT, follow_redirects=False, trust_env=False) as client:
                request = client.build_request(
                    "GET", way.url, headers=way.headers, extensions=way.extensions
                )
                response = client.send(request, stream=True)
                if response.is_redirect:
                    url = checked_url(urljoin(url, response.headers.get("location", "")))
                    continue
                if response.status_code != 200:
                    raise FetchError(
                        f"The server answered {response.status_code} {response.reason_phrase}."
                    )
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
