"""``GrpcMemoryService``: ADK's ``BaseMemoryService`` served by memory-svc over gRPC.

Drop-in for ``InMemoryMemoryService``: the same scope (app, user), the same ingestion rules
(events with content; a session re-added replaces its entries; the first copy of an event id
wins; a deleted id is never ingested again), but ranked BM25 search and durable storage on the
server. Search results are ``MemoryEntry`` objects shaped as ADK's in-memory service shapes
them: the event id, the whole content, the author, and the event time as a naive local-time ISO
string (M1.5).

With memory-svc started with ``--generator``, memories are also *generated*: a model extracts
facts from the conversation and consolidates them with the user's earlier ones, as Vertex AI
Memory Bank does. The ``custom_metadata`` keys ``VertexAiMemoryBankService`` reads for that
(``wait_for_completion``, ``disable_consolidation``, ``ttl``, ``allowed_topics``) work the same
here on ``add_session_to_memory`` and ``add_events_to_memory``, so calls written for Vertex keep
working; searches return generated memories beside raw ones (``kind`` chooses).

Memories know when they were true: searches and listings return what is valid now, or
``as_of`` a time, or with ``include_superseded`` the facts a later one superseded too; the
entries they return are ``TimedMemoryEntry`` objects (``MemoryEntry`` with ``valid_from`` and
``invalid_at``).
"""

from __future__ import annotations

import dataclasses
import datetime
import re
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Literal, Optional

import grpc
from google.adk.events.event import Event
from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions.session import Session

from . import timestamps
from ._channel import Metadata, ServiceClient, ignore_adk_options, translate
from ._proto.adk.memory.v1 import memory_pb2 as mpb
from ._proto.adk.memory.v1 import memory_pb2_grpc as mpb_grpc
from ._proto.adk.session.v1 import session_pb2 as spb
from .mapping import (
    content_from_proto,
    content_to_proto,
    dumps,
    json_safe,
    loads_object,
    memory_events_to_proto,
    memory_session_to_proto,
)

DEFAULT_PORT = 50052


