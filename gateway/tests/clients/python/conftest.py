"""Boots session-svc, memory-svc and the gateway (built binaries, ports picked by the OS) with
one tokens file, for MCP clients to talk to; memory-svc generates with a local stand-in for the
chat model, which extracts no facts."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

BIN = Path(os.environ.get("ADK_BIN_DIR", Path(__file__).resolve().parents[4] / "target" / "debug"))

TOKENS = {
    "alice": "alice-token-0001",
    "bob": "bob-token-0002",
    "team": "team-token-0003",
    "ops": "ops-token-0004",
}


@dataclass
class Stack:
    url: str
    session_endpoint: str
    memory_endpoint: str
    ops_token_file: Path
    gateway: Path


def _start(args: list[str], env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env)
    assert process.stdout is not None
    line = process.stdout.readline()
    if " listening on " not in line:
        process.kill()
        raise RuntimeError(f"{args[0]} did not start: {line!r}")
    return process, line.rsplit(" ", 1)[1].strip()


class _StandIn(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat model that extracts no facts from anything."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        message = {"role": "assistant", "content": json.dumps({"facts": []})}
        choice = {"index": 0, "finish_reason": "stop", "message": message}
        body = json.dumps({"id": "stand-in", "object": "chat.completion", "choices": [choice]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="session")
def model_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _StandIn)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()


@pytest.fixture(scope="session")
def stack(model_url: str) -> Iterator[Stack]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        tokens = root / "tokens.json"
        tokens.write_text(
            json.dumps(
                {
                    "tokens": [
                        {"name": "alice", "token": TOKENS["alice"], "apps": ["demo"], "users": ["alice"]},
                        {"name": "bob", "token": TOKENS["bob"], "apps": ["demo"], "users": ["bob"]},
                        {
                            "name": "team",
                            "token": TOKENS["team"],
                            "apps": ["demo"],
                            "users": ["alice", "bob"],
                        },
                        {"name": "ops", "token": TOKENS["ops"], "apps": ["*"]},
                    ]
                }
            )
        )
        ops = root / "ops-token"
        ops.write_text(TOKENS["ops"])
        processes = []
        try:
            session, session_addr = _start(
                [
                    str(BIN / "session-svc"),
                    "--listen",
                    "127.0.0.1:0",
                    "--data-dir",
                    str(root / "s"),
                    "--tokens-file",
                    str(tokens),
                ]
            )
            processes.append(session)
            memory, memory_addr = _start(
                [
                    str(BIN / "memory-svc"),
                    "--listen",
                    "127.0.0.1:0",
                    "--data-dir",
                    str(root / "m"),
                    "--tokens-file",
                    str(tokens),
                    "--session-endpoint",
                    f"http://{session_addr}",
                    "--session-token-file",
                    str(ops),
                    "--generator",
                    f"openai:{model_url}",
                    "--generator-model",
                    "stand-in",
                ]
            )
            processes.append(memory)
            endpoints = [
                "--session-endpoint",
                f"http://{session_addr}",
                "--memory-endpoint",
                f"http://{memory_addr}",
            ]
            gateway, gateway_addr = _start(
                [str(BIN / "gateway"), "--listen", "127.0.0.1:0", "--tokens-file", str(tokens), *endpoints]
            )
            processes.append(gateway)
            yield Stack(
                url=f"http://{gateway_addr}/mcp",
                session_endpoint=f"http://{session_addr}",
                memory_endpoint=f"http://{memory_addr}",
                ops_token_file=ops,
                gateway=BIN / "gateway",
            )
        finally:
            for process in reversed(processes):
                process.terminate()
                process.wait(timeout=30)
