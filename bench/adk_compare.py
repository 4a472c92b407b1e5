#!/usr/bin/env python3
"""Side by side: the same session and memory workload through

  * the Python client of this project (adk-grpc-services: GrpcSessionService, GrpcMemoryService)
    against the release session-svc / memory-svc (default `--sync sync`: durable appends), and
  * Google ADK's own DatabaseSessionService (SQLite file, sqlite+aiosqlite), InMemoryMemoryService
    and SqliteMemoryService (SQLite file, FTS5) (google-adk==2.13.0),

in one run, printing each measurement and the ratios (gRPC service / ADK service).

Setup (once):
    python3 -m venv /tmp/adk-bench-venv
    /tmp/adk-bench-venv/bin/pip install ./clients/python 'google-adk[db]==2.13.0' aiosqlite
    cargo build --release -p session-svc -p memory-svc
Run:
    /tmp/adk-bench-venv/bin/python bench/adk_compare.py --bin-dir target/release
    /tmp/adk-bench-venv/bin/python bench/adk_compare.py --quick      # seconds, for a smoke run

Workload (identical for both sides, through ADK's BaseSessionService / BaseMemoryService API):
  append:  `--appends` events (~1 KB of text, state delta in app:, user: and session scope),
           appended one after another to one session (concurrency 1), and again with
           `--concurrency` sessions appending at once.
  get:     get_session of a 1,000-event session, `--gets` times.
  list:    list_sessions of one user's `--list-sessions` sessions (small state each), `--lists`
           times; ADK's side is its SqliteSessionService here (sqlite3, no SQLAlchemy).
  search:  `--memories` entries (12-40 words each, Zipf-distributed vocabulary) added to one
           user's memory with add_events_to_memory in batches of 1,000, then `--searches`
           queries of two kinds: two rare words, and a 4-word question with one common word
           (ADK side: InMemoryMemoryService).
  ingest:  `--ingest-sessions` sessions of 20 events (12-40 words each) added one after another
           to one user's memory with add_session_to_memory (ADK side: SqliteMemoryService, the
           ADK memory service that persists and indexes); events/s until a search after the
           last session returns (indexing left for later counts), latency per session, and
           CPU time per session of this process and of memory-svc.
  ingest-search: the same sessions added to another user's memory, with a search of that
           user (a 4-word question with one common word) after every third: the searches'
           latency while the memory grows, and the adds'.
  ingest-turns: ADK's per-turn memory callback (an agent's after_agent_callback calling
           add_session_to_memory): `--turn-sessions` sessions of `--turns` turns, each session
           added again, whole, after every turn; calls/s until a search after the last call
           returns, latency per call, CPU time per call (ADK side: SqliteMemoryService).

`--only append,get,list,memory,ingest,ingest-search,ingest-turns` runs a subset.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import gc
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any, Awaitable, Callable

from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.memory import InMemoryMemoryService, SqliteMemoryService
from google.adk.sessions import DatabaseSessionService, Session
from google.adk.sessions.sqlite_session_service import SqliteSessionService
from google.genai import types

from adk_grpc_services import GrpcMemoryService, GrpcSessionService, mapping

APP = "bench"

# ---------------------------------------------------------------- synthetic text (as bench/src/text.rs)
COMMON = (
    "the i to and a of you is my it in that what for me on with project was we this be have can do "
    "your are not at about favorite please from like will an so how user time"
).split()
SYLLABLES = (
    "ka lo mi ne ru ta shi po ve den gar sol bri tun mo zen qua fel dor pix lam cor vin hes".split()
)
VOCAB = 20_000


def _vocabulary() -> list[str]:
    words = list(COMMON)
    i = 0
    while len(words) < VOCAB:
        n, w = i, ""
        while True:
            w += SYLLABLES[n % len(SYLLABLES)]
            n //= len(SYLLABLES)
            if n == 0:
                break
        if len(w) > 3:
            words.append(w)
        i += 1
    return words


WORDS = _vocabulary()
_CDF: list[float] = []
_total = 0.0
for _r in range(VOCAB):
    _total += 1.0 / (_r + 1)
    _CDF.append(_total)
_CDF = [c / _total for c in _CDF]


def zipf_word(rng: random.Random) -> str:
    return WORDS[min(bisect.bisect_left(_CDF, rng.random()), VOCAB - 1)]


def text_of_bytes(seed: int, size: int) -> str:
    rng = random.Random(seed)
    out: list[str] = []
    length = 0
    while length < size:
        w = zipf_word(rng)
        out.append(w)
        length += len(w) + 1
    return " ".join(out)


def memory_text(i: int) -> str:
    rng = random.Random(i * 7919 + 1)
    return " ".join(zipf_word(rng) for _ in range(rng.randint(12, 40)))


def query(kind: str, i: int) -> str:
    rng = random.Random(i ^ 0x5EA2C4)
    if kind == "rare":
        return " ".join(WORDS[rng.randrange(1000, VOCAB)] for _ in range(2))
    return " ".join(
        [
            WORDS[rng.randrange(0, 20)],
            WORDS[rng.randrange(40, 400)],
            WORDS[rng.randrange(400, VOCAB)],
            WORDS[rng.randrange(400, VOCAB)],
        ]
    )


# ---------------------------------------------------------------- servers
class Server:
    def __init__(self, binary: str, args: list[str]) -> None:
        self.dir = tempfile.mkdtemp(prefix="adk-compare-")
        env = dict(os.environ, RUST_LOG="warn")
        self.proc = subprocess.Popen(
            [binary, "--listen", "127.0.0.1:0", "--data-dir", self.dir, *args],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            m = re.search(r"listening on (\S+)", line)
            if m:
                self.addr = m.group(1)
                break
        else:
            raise RuntimeError(f"{binary} exited before listening")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


# ---------------------------------------------------------------- workload
def make_event(author: str, i: int, text: str) -> Event:
    return Event(
        id=str(uuid.uuid4()),
        invocation_id=f"inv-{i}",
        author=author,
        content=types.Content(role="user" if author == "user" else "model", parts=[types.Part(text=text)]),
        actions=EventActions(
            state_delta={
                "app:last_writer": author,
                "user:turns": i,
                "turn": i,
                "last_topic": f"topic-{i % 97}",
                "temp:scratch": 1,
            }
        ),
    )


TEXTS = [text_of_bytes(s, 1000) for s in range(16)]


async def append_run(svc: Any, user: str, sid: str, n: int) -> list[float]:
    session = await svc.create_session(app_name=APP, user_id=user, session_id=sid, state={"turn": 0})
    lat = []
    for i in range(n):
        ev = make_event("user" if i % 2 == 0 else "model", i, TEXTS[i % 16])
        t0 = time.perf_counter()
        await svc.append_event(session, ev)
        lat.append(time.perf_counter() - t0)
    return lat


async def measure_append(svc: Any, tag: str, n: int, concurrency: int) -> dict[str, float]:
    t0 = time.perf_counter()
    per = max(1, n // concurrency)
    results = await asyncio.gather(
        *(append_run(svc, f"{tag}-u{w}", f"{tag}-c{concurrency}-s{w}", per) for w in range(concurrency))
    )
    secs = time.perf_counter() - t0
    lat = sorted(x for r in results for x in r)
    return {"rate": len(lat) / secs, "p50_ms": pct(lat, 0.5), "p99_ms": pct(lat, 0.99)}


def pct(sorted_lat: list[float], q: float) -> float:
    if not sorted_lat:
        return float("nan")
    return sorted_lat[min(len(sorted_lat) - 1, int(q * len(sorted_lat)))] * 1000


async def timed(n: int, op: Callable[[int], Awaitable[Any]]) -> dict[str, float]:
    # Each timed loop starts from a collected heap, so the garbage one side's workload left
    # (ADK's gets leave cycles) is not collected on the clock of the side that runs next.
    gc.collect()
    lat = []
    t0 = time.perf_counter()
    for i in range(n):
        s = time.perf_counter()
        await op(i)
        lat.append(time.perf_counter() - s)
    secs = time.perf_counter() - t0
    lat.sort()
    return {"rate": n / secs, "p50_ms": pct(lat, 0.5), "p95_ms": pct(lat, 0.95), "p99_ms": pct(lat, 0.99)}


async def measure_get(svc: Any, tag: str, events: int, gets: int) -> dict[str, float]:
    sid = f"{tag}-long"
    await append_run(svc, f"{tag}-reader", sid, events)

    async def op(_: int) -> None:
        s = await svc.get_session(app_name=APP, user_id=f"{tag}-reader", session_id=sid)
        assert s is not None and len(s.events) == events, len(s.events) if s else None

    await op(0)  # warm
    return await timed(gets, op)


async def measure_list(svc: Any, tag: str, sessions: int, lists: int) -> dict[str, float]:
    user = f"{tag}-lister"
    for i in range(sessions):
        await svc.create_session(
            app_name=APP, user_id=user, session_id=f"l{i}", state={"n": i, "topic": "notes"}
        )

    async def op(_: int) -> None:
        listed = await svc.list_sessions(app_name=APP, user_id=user)
        assert len(listed.sessions) == sessions, len(listed.sessions)

    await op(0)  # warm
    return await timed(lists, op)


async def load_memory(svc: Any, entries: int) -> float:
    t0 = time.perf_counter()
    batch = 1000
    for first in range(0, entries, batch):
        events = [
            Event(
                id=f"m{i}",
                invocation_id=f"inv-{i}",
                author="user" if i % 2 == 0 else "model",
                content=types.Content(role="user", parts=[types.Part(text=memory_text(i))]),
            )
            for i in range(first, min(entries, first + batch))
        ]
        await svc.add_events_to_memory(
            app_name=APP, user_id="searcher", events=events, session_id=f"conv{first // batch}"
        )
    return entries / (time.perf_counter() - t0)


async def measure_search(svc: Any, kind: str, n: int) -> dict[str, float]:
    async def op(i: int) -> None:
        await svc.search_memory(app_name=APP, user_id="searcher", query=query(kind, i))

    await op(10_000)  # warm
    return await timed(n, op)


SESSION_EVENTS = 20


def conversation(tag: str, s: int, turns: int, seed: int, spacing: float) -> list[Event]:
    """The `turns` events of conversation `s`: user and model in turn, 12-40 words of bench text
    each (from `memory_text(seed + ...)`), one second apart, conversation `s` starting
    `s * spacing` seconds after the first."""
    return [
        Event(
            id=f"{tag}{s}-e{e}",
            invocation_id=f"inv-{s}-{e // 2}",
            author="user" if e % 2 == 0 else "model",
            content=types.Content(
                role="user" if e % 2 == 0 else "model",
                parts=[types.Part(text=memory_text(seed + s * turns + e))],
            ),
            timestamp=1_770_000_000.0 + s * spacing + e,
        )
        for e in range(turns)
    ]


def ingest_sessions(n: int, user: str = "ingester") -> list[Session]:
    """`n` sessions of SESSION_EVENTS events of `user`, built before timing starts."""
    return [
        Session(
            id=f"ingest-{s}",
            app_name=APP,
            user_id=user,
            events=conversation("s", s, SESSION_EVENTS, 1_000_000, 60),
        )
        for s in range(n)
    ]


def turn_by_turn(sessions: int, turns: int) -> list[Session]:
    """Each of `sessions` sessions of `turns` turns, as it stands after each of its turns: the
    sessions an agent adds to memory after every turn, in the order it adds them."""
    added = []
    for s in range(sessions):
        events = conversation("t", s, turns, 2_000_000, 600)
        added.extend(
            Session(id=f"turns-{s}", app_name=APP, user_id="turn-taker", events=events[: n + 1])
            for n in range(turns)
        )
    return added


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process has used so far (Linux: /proc/PID/stat)."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measure_adds(
    svc: Any, added: list[Session], server: Server | None
) -> dict[str, float]:
    """Calls per second until the last session added is searchable: the clock stops after a
    search that follows the last add, so indexing a service leaves for later is timed too. Also
    the CPU time per call of this process and, for a service in another process, of its
    server. The sessions are all of one user."""

    async def op(i: int) -> None:
        await svc.add_session_to_memory(added[i])

    server_cpu = cpu_seconds(server.proc.pid) if server else 0.0
    own_cpu = time.process_time()
    t0 = time.perf_counter()
    r = await timed(len(added), op)
    s = time.perf_counter()
    await svc.search_memory(app_name=APP, user_id=added[0].user_id, query=memory_text(1_000_000))
    end = time.perf_counter()
    r["first_search_ms"] = (end - s) * 1000
    r["rate"] = len(added) / (end - t0)
    r["client_cpu_ms"] = (time.process_time() - own_cpu) * 1000 / len(added)
    if server:
        r["server_cpu_ms"] = (cpu_seconds(server.proc.pid) - server_cpu) * 1000 / len(added)
    return r


async def measure_ingest(
    svc: Any, sessions: list[Session], server: Server | None
) -> dict[str, float]:
    """`measure_adds` of fresh sessions, its rate in events per second."""
    r = await measure_adds(svc, sessions, server)
    r["rate"] *= SESSION_EVENTS
    return r


async def measure_ingest_search(svc: Any, sessions: list[Session]) -> dict[str, float]:
    """Adds `sessions` one after another, searching their user's memory after every third:
    the searches' rate and latency, and the adds' latency."""
    searches: list[float] = []
    adds: list[float] = []
    for i, session in enumerate(sessions):
        s = time.perf_counter()
        await svc.add_session_to_memory(session)
        adds.append(time.perf_counter() - s)
        if i % 3 == 2:
            s = time.perf_counter()
            await svc.search_memory(app_name=APP, user_id=session.user_id, query=query("mixed", i))
            searches.append(time.perf_counter() - s)
    searches.sort()
    adds.sort()
    return {
        "rate": len(searches) / sum(searches),
        "p50_ms": pct(searches, 0.5),
        "p95_ms": pct(searches, 0.95),
        "p99_ms": pct(searches, 0.99),
        "add_p50_ms": pct(adds, 0.5),
        "add_p99_ms": pct(adds, 0.99),
    }


def fmt(r: dict[str, float]) -> str:
    line = f"{r['rate']:10.1f}/s  p50 {r['p50_ms']:8.2f} ms  p99 {r['p99_ms']:8.2f} ms"
    if "add_p50_ms" in r:
        line += f"  adds: p50 {r['add_p50_ms']:.2f} ms, p99 {r['add_p99_ms']:.2f} ms"
    if "first_search_ms" in r:
        line += f"  then search {r['first_search_ms']:.2f} ms"
    if "client_cpu_ms" in r:
        line += f"  cpu per call: this process {r['client_cpu_ms']:.2f} ms"
    if "server_cpu_ms" in r:
        line += f", server {r['server_cpu_ms']:.2f} ms"
    return line


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--bin-dir", default=os.path.join(here, "..", "target", "release"))
    ap.add_argument("--appends", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--gets", type=int, default=50)
    ap.add_argument("--session-events", type=int, default=1000)
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--searches", type=int, default=30)
    ap.add_argument("--ingest-sessions", type=int, default=500)
    ap.add_argument("--turn-sessions", type=int, default=50)
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--list-sessions", type=int, default=1000)
    ap.add_argument("--lists", type=int, default=50)
    ap.add_argument(
        "--only", default="append,get,list,memory,ingest", help="comma-separated subset"
    )
    ap.add_argument("--quick", action="store_true", help="tiny sizes, for a smoke run")
    ap.add_argument("--postgres", help="run the PostgreSQL section on this database instead")
    a = ap.parse_args()
    if a.postgres:
        return await main_postgres(a)
    only = set(a.only.split(","))
    if a.quick:
        a.appends, a.gets, a.session_events, a.memories, a.searches = 200, 5, 200, 2000, 5
        a.list_sessions, a.lists = 200, 5
        a.ingest_sessions = 20
        a.turn_sessions, a.turns = 3, 10
    print(f"# load average at start: {os.getloadavg()}")
    # Whether the client reads sessions with clients/python/native (ADK_GRPC_NATIVE=0: not).
    print(f"# native builder: {'on' if mapping._NATIVE is not None else 'off'}")

    session_svc = Server(os.path.join(a.bin_dir, "session-svc"), [])
    memory_svc = Server(
        os.path.join(a.bin_dir, "memory-svc"), ["--session-endpoint", f"http://{session_svc.addr}"]
    )
    db_dir = tempfile.mkdtemp(prefix="adk-compare-sqlite-")
    try:
        adk_sessions = DatabaseSessionService(f"sqlite+aiosqlite:///{db_dir}/sessions.db")
        # ADK's SQLite service (no SQLAlchemy) for the listing, as ADK users pick it for that.
        adk_sqlite_sessions = SqliteSessionService(f"{db_dir}/list.db")
    except Exception:
        memory_svc.stop()
        session_svc.stop()
        raise
    grpc_sessions = GrpcSessionService(session_svc.addr)
    grpc_memory = GrpcMemoryService(memory_svc.addr)
    adk_memory = InMemoryMemoryService()
    adk_sqlite_memory = SqliteMemoryService(os.path.join(db_dir, "memory.db"))
    # The memory services that persist and index, with the server whose CPU time is ours.
    persisting_memories = (("grpc", grpc_memory, memory_svc), ("adk", adk_sqlite_memory, None))
    results: dict[str, dict[str, dict[str, float]]] = {}

    def record(name: str, side: str, r: dict[str, float]) -> None:
        results.setdefault(name, {})[side] = r
        print(f"{name:<44} {side:<5} {fmt(r)}", flush=True)

    try:
        for side, svc in (("grpc", grpc_sessions), ("adk", adk_sessions)):
            if "append" in only:
                record("append_event, 1 session", side, await measure_append(svc, side, a.appends, 1))
                try:
                    record(
                        f"append_event, {a.concurrency} sessions at once",
                        side,
                        await measure_append(svc, side, a.appends, a.concurrency),
                    )
                except Exception as e:  # SQLite may refuse concurrent writers
                    print(f"append_event concurrent, {side}: failed: {type(e).__name__}: {e}")
            if "get" in only:
                record(
                    f"get_session of a {a.session_events}-event session",
                    side,
                    await measure_get(svc, side, a.session_events, a.gets),
                )
        if "list" in only:
            for side, svc in (("grpc", grpc_sessions), ("adk", adk_sqlite_sessions)):
                record(
                    f"list_sessions of one user's {a.list_sessions} (ADK: SQLite)",
                    side,
                    await measure_list(svc, side, a.list_sessions, a.lists),
                )
        if "memory" in only:
            for side, msvc in (("grpc", grpc_memory), ("adk", adk_memory)):
                rate = await load_memory(msvc, a.memories)
                print(f"{'add_events_to_memory':<44} {side:<5} {rate:10.1f} entries/s", flush=True)
                for kind in ("rare", "mixed"):
                    record(
                        f"search_memory ({kind} query) at {a.memories} entries",
                        side,
                        await measure_search(msvc, kind, a.searches),
                    )
        if "ingest" in only:
            sessions = ingest_sessions(a.ingest_sessions)
            for side, msvc, server in persisting_memories:
                record(
                    f"add_session_to_memory, {a.ingest_sessions} x {SESSION_EVENTS} events (events/s)",
                    side,
                    await measure_ingest(msvc, sessions, server),
                )
        if "ingest-search" in only:
            sessions = ingest_sessions(a.ingest_sessions, user="ingest-searcher")
            for side, msvc in (("grpc", grpc_memory), ("adk", adk_sqlite_memory)):
                record(
                    f"search_memory after every third of {a.ingest_sessions} sessions added",
                    side,
                    await measure_ingest_search(msvc, sessions),
                )
        if "ingest-turns" in only:
            added = turn_by_turn(a.turn_sessions, a.turns)
            for side, msvc, server in persisting_memories:
                record(
                    f"add_session_to_memory after each of {a.turns} turns, {a.turn_sessions} sessions (calls/s)",
                    side,
                    await measure_adds(msvc, added, server),
                )
    finally:
        await grpc_sessions.close()
        await grpc_memory.close()
        await adk_sessions.close() if hasattr(adk_sessions, "close") else None
        await adk_sqlite_memory.close()
        memory_svc.stop()
        session_svc.stop()
        shutil.rmtree(db_dir, ignore_errors=True)

    print(f"\n# load average at end: {os.getloadavg()}")
    print("\n| workload | adk-grpc-services | ADK | ratio (throughput) | ratio (p50 latency) |")
    print("|---|---:|---:|---:|---:|")
    for name, sides in results.items():
        if "grpc" in sides and "adk" in sides:
            g, d = sides["grpc"], sides["adk"]
            print(
                f"| {name} | {g['rate']:.1f}/s, p50 {g['p50_ms']:.2f} ms | {d['rate']:.1f}/s, "
                f"p50 {d['p50_ms']:.2f} ms | {g['rate'] / d['rate']:.1f}x | "
                f"{d['p50_ms'] / g['p50_ms']:.1f}x |"
            )
    return 0


# ---------------------------------------------------------------- PostgreSQL: both sides on one database
# `--postgres URL` runs this section instead of the default one: session-svc on `--store URL`
# against ADK's DatabaseSessionService on the same PostgreSQL (postgresql+asyncpg), each in a
# fresh schema (16 connections each side); `--only append,get` runs a subset:
#   append, shared:    1 KB events appended by 1, 8 and 64 sessions at once, every session of
#                      one user of one app, each delta writing `app:` and `user:` keys (the
#                      state every append of the app and the user shares);
#   append, separate:  64 sessions at once, a user per session, session keys only (no shared
#                      state), also against session-svc on sled;
#   get:               get_session of a `--session-events`-event session with `app:` and `user:`
#                      state, `--gets` times.
# It prints the deadlocks PostgreSQL counted in the database during the run
# (pg_stat_database.deadlocks; statistics are published when the connections close).
# Setup: as above, plus `pip install asyncpg`.


def pg_event(author: str, i: int, text: str, shared: bool) -> Event:
    delta: dict[str, Any] = {"turn": i, "last_topic": f"topic-{i % 97}"}
    if shared:
        delta.update({"app:last_writer": author, "app:turns": i, "user:turns": i, "user:last": author})
    return Event(
        id=str(uuid.uuid4()),
        invocation_id=f"inv-{i}",
        author=author,
        content=types.Content(role="user" if author == "user" else "model", parts=[types.Part(text=text)]),
        actions=EventActions(state_delta=delta),
    )


async def pg_append_run(svc: Any, user: str, sid: str, n: int, shared: bool) -> list[float]:
    session = await svc.create_session(app_name=APP, user_id=user, session_id=sid, state={"turn": 0})
    lat = []
    for i in range(n):
        ev = pg_event("user" if i % 2 == 0 else "model", i, TEXTS[i % 16], shared)
        t0 = time.perf_counter()
        await svc.append_event(session, ev)
        lat.append(time.perf_counter() - t0)
    return lat


async def pg_measure(svc: Any, tag: str, n: int, concurrency: int, shared: bool) -> dict[str, float]:
    per = max(1, n // concurrency)

    def user(w: int) -> str:
        return f"{tag}-user" if shared else f"{tag}-u{w}"

    t0 = time.perf_counter()
    results = await asyncio.gather(
        *(pg_append_run(svc, user(w), f"{tag}-s{w}", per, shared) for w in range(concurrency))
    )
    secs = time.perf_counter() - t0
    lat = sorted(x for r in results for x in r)
    return {
        "rate": len(lat) / secs,
        "p50_ms": pct(lat, 0.5),
        "p95_ms": pct(lat, 0.95),
        "p99_ms": pct(lat, 0.99),
    }


async def main_postgres(a: argparse.Namespace) -> int:
    import asyncpg  # only this section needs it

    url = a.postgres
    base = url.split("?", 1)[0]
    db = await asyncpg.connect(base)

    async def deadlocks() -> int:
        return await db.fetchval("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")

    async def fresh_schema(name: str) -> str:
        schema = f"bench_{name}_{os.getpid()}_{int(time.time())}"
        await db.execute(f"CREATE SCHEMA {schema}")
        return schema

    print(f"# load average at start: {os.getloadavg()}")
    before = await deadlocks()
    grpc_schema = await fresh_schema("grpc")
    adk_schema = await fresh_schema("adk")
    sep = "&" if "?" in url else "?"
    pg_svc = Server(
        os.path.join(a.bin_dir, "session-svc"),
        ["--store", f"{url}{sep}options=-csearch_path%3D{grpc_schema}", "--pg-max-connections", "16"],
    )
    sled_svc = Server(os.path.join(a.bin_dir, "session-svc"), [])
    asyncpg_url = "postgresql+asyncpg://" + base.split("://", 1)[1]
    adk = DatabaseSessionService(
        asyncpg_url,
        pool_size=16,
        max_overflow=0,
        connect_args={"server_settings": {"search_path": adk_schema}},
    )
    sides = {
        "grpc-pg": GrpcSessionService(pg_svc.addr),
        "adk-pg": adk,
        "grpc-sled": GrpcSessionService(sled_svc.addr),
    }
    only = set(a.only.split(","))
    rows: list[tuple[str, str, dict[str, float]]] = []

    def report(name: str, side: str, r: dict[str, float]) -> None:
        rows.append((name, side, r))
        print(
            f"{name:<36} {side:<9} {r['rate']:9.1f}/s  p50 {r['p50_ms']:7.2f}  "
            f"p95 {r['p95_ms']:7.2f}  p99 {r['p99_ms']:7.2f} ms",
            flush=True,
        )

    try:
        for shared, concurrencies in ((True, (1, 8, 64)), (False, (64,))):
            if "append" not in only:
                break
            kind = "shared app:/user: keys" if shared else "no shared keys"
            for c in concurrencies:
                for side, svc in sides.items():
                    if shared and side == "grpc-sled":
                        continue
                    tag = f"{side}-{'sh' if shared else 'own'}-c{c}"
                    r = await pg_measure(svc, tag, a.appends, c, shared)
                    report(f"append, {kind}, c={c}", side, r)
        if "get" in only:
            for side in ("grpc-pg", "adk-pg"):
                r = await measure_get(sides[side], f"{side}-get", a.session_events, a.gets)
                report(f"get_session, {a.session_events} events", side, r)
    finally:
        for side, svc in sides.items():
            if side != "adk-pg":
                await svc.close()
        await adk.close()
        pg_svc.stop()
        sled_svc.stop()
    # Statistics of the closed connections are published as their backends exit.
    await asyncio.sleep(2)
    after = await deadlocks()
    for schema in (grpc_schema, adk_schema):
        await db.execute(f"DROP SCHEMA {schema} CASCADE")
    await db.close()
    print(f"\n# load average at end: {os.getloadavg()}")
    print(f"# deadlocks detected in the database during the run: {after - before}")
    print("\n| workload | side | rate | p50 | p95 | p99 |")
    print("|---|---|---:|---:|---:|---:|")
    for name, side, r in rows:
        print(
            f"| {name} | {side} | {r['rate']:.1f}/s | {r['p50_ms']:.2f} ms | {r['p95_ms']:.2f} ms "
            f"| {r['p99_ms']:.2f} ms |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
