"""GrpcMemoryService against memory-svc: ADK's in-memory memory service cases (M1), ported
with a fresh app name per test, plus direct writes and deletes."""

from __future__ import annotations

import unicodedata

import grpc
import pytest
from google.adk.events.event import Event
from google.adk.memory import _utils
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions.session import Session
from google.genai import types

from adk_grpc_services import GrpcMemoryService, GrpcSessionService, TimedMemoryEntry
from adk_grpc_services.memory_service import SearchMode

USER = "test-user"
OTHER_USER = "another-user"


def text_event(
    event_id: str, text: str, *, author: str = "user", timestamp: float = 12345.0
) -> Event:
    return Event(
        id=event_id,
        invocation_id=f"inv-{event_id}",
        author=author,
        timestamp=timestamp,
        content=types.Content(parts=[types.Part(text=text)]),
    )


def session_1(app: str) -> Session:
    return Session(
        app_name=app,
        user_id=USER,
        id="session-1",
        last_update_time=1000,
        events=[
            text_event("event-1a", "The ADK is a great toolkit."),
            # No content: not remembered.
            Event(id="event-1b", invocation_id="inv-2", author="user", timestamp=12346),
            text_event(
                "event-1c",
                "I agree. The Agent Development Kit (ADK) rocks!",
                author="model",
                timestamp=12347,
            ),
        ],
    )


def session_2(app: str) -> Session:
    return Session(
        app_name=app,
        user_id=USER,
        id="session-2",
        last_update_time=2000,
        events=[text_event("event-2a", "I like to code in Python.", timestamp=54321)],
    )


async def search(
    memory: GrpcMemoryService, app: str, query: str, user: str = USER
) -> list[MemoryEntry]:
    return (await memory.search_memory(app_name=app, user_id=user, query=query)).memories


async def test_search_returns_entries_shaped_as_adk_does(
    memory_service: GrpcMemoryService, app: str
) -> None:
    await memory_service.add_session_to_memory(session_1(app))
    await memory_service.add_session_to_memory(session_2(app))
    (found,) = await search(memory_service, app, "Python")
    event = session_2(app).events[0]
    # A MemoryEntry, shaped as ADK shapes it; beside its fields, when it was valid (from the
    # event's time).
    assert isinstance(found, MemoryEntry)
    adk_fields = found.model_dump(include=set(MemoryEntry.model_fields))
    assert MemoryEntry.model_validate(adk_fields) == MemoryEntry(
        id="event-2a",
        content=event.content,
        author="user",
        timestamp=_utils.format_timestamp(event.timestamp),  # naive local ISO (M1.5)
    )
    assert isinstance(found, TimedMemoryEntry)
    assert (found.valid_from, found.invalid_at) == (found.timestamp, None)


async def test_search_matches_words_case_insensitively(
    memory_service: GrpcMemoryService, app: str
) -> None:
    await memory_service.add_session_to_memory(session_1(app))
    # The entry saying it, then the turn before it, which has it as context.
    found = await search(memory_service, app, "development")
    assert [m.id for m in found] == ["event-1c", "event-1a"]
    assert {m.id for m in await search(memory_service, app, "How about ADK?")} == {
        "event-1a",
        "event-1c",
    }
    assert await search(memory_service, app, "nonexistent") == []
    assert await search(memory_service, app, "") == []


async def test_search_is_scoped_by_app_and_user(
    memory_service: GrpcMemoryService, app: str
) -> None:
    await memory_service.add_session_to_memory(session_1(app))
    secret = Session(
        app_name=app,
        user_id=OTHER_USER,
        id="session-3",
        events=[text_event("event-3a", "This is a secret.")],
    )
    await memory_service.add_session_to_memory(secret)
    assert await search(memory_service, app, "secret") == []
    assert [m.id for m in await search(memory_service, app, "secret", user=OTHER_USER)] == [
        "event-3a"
    ]
    # A slash in a name cannot alias another (app, user) pair.
    slashed = Session(
        app_name=f"{app}/x", user_id="y", id="s", events=[text_event("e", "another secret")]
    )
    await memory_service.add_session_to_memory(slashed)
    assert await search(memory_service, app, "secret", user="x/y") == []
    assert [m.id for m in await search(memory_service, f"{app}/x", "secret", user="y")] == ["e"]


async def test_add_session_replaces_that_sessions_memories(
    memory_service: GrpcMemoryService, app: str
) -> None:
    await memory_service.add_session_to_memory(session_1(app))
    shrunk = session_1(app)
    shrunk.events = shrunk.events[:1]
    await memory_service.add_session_to_memory(shrunk)
    assert [m.id for m in await search(memory_service, app, "ADK")] == ["event-1a"]
    await memory_service.add_session_to_memory(Session(app_name=app, user_id=USER, id="session-1"))
    assert await search(memory_service, app, "ADK") == []


