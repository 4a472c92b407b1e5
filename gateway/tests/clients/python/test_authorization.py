"""Who may reach whose memory through the gateway: tokens, users, resource URIs, origins."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2

from conftest import TOKENS, Stack
from test_mcp_client import http_client, text_of

LEGACY = "2025-06-18"


def post(stack: Stack, body: Any, headers: dict[str, str] | None = None) -> httpx2.Response:
    base = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": LEGACY}
    return httpx2.post(stack.url, json=body, headers={**base, **(headers or {})}, timeout=30)


def call(name: str, arguments: Any, id: int = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


def test_missing_or_unknown_token_is_401_with_a_challenge(stack: Stack) -> None:
    missing = post(stack, call("list_apps", {}))
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"].startswith("Bearer ")
    unknown = post(stack, call("list_apps", {}), {"Authorization": "Bearer not-a-token-at-all"})
    assert unknown.status_code == 401
    assert 'error="invalid_token"' in unknown.headers["www-authenticate"]


def test_a_foreign_origin_is_refused(stack: Stack) -> None:
    auth = {"Authorization": f"Bearer {TOKENS['alice']}"}
    refused = post(stack, call("list_apps", {}), {**auth, "Origin": "https://evil.example"})
    assert refused.status_code == 403
    allowed = post(stack, call("list_apps", {}), auth)
    assert allowed.status_code == 200


def test_a_user_token_never_reaches_another_user(stack: Stack) -> None:
    async def run() -> None:
        async with http_client(stack, TOKENS["bob"]) as bob:
            kept = await bob.call_tool("add_memory", {"text": "Bob's locker code is 4711"})
            assert not kept.is_error
            bob_id = kept.structured_content["id"]
            await bob.call_tool("create_session", {"session_id": "bob-private"})
        async with http_client(stack, TOKENS["alice"]) as alice:
            attempts = [
                ("search_memory", {"query": "locker code", "user_id": "bob"}),
                ("list_memories", {"user_id": "bob"}),
                ("add_memory", {"text": "planted by alice", "user_id": "bob"}),
                ("delete_memory", {"memory_id": bob_id, "user_id": "bob"}),
                ("get_session", {"session_id": "bob-private", "user_id": "bob"}),
                ("list_sessions", {"user_id": "bob"}),
                (
                    "append_event",
                    {"session_id": "bob-private", "author": "user", "text": "x", "user_id": "bob"},
                ),
                ("create_session", {"session_id": "planted", "user_id": "bob"}),
                ("search_memory", {"query": "locker", "app_name": "other"}),
            ]
            for name, arguments in attempts:
                result = await alice.call_tool(name, arguments)
                assert result.is_error, (name, text_of(result))
                assert "permission denied" in text_of(result), (name, text_of(result))
            for uri in [
                "adk://apps/demo/users/bob/memory",
                "adk://apps/demo/users/bob/sessions/bob-private",
                "adk://apps/demo/users/%62ob/memory",
            ]:
                try:
                    await alice.read_resource(uri)
                except Exception as e:  # the SDK raises the JSON-RPC error
                    assert "permission denied" in str(e) or "not adk://" in str(e), (uri, e)
                else:
                    raise AssertionError(f"{uri} was readable with alice's token")
            # Her own scope is unaffected, and names her implicitly.
            own = await alice.call_tool("list_memories", {})
            assert "locker" not in text_of(own)
        async with http_client(stack, TOKENS["bob"]) as bob:
            mine = await bob.call_tool("list_memories", {})
            texts = text_of(mine)
            assert "locker code is 4711" in texts and "planted by alice" not in texts
            sessions = await bob.call_tool("list_sessions", {})
            assert [s["id"] for s in sessions.structured_content["sessions"]] == ["bob-private"]

    asyncio.run(run())


def test_a_token_of_several_users_must_name_one(stack: Stack) -> None:
    async def run() -> None:
        async with http_client(stack, TOKENS["team"]) as team:
            unnamed = await team.call_tool("list_memories", {})
            assert unnamed.is_error and "user_id is required" in text_of(unnamed)
            named = await team.call_tool("list_memories", {"user_id": "alice"})
            assert not named.is_error
            outside = await team.call_tool("list_memories", {"user_id": "mallory"})
            assert outside.is_error and "permission denied" in text_of(outside)

    asyncio.run(run())


def test_list_apps_is_filtered_by_the_token(stack: Stack) -> None:
    async def run() -> None:
        async with http_client(stack, TOKENS["ops"]) as ops:
            await ops.call_tool("create_session", {"app_name": "hidden", "user_id": "u"})
            everything = await ops.call_tool("list_apps", {})
            assert "hidden" in everything.structured_content["app_names"]
        async with http_client(stack, TOKENS["alice"]) as alice:
            apps = await alice.call_tool("list_apps", {})
            assert "hidden" not in apps.structured_content["app_names"]

    asyncio.run(run())
