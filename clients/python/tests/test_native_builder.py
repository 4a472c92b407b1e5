"""The native builder (``adk_grpc_services_native``, clients/python/native) builds from a
reply's bytes exactly what the client's own path builds from the parsed message, down to value
types, key order and ``model_fields_set``; what it declines is built by the client's path.

Skipped where the module is not installed, unless ``ADK_GRPC_NATIVE_REQUIRED=1`` (CI), which
makes its absence a failure."""

from __future__ import annotations

import copy
import gc
import logging
import os
from typing import Any

import pytest
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.genai import types
from google.protobuf.timestamp_pb2 import Timestamp
from test_mapping_fast_path import (
    CORPUS,
    VALIDATED_ONLY,
    assert_identical,
    stored,
    text_event,
    wire,
)

from adk_grpc_services import GrpcSessionService, mapping
from adk_grpc_services._proto.adk.session.v1 import session_pb2 as pb

if mapping._NATIVE is None:
    if os.environ.get("ADK_GRPC_NATIVE_REQUIRED") == "1":
        raise RuntimeError(
            "adk_grpc_services_native is not installed (pip install clients/python/native)"
        )
    pytest.skip("adk_grpc_services_native is not installed", allow_module_level=True)

NATIVE = mapping._NATIVE


def session_message(events: list[pb.Event], **fields: Any) -> pb.Session:
    """A GetSession reply holding ``events``, numbered 1, 2, ..."""
    message = pb.Session(id="s1", app_name="app", user_id="u", **fields)
    for sequence, event in enumerate(events, start=1):
        event.sequence = sequence
        message.events.append(event)
    message.last_sequence = max(message.last_sequence, len(events))
    message.last_update_time.FromNanoseconds(1_700_000_000_123_456_789)
    return message


def read_natively(message: pb.Session) -> tuple[Any, list[int]]:
    """The session the native builder makes of ``message``'s bytes, and the events it left to
    the client's path."""
    declined: list[int] = []

    def fallback(index: int) -> Event:
        declined.append(index)
        return mapping.event_from_proto(message.events[index])

    return NATIVE.session(message.SerializeToString(), fallback), declined


def test_the_corpus_is_built_as_the_client_builds_it() -> None:
    message = session_message([wire(e) for e in CORPUS], state='{"n":1,"app:x":[1,2.5]}')
    built, declined = read_natively(message)
    assert_identical(built, mapping.session_from_proto(message), "session")
    # Only artifact deltas are left to the client's path among these typed-field events.
    assert declined == [i for i, e in enumerate(CORPUS) if e.actions.artifact_delta]
    assert len(declined) < len(CORPUS) / 2


@pytest.mark.parametrize(
    "event",
    # A protobuf map's order is its decoder's: artifact deltas are left to the client's.
    [*VALIDATED_ONLY, stored(id="e", actions=pb.EventActions(artifact_delta={"a.txt": 1}))],
    ids=repr,
)
def test_what_it_declines_is_built_by_the_client(event: pb.Event) -> None:
    message = session_message([wire(text_event(0)), event, wire(text_event(2))])
    built, declined = read_natively(message)
    assert declined == [1]
    expected = mapping.session_from_proto(message)
    if not event.id:
        # Validation gives an event without id a new one, each time another.
        expected.events[1].__dict__["id"] = built.events[1].id
    assert_identical(built, expected, "session")


def test_defaults_made_by_model_classes_are_the_validated_ones() -> None:
    """An event written by another client may lack actions (and every event lacks node_info):
    the builder makes those defaults from their blueprints instead of calling the classes."""
    message = session_message([stored(id="e", author="user"), stored(id="f", branch="b")])
    built, declined = read_natively(message)
    assert declined == []
    assert_identical(built, mapping.session_from_proto(message), "session")
    assert built.events[0].actions == EventActions()


def test_times_far_from_now_convert_as_the_client_converts_them() -> None:
    """Seconds are nanoseconds divided as Python divides ints, whether the nanoseconds fit an
    i64 (until 2262) or not, and before 1970."""
    times = [(-1, 5), (9_223_372_036, 854_775_807), (9_223_372_036, 854_775_808), (10**11, 1)]
    events = [
        pb.Event(id=f"e{i}", timestamp=Timestamp(seconds=seconds, nanos=nanos))
        for i, (seconds, nanos) in enumerate(times)
    ]
    message = session_message(events)
    built, declined = read_natively(message)
    assert declined == []
    assert_identical(built, mapping.session_from_proto(message), "session")
    assert built.events[3].timestamp == (10**20 + 1) / 10**9


def test_a_value_the_client_refuses_raises_the_clients_error() -> None:
    """JSON that is not an object is declined, so the client's path raises its own error."""
    event = stored(id="e", custom_metadata="[1]")
    message = session_message([event])
    with pytest.raises(ValueError, match="Event.custom_metadata holds JSON that is not an object"):
        read_natively(message)
    bad_state = session_message([], state="[1]")
    assert NATIVE.session(bad_state.SerializeToString(), mapping.event_from_proto) is None
    with pytest.raises(ValueError, match="Session.state"):
        mapping.session_from_reply(bad_state.SerializeToString())


