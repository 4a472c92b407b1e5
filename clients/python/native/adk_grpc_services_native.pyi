"""Builds ADK sessions from session-svc's encoded replies (see adk_grpc_services.mapping)."""

from collections.abc import Callable, Mapping
from typing import Any

from google.adk.events.event import Event
from google.adk.sessions.session import Session

class Builder:
    def __init__(
        self,
        *,
        blueprints: Mapping[str, Any],
        factories: Mapping[type[Any], Any],
        from_json: Callable[[str], Any],
        model_from_json: Callable[[type[Any], str], Any],
        metadata_models: tuple[type[Any], type[Any], type[Any]],
        finish_reasons: Mapping[str, Any],
        languages: Mapping[str, Any],
        outcomes: Mapping[str, Any],
    ) -> None: ...
    def session(self, data: bytes, event_fallback: Callable[[int], Event]) -> Session | None: ...
    def sessions(
        self, data: bytes, session_fallback: Callable[[int], Session]
    ) -> tuple[list[Session], str]: ...