class TimedMemoryEntry(MemoryEntry):
    """A ``MemoryEntry`` as memory-svc returns it, with when what it says was true. Everything
    of ADK reads it as the ``MemoryEntry`` it is (a tool response serializes the ADK fields
    only)."""

    valid_from: Optional[str] = None  # noqa: UP045 (the style of MemoryEntry's fields)
    """When it became true, as ``timestamp`` spells times (ISO 8601, naive local time); None:
    since ever (an event without a time)."""

    invalid_at: Optional[str] = None  # noqa: UP045
    """When it stopped being true (a later fact superseded it); None: it still is."""


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

    async def add_session_to_memory(
        self, session: Session, *, custom_metadata: Mapping[str, object] | None = None
    ) -> None:
        """Replaces the session's memories with its events that have content.

        The session is sent by value, so what is remembered is exactly the caller's copy. When
        ``custom_metadata`` holds a generation key (see ``generation_options``), memories are
        also generated from the session (memory-svc ``--generator``).
        """
        options = generation_options(custom_metadata)
        request = mpb.AddSessionToMemoryRequest(session=memory_session_to_proto(session))
        if options is not None:
            request.generate.CopyFrom(options)
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

        ``custom_metadata`` is attached to every new memory and comes back in search results;
        its generation keys (see ``generation_options``) are not: they generate memories from
        the events as well (memory-svc ``--generator``).
        """
        options = generation_options(custom_metadata)
        kept = {k: v for k, v in (custom_metadata or {}).items() if k not in GENERATION_KEYS}
        proto_events = memory_events_to_proto(events)
        request = mpb.AddEventsToMemoryRequest(
            app_name=app_name,
            user_id=user_id,
            session_id=session_id or "",
            events=proto_events,
            custom_metadata=_metadata_text(kept),
        )
        await self._invoke("AddEventsToMemory", request)
        if options is not None:
            generate = mpb.GenerateMemoriesRequest(
                app_name=app_name,
                user_id=user_id,
                events=mpb.EventList(events=proto_events),
                options=options,
            )
            await self._invoke("GenerateMemories", generate)

    async def generate_memories(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event] = (),
        session: Session | None = None,
        session_id: str | None = None,
        facts: Sequence[str] = (),
        wait_for_completion: bool = False,
        disable_consolidation: bool = False,
        ttl: str | float | datetime.timedelta | None = None,
        allowed_topics: Sequence[object] | None = None,
    ) -> mpb.GenerationJob:
        """Generates memories of (app, user) from ``events``, a ``session`` given by value, or
        the session ``session_id`` that memory-svc fetches from session-svc; or consolidates
        ``facts`` already extracted (no extraction call to the model); returns the job.

        Without ``wait_for_completion`` the job is queued and runs in the background (see
        ``get_generation_job``); with it, this returns once the job has succeeded, and a job
        that failed raises the ``grpc.aio.AioRpcError`` naming the job and why.
        """
        options = _options(
            {
                "wait_for_completion": wait_for_completion,
                "disable_consolidation": disable_consolidation,
                "ttl": ttl,
                "allowed_topics": allowed_topics,
            }
        )
        request = mpb.GenerateMemoriesRequest(app_name=app_name, user_id=user_id, options=options)
        if session is not None:
            request.session.CopyFrom(memory_session_to_proto(session))
        elif session_id:
            request.session_ref.CopyFrom(
                mpb.SessionRef(app_name=app_name, user_id=user_id, session_id=session_id)
            )
        elif facts:
            if events:
                raise ValueError("generate_memories: give events or facts, not both")
            request.facts.CopyFrom(
                mpb.FactList(facts=[mpb.ExtractedFact(text=fact) for fact in facts])
            )
        else:
            request.events.CopyFrom(mpb.EventList(events=memory_events_to_proto(events)))
        reply: mpb.GenerateMemoriesResponse = await self._invoke("GenerateMemories", request)
        return reply.job

    async def get_generation_job(
        self, *, app_name: str, user_id: str, job_id: str
    ) -> mpb.GenerationJob:
        """The state of a generation job of (app, user)."""
        request = mpb.GetGenerationJobRequest(app_name=app_name, user_id=user_id, job_id=job_id)
        job: mpb.GenerationJob = await self._invoke("GetGenerationJob", request)
        return job

    async def list_memory_revisions(
        self, *, app_name: str, user_id: str, memory_id: str | None = None
    ) -> list[mpb.MemoryRevision]:
        """Every change generation made to (app, user)'s memories (to ``memory_id`` only, when
        given), oldest first."""
        revisions: list[mpb.MemoryRevision] = []
        token = ""
        while True:
            request = mpb.ListMemoryRevisionsRequest(
                app_name=app_name,
                user_id=user_id,
                memory_id=memory_id or "",
                page_size=100,
                page_token=token,
            )
            page: mpb.ListMemoryRevisionsResponse = await self._invoke(
                "ListMemoryRevisions", request
            )
            revisions.extend(page.revisions)
            token = page.next_page_token
            if not token:
                return revisions

    async def rollback_memory(
        self, *, app_name: str, user_id: str, memory_id: str, revision_id: str
    ) -> mpb.MemoryRevision:
        """Restores the generated memory ``memory_id`` (a deleted one too) to the fact its
        revision ``revision_id`` (from ``list_memory_revisions``) left it with; returns the
        revision the rollback recorded (action ``REVISION_ACTION_ROLLED_BACK``)."""
        request = mpb.RollbackMemoryRequest(
            app_name=app_name, user_id=user_id, memory_id=memory_id, revision_id=revision_id
        )
        reply: mpb.RollbackMemoryResponse = await self._invoke("RollbackMemory", request)
        return reply.revision

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
        valid_from: datetime.datetime | None = None,
    ) -> None:
        """Writes memories directly; an entry without an id gets one from the server.

        ``custom_metadata`` applies to every entry, under each entry's own keys. A timestamp
        must be ISO 8601 (naive means local time, as ADK writes them); it comes back from
        search as naive local time. Each entry is valid from its own ``valid_from`` (a
        ``TimedMemoryEntry``'s, which may also carry an ``invalid_at``), else ``valid_from``
        (naive: local time), else its timestamp, else the time of the write.
        """
        request = mpb.AddMemoryRequest(
            app_name=app_name,
            user_id=user_id,
            memories=[_entry_to_proto(m, valid_from) for m in memories],
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
        kind: MemoryKind = "all",
        where: Where | None = None,
        filter_groups: Sequence[Mapping[str, object]] | None = None,
        topics: Sequence[str] = (),
        author: str | None = None,
        after: datetime.datetime | None = None,
        before: datetime.datetime | None = None,
        as_of: datetime.datetime | None = None,
        include_superseded: bool = False,
    ) -> SearchMemoryResponse:
        """The memories of (app, user) that best match ``query``, best first.

        ``mode`` says how they are ranked: ``"keyword"`` (BM25), ``"semantic"`` (nearest by
        meaning; needs memory-svc started with ``--embedder``), ``"hybrid"`` (both, fused) or
        ``"auto"`` (ADK's ``load_memory`` and ``preload_memory`` use it: keyword, with the
        ranking by meaning joining in where keyword matches are weak when memory-svc has an
        embedding model).

        ``language`` (an ISO 639-1 code such as ``"de"``) is the query's language, instead of
        the constructor's ``search_language`` or the detected one: the query's words are
        reduced to their stems in it. A language the server does not know is a ``ValueError``.

        ``kind`` chooses raw memories (events and direct writes), generated ones (facts, their
        ``custom_metadata`` saying ``"kind": "generated"``, their topic and source events), or
        ``"all"``.

        The other arguments filter: the ranking is among the memories that pass, and the limit
        applies after filtering. ``where`` holds conditions on ``custom_metadata`` keys as an
        OR of AND groups: ``[[("color", "==", "red"), ("n", ">=", 3)], [("vip", "exists")]]``
        (see ``Where``); ``filter_groups`` takes the same in Vertex AI Memory Bank's shape
        (``[{"filters": [{"key": "n", "value": {"double_value": 3}, "op": "GREATER_THAN"}]}]``).
        ``topics`` keeps memories of these topics, ``author`` those by this author, ``after``
        and ``before`` those whose time is at or after, and before, these times. A condition
        the server cannot use is a ``ValueError`` naming it.

        Only memories valid now are found; ``as_of`` (naive: local time) finds those valid
        then, and ``include_superseded`` also those a later fact superseded. The entries are
        ``TimedMemoryEntry`` objects.
        """
        request = mpb.SearchMemoryRequest(
            app_name=app_name,
            user_id=user_id,
            query=query,
            limit=self._search_limit,
            mode=_MODES[mode],
            language=language or self._search_language or "",
            kind=_KINDS[kind],
            author=author or "",
            include_superseded=include_superseded,
        )
        _set_filter(request, where, filter_groups, topics, after, before)
        if as_of is not None:
            request.as_of.FromDatetime(_aware(as_of))
        reply: mpb.SearchMemoryResponse = await self._invoke("SearchMemory", request)
        return SearchMemoryResponse(memories=[_entry_from_proto(m) for m in reply.memories])

    async def list_memories(
        self,
        *,
        app_name: str,
        user_id: str,
        kind: MemoryKind = "all",
        where: Where | None = None,
        filter_groups: Sequence[Mapping[str, object]] | None = None,
        topics: Sequence[str] = (),
        author: str | None = None,
        after: datetime.datetime | None = None,
        before: datetime.datetime | None = None,
        as_of: datetime.datetime | None = None,
        include_superseded: bool = False,
        page_size: int = 100,
    ) -> AsyncIterator[TimedMemoryEntry]:
        """The memories of (app, user) in ingestion order, fetched ``page_size`` at a time,
        that pass the filters and are valid now, or ``as_of`` a time (the arguments of
        ``search_memory``)."""
        token = ""
        while True:
            request = mpb.ListMemoriesRequest(
                app_name=app_name,
                user_id=user_id,
                page_size=page_size,
                page_token=token,
                kind=_KINDS[kind],
                author=author or "",
                include_superseded=include_superseded,
            )
            _set_filter(request, where, filter_groups, topics, after, before)
            if as_of is not None:
                request.as_of.FromDatetime(_aware(as_of))
            reply: mpb.ListMemoriesResponse = await self._invoke("ListMemories", request)
            for message in reply.memories:
                yield _entry_from_proto(message)
            if not reply.next_page_token:
                return
            token = reply.next_page_token

    async def purge_memories(
        self,
        *,
        app_name: str,
        user_id: str | None = None,
        kind: MemoryKind = "all",
        where: Where | None = None,
        filter_groups: Sequence[Mapping[str, object]] | None = None,
        topics: Sequence[str] = (),
        author: str | None = None,
        after: datetime.datetime | None = None,
        before: datetime.datetime | None = None,
        force: bool = False,
    ) -> PurgeResult:
        """Deletes the memories of ``user_id`` (of every user of the app when None) that pass
        the filters (those of ``search_memory``; at least one is needed), superseded ones too.
        Without ``force`` a dry run: nothing is deleted, and the result says how many match,
        with a sample. A forced purge is one durable operation on the server: cut short by a
        restart, it finishes after it."""
        request = mpb.PurgeMemoriesRequest(
            app_name=app_name,
            user_id=user_id or "",
            kind=_KINDS[kind],
            author=author or "",
            force=force,
        )
        _set_filter(request, where, filter_groups, topics, after, before)
        reply: mpb.PurgeMemoriesResponse = await self._invoke("PurgeMemories", request)
        return PurgeResult(
            count=reply.count,
            sample=[_entry_from_proto(m) for m in reply.sample],
            operation_id=reply.operation_id or None,
        )

    async def append_memory_stream(
        self,
        *,
        app_name: str,
        user_id: str,
        stream_id: str,
        events: Sequence[Event],
    ) -> StreamAppend:
        """Buffers ``events`` (1 to 100) in the event stream ``stream_id`` of (app, user), as
        they happen; a session id is the natural stream id.

        memory-svc keeps the buffer durably, each event id once (an event sent again is not
        buffered again), and starts generation from it by itself once the stream holds its
        app's trigger count of events (``--stream-trigger-events``) or has been quiet for its
        app's quiet time (``--stream-quiet``). Needs memory-svc ``--generator``.
        """
        request = mpb.AppendMemoryStreamRequest(
            app_name=app_name,
            user_id=user_id,
            stream_id=stream_id,
            events=[_stream_event(event) for event in events],
        )
        reply: mpb.AppendMemoryStreamResponse = await self._invoke("AppendMemoryStream", request)
        return StreamAppend(
            appended=reply.appended,
            buffered=reply.buffered,
            job=reply.job if reply.HasField("job") else None,
        )

    async def flush_memory_stream(
        self, *, app_name: str, user_id: str, stream_id: str
    ) -> mpb.GenerationJob | None:
        """Starts generation from the events buffered in the stream now; returns the job (see
        ``get_generation_job``), or None when the stream held no events."""
        request = mpb.FlushMemoryStreamRequest(
            app_name=app_name, user_id=user_id, stream_id=stream_id
        )
        reply: mpb.FlushMemoryStreamResponse = await self._invoke("FlushMemoryStream", request)
        return reply.job if reply.HasField("job") else None

    async def list_memory_streams(self, *, app_name: str, user_id: str) -> list[MemoryStream]:
        """The user's event streams holding buffered events (waiting for generation), by stream
        id. A stream whose events were all handed to generation is not listed."""
        request = mpb.ListMemoryStreamsRequest(app_name=app_name, user_id=user_id)
        reply: mpb.ListMemoryStreamsResponse = await self._invoke("ListMemoryStreams", request)
        return [
            MemoryStream(
                stream_id=s.stream_id,
                buffered=s.buffered,
                last_append_time=timestamps.to_seconds(s.last_append_time),
            )
            for s in reply.streams
        ]

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
    "auto": mpb.SEARCH_MODE_UNSPECIFIED,
    "keyword": mpb.SEARCH_MODE_KEYWORD,
    "semantic": mpb.SEARCH_MODE_SEMANTIC,
    "hybrid": mpb.SEARCH_MODE_HYBRID,
}


MemoryKind = Literal["all", "raw", "generated"]
"""Which memories ``search_memory`` searches (see ``MemoryKind`` in memory.proto)."""

_KINDS: dict[str, mpb.MemoryKind] = {
    "all": mpb.MEMORY_KIND_UNSPECIFIED,
    "raw": mpb.MEMORY_KIND_RAW,
    "generated": mpb.MEMORY_KIND_GENERATED,
}

Condition = tuple[str, str] | tuple[str, str, object]
"""A condition on a ``custom_metadata`` key: ``(key, operator, value)``, the operator one of
``"=="``, ``"!="``, ``"<"``, ``"<="``, ``">"``, ``">="`` (numbers and ``datetime`` values), or
``(key, "exists")``. A value is a ``str``, ``bool``, ``int``/``float`` or a
``datetime.datetime`` (naive: local time), compared with RFC 3339 strings in UTC. ``"!="``
holds for a memory without the key too."""

Where = Sequence[Sequence[Condition]]
"""Conditions as an OR of AND groups: a memory passes when every condition of one group holds."""

_OPERATORS: dict[str, mpb.MetadataOperator] = {
    "==": mpb.METADATA_OPERATOR_EQUAL,
    "!=": mpb.METADATA_OPERATOR_NOT_EQUAL,
    "<": mpb.METADATA_OPERATOR_LESS,
    "<=": mpb.METADATA_OPERATOR_LESS_OR_EQUAL,
    ">": mpb.METADATA_OPERATOR_GREATER,
    ">=": mpb.METADATA_OPERATOR_GREATER_OR_EQUAL,
    "exists": mpb.METADATA_OPERATOR_EXISTS,
}

# Memory Bank's operators (MemoryFilter.op), and with ``negate`` set.
_VERTEX_OPERATORS = {
    "EQUAL": ("==", "!="),
    "GREATER_THAN": (">", "<="),
    "LESS_THAN": ("<", ">="),
}


@dataclasses.dataclass(frozen=True)
class PurgeResult:
    """What ``purge_memories`` found (a dry run) or deleted (forced)."""

    count: int
    """The memories that match, or that were deleted."""
    sample: list[MemoryEntry]
    """Up to 10 of them, in (user, ingestion) order."""
    operation_id: str | None
    """A forced purge's operation id, as the server's log names it."""


@dataclasses.dataclass(frozen=True)
class StreamAppend:
    """What ``append_memory_stream`` did."""

    appended: int
    """The events buffered by the call (those the stream already held, and events without
    content, left out)."""
    buffered: int
    """The events the stream holds after the call, waiting for generation."""
    job: mpb.GenerationJob | None
    """The generation job the call started, when it brought the stream to its trigger
    count."""


@dataclasses.dataclass(frozen=True)
class MemoryStream:
    """An event stream holding events that wait for generation (``list_memory_streams``)."""

    stream_id: str
    buffered: int
    """The events it holds."""
    last_append_time: float
    """When its last event was buffered, in Unix seconds (server time): its quiet time runs
    from there."""


def _stream_event(event: Event) -> spb.Event:
    """An event as a stream takes it: what memory-svc reads of one with content; of one
    without, its id only (the server counts it out, rather than refusing an append of no
    events)."""
    if event.content is None:
        return spb.Event(id=event.id, author=event.author)
    return memory_events_to_proto([event])[0]


def _set_filter(
    request: mpb.SearchMemoryRequest | mpb.ListMemoriesRequest | mpb.PurgeMemoriesRequest,
    where: Where | None,
    filter_groups: Sequence[Mapping[str, object]] | None,
    topics: Sequence[str],
    after: datetime.datetime | None,
    before: datetime.datetime | None,
) -> None:
    groups = list(where or ()) + [_vertex_group(g) for g in filter_groups or ()]
    for group in groups:
        conditions = request.filter.any_of.add()
        for condition in group:
            _condition(conditions.all_of.add(), condition)
    request.filter.topics.extend(topics)
    if after is not None:
        request.after_timestamp.FromDatetime(_aware(after))
    if before is not None:
        request.before_timestamp.FromDatetime(_aware(before))


def _condition(message: mpb.MetadataCondition, condition: Condition) -> None:
    key, operator, *rest = condition
    if operator not in _OPERATORS:
        raise ValueError(f"where: {operator!r} is not an operator ({', '.join(_OPERATORS)})")
    message.key = key
    message.operator = _OPERATORS[operator]
    if not rest:
        return
    (value,) = rest
    if isinstance(value, bool):
        message.bool_value = value
    elif isinstance(value, (int, float)):
        message.number_value = float(value)
    elif isinstance(value, str):
        message.string_value = value
    elif isinstance(value, datetime.datetime):
        message.time_value.FromDatetime(_aware(value))
    else:
        raise ValueError(f"where: {key}: {value!r} is not a str, bool, number or datetime")


def _vertex_group(group: Mapping[str, object]) -> list[Condition]:
    """One of Memory Bank's ``filter_groups`` (a conjunction of ``filters``) as conditions."""
    conditions: list[Condition] = []
    for f in _sequence(group.get("filters"), "filter_groups.filters"):
        if not isinstance(f, Mapping):
            raise ValueError(f"filter_groups: {f!r} is not a filter")
        op = f.get("op", "EQUAL")
        if not isinstance(op, str) or op not in _VERTEX_OPERATORS:
            raise ValueError(f"filter_groups: {op!r} is not an operator")
        operator = _VERTEX_OPERATORS[op][1 if f.get("negate") else 0]
        value = f.get("value")
        if not isinstance(value, Mapping) or len(value) != 1:
            raise ValueError(f"filter_groups: {value!r} is not a metadata value")
        ((kind, typed),) = value.items()
        if kind == "double_value" and isinstance(typed, (int, float)):
            typed = float(typed)
        elif kind not in ("string_value", "bool_value", "timestamp_value"):
            raise ValueError(f"filter_groups: {kind!r} is not a metadata value type")
        conditions.append((str(f.get("key", "")), operator, typed))
    return conditions


def _aware(value: datetime.datetime) -> datetime.datetime:
    """``value`` with its time zone; a naive one is local time, as ADK writes times."""
    return value if value.tzinfo is not None else value.astimezone()


GENERATION_KEYS = frozenset(
    {"wait_for_completion", "disable_consolidation", "ttl", "allowed_topics"}
)
"""The ``custom_metadata`` keys that ask for generation, as ``VertexAiMemoryBankService``
reads them."""

# Memory Bank's managed topics, as the built-in topics of memory-svc name them.
_MANAGED_TOPICS = {
    "USER_PREFERENCES": "preferences",
    "USER_PERSONAL_INFO": "personal_facts",
    "KEY_CONVERSATION_DETAILS": "plans",
    "EXPLICIT_INSTRUCTIONS": "instructions",
}

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def generation_options(custom_metadata: Mapping[str, object] | None) -> mpb.GenerateOptions | None:
    """The generation options ``custom_metadata`` asks for, or None when it names none of
    ``GENERATION_KEYS``:

    - ``wait_for_completion`` (bool): answer once the job is done;
    - ``disable_consolidation`` (bool): add every fact, without comparing it with memories;
    - ``ttl``: how long generated memories live: ``"3600s"`` (Vertex's form), seconds, or a
      ``datetime.timedelta``;
    - ``allowed_topics``: topic labels (``"preferences"``), or Vertex's
      ``{"managed_memory_topic": "USER_PREFERENCES"}`` / ``{"custom_memory_topic_label": ...}``.
    """
    if not custom_metadata or not GENERATION_KEYS.intersection(custom_metadata):
        return None
    return _options(custom_metadata)


def _options(values: Mapping[str, object]) -> mpb.GenerateOptions:
    options = mpb.GenerateOptions(
        wait=bool(values.get("wait_for_completion")),
        disable_consolidation=bool(values.get("disable_consolidation")),
        allowed_topics=[_topic(t) for t in _sequence(values.get("allowed_topics"))],
    )
    ttl = values.get("ttl")
    if ttl is not None:
        options.ttl.FromTimedelta(_timedelta(ttl))
    return options


def _sequence(value: object, name: str = "allowed_topics") -> Sequence[object]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValueError(f"{name}: expected a list, got {value!r}")
    return value


def _topic(topic: object) -> str:
    if isinstance(topic, str):
        return topic
    if isinstance(topic, Mapping):
        managed = topic.get("managed_memory_topic")
        if isinstance(managed, str) and managed in _MANAGED_TOPICS:
            return _MANAGED_TOPICS[managed]
        custom = topic.get("custom_memory_topic_label")
        if isinstance(custom, str):
            return custom
    raise ValueError(f"allowed_topics: {topic!r} is not a topic")


def _timedelta(ttl: object) -> datetime.timedelta:
    if isinstance(ttl, datetime.timedelta):
        return ttl
    if isinstance(ttl, (int, float)) and not isinstance(ttl, bool):
        return datetime.timedelta(seconds=ttl)
    if isinstance(ttl, str) and (match := _DURATION.match(ttl)):
        return datetime.timedelta(seconds=float(match.group(1)))
    raise ValueError(f'ttl: expected a duration such as "3600s", got {ttl!r}')


def _metadata_text(custom_metadata: Mapping[str, object] | None) -> str:
    return dumps(json_safe(dict(custom_metadata))) if custom_metadata else ""


def _entry_to_proto(
    entry: MemoryEntry, valid_from: datetime.datetime | None = None
) -> mpb.MemoryEntry:
    message = mpb.MemoryEntry(
        id=entry.id or "",
        content=content_to_proto(entry.content),
        author=entry.author or "",
        custom_metadata=dumps(json_safe(entry.custom_metadata)) if entry.custom_metadata else "",
    )
    if entry.timestamp is not None:
        message.timestamp.CopyFrom(timestamps.from_iso(entry.timestamp))
    timed = entry if isinstance(entry, TimedMemoryEntry) else None
    if timed is not None and timed.valid_from is not None:
        message.valid_from.CopyFrom(timestamps.from_iso(timed.valid_from))
    elif valid_from is not None:
        message.valid_from.FromDatetime(_aware(valid_from))
    if timed is not None and timed.invalid_at is not None:
        message.invalid_at.CopyFrom(timestamps.from_iso(timed.invalid_at))
    return message


def _entry_from_proto(message: mpb.MemoryEntry) -> TimedMemoryEntry:
    def time(field: str) -> str | None:
        return timestamps.to_local_iso(getattr(message, field)) if message.HasField(field) else None

    return TimedMemoryEntry(
        id=message.id or None,
        content=content_from_proto(message.content),
        author=message.author or None,
        timestamp=time("timestamp"),
        custom_metadata=loads_object(message.custom_metadata, "MemoryEntry.custom_metadata"),
        valid_from=time("valid_from"),
        invalid_at=time("invalid_at"),
    )
