#!/usr/bin/env python3
"""Writes the fixture session through one language's client and reads it through another's.

    check.py --languages python,go,java,typescript     # every ordered pair, itself included
    check.py --pairs python:go,go:python               # just these
    check.py --uri grpc://127.0.0.1:50051 ...          # a running session-svc instead of a fresh one

Without --uri it starts session-svc from $ADK_SERVICES_BIN_DIR (default <repo>/target/debug)
on a free loopback port with a fresh data directory. Each language's tool is
clients/<language>/fidelity. Prints one line per pair and exits non-zero on any difference.
Standard library only.
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
FIXTURE = HERE / "session.json"
# How each language's ADK writes an event timestamp in JSON.
MILLISECONDS = {"java", "typescript"}


def start_server(bin_dir: Path, data: Path) -> tuple[subprocess.Popen[bytes], str]:
    process = subprocess.Popen(
        [str(bin_dir / "session-svc"), "--listen", "127.0.0.1:0", "--data-dir", str(data)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdout is not None
    line = process.stdout.readline().decode().strip()
    prefix = "session-svc listening on "
    if not line.startswith(prefix):
        process.kill()
        sys.exit(f"session-svc did not start: {line!r}")
    return process, "grpc://" + line[len(prefix) :]


def run_tool(language: str, *args: str) -> str:
    tool = REPO / "clients" / language / "fidelity"
    done = subprocess.run([str(tool), *args], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"{language} {args[0]} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


def milliseconds(value: Any, language: str) -> int:
    """An event timestamp as the language wrote it, in epoch milliseconds."""
    if isinstance(value, str):  # RFC 3339 (Go)
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        return round(parsed.timestamp() * 1000)
    if language in MILLISECONDS:
        return round(value)
    return round(value * 1000)


def is_empty(value: Any) -> bool:
    """Absent, null and zero values are the same (as in proto3 and ADK's dumps), and so is an
    object holding only such values (ADK Python dumps empty `actions` in full)."""
    if isinstance(value, dict):
        return all(is_empty(v) for v in value.values())
    return value is None or value is False or value == 0 or value in ("", [])


def differences(expected: Any, actual: Any, path: str, skip: set[str]) -> list[str]:
    """Where `actual` differs from `expected`; keys in `skip` (a language's gaps) are passed over."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        found = []
        for key in sorted(set(expected) | set(actual)):
            if key in skip:
                continue
            a, b = expected.get(key), actual.get(key)
            if is_empty(a) and is_empty(b):
                continue
            found += differences(a, b, f"{path}.{key}", skip)
        return found
    if isinstance(expected, list) and isinstance(actual, list) and len(expected) == len(actual):
        return [
            d
            for i, (a, b) in enumerate(zip(expected, actual))
            for d in differences(a, b, f"{path}[{i}]", skip)
        ]
    if isinstance(expected, bool) or isinstance(actual, bool):
        same = expected is actual
    elif isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        same = expected == actual
    else:
        same = expected == actual
    return [] if same else [f"{path}: expected {expected!r}, got {actual!r}"]


def expected_events(fixture: dict[str, Any]) -> list[dict[str, Any]]:
    """The fixture's events as stored: `temp:` keys trimmed, timestamps in milliseconds."""
    events = json.loads(json.dumps(fixture["events"]))
    for event in events:
        event["timestamp"] = round(event["timestamp"] * 1000)
        delta = event.get("actions", {}).get("stateDelta")
        if delta:
            for key in [k for k in delta if k.startswith("temp:")]:
                del delta[key]
    return events


def check_pair(writer: str, reader: str, uri: str, gaps: dict[str, list[str]]) -> list[str]:
    fixture = json.loads(FIXTURE.read_text(encoding="utf-8"))
    key = ["--uri", uri, "--app", "fidelity", "--user", f"{writer}-{reader}"]
    session = ["--session", uuid.uuid4().hex]
    run_tool(writer, "write", *key, *session, "--fixture", str(FIXTURE))
    read = json.loads(run_tool(reader, "read", *key, *session))
    for event in read["events"]:
        event["timestamp"] = milliseconds(event.get("timestamp"), reader)
    skip = set(gaps.get(writer, [])) | set(gaps.get(reader, []))
    found = differences(fixture["expectedState"], read["state"], "state", set())
    found += differences(expected_events(fixture), read["events"], "events", skip)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--languages", help="comma-separated: every ordered pair of them")
    parser.add_argument("--pairs", help="comma-separated writer:reader pairs")
    parser.add_argument("--uri", help="a running session-svc (default: start one)")
    args = parser.parse_args()
    if args.pairs:
        pairs = [tuple(p.split(":", 1)) for p in args.pairs.split(",")]
    elif args.languages:
        pairs = list(itertools.product(args.languages.split(","), repeat=2))
    else:
        parser.error("give --languages or --pairs")
    gaps = json.loads((HERE / "unsupported.json").read_text(encoding="utf-8"))

    server = None
    with tempfile.TemporaryDirectory() as data:
        uri = args.uri
        if uri is None:
            bin_dir = Path(os.environ.get("ADK_SERVICES_BIN_DIR", REPO / "target" / "debug"))
            server, uri = start_server(bin_dir, Path(data))
        try:
            failed = 0
            for writer, reader in pairs:
                try:
                    found = check_pair(writer, reader, uri, gaps)
                except (RuntimeError, subprocess.TimeoutExpired, json.JSONDecodeError) as error:
                    found = [str(error)]
                status = "ok" if not found else "DIFFERS"
                print(f"{writer} -> {reader}: {status}")
                for line in found[:10]:
                    print(f"    {line}")
                failed += bool(found)
        finally:
            if server is not None:
                server.terminate()
                server.wait(timeout=10)
    print(f"fidelity: {len(pairs) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