async def test_add_events_appends_and_first_copy_of_an_id_wins(
    memory_service: GrpcMemoryService, app: str
) -> None:
    await memory_service.add_session_to_memory(session_1(app))
    await memory_service.add_events_to_memory(
        app_name=app,
        user_id=USER,
        session_id="session-1",
        events=[
            text_event("event-1d", "A new fact about gardening."),
            text_event("event-1a", "Updated duplicate text about gardening."),
        ],
    )
    # The new entry, then the turn before it, which now has it as context.
    assert [m.id for m in await search(memory_service, app, "gardening")] == [
        "event-1d",
        "event-1c",
    ]
    original = (await search(memory_service, app, "toolkit"))[0]
    assert original.id == "event-1a"
    # Without a session id the events still land, in a bucket of their own.
    await memory_service.add_events_to_memory(
        app_name=app, user_id=USER, events=[text_event("loose", "Loose notes on gardening.")]
    )
    assert {m.id for m in await search(memory_service, app, "gardening")} == {
        "event-1d",
        "event-1c",
        "loose",
    }


async def test_add_events_custom_metadata_comes_back(
    memory_service: GrpcMemoryService, app: str
) -> None:
    await memory_service.add_events_to_memory(
        app_name=app,
        user_id=USER,
        session_id="s",
        events=[text_event("tagged", "Tagged memory about kites.")],
        custom_metadata={"source": "import", "weight": 1.0},
    )
    (found,) = await search(memory_service, app, "kites")
    assert found.custom_metadata == {"source": "import", "weight": 1.0}


async def test_delete_memory_removes_it_for_good(
    memory_service: GrpcMemoryService, app: str
) -> None:
    await memory_service.add_session_to_memory(session_1(app))
    await memory_service.delete_memory(app_name=app, user_id=USER, memory_id="event-1a")
    assert [m.id for m in await search(memory_service, app, "ADK")] == ["event-1c"]
    # M1.6: a deleted id is not ingested again, by either path.
    await memory_service.add_session_to_memory(session_1(app))
    await memory_service.add_events_to_memory(
        app_name=app, user_id=USER, session_id="session-1", events=[session_1(app).events[0]]
    )
    assert [m.id for m in await search(memory_service, app, "ADK")] == ["event-1c"]
    # An empty id deletes nothing.
    await memory_service.delete_memory(app_name=app, user_id=USER, memory_id=None)
    await memory_service.delete_memory(app_name=app, user_id=USER, memory_id="")
    assert [m.id for m in await search(memory_service, app, "ADK")] == ["event-1c"]


async def test_add_memory_writes_entries_directly(
    memory_service: GrpcMemoryService, app: str
) -> None:
    stamped = MemoryEntry(
        id="fact-1",
        content=types.Content(
            role="user", parts=[types.Part(text="Alice drinks her coffee black.")]
        ),
        author="user",
        timestamp="2024-05-01T09:30:00",
        custom_metadata={"topic": "preferences"},
    )
    anonymous = MemoryEntry(
        content=types.Content(parts=[types.Part(text="Alice owns a red bicycle.")])
    )
    await memory_service.add_memory(
        app_name=app,
        user_id=USER,
        memories=[stamped, anonymous],
        custom_metadata={"origin": "import"},
    )
    (coffee,) = await search(memory_service, app, "coffee")
    # As written, valid from its timestamp.
    assert coffee == TimedMemoryEntry(
        **stamped.model_copy(
            update={"custom_metadata": {"origin": "import", "topic": "preferences"}}
        ).model_dump(),
        valid_from=stamped.timestamp,
    )
    (bicycle,) = await search(memory_service, app, "bicycle")
    assert bicycle.id and bicycle.id != "fact-1"
    assert (bicycle.author, bicycle.timestamp) == (None, None)
    assert bicycle.content == anonymous.content
    # Without a timestamp: valid from the time of the write.
    assert isinstance(bicycle, TimedMemoryEntry) and bicycle.valid_from is not None
    with pytest.raises(ValueError, match="ISO 8601"):
        await memory_service.add_memory(
            app_name=app,
            user_id=USER,
            memories=[stamped.model_copy(update={"timestamp": "last week"})],
        )


async def test_favorite_project_is_found(
    memory_service: GrpcMemoryService, session_service: GrpcSessionService, app: str
) -> None:
    """ADK's memory example: one session states a fact, a later question finds it."""
    session = await session_service.create_session(app_name=app, user_id=USER)
    for author, text in [
        ("user", "My favorite project is Project Alpha."),
        ("memory_agent", "Got it, Project Alpha is your favorite."),
        ("user", "The weather is nice today."),
    ]:
        await session_service.append_event(
            session,
            Event(
                invocation_id="inv-1",
                author=author,
                content=types.Content(parts=[types.Part(text=text)]),
            ),
        )
    await memory_service.add_session_to_memory(session)
    found = await search(memory_service, app, "What is my favorite project?")
    assert found[0].content.parts[0].text == "My favorite project is Project Alpha."
    assert found[0].id == session.events[0].id
    assert "The weather is nice today." not in [m.content.parts[0].text for m in found[:2]]


