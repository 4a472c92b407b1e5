"""Validity in time through ``GrpcMemoryService`` against memory-svc: memories written with
``valid_from`` (and ``invalid_at``), searches and listings as of now, as of a past time, and
with superseded memories too; every entry says when it was valid."""

from __future__ import annotations

import datetime

import pytest
from google.adk.memory.memory_entry import MemoryEntry
from google.genai import types

from adk_grpc_services import GrpcMemoryService, TimedMemoryEntry

USER = "alice"
UTC = datetime.timezone.utc
BERLIN_FROM = datetime.datetime(2024, 1, 10, 9, tzinfo=UTC)
MOVED = datetime.datetime(2025, 5, 1, tzinfo=UTC)


def content(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


def local_iso(at: datetime.datetime) -> str:
    """A time as the client spells entries' times: ISO 8601, naive local time."""
    return at.astimezone().replace(tzinfo=None).isoformat()


def texts(entries: list[MemoryEntry]) -> list[str]:
    return [e.content.parts[0].text or "" for e in entries if e.content.parts]


async def test_memories_are_found_when_they_were_valid(
    memory_service: GrpcMemoryService, app: str
) -> None:
    berlin = TimedMemoryEntry(
        id="berlin",
        content=content("Alice lives in Berlin."),
        valid_from=local_iso(BERLIN_FROM),
        invalid_at=local_iso(MOVED),
    )
    await memory_service.add_memory(app_name=app, user_id=USER, memories=[berlin])
    lisbon = MemoryEntry(id="lisbon", content=content("Alice lives in Lisbon."))
    await memory_service.add_memory(app_name=app, user_id=USER, memories=[lisbon], valid_from=MOVED)

    async def search(**validity: object) -> list[str]:
        found = await memory_service.search_memory(
            app_name=app,
            user_id=USER,
            query="Alice lives",
            **validity,  # type: ignore[arg-type]
        )
        return sorted(texts(found.memories))

    assert await search() == ["Alice lives in Lisbon."]
    assert await search(as_of=MOVED - datetime.timedelta(days=1)) == ["Alice lives in Berlin."]
    assert await search(as_of=MOVED) == ["Alice lives in Lisbon."]
    assert await search(as_of=BERLIN_FROM - datetime.timedelta(seconds=1)) == []
    assert await search(include_superseded=True) == [
        "Alice lives in Berlin.",
        "Alice lives in Lisbon.",
    ]

    listed = [
        m
        async for m in memory_service.list_memories(
            app_name=app, user_id=USER, include_superseded=True
        )
    ]
    assert [(m.id, m.valid_from, m.invalid_at) for m in listed] == [
        ("berlin", local_iso(BERLIN_FROM), local_iso(MOVED)),
        ("lisbon", local_iso(MOVED), None),
    ]
    now = [m.id async for m in memory_service.list_memories(app_name=app, user_id=USER)]
    assert now == ["lisbon"]
    then = [
        m.id
        async for m in memory_service.list_memories(app_name=app, user_id=USER, as_of=BERLIN_FROM)
    ]
    assert then == ["berlin"]


async def test_a_validity_ending_before_it_begins_is_refused(
    memory_service: GrpcMemoryService, app: str
) -> None:
    backwards = TimedMemoryEntry(
        content=content("A fact."),
        valid_from=local_iso(MOVED),
        invalid_at=local_iso(BERLIN_FROM),
    )
    with pytest.raises(ValueError, match=r"memories\[0\]\.invalid_at"):
        await memory_service.add_memory(app_name=app, user_id=USER, memories=[backwards])
    assert [m async for m in memory_service.list_memories(app_name=app, user_id=USER)] == []
