"""Connection plumbing shared by both services: one ``grpc.aio`` channel per event loop, and
service URIs.

A ``grpc.aio`` channel belongs to the event loop it was first used on. ADK creates its services
before any loop runs (``adk web`` builds them while setting up the app) and scripts may call
``asyncio.run`` more than once, so the channel is opened lazily and reopened when the running loop
changes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar
from urllib.parse import urlsplit

import grpc

StubT = TypeVar("StubT")

Metadata = Sequence[tuple[str, str]]


class Connection(Generic[StubT]):
    """A lazily opened channel to ``target`` and the stub over it."""

    def __init__(
        self,
        target: str,
        make_stub: Callable[[grpc.aio.Channel], StubT],
        *,
        credentials: grpc.ChannelCredentials | None,
        options: Sequence[tuple[str, object]] | None,
    ) -> None:
        self.target = target
        self.credentials = credentials
        self._make_stub = make_stub
        self._options = list(options or ())
        self._loop: asyncio.AbstractEventLoop | None = None
        self._channel: grpc.aio.Channel | None = None
        self._stub: StubT | None = None

    def stub(self) -> StubT:
        """The stub for the running event loop, opening a channel on first use in that loop."""
        loop = asyncio.get_running_loop()
        if self._stub is None or self._loop is not loop:
            if self.credentials is None:
                self._channel = grpc.aio.insecure_channel(self.target, options=self._options)
            else:
                self._channel = grpc.aio.secure_channel(
                    self.target, self.credentials, options=self._options
                )
            self._loop = loop
            self._stub = self._make_stub(self._channel)
        return self._stub

    async def close(self) -> None:
        """Closes the channel if it was opened on the running loop (others died with theirs)."""
        channel, loop = self._channel, self._loop
        self._channel = self._stub = self._loop = None
        if channel is not None and loop is asyncio.get_running_loop():
            await channel.close()


def parse_uri(uri: str, default_port: int) -> tuple[str, grpc.ChannelCredentials | None]:
    """The target and credentials a service URI names.

    ``grpc://host:port`` is a plaintext connection, ``grpcs://host:port`` TLS with the system's
    root certificates; without a port, ``default_port`` is used.
    """
    parts = urlsplit(uri)
    if parts.scheme not in ("grpc", "grpcs"):
        raise ValueError(f"expected a grpc:// or grpcs:// URI, got {uri!r}")
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.username:
        raise ValueError(f"a {parts.scheme}:// URI names only host and port, got {uri!r}")
    host = parts.hostname
    if not host:
        raise ValueError(f"{uri!r} names no host")
    if ":" in host:
        host = f"[{host}]"
    target = f"{host}:{parts.port or default_port}"
    credentials = grpc.ssl_channel_credentials() if parts.scheme == "grpcs" else None
    return target, credentials


def translate(error: grpc.aio.AioRpcError) -> Exception:
    """The exception an ADK caller expects for a failed call without a more specific meaning.

    Malformed input (INVALID_ARGUMENT: the message names the field) becomes ``ValueError``, as
    ADK's own services raise for bad input; any other failure (UNAVAILABLE, DEADLINE_EXCEEDED ...)
    stays the ``grpc.aio.AioRpcError``, which carries its status code.
    """
    if error.code() == grpc.StatusCode.INVALID_ARGUMENT:
        return ValueError(error.details() or "")
    return error
