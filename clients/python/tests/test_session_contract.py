"""ADK's shared session-service contract, run against session-svc through GrpcSessionService.

These are the cases google-adk holds every BaseSessionService to (its ``test_session_service.py``
and contract suite), ported with the app name made unique per test. Rule numbers (S0-S8) are
those of docs/rules.md.
"""

from __future__ import annotations

import time

import pytest
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

from adk_grpc_services import GrpcSessionService


def state_event(delta: dict[str, object], **fields: object) -> Event:
    return Event(
        invocation_id="inv", author="user", actions=EventActions(state_delta=delta), **fields
    )


async def test_get_missing_session_returns_none(
    session_service: GrpcSessionService, app: str
) -> None:
    assert await session_service.get_session(app_name=app, user_id="u", session_id="123") is None


async def test_create_get_delete(session_service: GrpcSessionService, app: str) -> None:
    session = await session_service.create_session(
        app_name=app, user_id="u", state={"key": "value"}
    )
    assert session.app_name == app
    assert session.user_id == "u"
    assert len(session.id) == 36  # a uuid4
    assert session.state == {"key": "value"}
    assert session.events == []
    assert 0 < session.last_update_time <= time.time()

    got = await session_service.get_session(app_name=app, user_id="u", session_id=session.id)
    assert got == session  # includes last_update_time and the storage marker

    await session_service.delete_session(app_name=app, user_id="u", session_id=session.id)
    assert (
        await session_service.get_session(app_name=app, user_id="u", session_id=session.id) is None
    )


async def test_create_splits_initial_state_by_scope(
    session_service: GrpcSessionService, app: str
) -> None:
    session = await session_service.create_session(
        app_name=app, user_id="u1", state={"app:k": 1, "user:k": 2, "temp:k": 3, "k": 4}
    )
    assert session.state == {"k": 4, "app:k": 1, "user:k": 2}
    same_user = await session_service.create_session(app_name=app, user_id="u1")
    assert same_user.state == {"app:k": 1, "user:k": 2}
    other_user = await session_service.create_session(app_name=app, user_id="u2")
    assert other_user.state == {"app:k": 1}


async def test_create_and_list_sessions(session_service: GrpcSessionService, app: str) -> None:
    ids = [f"session{i}" for i in range(5)]
    for session_id in ids:
        await session_service.create_session(
            app_name=app, user_id="u", session_id=session_id, state={"key": "value" + session_id}
        )
    sessions = (await session_service.list_sessions(app_name=app, user_id="u")).sessions
    assert {s.id for s in sessions} == set(ids)
    for session in sessions:
        assert session.state == {"key": "value" + session.id}


async def test_list_sessions_all_users_and_empty_user_filter(
    session_service: GrpcSessionService, app: str
) -> None:
    await session_service.create_session(
        app_name=app, user_id="user1", session_id="s1a", state={"key": "1a"}
    )
    await session_service.create_session(
        app_name=app, user_id="user1", session_id="s1b", state={"key": "1b"}
    )
    await session_service.create_session(
        app_name=app, user_id="user2", session_id="s2a", state={"key": "2a"}
    )

    user1 = (await session_service.list_sessions(app_name=app, user_id="user1")).sessions
    assert {s.id: s.state for s in user1} == {"s1a": {"key": "1a"}, "s1b": {"key": "1b"}}
    user2 = (await session_service.list_sessions(app_name=app, user_id="user2")).sessions
    assert [(s.id, s.state) for s in user2] == [("s2a", {"key": "2a"})]
    everyone = (await session_service.list_sessions(app_name=app, user_id=None)).sessions
    assert {s.id for s in everyone} == {"s1a", "s1b", "s2a"}
    # S4.1: "" is a filter for the user "", not "all users".
    assert (await session_service.list_sessions(app_name=app, user_id="")).sessions == []
    # S4.2: an unknown app lists nothing.
    assert (await session_service.list_sessions(app_name=app + "-other")).sessions == []


async def test_list_sessions_ordered_by_last_update_time_with_merged_state_and_no_events(
    session_service: GrpcSessionService, app: str
) -> None:
    a = await session_service.create_session(
        app_name=app, user_id="u", session_id="a", state={"k": "a"}
    )
    await session_service.create_session(app_name=app, user_id="u", session_id="b")
    await session_service.create_session(app_name=app, user_id="other", session_id="c")
    await session_service.append_event(
        a, state_event({"user:name": "Ann", "app:theme": "dark"}, timestamp=time.time() + 5)
    )

    listed = (await session_service.list_sessions(app_name=app)).sessions
    assert [s.id for s in listed] == ["b", "c", "a"]
    assert all(s.events == [] for s in listed)
    by_id = {s.id: s for s in listed}
    assert by_id["a"].state == {"k": "a", "user:name": "Ann", "app:theme": "dark"}
    assert by_id["b"].state == {"user:name": "Ann", "app:theme": "dark"}
    assert by_id["c"].state == {"app:theme": "dark"}
    assert by_id["a"].last_update_time == a.last_update_time


