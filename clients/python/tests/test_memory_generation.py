"""Memory generation through GrpcMemoryService: a real memory-svc started with ``--generator``
pointing at a local HTTP server that stands in for an OpenAI-compatible chat model and answers
as each test scripts it. The ``custom_metadata`` keys of ``VertexAiMemoryBankService`` map onto
the generation RPCs."""

from __future__ import annotations

import asyncio
import datetime
import json
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
import pytest
from conftest import start_server
from google.adk.events.event import Event
from google.adk.sessions.session import Session
from google.genai import types

from adk_grpc_services import GrpcMemoryService
from adk_grpc_services._proto.adk.memory.v1 import memory_pb2 as mpb
from adk_grpc_services.memory_service import generation_options

USER = "u"


class StandIn:
    """The scripted model: answers are popped in order; every request body is kept."""

    def __init__(self) -> None:
        self.answers: deque[str] = deque()
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def facts(self, *facts: tuple[str, str, list[str]]) -> None:
        content = {
            "facts": [{"topic": t, "fact": f, "source_event_ids": ids} for t, f, ids in facts]
        }
        with self.lock:
            self.answers.append(json.dumps(content))

    def text(self, text: str) -> None:
        with self.lock:
            self.answers.append(text)


def handler(stand_in: StandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the http.server name)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with stand_in.lock:
                stand_in.requests.append(body)
                content = stand_in.answers.popleft() if stand_in.answers else None
            if content is None:
                self.send_response(418)
                self.end_headers()
                return
            reply = json.dumps(
                {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass

    return Handler


@pytest.fixture(scope="module")
def generating(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, StandIn]]:
    """(memory-svc address, its stand-in model)."""
    stand_in = StandIn()
    http = ThreadingHTTPServer(("127.0.0.1", 0), handler(stand_in))
    threading.Thread(target=http.serve_forever, daemon=True).start()
    base_url = f"http://127.0.0.1:{http.server_address[1]}/v1"
    server = start_server(
        "memory-svc",
        tmp_path_factory.mktemp("generating"),
        "--generator",
        f"openai:{base_url}",
        "--generator-model",
        "stand-in",
    )
    yield server.address, stand_in
    server.stop()
    http.shutdown()


@pytest.fixture
async def service(generating: tuple[str, StandIn]) -> AsyncIterator[GrpcMemoryService]:
    async with GrpcMemoryService(generating[0]) as service:
        yield service


@pytest.fixture
def model(generating: tuple[str, StandIn]) -> StandIn:
    return generating[1]


def event(event_id: str, text: str) -> Event:
    return Event(
        id=event_id,
        invocation_id=f"inv-{event_id}",
        author="user",
        timestamp=1000.0,
        content=types.Content(role="user", parts=[types.Part(text=text)]),
    )


def texts(response: Any) -> list[str]:
    return sorted(m.content.parts[0].text for m in response.memories)


async def test_add_session_generates_with_vertex_options(
    service: GrpcMemoryService, model: StandIn, app: str
) -> None:
    model.facts(("preferences", "The user prefers window seats.", ["e1"]))
    session = Session(
        app_name=app, user_id=USER, id="s1", events=[event("e1", "A window seat, please.")]
    )
    await service.add_session_to_memory(
        session,
        custom_metadata={
            "wait_for_completion": True,
            "ttl": "3600s",
            "allowed_topics": [{"managed_memory_topic": "USER_PREFERENCES"}],
        },
    )
    # ADK's search_memory returns the raw turn and the generated fact.
    found = await service.search_memory(app_name=app, user_id=USER, query="window seat")
    assert texts(found) == ["A window seat, please.", "The user prefers window seats."]
    generated = await service.search_memory(
        app_name=app, user_id=USER, query="window seat", kind="generated"
    )
    (fact,) = generated.memories
    assert fact.custom_metadata["kind"] == "generated"
    assert fact.custom_metadata["topic"] == "preferences"
    assert fact.custom_metadata["source_event_ids"] == ["e1"]
    assert "expire_time" in fact.custom_metadata
    # Only the allowed topic was offered to the model.
    prompt = model.requests[-1]["messages"][1]["content"]
    assert "- preferences:" in prompt and "- plans:" not in prompt
    revisions = await service.list_memory_revisions(app_name=app, user_id=USER)
    assert [(r.action, r.new_fact) for r in revisions] == [
        (mpb.REVISION_ACTION_ADDED, "The user prefers window seats.")
    ]


async def test_add_events_keeps_other_metadata_on_the_raw_entries(
    service: GrpcMemoryService, model: StandIn, app: str
) -> None:
    model.facts(("personal_facts", "The user lives in Berlin.", ["b1"]))
    await service.add_events_to_memory(
        app_name=app,
        user_id=USER,
        events=[event("b1", "I live in Berlin.")],
        custom_metadata={
            "wait_for_completion": True,
            "disable_consolidation": True,
            "source": "chat",
        },
    )
    raw = await service.search_memory(app_name=app, user_id=USER, query="Berlin", kind="raw")
    assert [m.custom_metadata for m in raw.memories] == [{"source": "chat"}]
    generated = await service.search_memory(
        app_name=app, user_id=USER, query="Berlin", kind="generated"
    )
    assert texts(generated) == ["The user lives in Berlin."]


async def test_a_rollback_restores_a_fact(
    service: GrpcMemoryService, model: StandIn, app: str
) -> None:
    model.facts(("personal_facts", "The user lives in Berlin.", ["r1"]))
    await service.generate_memories(
        app_name=app,
        user_id=USER,
        events=[event("r1", "I live in Berlin.")],
        wait_for_completion=True,
    )
    (berlin,) = await service.list_memory_revisions(app_name=app, user_id=USER)
    model.facts(("personal_facts", "The user lives in Lisbon.", ["r2"]))
    decision = {
        "fact": 0,
        "action": "update",
        "memory_id": berlin.memory_id,
        "text": "The user lives in Lisbon.",
    }
    model.text(json.dumps({"decisions": [decision]}))
    await service.generate_memories(
        app_name=app,
        user_id=USER,
        events=[event("r2", "I moved to Lisbon.")],
        wait_for_completion=True,
    )
    rolled = await service.rollback_memory(
        app_name=app, user_id=USER, memory_id=berlin.memory_id, revision_id=berlin.revision_id
    )
    assert rolled.action == mpb.REVISION_ACTION_ROLLED_BACK
    assert rolled.restored_revision_id == berlin.revision_id
    assert (rolled.previous_fact, rolled.new_fact) == (
        "The user lives in Lisbon.",
        "The user lives in Berlin.",
    )
    generated = await service.search_memory(
        app_name=app, user_id=USER, query="lives", kind="generated"
    )
    assert texts(generated) == ["The user lives in Berlin."]
    with pytest.raises(ValueError, match="revision_id"):
        await service.rollback_memory(
            app_name=app, user_id=USER, memory_id=berlin.memory_id, revision_id="none"
        )


async def test_given_facts_are_consolidated_without_extraction(
    service: GrpcMemoryService, model: StandIn, app: str
) -> None:
    asked = len(model.requests)
    job = await service.generate_memories(
        app_name=app,
        user_id=USER,
        facts=["The user speaks Portuguese."],
        wait_for_completion=True,
    )
    assert job.added == 1
    assert len(model.requests) == asked
    generated = await service.search_memory(
        app_name=app, user_id=USER, query="Portuguese", kind="generated"
    )
    assert texts(generated) == ["The user speaks Portuguese."]
    with pytest.raises(ValueError, match="not both"):
        await service.generate_memories(
            app_name=app, user_id=USER, facts=["x"], events=[event("p1", "Olá")]
        )


async def test_background_generation_and_its_job(
    service: GrpcMemoryService, model: StandIn, app: str
) -> None:
    model.facts(("plans", "The user runs a marathon in October.", ["m1"]))
    job = await service.generate_memories(
        app_name=app, user_id=USER, events=[event("m1", "Marathon in October!")]
    )
    assert job.state == mpb.GENERATION_STATE_PENDING
    for _ in range(200):
        job = await service.get_generation_job(app_name=app, user_id=USER, job_id=job.id)
        if job.state == mpb.GENERATION_STATE_SUCCEEDED:
            break
        await asyncio.sleep(0.05)
    assert job.state == mpb.GENERATION_STATE_SUCCEEDED
    assert job.added == 1


async def test_a_stream_buffers_each_event_once_and_a_flush_generates(
    service: GrpcMemoryService, model: StandIn, app: str
) -> None:
    model.facts(("preferences", "The user drinks oat milk.", ["o1"]))
    silent = Event(id="o0", invocation_id="inv-o0", author="user", timestamp=1000.0)
    appended = await service.append_memory_stream(
        app_name=app,
        user_id=USER,
        stream_id="chat",
        events=[event("o1", "Oat milk, please."), event("o1", "Oat milk, please."), silent],
    )
    assert (appended.appended, appended.buffered, appended.job) == (1, 1, None)
    again = await service.append_memory_stream(
        app_name=app, user_id=USER, stream_id="chat", events=[event("o1", "Oat milk, please.")]
    )
    assert (again.appended, again.buffered) == (0, 1)
    [listed] = await service.list_memory_streams(app_name=app, user_id=USER)
    assert (listed.stream_id, listed.buffered) == ("chat", 1)
    assert abs(listed.last_append_time - time.time()) < 60
    job = await service.flush_memory_stream(app_name=app, user_id=USER, stream_id="chat")
    assert job is not None
    for _ in range(200):
        job = await service.get_generation_job(app_name=app, user_id=USER, job_id=job.id)
        if job.state == mpb.GENERATION_STATE_SUCCEEDED:
            break
        await asyncio.sleep(0.05)
    assert job.state == mpb.GENERATION_STATE_SUCCEEDED
    assert job.added == 1
    assert await service.flush_memory_stream(app_name=app, user_id=USER, stream_id="chat") is None
    assert await service.list_memory_streams(app_name=app, user_id=USER) == []
    prompt = model.requests[-1]["messages"][1]["content"]
    assert prompt.count("Oat milk, please.") == 1
    with pytest.raises(ValueError, match="^stream_id: "):
        await service.append_memory_stream(
            app_name=app, user_id=USER, stream_id="", events=[event("o2", "x")]
        )


async def test_a_malformed_answer_fails_the_waiting_call(
    service: GrpcMemoryService, model: StandIn, app: str
) -> None:
    model.text("I am not JSON")
    with pytest.raises(grpc.aio.AioRpcError) as failure:
        await service.generate_memories(
            app_name=app,
            user_id=USER,
            events=[event("x1", "Hello")],
            wait_for_completion=True,
        )
    assert failure.value.code() == grpc.StatusCode.INTERNAL
    assert "answered malformed output" in (failure.value.details() or "")
    found = await service.search_memory(app_name=app, user_id=USER, query="Hello")
    assert found.memories == []


def test_vertex_options_map_onto_the_request() -> None:
    assert generation_options(None) is None
    assert generation_options({"source": "chat"}) is None
    options = generation_options(
        {
            "wait_for_completion": True,
            "ttl": datetime.timedelta(minutes=2),
            "allowed_topics": ["plans", {"custom_memory_topic_label": "loyalty"}],
        }
    )
    assert options is not None
    assert options.wait and not options.disable_consolidation
    assert options.ttl.seconds == 120
    assert list(options.allowed_topics) == ["plans", "loyalty"]
    numeric = generation_options({"ttl": 90})
    assert numeric is not None and numeric.ttl.seconds == 90
    for bad in [{"ttl": "soon"}, {"allowed_topics": "plans"}, {"allowed_topics": [3]}]:
        with pytest.raises(ValueError):
            generation_options(bad)
