"""The Java, Go and Python clients side by side against one session-svc and one memory-svc.

Run by `bench/run --with-peers`, which starts the servers and passes their addresses:

    side_by_side.py SESSION_ADDR MEMORY_ADDR

One after another, against the same two servers, it runs the Java client's bench (ClientBench:
the Java client and the raw Java stub; the classpath comes from $JAVA_BENCH_CLASSPATH), the Go
client's bench (clients/go/bench, with -session-addr and -memory-addr: the Go client and the Go
stub) and the same workloads through the Python client, here. Each workload is the Go bench's:
1,000 appends at concurrency 1 and at 8 (each writer its own session), 50 reads of a
1,000-event session, 200 searches among one user's 10,000 memory entries of 8 words; the
client's overhead is its call and the stub's, alternating. Then it prints one Markdown table:
every row with the 1-minute load average when it was measured, and the overhead of each client
over its stub.

Needs an interpreter with the Python client installed (clients/python), Go, and Java.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from adk_grpc_services import GrpcMemoryService, GrpcSessionService
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions.session import Session
from google.genai import types

HERE = Path(__file__).resolve().parent
GO_DIR = HERE.parent.parent / "go"
APP = "bench-python"
APPENDS = 1000
EVENTS = 1000
GETS = 50
ENTRIES = 10_000
SEARCHES = 200
VOCABULARY = [
    "lisbon",
    "porto",
    "madrid",
    "paris",
    "berlin",
    "rome",
    "vienna",
    "prague",
    "coffee",
    "tea",
    "bread",
    "cheese",
    "wine",
    "river",
    "mountain",
    "beach",
    "forest",
    "city",
    "museum",
    "garden",
    "train",
    "flight",
    "hotel",
    "booking",
    "meeting",
    "project",
    "deadline",
    "report",
    "budget",
    "invoice",
    "contract",
    "holiday",
    "birthday",
    "dinner",
    "lunch",
    "recipe",
    "football",
    "tennis",
    "music",
    "concert",
    "guitar",
    "piano",
    "novel",
    "poem",
    "painting",
    "camera",
    "phone",
    "laptop",
]
WORKLOADS = [
    "appends c=1",
    "appends c=8",
    "append c=1, alternating",
    "getSession 1,000 events",
    "searchMemory 10,000 entries",
]


@dataclass
class Row:
    workload: str
    via: str
    p50_ms: float
    p99_ms: float
    per_second: float | None
    load: str


def load() -> str:
    return Path("/proc/loadavg").read_text().split()[0]


def java_rows(session: str, memory: str) -> list[Row]:
    classpath = os.environ["JAVA_BENCH_CLASSPATH"]
    out = subprocess.run(
        [
            "java",
            "-cp",
            classpath,
            "dev.adkservices.grpc.ClientBench",
            session,
            memory,
            "--peers-only",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    rows = []
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 6 and re.fullmatch(r"[\d.]+", cells[2]):
            rows.append(
                Row(
                    cells[0],
                    cells[1],
                    float(cells[2]),
                    float(cells[3]),
                    float(cells[4]),
                    cells[5],
                )
            )
    return rows


GO_DURATION = re.compile(r"(-?[\d.]+)(ns|µs|ms|s)")
GO_UNITS = {"ns": 1e-6, "µs": 1e-3, "ms": 1.0, "s": 1e3}
GO_NAMES = {
    ("appends, c=1", "grpcsession (session-svc)"): ("appends c=1", "Go client"),
    ("appends, c=8", "grpcsession (session-svc)"): ("appends c=8", "Go client"),
    ("Get, 1000 events", "grpcsession (session-svc)"): (
        "getSession 1,000 events",
        "Go client",
    ),
    ("overhead: Get, 1000 events", "generated stub alone"): (
        "getSession 1,000 events",
        "Go stub (alternating)",
    ),
    ("overhead: Get, 1000 events", "grpcsession (same calls, alternating)"): (
        "getSession 1,000 events",
        "Go client (alternating)",
    ),
    ("overhead: append, c=1", "generated stub alone"): (
        "append c=1, alternating",
        "Go stub (alternating)",
    ),
    ("overhead: append, c=1", "grpcsession (same calls, alternating)"): (
        "append c=1, alternating",
        "Go client (alternating)",
    ),
    ("SearchMemory, 10000 entries", "grpcmemory (memory-svc)"): (
        "searchMemory 10,000 entries",
        "Go client",
    ),
}


def go_rows(session: str, memory: str, scratch: str) -> list[Row]:
    binary = os.path.join(scratch, "go-bench")
    subprocess.run(["go", "build", "-o", binary, "./bench"], cwd=GO_DIR, check=True)
    out = subprocess.run(
        [binary, "-session-addr", session, "-memory-addr", memory],
        cwd=GO_DIR,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    # The Go bench prints the load only before and after its run.
    after = load()
    rows = []
    for line in out.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or (cells[0], cells[1]) not in GO_NAMES:
            continue
        workload, via = GO_NAMES[(cells[0], cells[1])]
        p50 = re.search(r"p50 " + GO_DURATION.pattern, cells[2])
        p99 = re.search(r"p99 " + GO_DURATION.pattern, cells[2])
        rate = re.match(r"([\d.]+)/s", cells[2])
        assert p50 and p99, line
        rows.append(
            Row(
                workload,
                via,
                float(p50[1]) * GO_UNITS[p50[2]],
                float(p99[1]) * GO_UNITS[p99[2]],
                float(rate[1]) if rate else None,
                f"{after} (after the run)",
            )
        )
    return rows


def event(i: int) -> Event:
    """An event as the Go and Java benches write it."""
    user = i % 2 == 0
    return Event(
        id=str(uuid.uuid4()),
        invocation_id=f"inv-{i // 2}",
        author="user" if user else "assistant",
        content=types.Content(
            role="user" if user else "model",
            parts=[
                types.Part(
                    text=f"Message {i}: the quick brown fox jumps over the lazy dog near the river bank."
                )
            ],
        ),
        actions=EventActions(state_delta={"turn": i}),
    )


def percentiles(latencies: list[float]) -> tuple[float, float]:
    ordered = sorted(latencies)
    return ordered[len(ordered) // 2] * 1e3, ordered[
        min(len(ordered) - 1, len(ordered) * 99 // 100)
    ] * 1e3


async def python_rows(session_addr: str, memory_addr: str) -> list[Row]:
    rows: list[Row] = []
    sessions = GrpcSessionService.from_uri(f"grpc://{session_addr}")
    memory = GrpcMemoryService.from_uri(f"grpc://{memory_addr}")
    try:

        async def appends(c: int, n: int) -> None:
            own = [
                await sessions.create_session(app_name=APP, user_id=f"writer-{w}")
                for w in range(c)
            ]
            latencies: list[float] = []

            async def writer(s: Session) -> None:
                for i in range(n):
                    t = time.perf_counter()
                    await sessions.append_event(s, event(i))
                    latencies.append(time.perf_counter() - t)

            start = time.perf_counter()
            await asyncio.gather(*(writer(s) for s in own))
            elapsed = time.perf_counter() - start
            p50, p99 = percentiles(latencies)
            rows.append(
                Row(
                    f"appends c={c}", "Python client", p50, p99, c * n / elapsed, load()
                )
            )

        await appends(1, 200)  # warm-up: the channel, the first calls' imports
        rows.clear()
        await appends(1, APPENDS)
        await appends(8, APPENDS // 8)

        big = await sessions.create_session(app_name=APP, user_id="reader")
        for i in range(EVENTS):
            await sessions.append_event(big, event(i))
        latencies = []
        for i in range(GETS + 5):
            t = time.perf_counter()
            read = await sessions.get_session(
                app_name=APP, user_id="reader", session_id=big.id
            )
            if i >= 5:
                latencies.append(time.perf_counter() - t)
            assert read is not None and len(read.events) == EVENTS
        p50, p99 = percentiles(latencies)
        rows.append(
            Row("getSession 1,000 events", "Python client", p50, p99, None, load())
        )

        user = f"search-{uuid.uuid4().hex[:8]}"
        for s in range(ENTRIES // 1000):
            batch = []
            for i in range(s * 1000, s * 1000 + 1000):
                rng = random.Random(i)
                text = " ".join(rng.choice(VOCABULARY) for _ in range(8))
                batch.append(
                    MemoryEntry(
                        id=f"m-{i}",
                        author="user",
                        content=types.Content(
                            role="user", parts=[types.Part(text=text)]
                        ),
                    )
                )
            await memory.add_memory(app_name=APP, user_id=user, memories=batch)
        rng = random.Random(7)
        queries = [
            f"{rng.choice(VOCABULARY)} {rng.choice(VOCABULARY)}"
            for _ in range(SEARCHES)
        ]
        for q in queries[:20]:
            await memory.search_memory(app_name=APP, user_id=user, query=q)
        latencies = []
        for q in queries:
            t = time.perf_counter()
            await memory.search_memory(app_name=APP, user_id=user, query=q)
            latencies.append(time.perf_counter() - t)
        p50, p99 = percentiles(latencies)
        rows.append(
            Row("searchMemory 10,000 entries", "Python client", p50, p99, None, load())
        )
    finally:
        await sessions.close()
        await memory.close()
    return rows


def overhead(rows: list[Row], workload: str, language: str) -> float | None:
    p50 = {r.via: r.p50_ms for r in rows if r.workload == workload}
    client, stub = (
        p50.get(f"{language} client (alternating)"),
        p50.get(f"{language} stub (alternating)"),
    )
    return None if client is None or stub is None else client - stub


def main() -> int:
    session, memory = sys.argv[1], sys.argv[2]
    print(
        f"load before: {Path('/proc/loadavg').read_text().strip()} on {os.cpu_count()} cores"
    )
    with tempfile.TemporaryDirectory() as scratch:
        rows = java_rows(session, memory)
        rows += go_rows(session, memory, scratch)
    rows += asyncio.run(python_rows(session, memory))
    print("\n| workload | via | p50 ms | p99 ms | calls/s | load (1 min) |")
    print("|---|---|---:|---:|---:|---|")
    for workload in WORKLOADS:
        for r in rows:
            if r.workload == workload:
                rate = "" if r.per_second is None else f"{r.per_second:,.0f}"
                print(
                    f"| {workload} | {r.via} | {r.p50_ms:.3f} | {r.p99_ms:.3f} | {rate} | {r.load} |"
                )
    print(
        "\n| overhead over the stub, p50 | Java client | Go client | Java - Go |\n|---|---:|---:|---:|"
    )
    for workload in ("getSession 1,000 events", "append c=1, alternating"):
        java, go = overhead(rows, workload, "Java"), overhead(rows, workload, "Go")
        if java is not None and go is not None:
            print(
                f"| {workload} | {java:+.3f} ms | {go:+.3f} ms | {java - go:+.3f} ms |"
            )
    print(f"\nload after: {Path('/proc/loadavg').read_text().strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
