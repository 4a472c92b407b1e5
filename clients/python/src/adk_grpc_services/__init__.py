"""Google ADK session and memory services backed by the adk-services gRPC servers.

``GrpcSessionService`` talks to session-svc and ``GrpcMemoryService`` to memory-svc; both are
drop-in replacements for ADK's in-memory and database services::

    from adk_grpc_services import GrpcMemoryService, GrpcSessionService

    runner = Runner(
        app_name="my_app",
        agent=root_agent,
        session_service=GrpcSessionService("localhost:50051"),
        memory_service=GrpcMemoryService("localhost:50052"),
    )

Importing this package registers the ``grpc://`` and ``grpcs://`` URI schemes with ADK's service
registry (see ``registry``), so ``adk web --session_service_uri grpc://localhost:50051`` works
once the agents folder's ``services.py`` imports it.
"""

from .memory_service import GrpcMemoryService, TimedMemoryEntry
from .registry import register
from .session_service import GrpcSessionService

__all__ = ["GrpcMemoryService", "GrpcSessionService", "TimedMemoryEntry", "register"]

register()