def test_a_reply_whose_events_continue_is_left_to_the_caller() -> None:
    message = session_message([wire(text_event(0))], last_sequence=5)
    assert NATIVE.session(message.SerializeToString(), mapping.event_from_proto) is None
    assert mapping.session_from_reply(message.SerializeToString()) is None


def test_the_last_update_time_is_the_last_events_exact_float() -> None:
    """As in the client's path: the last event's timestamp when the reply ends with the
    session's last event, the Timestamp (rounded to the nearest float) otherwise."""
    odd = Event(id="e", timestamp=0.1 + 1e-12)
    ended, _ = read_natively(session_message([wire(odd)]))
    assert ended.last_update_time == odd.timestamp
    empty, _ = read_natively(session_message([], last_sequence=0))
    assert empty.last_update_time == mapping.timestamps.to_seconds(
        Timestamp(seconds=1_700_000_000, nanos=123_456_789)
    )


def test_a_listing_is_built_as_the_client_builds_it() -> None:
    reply = pb.ListSessionsResponse(next_page_token="next")
    for i in range(50):
        listed = reply.sessions.add(
            id=f"s{i}", app_name="app", user_id=f"u{i % 3}", last_sequence=i, state=f'{{"n":{i}}}'
        )
        listed.last_update_time.FromNanoseconds(1_700_000_000_000_000_000 + i * 1_000_003)
    reply.sessions[7].state = "[]"  # declined: the client raises for it
    data = reply.SerializeToString()
    with pytest.raises(ValueError, match="Session.state"):
        mapping.sessions_from_reply(data)
    reply.sessions[7].state = ""
    data = reply.SerializeToString()
    declined: list[int] = []

    def fallback(index: int) -> Any:
        declined.append(index)
        return mapping.session_from_proto(reply.sessions[index])

    sessions, token = NATIVE.sessions(data, fallback)
    assert (declined, token) == ([], "next")
    assert_identical(sessions, mapping.sessions_from_proto(reply.sessions), "sessions")


def test_built_sessions_are_filed_with_the_long_lived_objects() -> None:
    def generation_of(obj: object) -> int | None:
        return next((g for g in range(3) if any(o is obj for o in gc.get_objects(g))), None)

    message = session_message([wire(text_event(i)) for i in range(3)])
    session = mapping.session_from_reply(message.SerializeToString())
    assert session is not None and gc.isenabled()
    assert generation_of(session.events[0]) == 2


def test_models_it_does_not_fill_turn_it_off(caplog: pytest.LogCaptureFixture) -> None:
    """A Session with another field order (a future ADK, say) is refused when the builder is
    made; the client then reads sessions without it, and says so."""

    moved = copy.copy(mapping._SESSION)
    moved.names = tuple(reversed(moved.names))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mapping, "_SESSION", moved)
        with caplog.at_level(logging.WARNING, logger=mapping.__name__):
            assert mapping._native_builder() is None
    assert "reading them without it" in caplog.text
    assert mapping._native_builder() is not None


async def test_the_service_reads_the_same_sessions_with_and_without_it(
    session_service: GrpcSessionService, app: str
) -> None:
    """An agent-like session through session-svc: tool calls, state, usage metadata, an
    artifact delta and a field only ``extra`` carries."""
    session = await session_service.create_session(app_name=app, user_id="u", state={"k": 1})
    events = [
        text_event(0),
        Event(
            author="model",
            invocation_id="inv",
            content=types.Content(
                role="model",
                parts=[types.Part(function_call=types.FunctionCall(name="f", args={"q": "x"}))],
            ),
            usage_metadata=types.GenerateContentResponseUsageMetadata(total_token_count=7),
        ),
        Event(
            author="tool",
            invocation_id="inv",
            content=types.Content(
                role="user",
                parts=[
                    types.Part(
                        function_response=types.FunctionResponse(name="f", response={"r": [1]})
                    )
                ],
            ),
            actions=EventActions(state_delta={"user:seen": True}, artifact_delta={"a.txt": 0}),
        ),
        Event(author="model", invocation_id="inv", output={"answer": 42}),
    ]
    for event in events:
        await session_service.append_event(session, event)
    for i in range(3):
        await session_service.create_session(app_name=app, user_id="u", session_id=f"more-{i}")

    async def read() -> tuple[Any, Any]:
        got = await session_service.get_session(app_name=app, user_id="u", session_id=session.id)
        listed = await session_service.list_sessions(app_name=app, user_id="u")
        return got, listed

    native_got, native_listed = await read()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mapping, "_NATIVE", None)
        plain_got, plain_listed = await read()
    assert_identical(native_got, plain_got, "get_session")
    assert_identical(native_listed.sessions, plain_listed.sessions, "list_sessions")
    assert native_got == session
