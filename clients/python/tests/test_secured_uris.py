"""Service URIs that carry a token, a CA file, a timeout and channel options, the ``ADK_GRPC_*``
environment variables, and ADK's ``services.yaml`` registration (#15), against servers started
with ``--tokens-file`` and ``--tls-cert/--tls-key``, from Python and from ``adk api_server``."""

from __future__ import annotations

import datetime
import ipaddress
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from api_server import api_server, http
from conftest import start_server
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from google.adk.cli.service_registry import ServiceRegistry

from adk_grpc_services import GrpcMemoryService, GrpcSessionService, register
from adk_grpc_services._channel import parse_uri

TOKEN = "t0k3n-for-tests"


@dataclass
class Secured:
    """session-svc and memory-svc requiring TLS and a token, and the files a client needs."""

    session: str
    memory: str
    ca_file: Path
    other_ca_file: Path


def write_ca_and_certificate(directory: Path, name: str) -> tuple[Path, Path, Path]:
    """A self-signed CA and a certificate it issued for 127.0.0.1: (ca.pem, cert.pem, key.pem)."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name} test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = (directory / f"{name}-ca.pem", directory / f"{name}.pem", directory / f"{name}.key")
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return paths


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    workdir = tmp_path_factory.mktemp("secured")
    ca, cert, key = write_ca_and_certificate(workdir, "server")
    other_ca, _, _ = write_ca_and_certificate(workdir, "other")
    tokens = workdir / "tokens.json"
    tokens.write_text(json.dumps({"tokens": [{"name": "tests", "token": TOKEN, "apps": ["*"]}]}))
    common = ["--tokens-file", str(tokens), "--tls-cert", str(cert), "--tls-key", str(key)]
    session_svc = start_server("session-svc", workdir, *common)
    try:
        memory_svc = start_server(
            "memory-svc",
            workdir,
            *common,
            "--session-endpoint",
            f"https://{session_svc.address}",
        )
    except BaseException:
        session_svc.stop()
        raise
    yield Secured(session_svc.address, memory_svc.address, ca, other_ca)
    memory_svc.stop()
    session_svc.stop()


def test_uri_query_parameters_and_environment() -> None:
    env = {"SESSION_TOKEN": "abc", "ADK_GRPC_TOKEN": "from-env", "ADK_GRPC_TIMEOUT": "7"}
    uri = "grpc://sessions:9?token_env=SESSION_TOKEN&timeout=2.5&grpc.keepalive_time_ms=10000"
    parsed = parse_uri(uri, default_port=50051, kind="session", environ=env)
    assert parsed.target == "sessions:9"
    assert parsed.credentials is None
    assert parsed.metadata == (("authorization", "Bearer abc"),)
    assert parsed.timeout == 2.5
    assert parsed.options == (("grpc.keepalive_time_ms", 10000),)

    # What the URI leaves out comes from the environment, the service's own variable first.
    plain = parse_uri("grpc://memory", default_port=50052, kind="memory", environ=env)
    assert (plain.target, plain.metadata, plain.timeout) == (
        "memory:50052",
        (("authorization", "Bearer from-env"),),
        7.0,
    )
    own = parse_uri(
        "grpc://memory",
        default_port=50052,
        kind="memory",
        environ={**env, "ADK_GRPC_MEMORY_TOKEN": "memory-only"},
    )
    assert own.metadata == (("authorization", "Bearer memory-only"),)
    # A CA file from the environment matters to grpcs:// only.
    assert (
        parse_uri(
            "grpc://h", default_port=1, kind="session", environ={"ADK_GRPC_CA_FILE": "/nonexistent"}
        ).credentials
        is None
    )


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("grpc://h?token_env=UNSET_VARIABLE", "UNSET_VARIABLE"),
        ("grpc://h?ca_file=/tmp/ca.pem", "grpcs://"),
        ("grpcs://h?ca_file=/nonexistent/ca.pem", "cannot read ca_file"),
        ("grpc://h?timeout=0", "timeout"),
        ("grpc://h?timeout=soon", "timeout"),
        ("grpc://h?token=secret", "unknown query parameter 'token'"),
    ],
)
def test_bad_uri_parameters_are_refused_by_name(uri: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        GrpcSessionService(uri=uri)


async def test_token_and_ca_in_the_uri_reach_secured_servers(
    secured: Secured, app: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_TOKEN", TOKEN)
    query = f"token_env=TEST_TOKEN&ca_file={secured.ca_file}&timeout=10"
    async with GrpcSessionService(uri=f"grpcs://{secured.session}?{query}") as sessions:
        created = await sessions.create_session(app_name=app, user_id="u", session_id="s")
        assert await sessions.get_session(app_name=app, user_id="u", session_id="s") == created
    async with GrpcMemoryService(uri=f"grpcs://{secured.memory}?{query}") as memory:
        assert (await memory.search_memory(app_name=app, user_id="u", query="x")).memories == []

    # Without the token the server refuses; with another CA the client refuses the server.
    async with GrpcSessionService(
        uri=f"grpcs://{secured.session}?ca_file={secured.ca_file}"
    ) as no_token:
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await no_token.get_session(app_name=app, user_id="u", session_id="s")
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    async with GrpcSessionService(
        uri=f"grpcs://{secured.session}?token_env=TEST_TOKEN&ca_file={secured.other_ca_file}"
        "&timeout=5"
    ) as wrong_ca:
        with pytest.raises(grpc.aio.AioRpcError) as untrusted:
            await wrong_ca.get_session(app_name=app, user_id="u", session_id="s")
        assert untrusted.value.code() in (
            grpc.StatusCode.UNAVAILABLE,
            grpc.StatusCode.DEADLINE_EXCEEDED,
        )


def test_services_yaml_registers_the_classes(tmp_path: Path) -> None:
    """ADK's services.yaml constructs a class with ``uri=`` (and ``agents_dir=``)."""
    from google.adk.cli.service_registry import _register_services_from_yaml_config

    registry = ServiceRegistry()
    _register_services_from_yaml_config(
        {
            "services": [
                {
                    "scheme": "grpcs",
                    "type": "session",
                    "class": "adk_grpc_services.GrpcSessionService",
                },
                {
                    "scheme": "grpcs",
                    "type": "memory",
                    "class": "adk_grpc_services.GrpcMemoryService",
                },
            ]
        },
        registry,
    )
    session = registry.create_session_service("grpcs://s.internal", agents_dir=str(tmp_path))
    memory = registry.create_memory_service("grpcs://m.internal:7?timeout=3")
    assert isinstance(session, GrpcSessionService) and session.target == "s.internal:50051"
    assert isinstance(memory, GrpcMemoryService) and memory.target == "m.internal:7"
    register(registry)  # both ways of registering agree


