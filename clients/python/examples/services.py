"""Loaded by ``adk web`` / ``adk api_server`` / ``adk run`` from the agents folder before they
build their services: importing the package registers the ``grpc://`` and ``grpcs://`` URIs."""

import adk_grpc_services  # noqa: F401
