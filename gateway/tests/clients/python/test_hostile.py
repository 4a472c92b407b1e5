"""Hostile input: malformed JSON-RPC, unknown tools, wrong types, oversize arguments and a
10,000-message burst get errors, write nothing, and leave the gateway serving."""

from __future__ import annotations

import asyncio

import httpx2

from conftest import TOKENS, Stack
from test_authorization import LEGACY, call, post

AUTH = {"Authorization": f"Bearer {TOKENS['alice']}"}


def memories(stack: Stack) -> list[dict[str, object]]:
    listed = post(stack, call("list_memories", {"page_size": 100}), AUTH).json()
    found: list[dict[str, object]] = listed["result"]["structuredContent"]["memories"]
    return found


def test_hostile_requests_get_errors_and_write_nothing(stack: Stack) -> None:
    before = memories(stack)
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": LEGACY,
        "Content-Type": "application/json",
        **AUTH,
    }
    malformed = httpx2.post(stack.url, content=b'{"jsonrpc": "2.0", "id": 1, "method": ', headers=headers)
    assert malformed.status_code == 400
    assert malformed.json()["error"]["code"] == -32700

    not_rpc = post(stack, {"hello": "world"}, AUTH)
    assert not_rpc.status_code == 400 and not_rpc.json()["error"]["code"] == -32600

    unknown = post(stack, call("drop_database", {}), AUTH).json()
    assert unknown["error"]["code"] == -32602

    wrong = post(stack, call("add_memory", {"text": 42}), AUTH).json()
    assert wrong["result"]["isError"] is True
    assert "text" in wrong["result"]["content"][0]["text"]

    missing = post(stack, call("add_memory", {}), AUTH).json()
    assert missing["result"]["isError"] is True

    bad_limit = post(stack, call("search_memory", {"query": "x", "limit": 1000}), AUTH).json()
    assert bad_limit["result"]["isError"] is True and "limit" in bad_limit["result"]["content"][0]["text"]

    oversize = post(stack, call("add_memory", {"text": "x" * 200_000}), AUTH).json()
    assert oversize["error"]["code"] == -32602

    too_long = post(stack, call("add_memory", {"text": "y" * 40_000}), AUTH).json()
    assert too_long["result"]["isError"] is True

    huge_body = httpx2.post(stack.url, content=b"[" + b"1," * 1_000_000 + b"1]", headers=headers)
    assert huge_body.status_code == 413

    assert memories(stack) == before


def test_a_burst_of_10000_messages(stack: Stack) -> None:
    before = memories(stack)
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": LEGACY, **AUTH}
    bodies = [
        call("add_memory", {"text": ["not", "text"]}, i)
        if i % 3 == 0
        else call("no_such_tool", {}, i)
        if i % 3 == 1
        else {"jsonrpc": "2.0", "id": i, "method": "no/such/method"}
        for i in range(10_000)
    ]

    async def run() -> list[int]:
        limits = httpx2.Limits(max_connections=64)
        async with httpx2.AsyncClient(headers=headers, limits=limits, timeout=60) as http:
            gate = asyncio.Semaphore(64)

            async def one(body: dict[str, object]) -> int:
                async with gate:
                    response = await http.post(stack.url, json=body)
                    answer = response.json()
                    assert response.status_code == 200, response.text
                    assert answer.get("error") or answer["result"].get("isError"), answer
                    return response.status_code

            return await asyncio.gather(*(one(b) for b in bodies))

    statuses = asyncio.run(run())
    assert len(statuses) == 10_000
    assert memories(stack) == before
    # Still serving.
    ok = post(stack, call("list_apps", {}), AUTH)
    assert ok.status_code == 200 and "result" in ok.json()