async def test_adk_api_server_with_token_and_tls(
    tmp_path: Path, secured: Secured, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``adk api_server`` serves sessions and memory through the secured servers: the session
    URI carries its token and CA as query parameters (classes registered by services.yaml), the
    memory URI gets them from ADK_GRPC_* environment variables."""
    agents = tmp_path / "agents"
    (agents / "notes").mkdir(parents=True)
    (agents / "services.yaml").write_text(
        "services:\n"
        "  - scheme: grpcs\n"
        "    type: session\n"
        "    class: adk_grpc_services.GrpcSessionService\n"
        "  - scheme: grpcs\n"
        "    type: memory\n"
        "    class: adk_grpc_services.GrpcMemoryService\n"
    )
    (agents / "notes" / "__init__.py").write_text("from . import agent\n")
    (agents / "notes" / "agent.py").write_text(
        "from google.adk.agents import Agent\n"
        "root_agent = Agent(name='notes', model='gemini-2.0-flash', instruction='Take notes.')\n"
    )
    env = {
        "NOTES_SESSION_TOKEN": TOKEN,
        "ADK_GRPC_MEMORY_TOKEN": TOKEN,
        "ADK_GRPC_CA_FILE": str(secured.ca_file),
    }
    user = f"user-{uuid.uuid4().hex[:12]}"
    with api_server(
        agents,
        session_uri=f"grpcs://{secured.session}?token_env=NOTES_SESSION_TOKEN"
        f"&ca_file={secured.ca_file}&timeout=10",
        memory_uri=f"grpcs://{secured.memory}",
        workdir=tmp_path,
        env=env,
    ) as base:
        assert http("GET", f"{base}/list-apps") == ["notes"]
        http(
            "POST",
            f"{base}/apps/notes/users/{user}/sessions",
            {
                "sessionId": "s1",
                "events": [
                    {
                        "author": "user",
                        "content": {"role": "user", "parts": [{"text": "Secured note."}]},
                    }
                ],
            },
        )
        http("PATCH", f"{base}/apps/notes/users/{user}/memory", {"sessionId": "s1"})
        listed = http("GET", f"{base}/apps/notes/users/{user}/sessions")
        assert [s["id"] for s in listed] == ["s1"]

    monkeypatch.setenv("TEST_TOKEN", TOKEN)
    query = f"token_env=TEST_TOKEN&ca_file={secured.ca_file}"
    async with GrpcSessionService(uri=f"grpcs://{secured.session}?{query}") as sessions:
        stored = await sessions.get_session(app_name="notes", user_id=user, session_id="s1")
    assert stored is not None
    assert [e.content.parts[0].text for e in stored.events if e.content] == ["Secured note."]
    async with GrpcMemoryService(uri=f"grpcs://{secured.memory}?{query}") as memory:
        found = await memory.search_memory(app_name="notes", user_id=user, query="secured")
    assert [m.content.parts[0].text for m in found.memories] == ["Secured note."]
