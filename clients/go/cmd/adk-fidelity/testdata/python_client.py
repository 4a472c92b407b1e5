"""The Python client's side of the cross-language test: writes the fixture session, or reads a
session and prints it as ADK Python serializes it (camelCase, timestamps in float seconds)."""

import asyncio
import json
import sys

from adk_grpc_services import GrpcSessionService
from google.adk.events.event import Event


async def main(mode: str, uri: str, app: str, user: str, session_id: str, *fixture: str) -> None:
    service = GrpcSessionService(uri=uri)
    if mode == "write":
        with open(fixture[0]) as f:
            data = json.load(f)
        session = await service.create_session(
            app_name=app, user_id=user, state=data["state"], session_id=session_id
        )
        for event in data["events"]:
            await service.append_event(session, Event.model_validate(event))
    else:
        session = await service.get_session(app_name=app, user_id=user, session_id=session_id)
        assert session is not None
        events = [e.model_dump(mode="json", by_alias=True, exclude_none=True) for e in session.events]
        print(json.dumps({"state": session.state, "events": events}))
    await service.close()


asyncio.run(main(*sys.argv[1:]))
