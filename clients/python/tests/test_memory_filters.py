"""Filters of ``search_memory`` and ``list_memories`` against memory-svc: conditions on
``custom_metadata`` (this client's form and Memory Bank's ``filter_groups``), topics, author and
time."""

from __future__ import annotations

import datetime

import pytest
from google.adk.memory.memory_entry import MemoryEntry
from google.genai import types

from adk_grpc_services import GrpcMemoryService

USER = "filter-user"
T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)


def entry(i: int) -> MemoryEntry:
    seen = (T0 + datetime.timedelta(hours=i)).isoformat().replace("+00:00", "Z")
    metadata: dict[str, object] = {"n": i, "color": ["red", "green", "blue"][i % 3], "seen": seen}
    if i % 5 == 0:
        metadata["topic"] = "pets"
        metadata["vip"] = True
    return MemoryEntry(
        id=f"m{i:02}",
        author="alice" if i % 2 else "bob",
        timestamp=(T0 + datetime.timedelta(seconds=i)).isoformat(),
        content=types.Content(role="user", parts=[types.Part(text=f"garden note {i}")]),
        custom_metadata=metadata,
    )


async def listed(service: GrpcMemoryService, app: str, **filters: object) -> list[str]:
    return [
        m.id or ""
        async for m in service.list_memories(
            app_name=app,
            user_id=USER,
            page_size=3,
            **filters,  # type: ignore[arg-type]
        )
    ]


async def test_filters_select_by_metadata(memory_service: GrpcMemoryService, app: str) -> None:
    await memory_service.add_memory(
        app_name=app, user_id=USER, memories=[entry(i) for i in range(20)]
    )
    ids = lambda keep: [f"m{i:02}" for i in range(20) if keep(i)]  # noqa: E731

    assert await listed(memory_service, app, where=[[("n", "<", 3)]]) == ids(lambda i: i < 3)
    assert await listed(
        memory_service, app, where=[[("color", "==", "red"), ("n", ">=", 10)], [("vip", "exists")]]
    ) == ids(lambda i: (i % 3 == 0 and i >= 10) or i % 5 == 0)
    assert await listed(memory_service, app, where=[[("color", "!=", "red"), ("n", "<=", 4)]]) == (
        ids(lambda i: i % 3 != 0 and i <= 4)
    )
    assert await listed(
        memory_service, app, where=[[("seen", ">", T0 + datetime.timedelta(hours=17))]]
    ) == ids(lambda i: i > 17)
    assert await listed(memory_service, app, topics=["pets"], author="bob") == ids(
        lambda i: i % 5 == 0 and i % 2 == 0
    )
    assert await listed(
        memory_service,
        app,
        after=T0 + datetime.timedelta(seconds=5),
        before=T0 + datetime.timedelta(seconds=8),
    ) == ids(lambda i: 5 <= i < 8)
    # Memory Bank's filter_groups: EQUAL, GREATER_THAN negated (<=), LESS_THAN.
    groups = [
        {
            "filters": [
                {"key": "color", "value": {"string_value": "blue"}, "op": "EQUAL"},
                {"key": "n", "value": {"double_value": 7}, "op": "GREATER_THAN", "negate": True},
            ]
        },
        {"filters": [{"key": "n", "value": {"double_value": 1}, "op": "LESS_THAN"}]},
    ]
    assert await listed(memory_service, app, filter_groups=groups) == ids(
        lambda i: (i % 3 == 2 and i <= 7) or i < 1
    )

    # A search ranks among the memories that pass; the limit applies after filtering.
    found = await memory_service.search_memory(
        app_name=app, user_id=USER, query="garden note", where=[[("n", ">=", 15)]]
    )
    assert sorted(m.id or "" for m in found.memories) == ids(lambda i: i >= 15)
    assert all((m.custom_metadata or {})["n"] >= 15 for m in found.memories)


async def test_bad_conditions_are_rejected(memory_service: GrpcMemoryService, app: str) -> None:
    with pytest.raises(ValueError, match=r"filter\.any_of\[0\]\.all_of\[0\]\.value"):
        await memory_service.search_memory(
            app_name=app, user_id=USER, query="garden", where=[[("color", "<", "red")]]
        )
    with pytest.raises(ValueError, match="not an operator"):
        await listed(memory_service, app, where=[[("color", "~", "red")]])


async def test_purge_is_a_dry_run_unless_forced(
    memory_service: GrpcMemoryService, app: str
) -> None:
    await memory_service.add_memory(
        app_name=app, user_id=USER, memories=[entry(i) for i in range(20)]
    )
    dry = await memory_service.purge_memories(app_name=app, where=[[("n", ">=", 15)]])
    assert dry.count == 5
    assert [m.id for m in dry.sample] == [f"m{i}" for i in range(15, 20)]
    assert dry.operation_id is None
    assert len(await listed(memory_service, app)) == 20
    forced = await memory_service.purge_memories(
        app_name=app, user_id=USER, where=[[("n", ">=", 15)]], force=True
    )
    assert forced.count == 5 and forced.operation_id
    assert await listed(memory_service, app) == [f"m{i:02}" for i in range(15)]
    with pytest.raises(ValueError, match="filter"):
        await memory_service.purge_memories(app_name=app, force=True)
