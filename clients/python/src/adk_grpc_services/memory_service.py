"""``GrpcMemoryService``: ADK's ``BaseMemoryService`` served by memory-svc over gRPC.

Drop-in for ``InMemoryMemoryService``: the same scope (app, user), the same ingestion rules
(events with content; a session re-added replaces its entries; the first copy of an event id
wins; a deleted id is never ingested again), but ranked BM25 search and durable storage on the
server. Search results are ``MemoryEntry`` objects shaped as ADK's in-memory service shapes
them: the event id, the whole content, the author, and the event time as a naive local-time ISO
string (M1.5).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

import grpc
from google.adk.events.event import Event
from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions.session import Session

from . import timestamps
from ._channel import Metadata, ServiceClient, ignore_adk_options, translate
from ._proto.adk.memory.v1 import memory_pb2 as mpb
from ._proto.adk.memory.v1 import memory_pb2_grpc as mpb_grpc
from .mapping import (
    content_from_proto,
    content_to_proto,
    dumps,
    event_to_proto,
    json_safe,
    loads_object,
    session_to_proto,
)

DEFAULT_PORT = 50052


class GrpcMemoryService(ServiceClient[mpb_grpc.MemoryServiceStub], BaseMemoryService):
    """A memory service that stores memories in memory-svc.

    Args:
      target: the server's address (give this or ``uri``), e.g. ``"localhost:50052"``.
      uri: a service URI instead of ``target``: ``grpc://host[:port]`` or ``grpcs://...`` with
        query parameters ``token_env``, ``ca_file``, ``timeout`` and ``grpc.*`` channel options
        (see the README); what it leaves out comes from ``ADK_GRPC_*`` environment variables.
        ADK's ``services.yaml`` registration constructs the class this way.
      adk_options: what ADK's service factories pass besides ``uri`` (``agents_dir``);
        ignored, with a warning for anything else.
      credentials: channel credentials for TLS; plaintext when None.
      options: gRPC channel options.
      metadata: sent with every call, e.g. ``[("authorization", "Bearer ...")]``.
      timeout: seconds allowed per call; None waits as long as the channel does.
      search_limit: most memories a search returns (ADK's in-memory service returns 10; the
        server serves at most 100).
      search_language: the language of search queries as an ISO 639-1 code (``"de"``), for
        every search that does not name one; None lets the server detect it (falling back to
        its ``--default-language``).
    """

    def __init__(
        self,
        target: str | None = None,
        *,
        uri: str | None = None,
        credentials: grpc.ChannelCredentials | None = None,
        options: Sequence[tuple[str, Any]] | None = None,
        metadata: Metadata | None = None,
        timeout: float | None = None,
        search_limit: int = 10,
        search_language: str | None = None,
        **adk_options: Any,
    ) -> None:
        ignore_adk_options(adk_options, "memory")
        self._connect(
            target,
            uri,
            mpb_grpc.MemoryServiceStub,
            default_port=DEFAULT_PORT,
            kind="memory",
            credentials=credentials,
            options=options,
            metadata=metadata,
            timeout=timeout,
        )
        self._search_limit = search_limit
        self._search_language = search_language

    @classmethod
    def from_uri(cls, uri: str) -> GrpcMemoryService:
        """A service for ``grpc://host[:port]`` (plaintext) or ``grpcs://host[:port]`` (TLS),
        with the query parameters and environment variables ``uri=`` takes."""
        return cls(uri=uri)

    async def add_session_to_memory(self, session: Session) -> None:
        """Replaces the session's memories with its events that have content.

        The session is sent by value, so what is remembered is exactly the caller's copy.
        """
        request = mpb.AddSessionToMemoryRequest(session=session_to_proto(session))
        await self._invoke("AddSessionToMemory", request)

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Adds events with content; an event id already remembered for that session is skipped.

        ``custom_metadata`` is attached to every new memory and comes back in search results.
        """
        request = mpb.AddEventsToMemoryRequest(
            app_name=app_name,
            user_id=user_id,
            session_id=session_id or "",
            events=[event_to_proto(e) for e in events],
            custom_metadata=_metadata_text(custom_metadata),
        )
        await self._invoke("AddEventsToMemory", request)

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        """Writes memories directly; an entry without an id gets one from the server.

        ``custom_metadata`` applies to every entry, under each entry's own keys. A timestamp
        must be ISO 8601 (naive means local time, as ADK writes them); it comes back from
        search as naive local time.
        """
        request = mpb.AddMemoryRequest(
            app_name=app_name,
            user_id=user_id,
            memories=[_entry_to_proto(m) for m in memories],
            custom_metadata=_metadata_text(custom_metadata),
        )
        await self._invoke("AddMemory", request)

    async def search_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        query: str,
        mode: SearchMode = "auto",
        language: str | None = None,
    ) -> SearchMemoryResponse:
        """The memories of (app, user) that best match ``query``, best first.

        ``mode`` says how they are ranked: ``"keyword"`` (BM25), ``"semantic"`` (nearest by
        meaning; needs memory-svc started with ``--embedder``), ``"hybrid"`` (both, fused) or
        ``"auto"`` (ADK's ``load_memory`` and ``preload_memory`` use it: hybrid when memory-svc
        has an embedding model, else keyword).

        ``language`` (an ISO 639-1 code such as ``"de"``) is the query's language, instead of
        the constructor's ``search_language`` or the detected one: the query's words are
        reduced to their stems in it. A language the server does not know is a ``ValueError``.
        """
        request = mpb.SearchMemoryRequest(
            app_name=app_name,
            user_id=user_id,
            query=query,
            limit=self._search_limit,
            mode=_MODES[mode],
            language=language or self._search_language or "",
        )
        reply: mpb.SearchMemoryResponse = await self._invoke("SearchMemory", request)
        return SearchMemoryResponse(memories=[_entry_from_proto(m) for m in reply.memories])

    async def delete_memory(
        self, *, app_name: str, user_id: str, memory_id: str | None = None
    ) -> None:
        """Deletes every memory of the user with this id; the id is never ingested again.

        A missing or empty id deletes nothing, as in ADK's in-memory service (M1.6).
        """
        if not memory_id:
            return
        request = mpb.DeleteMemoryRequest(app_name=app_name, user_id=user_id, memory_id=memory_id)
        await self._invoke("DeleteMemory", request)

    async def _invoke(self, method: str, request: Any) -> Any:
        try:
            return await getattr(await self._stub(), method)(request, **self._call())
        except grpc.aio.AioRpcError as e:
            raise translate(e) from e


