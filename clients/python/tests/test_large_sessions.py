"""Large events and large sessions (#15): events up to the server's 16 MiB limit are appended
and read back, and a session far larger than any message limit is read whole (GetSession with a
byte budget, then ListEvents for the rest)."""

from __future__ import annotations

from google.adk.events.event import Event
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

from adk_grpc_services import GrpcSessionService

MIB = 1 << 20
USER = "u"


def big_event(i: int, size: int) -> Event:
    head = f"event {i}: "
    text = head + "x" * (size - len(head))
    return Event(
        author="user",
        invocation_id="inv",
        content=types.Content(role="user", parts=[types.Part(text=text)]),
    )


def texts(events: list[Event]) -> list[str]:
    return [e.content.parts[0].text or "" for e in events if e.content and e.content.parts]


async def test_events_of_5_and_15_mib_are_appended_and_read_back(
    session_service: GrpcSessionService, app: str
) -> None:
    session = await session_service.create_session(app_name=app, user_id=USER, session_id="big")
    sent = [big_event(0, 5 * MIB), big_event(1, 15 * MIB)]
    for event in sent:
        await session_service.append_event(session, event)
    stored = await session_service.get_session(app_name=app, user_id=USER, session_id="big")
    assert stored is not None
    assert texts(stored.events) == texts(sent)
    assert stored.events == session.events
    # The caller's session carries the marker of its last append: it can go on appending.
    await session_service.append_event(session, big_event(2, 10))


async def test_a_120_mib_session_is_read_whole(
    session_service: GrpcSessionService, app: str
) -> None:
    session = await session_service.create_session(app_name=app, user_id=USER, session_id="huge")
    sent = [big_event(i, MIB) for i in range(121)]
    for event in sent:
        await session_service.append_event(session, event)
    stored = await session_service.get_session(app_name=app, user_id=USER, session_id="huge")
    assert stored is not None
    assert sum(len(t) for t in texts(stored.events)) > 120 * MIB
    assert texts(stored.events) == texts(sent)
    assert stored.events == session.events
    assert stored.last_update_time == sent[-1].timestamp

    recent = await session_service.get_session(
        app_name=app,
        user_id=USER,
        session_id="huge",
        config=GetSessionConfig(num_recent_events=10),
    )
    assert recent is not None
    assert texts(recent.events) == texts(sent[-10:])
    # An append after a paged read is checked against the session as it was read.
    await session_service.append_event(stored, big_event(121, 10))
