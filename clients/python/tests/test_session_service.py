"""GrpcSessionService beyond the shared contract: stale writers, retries, errors, paging, and
values that must come back exactly as they went in."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest
from google.adk.errors import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.session import Session

from adk_grpc_services import GrpcSessionService
from adk_grpc_services import session_service as session_service_module

# DatabaseSessionService's exact text (S8).
STALE = (
    r"^The session has been modified in storage since it was loaded\. "
    r"Please reload the session before appending more events\.$"
)


async def test_second_writer_from_the_same_snapshot_is_stale(
    session_service: GrpcSessionService, app: str
) -> None:
    await session_service.create_session(app_name=app, user_id="u", session_id="s")
    first = await session_service.get_session(app_name=app, user_id="u", session_id="s")
    second = await session_service.get_session(app_name=app, user_id="u", session_id="s")
    assert first is not None and second is not None

    await session_service.append_event(
        first, Event(author="a", actions=EventActions(state_delta={"k": 1}))
    )
    with pytest.raises(StaleSessionError, match=STALE):
        await session_service.append_event(
            second, Event(author="b", actions=EventActions(state_delta={"k": 2}))
        )
    # The loser's session object is unchanged apart from what ADK applies before storing.
    assert second.events == [] and second.state == {}

    # The winner keeps appending from its own object; the loser reloads and then succeeds.
    await session_service.append_event(first, Event(author="a"))
    reloaded = await session_service.get_session(app_name=app, user_id="u", session_id="s")
    assert reloaded is not None
    await session_service.append_event(
        reloaded, Event(author="b", actions=EventActions(state_delta={"k": 2}))
    )
    final = await session_service.get_session(app_name=app, user_id="u", session_id="s")
    assert final is not None
    assert [e.author for e in final.events] == ["a", "a", "b"]
    assert final.state == {"k": 2}
    assert final == reloaded


async def test_concurrent_writers_from_one_snapshot_exactly_one_wins(
    session_service: GrpcSessionService, app: str
) -> None:
    session = await session_service.create_session(app_name=app, user_id="u")
    for i in range(8):
        latest = await session_service.get_session(app_name=app, user_id="u", session_id=session.id)
        assert latest is not None
        copies = [latest.model_copy(deep=True) for _ in range(2)]
        results = await asyncio.gather(
            *(
                session_service.append_event(
                    copy, Event(author="user", actions=EventActions(state_delta={f"sk{i}-{n}": n}))
                )
                for n, copy in enumerate(copies)
            ),
            return_exceptions=True,
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        assert len(errors) == 1
        assert isinstance(errors[0], StaleSessionError)
    final = await session_service.get_session(app_name=app, user_id="u", session_id=session.id)
    assert final is not None
    assert len(final.events) == 8
    assert len(final.state) == 8


async def test_session_listed_or_created_can_append(
    session_service: GrpcSessionService, app: str
) -> None:
    created = await session_service.create_session(app_name=app, user_id="u", session_id="s")
    await session_service.append_event(created, Event(author="user"))
    (listed,) = (await session_service.list_sessions(app_name=app, user_id="u")).sessions
    await session_service.append_event(listed, Event(author="user"))
    # created is now one event behind.
    with pytest.raises(StaleSessionError):
        await session_service.append_event(created, Event(author="user"))


async def test_markerless_session_follows_the_database_backend_rule(
    session_service: GrpcSessionService, app: str
) -> None:
    session = await session_service.create_session(app_name=app, user_id="u", session_id="s")
    first = Event(author="user", timestamp=session.last_update_time + 10)
    await session_service.append_event(session, first)

    # Current content, no marker, clock drift: accepted (the last events match).
    current = session.model_copy(deep=True)
    current._storage_update_marker = None
    current.last_update_time -= 0.0001
    await session_service.append_event(
        current, Event(author="user", timestamp=first.timestamp + 10)
    )

    # A hand-built copy of the state before that append: storage is newer and its last event
    # differs, so the copy is stale.
    stale = Session(
        id="s", app_name=app, user_id="u", events=[first], last_update_time=first.timestamp
    )
    with pytest.raises(StaleSessionError, match=STALE):
        await session_service.append_event(stale, Event(author="user"))

    # A hand-built copy that is current appends fine and then carries a marker.
    got = await session_service.get_session(app_name=app, user_id="u", session_id="s")
    assert got is not None
    fresh = Session(
        id="s", app_name=app, user_id="u", events=got.events, last_update_time=got.last_update_time
    )
    await session_service.append_event(fresh, Event(author="user"))
    assert fresh._storage_update_marker is not None
    final = await session_service.get_session(app_name=app, user_id="u", session_id="s")
    assert final is not None
    assert len(final.events) == 3


async def test_redelivered_event_changes_nothing(
    session_service: GrpcSessionService, app: str
) -> None:
    session = await session_service.create_session(app_name=app, user_id="u")
    event = Event(author="user", actions=EventActions(state_delta={"n": 1}))
    await session_service.append_event(session, event)
    before = session.model_copy(deep=True)
    assert await session_service.append_event(session, event) is event
    assert session == before
    got = await session_service.get_session(app_name=app, user_id="u", session_id=session.id)
    assert got == session
    assert len(got.events) == 1


async def test_retry_after_a_lost_reply_is_applied_once(
    session_service: GrpcSessionService, app: str
) -> None:
    session = await session_service.create_session(app_name=app, user_id="u")
    snapshot = session.model_copy(deep=True)
    event = Event(author="user", actions=EventActions(state_delta={"n": 1}))
    # The first attempt reached storage but its reply never came back to `snapshot`.
    await session_service.append_event(session, event.model_copy(deep=True))
    await session_service.append_event(snapshot, event)
    assert snapshot == session
    assert len(snapshot.events) == 1


async def test_same_event_id_with_other_payload_is_refused(
    session_service: GrpcSessionService, app: str
) -> None:
    session = await session_service.create_session(app_name=app, user_id="u")
    await session_service.append_event(session, Event(id="e1", author="user"))
    with pytest.raises(AlreadyExistsError, match="e1"):
        await session_service.append_event(session, Event(id="e1", author="someone else"))
    assert len(session.events) == 1


async def test_append_to_deleted_session_raises_not_found(
    session_service: GrpcSessionService, app: str
) -> None:
    session = await session_service.create_session(app_name=app, user_id="u")
    await session_service.delete_session(app_name=app, user_id="u", session_id=session.id)
    with pytest.raises(SessionNotFoundError, match=rf"^Session {session.id} not found\.$"):
        await session_service.append_event(session, Event(author="user"))
    hand_built = Session(id=session.id, app_name=app, user_id="u")
    with pytest.raises(SessionNotFoundError):
        await session_service.append_event(hand_built, Event(author="user"))


async def test_invalid_input_raises_value_error(
    session_service: GrpcSessionService, app: str
) -> None:
    with pytest.raises(ValueError, match="user_id"):
        await session_service.create_session(app_name=app, user_id="")
    session = await session_service.create_session(app_name=app, user_id="u")
    with pytest.raises(ValueError, match="state_delta"):
        await session_service.append_event(
            session, Event(author="user", actions=EventActions(state_delta={"app:": 1}))
        )


async def test_unreachable_server_raises_the_rpc_error(app: str) -> None:
    async with GrpcSessionService("127.0.0.1:1", timeout=5) as service:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await service.get_session(app_name=app, user_id="u", session_id="s")
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_list_sessions_follows_every_page(
    session_service: GrpcSessionService, app: str
) -> None:
    # More than one page of 100; created concurrently to keep the test fast.
    ids = [f"s{i:03d}" for i in range(130)]
    await asyncio.gather(
        *(
            session_service.create_session(app_name=app, user_id=f"u{i % 3}", session_id=s)
            for i, s in enumerate(ids)
        )
    )
    listed = (await session_service.list_sessions(app_name=app)).sessions
    assert sorted(s.id for s in listed) == ids
    # The server orders by (last_update_time, user_id, id) with nanosecond times. A float of
    # seconds keeps about a quarter of a microsecond, so two sessions created closer together
    # than that show equal times here although the server ordered them by their nanoseconds:
    # only the times are checked (session-svc's contract suite checks the tie-break exactly).
    times = [s.last_update_time for s in listed]
    assert times == sorted(times)
    assert len((await session_service.list_sessions(app_name=app, user_id="u1")).sessions) == 43


async def test_list_sessions_in_small_pages_is_the_one_page_listing(
    session_service: GrpcSessionService, app: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await asyncio.gather(
        *(
            session_service.create_session(
                app_name=app, user_id=f"u{i % 2}", session_id=f"s{i:02d}", state={"i": i}
            )
            for i in range(23)
        )
    )
    whole = (await session_service.list_sessions(app_name=app)).sessions
    monkeypatch.setattr(session_service_module, "_SESSIONS_PAGE_SIZE", 5)
    paged = (await session_service.list_sessions(app_name=app)).sessions
    assert len(whole) == 23
    assert paged == whole
    assert [s.state["i"] for s in paged] == [s.state["i"] for s in whole]


async def test_json_values_come_back_exactly(session_service: GrpcSessionService, app: str) -> None:
    values = {
        "int": 1,
        "float": 1.0,
        "big": 2**53 + 1,
        "huge": 2**70,
        "neg": -0.0,
        "tiny": 5e-324,
        "pi": 3.141592653589793,
        "text": 'héllo \u2603 "quoted"',
        "nested": {"list": [1, 1.5, None, True, "x"], "empty": {}},
    }
    session = await session_service.create_session(app_name=app, user_id="u", state=values)
    await session_service.append_event(
        session,
        Event(
            author="user",
            actions=EventActions(state_delta={"user:" + k: v for k, v in values.items()}),
        ),
    )
    got = await session_service.get_session(app_name=app, user_id="u", session_id=session.id)
    assert got is not None
    for key, value in values.items():
        assert repr(got.state[key]) == repr(value)
        assert repr(got.state["user:" + key]) == repr(value)
        assert repr(got.events[0].actions.state_delta["user:" + key]) == repr(value)


async def test_non_serializable_values_are_stored_as_text(
    session_service: GrpcSessionService, app: str
) -> None:
    def callback() -> None:
        pass

    session = await session_service.create_session(
        app_name=app, user_id="u", state={"fn": callback}
    )
    assert session.state == {"fn": repr(callback)}
    event = Event(author="user", actions=EventActions(state_delta={"later": callback}))
    await session_service.append_event(session, event)
    # The caller's objects keep the raw value (S6.9); storage holds its text.
    assert session.state["later"] is callback
    got = await session_service.get_session(app_name=app, user_id="u", session_id=session.id)
    assert got is not None
    assert got.state == {"fn": repr(callback), "later": repr(callback)}
    assert got.events[0].actions.state_delta == {"later": repr(callback)}


@pytest.mark.parametrize(
    "timestamp",
    [time.time(), 1700000000.123, 1.0, 0.1, 12345.678901234567, 0.1 + 1e-12, 5e-324, -86400.25],
)
async def test_event_timestamps_come_back_as_the_same_float(
    session_service: GrpcSessionService, app: str, timestamp: float
) -> None:
    session = await session_service.create_session(app_name=app, user_id="u")
    event = Event(author="user", timestamp=timestamp)
    await session_service.append_event(session, event)
    got = await session_service.get_session(app_name=app, user_id="u", session_id=session.id)
    assert got is not None
    assert got.events[0].timestamp == timestamp
    assert got.last_update_time == timestamp
    assert got == session


def test_one_service_serves_successive_event_loops(servers: tuple[str, str], app: str) -> None:
    # Scripts may call asyncio.run more than once with one service; each loop gets its channel.
    service = GrpcSessionService(servers[0])
    created = asyncio.run(service.create_session(app_name=app, user_id="u", session_id="s"))
    assert asyncio.run(service.get_session(app_name=app, user_id="u", session_id="s")) == created
    asyncio.run(service.close())
