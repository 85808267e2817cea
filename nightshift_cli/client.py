"""A thin client of the REST API: JSON in and out, its errors as ApiError, uploads and
downloads with progress."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import httpx

USER_AGENT = "nightshift-cli/1"
# Requests that may be sent twice without changing anything.
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "DELETE"})
# A server closes an idle kept-alive connection when it likes; a request sent on it just
# then meets a reset or an empty answer. Those, not timeouts, are worth one more try.
DROPPED_CONNECTION = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)


class ApiError(Exception):
    """What the server (or the network) said went wrong, in words for the user."""

    def __init__(
        self,
        message: str,
        *,
        code: str = "error",
        status: int = 0,
        fields: dict[str, list[str]] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status
        self.fields = fields or {}


class ProgressReader:
    """A file whose reads advance a progress callback, for uploads."""

    def __init__(self, stream: IO[bytes], advance: Callable[[int], None]) -> None:
        self._stream = stream
        self._advance = advance

    def read(self, size: int = -1) -> bytes:
        data = self._stream.read(size)
        self._advance(len(data))
        return data

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class Client:
    def __init__(self, server: str, token: str | None, *, timeout: float = 60.0) -> None:
        self.server = server.rstrip("/")
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(
            base_url=f"{self.server}/api/v1",
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=10.0),
            follow_redirects=False,
        )

    def close(self) -> None:
        self._http.close()

    def auth_headers(self) -> dict[str, str]:
        """What another HTTP client (the resumable uploader's) sends to sign in."""
        token = self._http.headers.get("Authorization")
        return {"Authorization": token, "User-Agent": USER_AGENT} if token else {}

    def _request(self, request: httpx.Request, *, stream: bool = False) -> httpx.Response:
        """Sends it; an idempotent request whose kept-alive connection was dropped under it
        is sent once more, on a new connection."""
        try:
            return self._http.send(request, stream=stream)
        except DROPPED_CONNECTION:
            if request.method not in IDEMPOTENT:
                raise
            return self._http.send(request, stream=stream)

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        timeout = kwargs.pop("timeout", httpx.USE_CLIENT_DEFAULT)
        try:
            request = self._http.build_request(method, path, timeout=timeout, **kwargs)
            response = self._request(request)
        except httpx.TransportError as exc:
            raise ApiError(
                f"Cannot reach Nightshift at {self.server} ({exc.__class__.__name__}: {exc}).",
                code="unreachable",
            ) from None
        if response.is_error:
            raise error_from(response)
        return response

    def get(self, path: str, **params: Any) -> Any:
        clean = {key: value for key, value in params.items() if value is not None}
        return self._send("GET", path, params=clean).json()

    def post(self, path: str, json: dict | None = None, **kwargs: Any) -> Any:
        return self._send("POST", path, json=json, **kwargs).json()

    def put(self, path: str, json: dict) -> Any:
        return self._send("PUT", path, json=json).json()

    def delete(self, path: str) -> None:
        self._send("DELETE", path)

    def upload(self, path: str, data: dict, files: dict[str, tuple[str, IO[bytes]]]) -> Any:
        # Large project archives take a while: no overall timeout, only between bytes.
        return self._send(
            "POST", path, data=data, files=files, timeout=httpx.Timeout(None, connect=10.0)
        ).json()

    def stream(self, path: str) -> Iterator[tuple[int | None, Iterator[bytes]]]:
        """Yields (total size or None, chunks) for a download."""
        request = self._http.build_request("GET", path, timeout=httpx.Timeout(None, connect=10.0))
        try:
            response = self._request(request, stream=True)
        except httpx.TransportError as exc:
            raise ApiError(
                f"Cannot reach Nightshift at {self.server} ({exc}).", code="unreachable"
            ) from None
        try:
            if response.is_error:
                response.read()
                raise error_from(response)
            length = response.headers.get("Content-Length")
            yield (int(length) if length and length.isdigit() else None), response.iter_bytes()
        finally:
            response.close()


def error_from(response: httpx.Response) -> ApiError:
    try:
        error = response.json()["error"]
        return ApiError(
            error["message"],
            code=error.get("code", "error"),
            status=response.status_code,
            fields=error.get("fields"),
        )
    except (ValueError, KeyError, TypeError):
        snippet = " ".join(response.text.split())[:200]
        return ApiError(
            f"The server answered HTTP {response.status_code} {response.reason_phrase}"
            + (f": {snippet}" if snippet else "."),
            status=response.status_code,
        )


def safe_destination(root: Path, relative: str) -> Path:
    """Where an output file goes under `root`; never outside it, whatever the server says."""
    parts = [part for part in relative.replace("\\", "/").split("/") if part not in ("", ".")]
    if not parts or ".." in parts or os.path.isabs(relative):
        raise ApiError(f"Refusing to write {relative!r}: it would land outside {root}.")
    return root.joinpath(*parts)
