"""Connection plumbing shared by both services: one ``grpc.aio`` channel per event loop, service
URIs, and the message limits.

A ``grpc.aio`` channel belongs to the event loop it was first used on, and ADK apps use one
service object from several loops: ``Runner.run`` drives ``run_async`` on a thread of its own,
sync web frameworks call ``asyncio.run`` per request, scripts call it more than once. So each loop
gets its own channel, opened on its first call and closed when the loop shuts down: the channel
is tied to an async generator that the loop itself closes in ``shutdown_asyncgens()``
(``asyncio.run``, ``asyncio.Runner``, uvloop and pytest-asyncio all call it before closing
their loop), and that generator's ``finally`` closes the channel on its own loop. A loop closed
without that step leaves its channel to be dropped on the next first use in another loop; grpc
closes a dropped channel's connections when the channel is collected.
"""

from __future__ import annotations

import asyncio
import logging
import math
import os
import threading
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar
from urllib.parse import parse_qsl, urlsplit

import grpc

StubT = TypeVar("StubT")

Metadata = Sequence[tuple[str, str]]

# The servers accept events of up to 16 MiB (--max-event-bytes) in requests of up to 17 MiB (the
# event plus 1 MiB for the rest); the client sends and receives messages of the same size.
# Replies stay below it: GetSession and ListEvents are asked for at most READ_BUDGET_BYTES of
# events per reply (one event past the budget at most, so a 16 MiB event still comes back).
MAX_MESSAGE_BYTES = (16 << 20) + (1 << 20)
READ_BUDGET_BYTES = 4 << 20

_DEFAULT_OPTIONS: dict[str, object] = {
    "grpc.max_receive_message_length": MAX_MESSAGE_BYTES,
    "grpc.max_send_message_length": MAX_MESSAGE_BYTES,
}

logger = logging.getLogger("adk_grpc_services")


@dataclass
class _Opened(Generic[StubT]):
    """One loop's channel, its stub, and the generator its loop closes at shutdown."""

    channel: grpc.aio.Channel
    stub: StubT
    closer: AsyncGenerator[None, None] | None = field(default=None)


class Connection(Generic[StubT]):
    """Channels to ``target``, one per event loop, and the stub over each.

    Safe to use from several threads at once, each running its own loop.
    """

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
        # The caller's options win over the defaults.
        self._options = list({**_DEFAULT_OPTIONS, **dict(options or ())}.items())
        self._lock = threading.Lock()
        self._by_loop: dict[asyncio.AbstractEventLoop, _Opened[StubT]] = {}

    async def stub(self) -> StubT:
        """The stub for the running event loop, opening a channel on first use in that loop."""
        loop = asyncio.get_running_loop()
        opened = self._by_loop.get(loop)
        if opened is None:
            opened = await self._open(loop)
        return opened.stub

    def open_channels(self) -> int:
        """How many loops hold a channel of this connection now."""
        with self._lock:
            return len(self._by_loop)

    async def _open(self, loop: asyncio.AbstractEventLoop) -> _Opened[StubT]:
        with self._lock:
            opened = self._by_loop.get(loop)
            if opened is not None:
                return opened
            self._drop_closed_loops()
            if self.credentials is None:
                channel = grpc.aio.insecure_channel(self.target, options=self._options)
            else:
                channel = grpc.aio.secure_channel(
                    self.target, self.credentials, options=self._options
                )
            opened = _Opened(channel, self._make_stub(channel))
            self._by_loop[loop] = opened
        # Starting the generator here hands it to this loop's shutdown_asyncgens(). Its first
        # step never suspends, so no other task of this loop runs in between.
        closer = self._closer(loop, channel)
        await closer.__anext__()
        opened.closer = closer
        return opened

    async def _closer(
        self, loop: asyncio.AbstractEventLoop, channel: grpc.aio.Channel
    ) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            with self._lock:
                opened = self._by_loop.get(loop)
                if opened is not None and opened.channel is channel:
                    del self._by_loop[loop]
            await channel.close()

    def _drop_closed_loops(self) -> None:
        """Forgets the channels of loops closed without shutting down their generators (called
        with the lock held); each channel closes its connections once collected."""
        for loop in [loop for loop in self._by_loop if loop.is_closed()]:
            del self._by_loop[loop]

    async def close(self) -> None:
        """Closes the running loop's channel and drops those of closed loops.

        A channel can only be closed on its own loop: channels of loops still running elsewhere
        stay open for their calls in progress and close when those loops shut down.
        """
        loop = asyncio.get_running_loop()
        with self._lock:
            self._drop_closed_loops()
            opened = self._by_loop.pop(loop, None)
        if opened is None:
            return
        if opened.closer is not None:
            # Runs the generator's finally, which closes the channel.
            await opened.closer.aclose()
        else:
            await opened.channel.close()