async def test_app_state_is_shared_by_all_users_of_app(
    session_service: GrpcSessionService, app: str
) -> None:
    session1 = await session_service.create_session(
        app_name=app, user_id="u1", session_id="s1", state={"app:k1": "v1"}
    )
    await session_service.append_event(session1, state_event({"app:k2": "v2"}))
    session2 = await session_service.create_session(app_name=app, user_id="u2", session_id="s2")
    assert session2.state == {"app:k1": "v1", "app:k2": "v2"}
    got = await session_service.get_session(app_name=app, user_id="u1", session_id="s1")
    assert got is not None
    assert got.state == {"app:k1": "v1", "app:k2": "v2"}


async def test_user_state_is_shared_only_by_user_sessions(
    session_service: GrpcSessionService, app: str
) -> None:
    session1 = await session_service.create_session(
        app_name=app, user_id="u1", session_id="s1", state={"user:k1": "v1"}
    )
    await session_service.append_event(session1, state_event({"user:k2": "v2"}))
    session1b = await session_service.create_session(app_name=app, user_id="u1", session_id="s1b")
    assert session1b.state == {"user:k1": "v1", "user:k2": "v2"}
    session2 = await session_service.create_session(app_name=app, user_id="u2", session_id="s2")
    assert session2.state == {}


async def test_session_state_is_not_shared(session_service: GrpcSessionService, app: str) -> None:
    session1 = await session_service.create_session(
        app_name=app, user_id="u1", session_id="s1", state={"sk1": "v1"}
    )
    await session_service.append_event(session1, state_event({"sk2": "v2"}))
    got = await session_service.get_session(app_name=app, user_id="u1", session_id="s1")
    assert got is not None
    assert got.state == {"sk1": "v1", "sk2": "v2"}
    session1b = await session_service.create_session(app_name=app, user_id="u1", session_id="s1b")
    assert session1b.state == {}


async def test_temp_state_is_not_persisted_in_state_or_events(
    session_service: GrpcSessionService, app: str
) -> None:
    session = await session_service.create_session(app_name=app, user_id="u1", session_id="s1")
    event = state_event({"temp:k1": "v1", "sk": "v2"})
    await session_service.append_event(session, event)

    # Available to the rest of the invocation through the caller's session object...
    assert session.state["temp:k1"] == "v1"
    assert session.state["sk"] == "v2"
    # ...but trimmed from the event before it was sent.
    assert event.actions.state_delta == {"sk": "v2"}

    got = await session_service.get_session(app_name=app, user_id="u1", session_id="s1")
    assert got is not None
    assert got.state == {"sk": "v2"}
    assert got.events[0].actions.state_delta == {"sk": "v2"}


async def test_temp_state_visible_across_sequential_events(
    session_service: GrpcSessionService, app: str
) -> None:
    session = await session_service.create_session(app_name=app, user_id="u1", session_id="s_seq")
    event1 = Event(
        invocation_id="inv1",
        author="agent1",
        actions=EventActions(state_delta={"temp:output": "from a1"}),
    )
    await session_service.append_event(session, event1)
    assert session.state.get("temp:output") == "from a1"
    assert "temp:output" not in event1.actions.state_delta

    event2 = Event(
        invocation_id="inv1",
        author="agent2",
        actions=EventActions(state_delta={"seen": session.state["temp:output"]}),
    )
    await session_service.append_event(session, event2)
    got = await session_service.get_session(app_name=app, user_id="u1", session_id="s_seq")
    assert got is not None
    assert got.state == {"seen": "from a1"}


async def test_dict_valued_state_delta_replaces_stored_value(
    session_service: GrpcSessionService, app: str
) -> None:
    session = await session_service.create_session(
        app_name=app,
        user_id="u",
        state={"profile": {"name": "A", "age": 1}, "app:cfg": {"a": 1, "b": 2}},
    )
    await session_service.append_event(
        session, state_event({"profile": {"name": "B"}, "app:cfg": {"c": 3}})
    )
    got = await session_service.get_session(app_name=app, user_id="u", session_id=session.id)
    assert got is not None
    assert got.state == {"profile": {"name": "B"}, "app:cfg": {"c": 3}}
    assert got.state == session.state


async def test_none_valued_state_delta_is_stored_not_dropped(
    session_service: GrpcSessionService, app: str
) -> None:
    session = await session_service.create_session(
        app_name=app, user_id="u", state={"k": "v", "user:u": "v"}
    )
    await session_service.append_event(
        session, state_event({"k": None, "user:u": None, "new": None})
    )
    got = await session_service.get_session(app_name=app, user_id="u", session_id=session.id)
    assert got is not None
    assert got.state == {"k": None, "user:u": None, "new": None}
    assert await session_service.get_user_state(app_name=app, user_id="u") == {"u": None}


