"""The Python side of the cross-language fidelity check (``clients/fidelity/README.md``).

``write`` creates the fixture's session and appends its events through ``GrpcSessionService``;
``read`` prints the session as ADK Python serializes it (camelCase, float-second timestamps).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from google.adk.events.event import Event

from adk_grpc_services import GrpcSessionService


async def write(service: GrpcSessionService, args: argparse.Namespace) -> None:
    fixture = json.loads(Path(args.fixture).read_text(encoding="utf-8"))
    session = await service.create_session(
        app_name=args.app, user_id=args.user, session_id=args.session, state=fixture["state"]
    )
    for raw in fixture["events"]:
        await service.append_event(session, Event.model_validate(raw))


async def read(service: GrpcSessionService, args: argparse.Namespace) -> None:
    session = await service.get_session(
        app_name=args.app, user_id=args.user, session_id=args.session
    )
    if session is None:
        sys.exit(f"session {args.session} not found")
    dump: dict[str, Any] = {
        "state": session.state,
        "events": [
            e.model_dump(mode="json", by_alias=True, exclude_none=True) for e in session.events
        ],
    }
    json.dump(dump, sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("command", choices=["write", "read"])
    parser.add_argument("--uri", required=True)
    parser.add_argument("--app", required=True)
    parser.add_argument("--user", required=True)
    parser.add_argument("--session", required=True)
    parser.add_argument("--fixture")
    args = parser.parse_args()
    if args.command == "write" and not args.fixture:
        parser.error("write needs --fixture")
    async with GrpcSessionService(uri=args.uri) as service:
        await (write if args.command == "write" else read)(service, args)


if __name__ == "__main__":
    asyncio.run(main())
