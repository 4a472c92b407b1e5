"""``GrpcSessionService``: ADK's ``BaseSessionService`` served by session-svc over gRPC.

Drop-in for ``InMemorySessionService`` / ``DatabaseSessionService``: the server applies ADK's
rules (state scopes, temp keys never stored, ordering, ...); this class adds what ADK's base class
does to the caller's own ``Session`` object on append, and maps statuses to ADK's exceptions.

Stale writers are detected exactly, like ``DatabaseSessionService`` does with its revision
marker: every Session this service returns carries, in ``_storage_update_marker``, the sequence
of the last event it was loaded at, and appends send it as ``expected_last_sequence``. When the
session moved on meanwhile the server answers ABORTED and the append raises
``StaleSessionError`` with the database backend's message.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session

from . import timestamps
from ._channel import (
    READ_BUDGET_BYTES,
    Metadata,
    ServiceClient,
    ignore_adk_options,
    translate,
)
from ._proto.adk.session.v1 import session_pb2 as pb
from ._proto.adk.session.v1 import session_pb2_grpc as pb_grpc
from .mapping import (
    dumps,
    event_to_proto,
    json_safe,
    loads_object,
    sequence_of,
    session_from_proto,
    session_from_reply,
    session_marker,
    sessions_from_reply,
)

DEFAULT_PORT = 50051

# DatabaseSessionService's text (S8), so code written against it keeps working.
STALE_SESSION_MESSAGE = (
    "The session has been modified in storage since it was loaded. "
    "Please reload the session before appending more events."
)

# ADK's list_sessions returns every session: pages as large as ListSessions serves.
_SESSIONS_PAGE_SIZE = 1000
# ListEvents serves at most 100 per page.
_EVENTS_PAGE_SIZE = 100
_INT32_MAX = 2**31 - 1


class _Stub(pb_grpc.SessionServiceStub):
    """The generated stub, plus GetSession and ListSessions answering with the encoded reply,
    which the mapping reads itself (``session_from_reply``, ``sessions_from_reply``)."""

    def __init__(self, channel: grpc.aio.Channel) -> None:
        super().__init__(channel)  # type: ignore[no-untyped-call]  # generated, not annotated
        # No response deserializer: the reply's bytes as they came.
        self.GetSessionEncoded: grpc.aio.UnaryUnaryMultiCallable[pb.GetSessionRequest, bytes] = (
            channel.unary_unary(
                "/adk.session.v1.SessionService/GetSession",
                request_serializer=pb.GetSessionRequest.SerializeToString,
            )
        )
        self.ListSessionsEncoded: grpc.aio.UnaryUnaryMultiCallable[
            pb.ListSessionsRequest, bytes
        ] = channel.unary_unary(
            "/adk.session.v1.SessionService/ListSessions",
            request_serializer=pb.ListSessionsRequest.SerializeToString,
        )


class GrpcSessionService(ServiceClient[_Stub], BaseSessionService):
    """A session service that stores sessions in session-svc.

    Args:
      target: the server's address (give this or ``uri``), e.g. ``"localhost:50051"``.
      uri: a service URI instead of ``target``: ``grpc://host[:port]`` or ``grpcs://...`` with
        query parameters ``token_env``, ``ca_file``, ``timeout`` and ``grpc.*`` channel options
        (see the README); what it leaves out comes from ``ADK_GRPC_*`` environment variables.
        ADK's ``services.yaml`` registration constructs the class this way.
      adk_options: what ADK's service factories pass besides ``uri`` (``agents_dir``);
        ignored, with a warning for anything else.
      credentials: channel credentials for TLS (``grpc.ssl_channel_credentials()``); plaintext
        when None.
      options: gRPC channel options, e.g. ``[("grpc.max_receive_message_length", 64 << 20)]``.
      metadata: sent with every call, e.g. ``[("authorization", "Bearer ...")]``.
      timeout: seconds allowed per call; None waits as long as the channel does.
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
        **adk_options: Any,
    ) -> None:
        ignore_adk_options(adk_options, "session")
        self._connect(
            target,
            uri,
            _Stub,
            default_port=DEFAULT_PORT,
            kind="session",
            credentials=credentials,
            options=options,
            metadata=metadata,
            timeout=timeout,
        )

    @classmethod
    def from_uri(cls, uri: str) -> GrpcSessionService:
        """A service for ``grpc://host[:port]`` (plaintext) or ``grpcs://host[:port]`` (TLS),
        with the query parameters and environment variables ``uri=`` takes."""
        return cls(uri=uri)

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        request = pb.CreateSessionRequest(
            app_name=app_name,
            user_id=user_id,
            session_id=session_id or "",
            state=dumps(json_safe(state)) if state else "",
        )
        try:
            reply: pb.Session = await (await self._stub()).CreateSession(request, **self._call())
        except grpc.aio.AioRpcError as e:
            if e.code() == grpc.StatusCode.ALREADY_EXISTS:
                raise AlreadyExistsError(
                    f"Session with id {request.session_id.strip()} already exists."
                ) from e
            raise translate(e) from e
        return session_from_proto(reply)

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        if not _names_a_session(app_name, user_id, session_id):
            return None
        request = pb.GetSessionRequest(
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            max_reply_event_bytes=READ_BUDGET_BYTES,
        )
        if config is not None and config.num_recent_events is not None:
            # More than 2**31-1 recent events is every event.
            request.num_recent_events = min(config.num_recent_events, _INT32_MAX)
        if config is not None and config.after_timestamp is not None:
            request.after_timestamp.CopyFrom(timestamps.to_timestamp(config.after_timestamp))
        try:
            encoded: bytes = await (await self._stub()).GetSessionEncoded(request, **self._call())
        except grpc.aio.AioRpcError as e:
            if e.code() == grpc.StatusCode.NOT_FOUND:
                return None
            raise translate(e) from e
        session = session_from_reply(encoded)
        if session is not None:
            return session
        # The events continue past the reply.
        reply = pb.Session.FromString(encoded)
        if not await self._read_rest(reply):
            return None
        return session_from_proto(reply)

    async def _read_rest(self, reply: pb.Session) -> bool:
        """Adds to ``reply`` the events a byte-bounded GetSession left for ListEvents: those
        after its last event, up to its ``last_sequence`` (the session as it was read). False
        when the session was deleted meanwhile."""
        token = ""
        while True:
            request = pb.ListEventsRequest(
                app_name=reply.app_name,
                user_id=reply.user_id,
                session_id=reply.id,
                after_sequence=reply.events[-1].sequence,
                page_size=_EVENTS_PAGE_SIZE,
                page_token=token,
                max_reply_event_bytes=READ_BUDGET_BYTES,
            )
            try:
                page: pb.ListEventsResponse = await (await self._stub()).ListEvents(
                    request, **self._call()
                )
            except grpc.aio.AioRpcError as e:
                if e.code() == grpc.StatusCode.NOT_FOUND:
                    return False
                raise translate(e) from e
            for event in page.events:
                if event.sequence > reply.last_sequence:
                    return True
                reply.events.append(event)
            token = page.next_page_token
            if not token or reply.events[-1].sequence >= reply.last_sequence:
                return True

    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        if not app_name:
            return ListSessionsResponse()
        found: dict[tuple[str, str], Session] = {}
        page_token = ""
        while True:
            request = pb.ListSessionsRequest(
                app_name=app_name, page_size=_SESSIONS_PAGE_SIZE, page_token=page_token
            )
            if user_id is not None:
                request.user_id = user_id
            try:
                encoded: bytes = await (await self._stub()).ListSessionsEncoded(
                    request, **self._call()
                )
            except grpc.aio.AioRpcError as e:
                raise translate(e) from e
            sessions, page_token = sessions_from_reply(encoded)
            if not page_token and not found:
                # A single page holds each session once.
                return ListSessionsResponse(sessions=sessions)
            for session in sessions:
                # A session updated while paging shows up again further on; its later place is
                # its current one.
                found.pop((session.user_id, session.id), None)
                found[(session.user_id, session.id)] = session
            if not page_token:
                return ListSessionsResponse(sessions=list(found.values()))

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        if not _names_a_session(app_name, user_id, session_id):
            return
        request = pb.DeleteSessionRequest(app_name=app_name, user_id=user_id, session_id=session_id)
        try:
            await (await self._stub()).DeleteSession(request, **self._call())
        except grpc.aio.AioRpcError as e:
            raise translate(e) from e

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        if not (app_name and user_id):
            return {}
        request = pb.GetUserStateRequest(app_name=app_name, user_id=user_id)
        try:
            reply: pb.StateResponse = await (await self._stub()).GetUserState(
                request, **self._call()
            )
        except grpc.aio.AioRpcError as e:
            raise translate(e) from e
        return loads_object(reply.state, "StateResponse.state")

    async def append_event(self, session: Session, event: Event) -> Event:
        # Partial events are streaming fragments: never stored, nothing applied (S6.1).
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        expected = sequence_of(session)
        if expected is None:
            expected = await self._current_sequence(session)
        request = pb.AppendEventRequest(
            app_name=session.app_name,
            user_id=session.user_id,
            session_id=session.id,
            event=event_to_proto(event),
            expected_last_sequence=expected,
        )
        try:
            reply: pb.AppendEventResponse = await (await self._stub()).AppendEvent(
                request, **self._call()
            )
        except grpc.aio.AioRpcError as e:
            code = e.code()
            if code == grpc.StatusCode.ABORTED:
                raise StaleSessionError(STALE_SESSION_MESSAGE) from e
            if code == grpc.StatusCode.NOT_FOUND:
                raise SessionNotFoundError(f"Session {session.id} not found.") from e
            if code == grpc.StatusCode.ALREADY_EXISTS:
                # Another event with this id and a different payload is stored.
                raise AlreadyExistsError(e.details() or "") from e
            raise translate(e) from e
        stored = reply.event.sequence
        if stored <= expected:
            # The server already held this event (same id and payload) when the caller loaded
            # the session: a re-delivery, which, like ADK's in-memory service, changes nothing.
            return event
        # Either a fresh append or a retry whose first reply was lost: the caller's session
        # moves to the revision that holds this event.
        session._storage_update_marker = session_marker(stored)
        self._commit_event_to_session(session, event)
        session.last_update_time = event.timestamp
        return event

    async def _current_sequence(self, session: Session) -> int:
        """The sequence to append at for a session that carries no marker of this service.

        That is a hand-built Session or one from another backend. ``DatabaseSessionService``'s
        rule for such sessions applies: if storage was updated after ``session.last_update_time``
        the append is allowed only when the session's last event is storage's last event (or
        neither has events); otherwise ``StaleSessionError``. The sequence read here makes the
        append conditional, so a writer slipping in between is still detected.
        """
        request = pb.GetSessionRequest(
            app_name=session.app_name,
            user_id=session.user_id,
            session_id=session.id,
            num_recent_events=1,
        )
        try:
            reply: pb.Session = await (await self._stub()).GetSession(request, **self._call())
        except grpc.aio.AioRpcError as e:
            if e.code() == grpc.StatusCode.NOT_FOUND:
                raise SessionNotFoundError(f"Session {session.id} not found.") from e
            raise translate(e) from e
        stored = session_from_proto(reply)
        if stored.last_update_time > session.last_update_time:
            stored_last = stored.events[-1].id if stored.events else None
            own_last = session.events[-1].id if session.events else None
            if stored_last != own_last:
                raise StaleSessionError(STALE_SESSION_MESSAGE)
        return reply.last_sequence


def _names_a_session(app_name: str, user_id: str, session_id: str) -> bool:
    """False for names no stored session can have (the server refuses to create them), which
    ADK answers as "not found" rather than as an error. Session ids are compared stripped (S1.1)."""
    return bool(app_name and user_id and session_id and session_id.strip())
