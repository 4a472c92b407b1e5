"""The shipped ``examples/`` agents folder runs under ``adk api_server`` with our services: a
note told in one session is recalled in another through ``load_memory`` and memory-svc. A local
HTTP server stands in for the Gemini endpoint (``GOOGLE_GEMINI_BASE_URL``)."""

from __future__ import annotations

import json
import shutil
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from api_server import api_server, http

from adk_grpc_services import GrpcMemoryService, GrpcSessionService

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def model_reply(request: dict[str, Any]) -> dict[str, Any]:
    """A scripted Gemini: questions go to load_memory, its result is quoted, the rest noted."""
    parts = request["contents"][-1]["parts"]
    response = next((p["functionResponse"] for p in parts if "functionResponse" in p), None)
    text = next((p["text"] for p in parts if "text" in p), "")
    if response is not None:
        # ADK wraps the tool's LoadMemoryResponse as {"result": ...}.
        memories = response["response"]["result"]["memories"]
        recalled = memories[0]["content"]["parts"][0]["text"] if memories else "nothing"
        part: dict[str, Any] = {"text": f"From memory: {recalled}"}
    elif text.endswith("?"):
        part = {"functionCall": {"name": "load_memory", "args": {"query": "locker code"}}}
    else:
        part = {"text": "Noted."}
    return {
        "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
    }


class FakeGemini(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
        length = int(self.headers["content-length"])
        reply = model_reply(json.loads(self.rfile.read(length)))
        if ":streamGenerateContent" in self.path:
            body = f"data: {json.dumps(reply)}\n\n".encode()
            kind = "text/event-stream"
        else:
            body, kind = json.dumps(reply).encode(), "application/json"
        self.send_response(200)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def fake_gemini() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeGemini)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


async def test_examples_folder_runs_under_adk_api_server(
    tmp_path: Path,
    servers: tuple[str, str],
    fake_gemini: str,
    session_service: GrpcSessionService,
    memory_service: GrpcMemoryService,
) -> None:
    # A copy, so that nothing ADK writes lands in the repository.
    agents = tmp_path / "agents"
    shutil.copytree(EXAMPLES, agents, ignore=shutil.ignore_patterns("__pycache__"))
    env = {
        "GOOGLE_GEMINI_BASE_URL": fake_gemini,
        "GOOGLE_API_KEY": "not-a-real-key",
        "GOOGLE_GENAI_USE_VERTEXAI": "0",
    }
    with api_server(
        agents,
        session_uri=f"grpc://{servers[0]}",
        memory_uri=f"grpc://{servers[1]}",
        workdir=tmp_path,
        env=env,
    ) as base:
        assert http("GET", f"{base}/list-apps") == ["notes"]
        user = f"user-{uuid.uuid4().hex[:12]}"

        def run(session_id: str, text: str) -> list[dict[str, Any]]:
            http("POST", f"{base}/apps/notes/users/{user}/sessions", {"sessionId": session_id})
            events: list[dict[str, Any]] = http(
                "POST",
                f"{base}/run",
                {
                    "appName": "notes",
                    "userId": user,
                    "sessionId": session_id,
                    "newMessage": {"role": "user", "parts": [{"text": text}]},
                },
            )
            return events

        told = run("first", "My locker code is 4711.")
        assert told[-1]["content"]["parts"][0]["text"] == "Noted."
        asked = run("second", "What is my locker code?")
        assert asked[-1]["content"]["parts"][0]["text"] == "From memory: My locker code is 4711."

    second = await session_service.get_session(app_name="notes", user_id=user, session_id="second")
    assert second is not None
    assert [e.author for e in second.events] == ["user", "notes", "notes", "notes"]
    assert second.events[1].get_function_calls()[0].name == "load_memory"
    found = await memory_service.search_memory(app_name="notes", user_id=user, query="locker")
    assert "My locker code is 4711." in [m.content.parts[0].text for m in found.memories]
