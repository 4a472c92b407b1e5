"""Runs the real session-svc and memory-svc binaries for the tests.

The binaries come from ``$ADK_SERVICES_BIN_DIR`` (default ``<repo>/target/debug``; build them with
``cargo build -p session-svc -p memory-svc``). Each server starts once per test run on a free
loopback port with its own temporary data directory and is stopped at the end. Tests keep out of
each other's way by using a fresh app name each (the ``app`` fixture) instead of fresh servers.
"""

from __future__ import annotations

import os
import select
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from adk_grpc_services import GrpcMemoryService, GrpcSessionService

REPO_ROOT = Path(__file__).resolve().parents[3]
BIN_DIR = Path(os.environ.get("ADK_SERVICES_BIN_DIR", REPO_ROOT / "target" / "debug"))
STARTUP_SECONDS = 30


@dataclass
class RunningServer:
    """A server process and the address it printed once ready."""

    name: str
    address: str
    process: subprocess.Popen[bytes]
    log: Path

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_server(name: str, workdir: Path, *args: str) -> RunningServer:
    """Starts ``name`` on 127.0.0.1:0 and waits for its ``<name> listening on ADDR`` line."""
    binary = BIN_DIR / name
    if not binary.is_file():
        pytest.exit(
            f"{binary} is missing: build it with `cargo build -p session-svc -p memory-svc` "
            "or point ADK_SERVICES_BIN_DIR at the folder holding it",
            returncode=2,
        )
    data_dir = workdir / f"{name}-data"
    log = workdir / f"{name}.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [str(binary), "--listen", "127.0.0.1:0", "--data-dir", str(data_dir), *args],
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
    assert process.stdout is not None
    prefix = f"{name} listening on "
    deadline = time.monotonic() + STARTUP_SECONDS
    line = b""
    while not line.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        ready, _, _ = select.select([process.stdout], [], [], max(remaining, 0))
        chunk = os.read(process.stdout.fileno(), 256) if ready else b""
        if not chunk:
            process.kill()
            raise RuntimeError(
                f"{name} did not report its address within {STARTUP_SECONDS}s; "
                f"its log:\n{log.read_text(errors='replace')}"
            )
        line += chunk
    text = line.decode().strip()
    assert text.startswith(prefix), f"unexpected first line from {name}: {text!r}"
    return RunningServer(name, text[len(prefix) :], process, log)


@pytest.fixture(scope="session")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(session-svc address, memory-svc address); memory-svc fetches session refs from the first."""
    workdir = tmp_path_factory.mktemp("servers")
    session_svc = start_server("session-svc", workdir)
    try:
        memory_svc = start_server(
            "memory-svc", workdir, "--session-endpoint", f"http://{session_svc.address}"
        )
    except BaseException:
        session_svc.stop()
        raise
    yield session_svc.address, memory_svc.address
    memory_svc.stop()
    session_svc.stop()


@pytest.fixture
def app() -> str:
    """An app name no other test uses, so tests sharing the servers never see each other."""
    return f"app-{uuid.uuid4().hex[:12]}"


@pytest.fixture
async def session_service(servers: tuple[str, str]) -> AsyncIterator[GrpcSessionService]:
    async with GrpcSessionService(servers[0]) as service:
        yield service


@pytest.fixture
async def memory_service(servers: tuple[str, str]) -> AsyncIterator[GrpcMemoryService]:
    async with GrpcMemoryService(servers[1]) as service:
        yield service