@dataclass(frozen=True)
class Endpoint:
    """Everything a service URI (and the environment) says about how to reach a server."""

    target: str
    credentials: grpc.ChannelCredentials | None = None
    options: tuple[tuple[str, object], ...] = ()
    metadata: tuple[tuple[str, str], ...] = ()
    timeout: float | None = None


ClientT = TypeVar("ClientT", bound="ServiceClient[Any]")


class ServiceClient(Generic[StubT]):
    """What both services share: the connection to their server (one channel per event loop),
    the metadata and timeout of every call, ``target``, ``close`` and ``async with``."""

    _connection: Connection[StubT]
    _metadata: Metadata
    _timeout: float | None

    def _connect(
        self,
        target: str | None,
        uri: str | None,
        stub: Callable[[grpc.aio.Channel], StubT],
        *,
        default_port: int,
        kind: str,
        credentials: grpc.ChannelCredentials | None,
        options: Sequence[tuple[str, Any]] | None,
        metadata: Metadata | None,
        timeout: float | None,
    ) -> None:
        where = endpoint(
            target,
            uri,
            default_port=default_port,
            kind=kind,
            credentials=credentials,
            options=options,
            metadata=metadata,
            timeout=timeout,
        )
        self._connection = Connection(
            where.target, stub, credentials=where.credentials, options=where.options
        )
        self._metadata = where.metadata
        self._timeout = where.timeout

    @property
    def target(self) -> str:
        """The server address this service talks to."""
        return self._connection.target

    async def close(self) -> None:
        """Closes the running loop's channel; the service reopens one if used again.

        Channels of loops still running on other threads close when those loops shut down.
        """
        await self._connection.close()

    async def __aenter__(self: ClientT) -> ClientT:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def _stub(self) -> StubT:
        return await self._connection.stub()

    def _call(self) -> dict[str, Any]:
        """The keyword arguments of every call: its timeout and metadata."""
        return {"timeout": self._timeout, "metadata": self._metadata}


def endpoint(
    target: str | None,
    uri: str | None,
    *,
    default_port: int,
    kind: str,
    credentials: grpc.ChannelCredentials | None,
    options: Sequence[tuple[str, Any]] | None,
    metadata: Metadata | None,
    timeout: float | None,
) -> Endpoint:
    """Where and how a service connects: a ``target`` address, or a service ``uri`` (see
    ``parse_uri``), with the constructor's own arguments added to (and winning over) what the
    URI says."""
    if uri is None:
        if target is None:
            raise ValueError("give a target address or a uri=")
        return Endpoint(target, credentials, tuple(options or ()), tuple(metadata or ()), timeout)
    if target is not None:
        raise ValueError("give a target address or a uri=, not both")
    parsed = parse_uri(uri, default_port=default_port, kind=kind)
    return Endpoint(
        parsed.target,
        credentials or parsed.credentials,
        (*parsed.options, *(options or ())),
        (*parsed.metadata, *(metadata or ())),
        parsed.timeout if timeout is None else timeout,
    )