async def test_boolean_state_survives_unrelated_state_delta(
    session_service: GrpcSessionService, app: str
) -> None:
    session = await session_service.create_session(
        app_name=app, user_id="u", state={"flag": True, "off": False, "n": 0, "user:b": True}
    )
    await session_service.append_event(session, state_event({"other": 1}))
    got = await session_service.get_session(app_name=app, user_id="u", session_id=session.id)
    assert got is not None
    assert got.state == {"flag": True, "off": False, "n": 0, "user:b": True, "other": 1}
    assert got.state["flag"] is True and got.state["off"] is False
    assert type(got.state["n"]) is int


async def test_get_session_respects_user_id(session_service: GrpcSessionService, app: str) -> None:
    session1 = await session_service.create_session(app_name=app, user_id="u1", session_id="s1")
    await session_service.append_event(session1, Event(invocation_id="inv1", author="user"))
    await session_service.create_session(app_name=app, user_id="u2", session_id="s1")
    got = await session_service.get_session(app_name=app, user_id="u2", session_id="s1")
    assert got is not None
    assert got.user_id == "u2"
    assert got.events == []


async def test_create_session_with_existing_id_raises(
    session_service: GrpcSessionService, app: str
) -> None:
    await session_service.create_session(app_name=app, user_id="u", session_id="existing")
    with pytest.raises(AlreadyExistsError, match=r"^Session with id existing already exists\.$"):
        await session_service.create_session(app_name=app, user_id="u", session_id="existing")
    # The same id for another user or app is another session.
    await session_service.create_session(app_name=app, user_id="u2", session_id="existing")
    await session_service.create_session(app_name=app + "-b", user_id="u", session_id="existing")


async def test_padded_session_id_is_stripped(session_service: GrpcSessionService, app: str) -> None:
    session = await session_service.create_session(
        app_name=app, user_id="u", session_id="  order-42\n"
    )
    assert session.id == "order-42"
    with pytest.raises(AlreadyExistsError, match="Session with id order-42 already exists."):
        await session_service.create_session(app_name=app, user_id="u", session_id=" order-42 ")
    got = await session_service.get_session(app_name=app, user_id="u", session_id=" order-42 ")
    assert got == session
    await session_service.delete_session(app_name=app, user_id="u", session_id="\torder-42 ")
    assert (
        await session_service.get_session(app_name=app, user_id="u", session_id="order-42") is None
    )
    # A blank id means "generate one" on create and "no such session" elsewhere.
    generated = await session_service.create_session(app_name=app, user_id="u", session_id="   ")
    assert len(generated.id) == 36
    assert await session_service.get_session(app_name=app, user_id="u", session_id="  ") is None


async def test_append_event_bytes(session_service: GrpcSessionService, app: str) -> None:
    session = await session_service.create_session(app_name=app, user_id="u")
    content = types.Content(
        role="user", parts=[types.Part.from_bytes(data=b"test_image_data", mime_type="image/png")]
    )
    grounding = types.GroundingMetadata(
        search_entry_point=types.SearchEntryPoint(sdk_blob=b"test_sdk_blob")
    )
    event = Event(invocation_id="inv", author="user", content=content, grounding_metadata=grounding)
    await session_service.append_event(session, event)
    assert session.events[0].content == content

    got = await session_service.get_session(app_name=app, user_id="u", session_id=session.id)
    assert got is not None
    assert len(got.events) == 1
    assert got.events[0].content == content
    assert got.events[0].grounding_metadata == grounding


async def test_append_event_complete(session_service: GrpcSessionService, app: str) -> None:
    session = await session_service.create_session(app_name=app, user_id="u")
    event = Event(
        invocation_id="invocation",
        author="user",
        content=types.Content(role="user", parts=[types.Part(text="test_text")]),
        turn_complete=True,
        partial=False,
        actions=EventActions(artifact_delta={"file": 0}, transfer_to_agent="agent", escalate=True),
        long_running_tool_ids={"tool1"},
        error_code="error_code",
        error_message="error_message",
        interrupted=True,
        grounding_metadata=types.GroundingMetadata(web_search_queries=["query1"]),
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=1, candidates_token_count=1, total_token_count=2
        ),
        citation_metadata=types.CitationMetadata(),
        custom_metadata={"custom_key": "custom_value"},
        timestamp=1700000000.123,
        input_transcription=types.Transcription(text="input transcription", finished=True),
        output_transcription=types.Transcription(text="output transcription", finished=True),
    )
    returned = await session_service.append_event(session, event)
    assert returned is event
    assert session.events == [event]
    assert (
        await session_service.get_session(app_name=app, user_id="u", session_id=session.id)
        == session
    )


