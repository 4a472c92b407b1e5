"""An ADK agent whose only memory is the gateway's MCP tools (ADK's McpToolset), driven by a
stand-in model: it stores a fact in one session, recalls it in another, and purges it by its
metadata (a dry run, then forced)."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncGenerator

from google.adk.agents import LlmAgent
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools.mcp_tool import McpToolset, StreamableHTTPConnectionParams
from google.genai import types

from conftest import TOKENS, Stack


class ScriptedModel(BaseLlm):
    """Remembers what follows "Remember:" with add_memory (tagged with `batch` in its metadata),
    purges what it tagged on "Forget:" (a dry run) and "Forget for good:" (forced), answers a
    question with search_memory, and turns a tool's response into its reply."""

    model: str = "scripted"
    batch: str = ""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        tools = set(llm_request.tools_dict)
        assert {"add_memory", "search_memory", "purge_memories"} <= tools, tools
        last = (llm_request.contents[-1].parts or [types.Part()])[-1]
        if last.function_response is not None:
            reply = f"From memory: {json.dumps(last.function_response.response)}"
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=reply)]))
            return
        message = last.text or ""
        tagged = {"metadata": [[{"key": "batch", "op": "=", "value": self.batch}]]}
        if message.startswith("Remember:"):
            text = message.removeprefix("Remember:").strip()
            call = types.FunctionCall(
                name="add_memory", args={"text": text, "metadata": {"batch": self.batch}}
            )
        elif message.startswith("Forget for good:"):
            call = types.FunctionCall(name="purge_memories", args={"filters": tagged, "force": True})
        elif message.startswith("Forget:"):
            call = types.FunctionCall(name="purge_memories", args={"filters": tagged})
        else:
            call = types.FunctionCall(name="search_memory", args={"query": message, "limit": 3})
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))


def test_adk_agent_remembers_across_sessions(stack: Stack) -> None:
    toolset = McpToolset(
        connection_params=StreamableHTTPConnectionParams(
            url=stack.url, headers={"Authorization": f"Bearer {TOKENS['alice']}"}
        )
    )
    agent = LlmAgent(name="assistant", model=ScriptedModel(batch=uuid.uuid4().hex), tools=[toolset])
    sessions = InMemorySessionService()
    runner = Runner(app_name="demo", agent=agent, session_service=sessions)

    async def turn(session_id: str, text: str) -> str:
        await sessions.create_session(app_name="demo", user_id="alice", session_id=session_id)
        replies: list[str] = []
        async for event in runner.run_async(
            user_id="alice",
            session_id=session_id,
            new_message=types.Content(role="user", parts=[types.Part(text=text)]),
        ):
            if event.content and event.content.parts:
                replies.extend(p.text for p in event.content.parts if p.text)
        return "\n".join(replies)

    async def run() -> None:
        try:
            await turn("first", "Remember: Alice's sister is called Ingrid Halvorsen.")
            answer = await turn("second", "What is the name of Alice's sister?")
            assert "Ingrid Halvorsen" in answer, answer
            dry = await turn("third", "Forget: what you remembered about my sister.")
            assert '"count": 1' in dry and '"deleted": false' in dry, dry
            again = await turn("fourth", "What is the name of Alice's sister?")
            assert "Ingrid Halvorsen" in again, "a dry run deletes nothing"
            forced = await turn("fifth", "Forget for good: what you remembered about my sister.")
            assert '"count": 1' in forced and '"deleted": true' in forced, forced
            gone = await turn("sixth", "What is the name of Alice's sister?")
            assert "Ingrid Halvorsen" not in gone, gone
        finally:
            await toolset.close()

    asyncio.run(run())