def parse_uri(
    uri: str, *, default_port: int, kind: str, environ: Mapping[str, str] | None = None
) -> Endpoint:
    """The endpoint a service URI names.

    ``grpc://host[:port]`` is plaintext, ``grpcs://host[:port]`` TLS (system root certificates
    unless a CA file is given); without a port, ``default_port`` is used. Query parameters:

    - ``token_env=NAME``: send ``authorization: Bearer <the value of $NAME>`` with every call;
    - ``ca_file=PATH``: PEM root certificates for ``grpcs://``;
    - ``timeout=SECONDS``: the deadline of every call;
    - ``grpc.<option>=VALUE``: a gRPC channel option (integers are passed as integers).

    What the URI leaves out comes from the environment: ``ADK_GRPC_<KIND>_TOKEN`` or
    ``ADK_GRPC_TOKEN`` (the token itself), ``ADK_GRPC_<KIND>_CA_FILE`` or ``ADK_GRPC_CA_FILE``
    (used by ``grpcs://`` only), ``ADK_GRPC_<KIND>_TIMEOUT`` or ``ADK_GRPC_TIMEOUT``, where
    ``kind`` is ``SESSION`` or ``MEMORY``.
    """
    env = os.environ if environ is None else environ
    parts = urlsplit(uri)
    if parts.scheme not in ("grpc", "grpcs"):
        raise ValueError(f"expected a grpc:// or grpcs:// URI, got {uri!r}")
    if parts.path not in ("", "/") or parts.fragment or parts.username:
        raise ValueError(
            f"a {parts.scheme}:// URI names host, port and query parameters only, got {uri!r}"
        )
    host = parts.hostname
    if not host:
        raise ValueError(f"{uri!r} names no host")
    if ":" in host:
        host = f"[{host}]"
    target = f"{host}:{parts.port or default_port}"

    def setting(name: str) -> str | None:
        return env.get(f"ADK_GRPC_{kind.upper()}_{name}") or env.get(f"ADK_GRPC_{name}") or None

    token = setting("TOKEN")
    ca_file = setting("CA_FILE") if parts.scheme == "grpcs" else None
    timeout_text = setting("TIMEOUT")
    options: list[tuple[str, object]] = []
    for name, value in parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False):
        if name == "token_env":
            token = env.get(value)
            if not token:
                raise ValueError(f"{uri!r}: token_env names ${value}, which is not set")
        elif name == "ca_file":
            if parts.scheme != "grpcs":
                raise ValueError(f"{uri!r}: ca_file needs a grpcs:// URI")
            ca_file = value
        elif name == "timeout":
            timeout_text = value
        elif name.startswith("grpc."):
            options.append((name, int(value) if value.lstrip("-").isdigit() else value))
        else:
            raise ValueError(
                f"{uri!r}: unknown query parameter {name!r} "
                "(known: token_env, ca_file, timeout, grpc.<channel option>)"
            )
    credentials = None
    if parts.scheme == "grpcs":
        root = None
        if ca_file:
            try:
                with open(ca_file, "rb") as f:
                    root = f.read()
            except OSError as e:
                raise ValueError(f"{uri!r}: cannot read ca_file {ca_file}: {e}") from e
        credentials = grpc.ssl_channel_credentials(root_certificates=root)
    return Endpoint(
        target=target,
        credentials=credentials,
        options=tuple(options),
        metadata=(("authorization", f"Bearer {token}"),) if token else (),
        timeout=_timeout(uri, timeout_text),
    )


def _timeout(uri: str, text: str | None) -> float | None:
    if text is None:
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(f"{uri!r}: timeout must be a positive number of seconds, got {text!r}")
    return seconds


def ignore_adk_options(kwargs: Mapping[str, Any], kind: str) -> None:
    """Warns about options ADK's service factory passed that a remote service cannot use.

    ADK always passes ``agents_dir``, which a remote service has no use for; anything else came
    from the user (e.g. ``--session_db_kwargs``) and deserves a word.
    """
    extra = sorted(k for k in kwargs if k != "agents_dir")
    if extra:
        logger.warning("grpc %s service: ignoring unsupported options %s", kind, extra)


def translate(error: grpc.aio.AioRpcError) -> Exception:
    """The exception an ADK caller expects for a failed call without a more specific meaning.

    Malformed input (INVALID_ARGUMENT: the message names the field) becomes ``ValueError``, as
    ADK's own services raise for bad input; any other failure (UNAVAILABLE, DEADLINE_EXCEEDED ...)
    stays the ``grpc.aio.AioRpcError``, which carries its status code.
    """
    if error.code() == grpc.StatusCode.INVALID_ARGUMENT:
        return ValueError(error.details() or "")
    return error
