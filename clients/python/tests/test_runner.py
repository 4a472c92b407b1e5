"""Whole ADK Runner turns with sessions and memory served by session-svc and memory-svc.

The model is scripted (no network): asked a question, it calls ADK's ``load_memory`` tool, then
answers with the text of the first memory the tool returned, so the answer can only be right if
the memory written in an earlier session came back through memory-svc.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.events.event import Event
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.tools import load_memory
from google.adk.tools.load_memory_tool import LoadMemoryResponse
from google.genai import types
from pydantic import Field

from adk_grpc_services import GrpcMemoryService, GrpcSessionService

USER = "alice"


class ScriptedModel(BaseLlm):
    """Answers statements with "Noted."; answers questions from memory via ``load_memory``."""

    model: str = "scripted"
    requests: list[LlmRequest] = Field(default_factory=list)

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        self.requests.append(llm_request)
        parts = llm_request.contents[-1].parts or []
        tool_result = next((p.function_response for p in parts if p.function_response), None)
        question = next((p.text for p in parts if p.text and p.text.endswith("?")), None)
        if tool_result is not None:
            # ADK wraps a tool's non-dict return value as {"result": value}.
            found = (tool_result.response or {})["result"]
            assert isinstance(found, LoadMemoryResponse)
            remembered = found.memories[0].content.parts[0].text if found.memories else "nothing"
            reply = types.Part(text=f"From memory: {remembered}")
        elif question is not None:
            reply = types.Part(
                function_call=types.FunctionCall(name="load_memory", args={"query": question})
            )
        else:
            reply = types.Part(text="Noted.")
        yield LlmResponse(content=types.Content(role="model", parts=[reply]), turn_complete=True)


def json_form(event: Event) -> dict[str, Any]:
    return event.model_dump(mode="json", exclude_none=True)


async def run_turn(runner: Runner, session_id: str, text: str) -> list[Event]:
    message = types.Content(role="user", parts=[types.Part(text=text)])
    return [
        event
        async for event in runner.run_async(
            user_id=USER, session_id=session_id, new_message=message
        )
    ]


async def test_runner_answers_from_memory_served_over_grpc(
    session_service: GrpcSessionService, memory_service: GrpcMemoryService, app: str
) -> None:
    model = ScriptedModel()
    agent = LlmAgent(
        name="memory_agent",
        model=model,
        instruction="Answer the user's questions using your memory.",
        tools=[load_memory],
    )
    runner = Runner(
        app_name=app,
        agent=agent,
        session_service=session_service,
        memory_service=memory_service,
        auto_create_session=True,
    )

    # An earlier conversation, then remembered.
    earlier = await run_turn(runner, "earlier", "My favorite project is Project Alpha.")
    assert [e.content.parts[0].text for e in earlier] == ["Noted."]
    first = await session_service.get_session(app_name=app, user_id=USER, session_id="earlier")
    assert first is not None
    assert [(e.author, e.content.parts[0].text) for e in first.events] == [
        ("user", "My favorite project is Project Alpha."),
        ("memory_agent", "Noted."),
    ]
    await memory_service.add_session_to_memory(first)

    # A new session asks; the agent looks it up.
    events = await run_turn(runner, "later", "What is my favorite project?")
    assert events[-1].content.parts[0].text == "From memory: My favorite project is Project Alpha."
    call = events[0].get_function_calls()[0]
    assert (call.name, call.args) == ("load_memory", {"query": "What is my favorite project?"})

    # The tool's answer carried memory-svc's entry for the user event of the earlier session.
    tool_response = events[1].get_function_responses()[0]
    assert tool_response.response is not None
    found = tool_response.response["result"]
    assert [m.id for m in found.memories if m.author == "user"] == [first.events[0].id]

    # Every event of the turn is stored, in order, as the runner produced it. The tool result
    # (a pydantic object inside a dict) is stored as JSON, as ADK's database backend stores it,
    # so the stored events equal the runner's in that form.
    stored = await session_service.get_session(app_name=app, user_id=USER, session_id="later")
    assert stored is not None
    assert [json_form(e) for e in stored.events[1:]] == [json_form(e) for e in events]
    assert (stored.events[1], stored.events[3]) == (events[0], events[2])  # no objects inside
    assert stored.events[0].content.parts[0].text == "What is my favorite project?"
    assert [e.author for e in stored.events] == [
        "user",
        "memory_agent",
        "memory_agent",
        "memory_agent",
    ]
    assert stored.events[2].get_function_responses()[0].id == call.id
    assert len(model.requests) == 3
