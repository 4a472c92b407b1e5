"""``adk api_server`` run over an agents folder for a test, and the HTTP calls tests make to it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

STARTUP_SECONDS = 60


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http(method: str, url: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"content-type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read() or b"null")


@contextmanager
def api_server(
    agents: Path,
    *,
    session_uri: str,
    memory_uri: str,
    workdir: Path,
    env: dict[str, str] | None = None,
) -> Iterator[str]:
    """Runs ``adk api_server`` over ``agents`` (from ``workdir``, with local storage off and
    ``env`` added) until the block ends; yields its base URL once it lists ``agents``' apps.
    The server's output is shown if the block fails."""
    port = free_port()
    log = workdir / "api_server.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "google.adk.cli",
                "api_server",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--session_service_uri",
                session_uri,
                "--memory_service_uri",
                memory_uri,
                str(agents),
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=workdir,
            env={**os.environ, "ADK_DISABLE_LOCAL_STORAGE": "1", **(env or {})},
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_SECONDS
        while True:
            try:
                http("GET", f"{base}/list-apps")
                break
            except (urllib.error.URLError, ConnectionError):
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(
                        f"adk api_server did not come up:\n{log.read_text(errors='replace')}"
                    )
                time.sleep(0.25)
        yield base
    except BaseException:
        print(log.read_text(errors="replace"))
        raise
    finally:
        server.terminate()
        server.wait(timeout=30)