async def test_ranking_and_limit(memory_service: GrpcMemoryService, app: str) -> None:
    ranked = Session(
        app_name=app,
        user_id=USER,
        id="ranked",
        events=[
            text_event("a", "The deploy is ready."),
            text_event("b", "Ready."),
            text_event("c", "The deploy status is ready."),
        ],
    )
    await memory_service.add_session_to_memory(ranked)
    assert [m.id for m in await search(memory_service, app, "deploy status ready")][0] == "c"
    many = Session(
        app_name=app,
        user_id=USER,
        id="many",
        events=[text_event(f"n{i}", f"note {i} about work") for i in range(20)],
    )
    await memory_service.add_session_to_memory(many)
    assert len(await search(memory_service, app, "work")) == 10


@pytest.mark.parametrize(
    "text,query,expected",
    [
        ("私の名前は太郎です", "太郎", 1),
        ("私の名前は太郎です", "天気", 0),
        ("Меня зовут Алексей", "Алексей", 1),
        ("私はPythonでADKを使っています", "adk", 1),
        ("I like to code in Python.", "thon", 0),
        (unicodedata.normalize("NFD", "Meet at the Café"), "Café", 1),
    ],
)
async def test_search_non_latin(
    memory_service: GrpcMemoryService, app: str, text: str, query: str, expected: int
) -> None:
    await memory_service.add_session_to_memory(
        Session(app_name=app, user_id=USER, id="i18n", events=[text_event("i18n", text)])
    )
    assert len(await search(memory_service, app, query)) == expected


async def test_remembered_content_keeps_every_part(
    memory_service: GrpcMemoryService, app: str
) -> None:
    content = types.Content(
        role="model",
        parts=[
            types.Part(text="Chart of the quarterly numbers", thought=True),
            types.Part(inline_data=types.Blob(data=b"\x89PNG", mime_type="image/png")),
            types.Part(function_call=types.FunctionCall(name="plot", args={"q": [1, 2.5]})),
            types.Part(text="caption", video_metadata=types.VideoMetadata(fps=2.0)),
        ],
    )
    event = Event(id="rich", author="model", content=content, timestamp=1700000000.25)
    await memory_service.add_events_to_memory(
        app_name=app, user_id=USER, session_id="s", events=[event]
    )
    (found,) = await search(memory_service, app, "quarterly")
    assert found.content == content
    assert found.timestamp == _utils.format_timestamp(1700000000.25)


async def test_search_modes_without_an_embedding_model(
    memory_service: GrpcMemoryService, app: str
) -> None:
    """The test server has no ``--embedder``: auto is keyword search, and a search by meaning
    is refused, saying what it needs."""
    await memory_service.add_session_to_memory(session_1(app))
    await memory_service.add_session_to_memory(session_2(app))

    async def ids(mode: SearchMode) -> list[str | None]:
        found = await memory_service.search_memory(
            app_name=app, user_id=USER, query="Python", mode=mode
        )
        return [m.id for m in found.memories]

    assert await ids("auto") == await ids("keyword") == ["event-2a"]
    for mode in ("semantic", "hybrid"):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await ids(mode)
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "--embedder" in (refused.value.details() or "")


async def test_search_in_a_language_the_query_names(
    memory_service: GrpcMemoryService, app: str, servers: tuple[str, str]
) -> None:
    german = text_event("haus", "Wir haben letztes Jahr ein altes Haus am See gekauft")
    await memory_service.add_events_to_memory(
        app_name=app, user_id=USER, events=[german], session_id="s"
    )
    # German Snowball gives "Häuser" the stem of "Haus"; English leaves the word as it is.
    found = await memory_service.search_memory(
        app_name=app, user_id=USER, query="Häuser", language="de"
    )
    assert [m.id for m in found.memories] == ["haus"]
    english = await memory_service.search_memory(
        app_name=app, user_id=USER, query="Häuser", language="en"
    )
    assert english.memories == []
    with pytest.raises(ValueError, match="language"):
        await memory_service.search_memory(
            app_name=app, user_id=USER, query="Häuser", language="klingon"
        )
    # A service's default applies to every search that names no language, through ADK's own
    # signature; a search's own language wins.
    async with GrpcMemoryService(servers[1], search_language="de") as in_german:
        assert [m.id for m in (await search(in_german, app, "Häuser"))] == ["haus"]
        english = await in_german.search_memory(
            app_name=app, user_id=USER, query="Häuser", language="en"
        )
        assert english.memories == []
