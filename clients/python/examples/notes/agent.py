"""A note keeper that remembers across sessions: its sessions live in session-svc, and after
every turn the session is added to memory-svc, where ``load_memory`` finds it in later sessions.

The model is Gemini by default (``GOOGLE_API_KEY``); ``NOTES_MODEL`` names another one.
"""

import os

from google.adk.agents import Agent
from google.adk.agents.callback_context import CallbackContext
from google.adk.tools import load_memory


async def remember(callback_context: CallbackContext) -> None:
    """Adds the session, as it is after this turn, to memory."""
    await callback_context.add_session_to_memory()


root_agent = Agent(
    name="notes",
    model=os.environ.get("NOTES_MODEL", "gemini-2.5-flash"),
    description="Keeps the user's notes and recalls them in later sessions.",
    instruction=(
        "You keep the user's notes. When the user tells you something, acknowledge it briefly. "
        "When the user asks about something they may have told you before, call load_memory "
        "with a short query and answer from what it returns."
    ),
    tools=[load_memory],
    after_agent_callback=remember,
)
