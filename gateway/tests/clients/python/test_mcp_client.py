"""The Python MCP SDK against the real gateway and services: over streamable HTTP (the
sessionless 2026-07-28 protocol and the handshake versions) and over stdio."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import TextContent, TextResourceContents

from conftest import TOKENS, Stack

EXPECTED_TOOLS = {
    "search_memory",
    "add_memory",
    "list_memories",
    "delete_memory",
    "purge_memories",
    "generate_memories",
    "append_memory_stream",
    "flush_memory_stream",
    "list_sessions",
    "get_session",
    "create_session",
    "append_event",
    "list_apps",
}


def http_client(stack: Stack, token: str, **kwargs: Any) -> Client:
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=30)
    return Client(streamable_http_client(stack.url, http_client=http), **kwargs)


def text_of(result: Any) -> str:
    return "\n".join(str(c.text) for c in result.content if getattr(c, "text", None) is not None)


async def round_trip(client: Client, user: str) -> None:
    """Lists the tools, adds a memory, finds it, reads a session resource, deletes the memory."""
    tools = await client.list_tools()
    assert {t.name for t in tools.tools} == EXPECTED_TOOLS
    search = next(t for t in tools.tools if t.name == "search_memory")
    assert search.input_schema["required"] == ["query"]
    assert {"query", "limit", "mode", "filters", "app_name", "user_id"} <= set(
        search.input_schema["properties"]
    )

    fact = f"{user} keeps a {uuid.uuid4().hex[:8]} bonsai on the windowsill"
    added = await client.call_tool("add_memory", {"text": fact})
    assert not added.is_error, text_of(added)
    memory_id = added.structured_content["id"]

    found = await client.call_tool("search_memory", {"query": "bonsai windowsill", "limit": 5})
    assert not found.is_error, text_of(found)
    assert [m["id"] for m in found.structured_content["memories"]] == [memory_id]
    assert fact in text_of(found)

    await filter_and_purge(client, user)
    await stream_and_flush(client)

    session_id = f"s-{uuid.uuid4().hex[:8]}"
    created = await client.call_tool("create_session", {"session_id": session_id})
    assert not created.is_error, text_of(created)
    appended = await client.call_tool(
        "append_event", {"session_id": session_id, "author": "user", "text": "Water the bonsai on Sundays."}
    )
    assert not appended.is_error, text_of(appended)
    resource = await client.read_resource(f"adk://apps/demo/users/{user}/sessions/{session_id}")
    contents = resource.contents[0]
    assert isinstance(contents, TextResourceContents)
    assert "1. user: Water the bonsai on Sundays." in contents.text

    prompt = await client.get_prompt("memory_context", {"question": "Where is the bonsai?"})
    message = prompt.messages[0].content
    assert isinstance(message, TextContent)
    assert fact in message.text

    deleted = await client.call_tool("delete_memory", {"memory_id": memory_id})
    assert deleted.structured_content == {"deleted": 1}
    again = await client.call_tool("search_memory", {"query": "bonsai windowsill"})
    assert again.structured_content["memories"] == []


def ids(result: Any, field: str = "memories") -> list[str]:
    assert not result.is_error, text_of(result)
    return [m["id"] for m in result.structured_content[field]]


async def filter_and_purge(client: Client, user: str) -> None:
    """A search filtered by metadata, then a purge: a dry run that deletes nothing, then forced."""
    batch = uuid.uuid4().hex[:8]
    tagged = await client.call_tool(
        "add_memory", {"text": f"{user} flies a kite on the beach", "metadata": {"batch": batch, "n": 3}}
    )
    assert not tagged.is_error, text_of(tagged)
    tagged_id = tagged.structured_content["id"]
    other = await client.call_tool(
        "add_memory", {"text": f"{user} flies a kite in the park", "metadata": {"batch": batch, "n": 1}}
    )
    other_id = other.structured_content["id"]
    this_batch = {"key": "batch", "op": "=", "value": batch}
    rule = {"metadata": [[this_batch, {"key": "n", "op": ">=", "value": 3}]]}

    found = await client.call_tool("search_memory", {"query": "kite", "filters": rule})
    assert ids(found) == [tagged_id]
    both = await client.call_tool("list_memories", {"filters": {"metadata": [[this_batch]]}})
    assert ids(both) == [tagged_id, other_id]

    dry = await client.call_tool("purge_memories", {"filters": rule})
    assert ids(dry, "sample") == [tagged_id]
    assert dry.structured_content["count"] == 1 and dry.structured_content["deleted"] is False
    again = await client.call_tool("search_memory", {"query": "kite", "filters": rule})
    assert ids(again) == [tagged_id], "a dry run deletes nothing"

    forced = await client.call_tool("purge_memories", {"filters": rule, "force": True})
    assert not forced.is_error, text_of(forced)
    assert forced.structured_content["count"] == 1 and forced.structured_content["deleted"] is True
    left = await client.call_tool("list_memories", {"filters": {"metadata": [[this_batch]]}})
    assert ids(left) == [other_id]

    bad = await client.call_tool(
        "search_memory", {"query": "kite", "filters": {"metadata": [[{"key": "n", "op": "<"}]]}}
    )
    assert bad.is_error and "filters.metadata[0][0].value" in text_of(bad)
    cleaned = await client.call_tool("delete_memory", {"memory_id": other_id})
    assert cleaned.structured_content == {"deleted": 1}


async def stream_and_flush(client: Client) -> None:
    """A turn appended twice with one event id is buffered once; a flush hands it to a job."""
    stream = f"chat-{uuid.uuid4().hex[:8]}"
    turn = {"stream_id": stream, "text": "I moved to Lisbon.", "event_id": "t1"}
    first = await client.call_tool("append_memory_stream", turn)
    assert not first.is_error, text_of(first)
    assert first.structured_content == {"event_id": "t1", "appended": 1, "buffered": 1, "job_id": None}
    again = await client.call_tool("append_memory_stream", turn)
    assert again.structured_content == {"event_id": "t1", "appended": 0, "buffered": 1, "job_id": None}
    flushed = await client.call_tool("flush_memory_stream", {"stream_id": stream})
    assert not flushed.is_error, text_of(flushed)
    assert flushed.structured_content["job_id"], text_of(flushed)
    empty = await client.call_tool("flush_memory_stream", {"stream_id": stream})
    assert empty.structured_content == {"job_id": None}


def test_streamable_http_2026(stack: Stack) -> None:
    async def run() -> None:
        async with http_client(stack, TOKENS["alice"]) as client:
            assert client.session.protocol_version == "2026-07-28"
            await round_trip(client, "alice")

    asyncio.run(run())


def test_streamable_http_handshake(stack: Stack) -> None:
    async def run() -> None:
        async with http_client(stack, TOKENS["alice"], mode="legacy") as client:
            assert client.session.protocol_version == "2025-11-25"
            await round_trip(client, "alice")

    asyncio.run(run())


@pytest.mark.parametrize("version", ["2025-03-26", "2025-06-18"])
def test_older_protocol_versions(stack: Stack, version: str) -> None:
    """A client of an older revision gets that revision, and its calls work without a session."""
    headers = {
        "Authorization": f"Bearer {TOKENS['alice']}",
        "Accept": "application/json, text/event-stream",
    }
    with httpx2.Client(headers=headers, timeout=30) as http:
        init = http.post(
            stack.url,
            json={
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": version,
                    "capabilities": {},
                    "clientInfo": {"name": "old-client", "version": "1"},
                },
            },
        )
        assert init.status_code == 200, init.text
        assert init.json()["result"]["protocolVersion"] == version
        call = http.post(
            stack.url,
            headers={"MCP-Protocol-Version": version},
            json={
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "add_memory", "arguments": {"text": f"Alice speaks MCP {version}"}},
            },
        )
        assert call.status_code == 200, call.text
        result = call.json()["result"]
        assert result.get("isError") is not True, result
        listed = http.post(
            stack.url,
            headers={"MCP-Protocol-Version": version},
            json={"jsonrpc": "2.0", "id": 3, "method": "tools/list"},
        )
        assert {t["name"] for t in listed.json()["result"]["tools"]} == EXPECTED_TOOLS
        memory_id = result["structuredContent"]["id"]
        http.post(
            stack.url,
            headers={"MCP-Protocol-Version": version},
            json={
                "jsonrpc": "2.0",
                "id": 4,
                "method": "tools/call",
                "params": {"name": "delete_memory", "arguments": {"memory_id": memory_id}},
            },
        ).raise_for_status()


def test_stdio(stack: Stack) -> None:
    params = StdioServerParameters(
        command=str(stack.gateway),
        args=[
            "mcp",
            "--stdio",
            "--app",
            "demo",
            "--user",
            "carol",
            "--session-endpoint",
            stack.session_endpoint,
            "--memory-endpoint",
            stack.memory_endpoint,
            "--token-file",
            str(stack.ops_token_file),
        ],
    )

    async def run() -> None:
        async with Client(params) as client:
            await round_trip(client, "carol")

    asyncio.run(run())


def test_typescript_sdk(stack: Stack) -> None:
    """The TypeScript SDK's test (typescript/src), against this stack."""
    import os
    import subprocess
    from pathlib import Path

    folder = Path(__file__).resolve().parents[1] / "typescript"
    env = {**os.environ, "GATEWAY_URL": stack.url, "GATEWAY_TOKEN": TOKENS["alice"]}
    run = subprocess.run(
        ["node", "--test", "dist/"], check=False, cwd=folder, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "# pass 1" in run.stdout, run.stdout