async def test_session_last_update_time_updates_on_event(
    session_service: GrpcSessionService, app: str
) -> None:
    session = await session_service.create_session(app_name=app, user_id="u")
    original = session.last_update_time
    event = Event(invocation_id="inv", author="user", timestamp=original + 10)
    await session_service.append_event(session, event)
    assert session.last_update_time == event.timestamp
    refreshed = await session_service.get_session(app_name=app, user_id="u", session_id=session.id)
    assert refreshed is not None
    assert refreshed.last_update_time == event.timestamp  # exact, not approximately
    # S6.8: an older event timestamp moves last_update_time backwards.
    older = Event(invocation_id="inv", author="user", timestamp=original - 100)
    await session_service.append_event(session, older)
    refreshed = await session_service.get_session(app_name=app, user_id="u", session_id=session.id)
    assert refreshed is not None
    assert refreshed.last_update_time == session.last_update_time == original - 100


async def test_get_session_with_config(session_service: GrpcSessionService, app: str) -> None:
    session = await session_service.create_session(app_name=app, user_id="u")
    for i in range(1, 6):
        await session_service.append_event(session, Event(author="user", timestamp=float(i)))

    async def timestamps(**config: float | int) -> list[float]:
        got = await session_service.get_session(
            app_name=app, user_id="u", session_id=session.id, config=GetSessionConfig(**config)
        )
        assert got is not None
        return [e.timestamp for e in got.events]

    assert await timestamps() == [1, 2, 3, 4, 5]
    assert await timestamps(num_recent_events=0) == []
    assert await timestamps(num_recent_events=3) == [3, 4, 5]
    assert await timestamps(after_timestamp=4.0) == [4, 5]
    assert await timestamps(after_timestamp=50.0) == []
    assert await timestamps(after_timestamp=4.0, num_recent_events=3) == [4, 5]
    assert await timestamps(after_timestamp=2.0, num_recent_events=2) == [4, 5]
    assert await timestamps(num_recent_events=10) == [1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="num_recent_events must be greater than or equal to 0"):
        GetSessionConfig(num_recent_events=-1)


async def test_partial_events_are_not_persisted(
    session_service: GrpcSessionService, app: str
) -> None:
    session = await session_service.create_session(app_name=app, user_id="u")
    event = Event(
        author="user", partial=True, actions=EventActions(state_delta={"k": 1, "temp:t": 1})
    )
    assert await session_service.append_event(session, event) is event
    # S6.1: nothing applied, not even temp state.
    assert session.events == []
    assert session.state == {}
    got = await session_service.get_session(app_name=app, user_id="u", session_id=session.id)
    assert got is not None
    assert got.events == []
    assert got.state == {}


async def test_delete_session_removes_only_the_targeted_users_session(
    session_service: GrpcSessionService, app: str
) -> None:
    await session_service.create_session(
        app_name=app, user_id="u1", session_id="s", state={"user:k": 1}
    )
    await session_service.create_session(app_name=app, user_id="u2", session_id="s")
    await session_service.delete_session(app_name=app, user_id="u1", session_id="s")
    assert await session_service.get_session(app_name=app, user_id="u1", session_id="s") is None
    assert await session_service.get_session(app_name=app, user_id="u2", session_id="s") is not None
    # S5.4: user state outlives the session.
    assert await session_service.get_user_state(app_name=app, user_id="u1") == {"k": 1}
    # S5.2: deleting what is not there is a no-op.
    await session_service.delete_session(app_name=app, user_id="u1", session_id="s")
    await session_service.delete_session(app_name=app + "-none", user_id="nobody", session_id="x")


async def test_get_user_state(session_service: GrpcSessionService, app: str) -> None:
    assert await session_service.get_user_state(app_name=app, user_id="u1") == {}
    session = await session_service.create_session(app_name=app, user_id="u1")
    await session_service.append_event(
        session,
        Event(
            author="system",
            actions=EventActions(state_delta={"user:profile": {"name": "Alice"}, "sk": 1}),
        ),
    )
    await session_service.append_event(
        session,
        Event(author="system", actions=EventActions(state_delta={"user:counter": 1, "app:a": 1})),
    )
    await session_service.append_event(
        session, Event(author="system", actions=EventActions(state_delta={"user:counter": 2}))
    )
    assert await session_service.get_user_state(app_name=app, user_id="u1") == {
        "profile": {"name": "Alice"},
        "counter": 2,
    }
    assert await session_service.get_user_state(app_name=app, user_id="u2") == {}
    assert await session_service.get_user_state(app_name=app + "-other", user_id="u1") == {}