SearchMode = Literal["auto", "keyword", "semantic", "hybrid"]
"""How ``search_memory`` ranks (see ``SearchMode`` in memory.proto)."""

_MODES: dict[str, mpb.SearchMode] = {
    "auto": mpb.SEARCH_MODE_AUTO,
    "keyword": mpb.SEARCH_MODE_KEYWORD,
    "semantic": mpb.SEARCH_MODE_SEMANTIC,
    "hybrid": mpb.SEARCH_MODE_HYBRID,
}


def _metadata_text(custom_metadata: Mapping[str, object] | None) -> str:
    return dumps(json_safe(dict(custom_metadata))) if custom_metadata else ""


def _entry_to_proto(entry: MemoryEntry) -> mpb.MemoryEntry:
    message = mpb.MemoryEntry(
        id=entry.id or "",
        content=content_to_proto(entry.content),
        author=entry.author or "",
        custom_metadata=dumps(json_safe(entry.custom_metadata)) if entry.custom_metadata else "",
    )
    if entry.timestamp is not None:
        message.timestamp.CopyFrom(timestamps.from_iso(entry.timestamp))
    return message


def _entry_from_proto(message: mpb.MemoryEntry) -> MemoryEntry:
    return MemoryEntry(
        id=message.id or None,
        content=content_from_proto(message.content),
        author=message.author or None,
        timestamp=timestamps.to_local_iso(message.timestamp)
        if message.HasField("timestamp")
        else None,
        custom_metadata=loads_object(message.custom_metadata, "MemoryEntry.custom_metadata"),
    )
