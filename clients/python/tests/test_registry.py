"""The grpc:// and grpcs:// service URIs: resolution through ADK's service registry, and a real
``adk api_server --session_service_uri grpc://... --memory_service_uri grpc://...``."""

from __future__ import annotations

import uuid
from pathlib import Path

import grpc
import pytest
from api_server import api_server, http
from google.adk.cli.service_registry import ServiceRegistry, get_service_registry
from google.adk.cli.utils.service_factory import (
    create_memory_service_from_options,
    create_session_service_from_options,
)

from adk_grpc_services import GrpcMemoryService, GrpcSessionService, register


async def test_importing_the_package_registers_the_schemes(
    servers: tuple[str, str], app: str
) -> None:
    session_uri, memory_uri = (f"grpc://{address}" for address in servers)
    sessions = get_service_registry().create_session_service(session_uri, agents_dir="/unused")
    memory = get_service_registry().create_memory_service(memory_uri, agents_dir="/unused")
    assert isinstance(sessions, GrpcSessionService) and sessions.target == servers[0]
    assert isinstance(memory, GrpcMemoryService) and memory.target == servers[1]
    async with sessions, memory:
        created = await sessions.create_session(app_name=app, user_id="u", state={"k": 1})
        assert (
            await sessions.get_session(app_name=app, user_id="u", session_id=created.id) == created
        )
        await memory.search_memory(app_name=app, user_id="u", query="anything")


async def test_adk_cli_service_factories_resolve_grpc_uris(
    tmp_path: Path, servers: tuple[str, str]
) -> None:
    # The functions `adk web` / `adk api_server` / `adk run` build their services with.
    sessions = create_session_service_from_options(
        base_dir=tmp_path, session_service_uri=f"grpc://{servers[0]}"
    )
    memory = create_memory_service_from_options(
        base_dir=tmp_path, memory_service_uri=f"grpc://{servers[1]}"
    )
    assert isinstance(sessions, GrpcSessionService) and sessions.target == servers[0]
    assert isinstance(memory, GrpcMemoryService) and memory.target == servers[1]


def test_register_onto_a_given_registry() -> None:
    registry = ServiceRegistry()
    assert registry.create_session_service("grpc://db:1") is None
    register(registry)
    register(registry)  # idempotent

    plain = registry.create_session_service("grpc://sessions.internal")
    assert isinstance(plain, GrpcSessionService)
    assert (plain.target, plain._connection.credentials) == ("sessions.internal:50051", None)

    tls = registry.create_memory_service("grpcs://[::1]:8443/")
    assert isinstance(tls, GrpcMemoryService)
    assert tls.target == "[::1]:8443"
    assert isinstance(tls._connection.credentials, grpc.ChannelCredentials)
    default_port = registry.create_memory_service("grpc://memory.internal")
    assert default_port is not None and default_port.target == "memory.internal:50052"


@pytest.mark.parametrize(
    "uri",
    ["grpc://", "grpc://host:1/path", "grpc://host:1?tls=1", "grpc://user@host:1", "http://host:1"],
)
def test_malformed_uris_are_refused(uri: str) -> None:
    with pytest.raises(ValueError):
        GrpcSessionService.from_uri(uri)


async def test_adk_api_server_with_grpc_uris(
    tmp_path: Path,
    servers: tuple[str, str],
    session_service: GrpcSessionService,
    memory_service: GrpcMemoryService,
) -> None:
    """``adk api_server``, with a services.py importing this package, stores through our servers."""
    agents = tmp_path / "agents"
    (agents / "notes").mkdir(parents=True)
    (agents / "services.py").write_text(
        "import adk_grpc_services  # registers grpc:// and grpcs://\n"
    )
    (agents / "notes" / "__init__.py").write_text("from . import agent\n")
    (agents / "notes" / "agent.py").write_text(
        "from google.adk.agents import Agent\n"
        "root_agent = Agent(name='notes', model='gemini-2.0-flash', instruction='Take notes.')\n"
    )
    with api_server(
        agents,
        session_uri=f"grpc://{servers[0]}",
        memory_uri=f"grpc://{servers[1]}",
        workdir=tmp_path,
    ) as base:
        assert http("GET", f"{base}/list-apps") == ["notes"]
        # The agent folder fixes the app name; a fresh user keeps runs against one server apart.
        user = f"user-{uuid.uuid4().hex[:12]}"
        created = http(
            "POST",
            f"{base}/apps/notes/users/{user}/sessions",
            {
                "sessionId": "s1",
                "state": {"user:lang": "en", "count": 1.0},
                "events": [
                    {
                        "author": "user",
                        "content": {
                            "role": "user",
                            "parts": [{"text": "My favorite project is Project Alpha."}],
                        },
                    }
                ],
            },
        )
        assert created["state"] == {"user:lang": "en", "count": 1.0}
        http("PATCH", f"{base}/apps/notes/users/{user}/sessions/s1", {"stateDelta": {"count": 2}})
        http("PATCH", f"{base}/apps/notes/users/{user}/memory", {"sessionId": "s1"})

    stored = await session_service.get_session(app_name="notes", user_id=user, session_id="s1")
    assert stored is not None
    assert stored.state == {"user:lang": "en", "count": 2}
    assert [e.actions.state_delta for e in stored.events] == [{}, {"count": 2}]
    found = await memory_service.search_memory(
        app_name="notes", user_id=user, query="favorite project"
    )
    assert [m.content.parts[0].text for m in found.memories] == [
        "My favorite project is Project Alpha."
    ]
    assert found.memories[0].id == stored.events[0].id
