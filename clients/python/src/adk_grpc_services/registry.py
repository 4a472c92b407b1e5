"""Registers the ``grpc://`` and ``grpcs://`` service URIs with ADK's service registry.

After registration, ADK resolves ``--session_service_uri grpc://host:port`` to a
``GrpcSessionService`` and ``--memory_service_uri grpc://host:port`` to a ``GrpcMemoryService``
(``grpcs://`` for TLS). ADK has no plugin entry points; its CLI imports ``services.py`` from the
agents folder before it builds services, so that file needs one line::

    import adk_grpc_services  # registers grpc:// and grpcs://

Importing the package registers the schemes; ``register()`` does it explicitly (and onto
another registry, if given).
"""

from __future__ import annotations

from typing import Any

from google.adk.cli.service_registry import ServiceRegistry, get_service_registry

from .memory_service import GrpcMemoryService
from .session_service import GrpcSessionService

SCHEMES = ("grpc", "grpcs")


def register(registry: ServiceRegistry | None = None) -> None:
    """Registers the session and memory factories for ``grpc://`` and ``grpcs://``.

    Idempotent. ``registry`` defaults to ADK's process-wide registry, the one ``adk web``,
    ``adk run`` and ``adk api_server`` resolve URIs with.
    """
    registry = registry or get_service_registry()
    for scheme in SCHEMES:
        registry.register_session_service(scheme, _session_service)
        registry.register_memory_service(scheme, _memory_service)


def _session_service(uri: str, **kwargs: Any) -> GrpcSessionService:
    return GrpcSessionService(uri=uri, **kwargs)


def _memory_service(uri: str, **kwargs: Any) -> GrpcMemoryService:
    return GrpcMemoryService(uri=uri, **kwargs)
