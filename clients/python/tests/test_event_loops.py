"""One service object used from several event loops (#21): threads that each run their own
loop, sequential ``asyncio.run`` calls, and ADK's sync ``Runner.run``, which drives
``run_async`` on a thread of its own. Each loop gets its own channel, released when the loop
shuts down: the tests count the connections the server holds open."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path

import pytest
from conftest import RunningServer, start_server
from google.adk.agents import LlmAgent
from google.adk.events.event import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.genai import types

from adk_grpc_services import GrpcMemoryService, GrpcSessionService

USER = "u"
THREADS = 8
SECONDS = 3.0


def established_connections(port: int) -> int:
    """TCP connections in state ESTABLISHED whose local port is ``port`` (the server's side)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                count += 1
    return count


def wait_for_connections(port: int, expected: int) -> None:
    """Waits (boundedly) until the server holds ``expected`` connections: a closed channel's
    connection ends a moment after ``close()`` returns."""
    deadline = time.monotonic() + 10
    while (found := established_connections(port)) != expected:
        if time.monotonic() > deadline:
            pytest.fail(f"the server holds {found} connections, expected {expected}")
        time.sleep(0.02)


def port_of(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


@pytest.fixture
def own_servers(tmp_path: Path) -> Iterator[tuple[RunningServer, RunningServer]]:
    """Servers of this test alone, so that every connection they hold is the test's (memory-svc
    connects to session-svc only to resolve session refs, which these tests never send)."""
    session_svc = start_server("session-svc", tmp_path)
    try:
        memory_svc = start_server(
            "memory-svc", tmp_path, "--session-endpoint", f"http://{session_svc.address}"
        )
    except BaseException:
        session_svc.stop()
        raise
    yield session_svc, memory_svc
    memory_svc.stop()
    session_svc.stop()


def text_event(text: str, author: str = "user") -> Event:
    return Event(
        author=author,
        invocation_id="inv",
        content=types.Content(role="user", parts=[types.Part(text=text)]),
    )


def test_search_memory_is_thread_safe_against_concurrent_writes(
    own_servers: tuple[RunningServer, RunningServer], app: str
) -> None:
    """ADK's own thread-safety case for InMemoryMemoryService, with GrpcMemoryService and
    GrpcSessionService shared by threads that each run their own event loop: every thread
    writes and reads for a few seconds; no call fails and every write is there afterwards."""
    session_svc, memory_svc = own_servers
    sessions = GrpcSessionService(session_svc.address)
    memory = GrpcMemoryService(memory_svc.address, search_limit=100)
    errors: list[BaseException] = []
    written: dict[int, int] = {}
    start = threading.Barrier(THREADS)

    async def work(worker: int) -> int:
        session = await sessions.create_session(app_name=app, user_id=USER, session_id=f"s{worker}")
        deadline = time.monotonic() + SECONDS
        n = 0
        while time.monotonic() < deadline:
            event = text_event(f"worker{worker} note{n}")
            await sessions.append_event(session, event)
            await memory.add_events_to_memory(
                app_name=app, user_id=USER, session_id=f"s{worker}", events=[event]
            )
            found = await memory.search_memory(
                app_name=app, user_id=USER, query=f"worker{worker} note{n}"
            )
            assert any(m.id == event.id for m in found.memories)
            n += 1
        return n

    def thread(worker: int) -> None:
        try:
            start.wait()
            written[worker] = asyncio.run(work(worker))
        except BaseException as e:  # reported below, with the others
            errors.append(e)

    threads = [threading.Thread(target=thread, args=(w,)) for w in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []

    async def check() -> None:
        for worker, n in written.items():
            assert n > 0
            stored = await sessions.get_session(app_name=app, user_id=USER, session_id=f"s{worker}")
            assert stored is not None
            assert [e.content.parts[0].text for e in stored.events] == [
                f"worker{worker} note{i}" for i in range(n)
            ]
            found = await memory.search_memory(app_name=app, user_id=USER, query=f"worker{worker}")
            assert len(found.memories) == min(n, 100)
        await sessions.close()
        await memory.close()

    asyncio.run(check())
    assert len(written) == THREADS
    # Every thread's loop has shut down: no channel is left, and no connection.
    assert (sessions._connection.open_channels(), memory._connection.open_channels()) == (0, 0)
    wait_for_connections(port_of(session_svc.address), 0)
    wait_for_connections(port_of(memory_svc.address), 0)


def test_a_loop_that_shuts_down_frees_its_channel(
    own_servers: tuple[RunningServer, RunningServer], app: str
) -> None:
    """Sequential ``asyncio.run`` calls on one service keep working, and none leaves a
    connection behind once its loop is gone."""
    session_svc, memory_svc = own_servers
    port = port_of(session_svc.address)
    sessions = GrpcSessionService(session_svc.address)

    async def round_trip(i: int) -> int:
        session = await sessions.create_session(app_name=app, user_id=USER, session_id=f"r{i}")
        await sessions.append_event(session, text_event(f"run {i}"))
        # While the loop runs, its channel holds one connection. The channel of a loop closed
        # without shutting down is closed on the first use in this one, and its connection ends
        # a moment later: wait for that rather than count it.
        wait_for_connections(port, 1)
        listed = await sessions.list_sessions(app_name=app, user_id=USER)
        return len(listed.sessions)

    for i in range(5):
        assert asyncio.run(round_trip(i)) == i + 1
        assert sessions._connection.open_channels() == 0
        wait_for_connections(port, 0)

    # A loop closed without shutting down its generators: its channel goes on the next first
    # use in another loop.
    loop = asyncio.new_event_loop()
    loop.run_until_complete(sessions.get_user_state(app_name=app, user_id=USER))
    loop.close()
    assert asyncio.run(round_trip(5)) == 6
    assert sessions._connection.open_channels() == 0
    wait_for_connections(port, 0)


async def test_close_closes_the_running_loops_channel_and_reopens_on_use(
    own_servers: tuple[RunningServer, RunningServer], app: str
) -> None:
    session_svc, _ = own_servers
    port = port_of(session_svc.address)
    sessions = GrpcSessionService(session_svc.address)
    await sessions.create_session(app_name=app, user_id=USER, session_id="c")
    assert sessions._connection.open_channels() == 1
    await sessions.close()
    assert sessions._connection.open_channels() == 0
    wait_for_connections(port, 0)
    assert await sessions.get_session(app_name=app, user_id=USER, session_id="c") is not None
    await sessions.close()
    await sessions.close()  # closing twice is fine


class NotingModel(BaseLlm):
    """Answers every message with "Noted."."""

    model: str = "noting"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        yield LlmResponse(
            content=types.Content(role="model", parts=[types.Part(text="Noted.")]),
            turn_complete=True,
        )


def test_sync_runner_run_called_repeatedly(
    own_servers: tuple[RunningServer, RunningServer], app: str
) -> None:
    """``Runner.run`` runs each turn on a new thread with a new loop."""
    session_svc, memory_svc = own_servers
    sessions = GrpcSessionService(session_svc.address)
    memory = GrpcMemoryService(memory_svc.address)
    runner = Runner(
        app_name=app,
        agent=LlmAgent(name="noter", model=NotingModel()),
        session_service=sessions,
        memory_service=memory,
        auto_create_session=True,
    )
    for i in range(5):
        message = types.Content(role="user", parts=[types.Part(text=f"note {i}")])
        replies = list(runner.run(user_id=USER, session_id="sync", new_message=message))
        assert [e.content.parts[0].text for e in replies if e.content] == ["Noted."]

    async def check() -> None:
        stored = await sessions.get_session(app_name=app, user_id=USER, session_id="sync")
        assert stored is not None
        assert [e.content.parts[0].text for e in stored.events] == [
            text for i in range(5) for text in (f"note {i}", "Noted.")
        ]
        await memory.add_session_to_memory(stored)
        found = await memory.search_memory(app_name=app, user_id=USER, query="note 3")
        assert "note 3" in [m.content.parts[0].text for m in found.memories]
        await sessions.close()
        await memory.close()

    asyncio.run(check())
    assert sessions._connection.open_channels() == 0
    wait_for_connections(port_of(memory_svc.address), 0)
