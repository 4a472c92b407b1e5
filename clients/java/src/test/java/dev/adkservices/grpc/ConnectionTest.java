package dev.adkservices.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Service URIs and the ADK_GRPC_* environment, and a session-svc requiring TLS and a bearer token
 * (certificates made with openssl).
 */
class ConnectionTest {
  private static final String TOKEN = "t0k3n-for-tests";

  private static ServiceEndpoint parse(String uri, Map<String, String> environment) {
    return ServiceEndpoint.parse(uri, ServiceEndpoint.SESSION_PORT, "session", environment::get);
  }

  @Test
  void uriAndEnvironment() {
    ServiceEndpoint plain = parse("grpc://example.org", Map.of());
    assertEquals("example.org:50051", plain.target());
    assertEquals(Optional.empty(), plain.timeout());
    ServiceEndpoint timed =
        parse("grpc://h:7", Map.of("ADK_GRPC_TIMEOUT", "9", "ADK_GRPC_SESSION_TIMEOUT", "2.5"));
    assertEquals(Optional.of(Duration.ofMillis(2500)), timed.timeout());
    assertEquals(
        Optional.of(Duration.ofSeconds(1)),
        parse("grpc://h:7?timeout=1", Map.of("ADK_GRPC_TIMEOUT", "9")).timeout());
    assertThrows(IllegalArgumentException.class, () -> parse("grpc://h?ca_file=/x.pem", Map.of()));
    assertThrows(IllegalArgumentException.class, () -> parse("grpc://h/path", Map.of()));
    assertThrows(IllegalArgumentException.class, () -> parse("grpc://h?timeout=abc", Map.of()));
    IllegalArgumentException unset =
        assertThrows(
            IllegalArgumentException.class, () -> parse("grpc://h?token_env=MY_TOKEN", Map.of()));
    assertTrue(unset.getMessage().contains("MY_TOKEN"), unset.getMessage());
  }

  @Test
  void tlsAndATokenFromTheEnvironment(@TempDir Path dir) throws Exception {
    Path key = dir.resolve("server.key");
    Path cert = dir.resolve("server.pem");
    ServerProcess.run(
        List.of(
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            key.toString(),
            "-out",
            cert.toString()));
    Path tokens = dir.resolve("tokens.json");
    Files.writeString(
        tokens,
        "{\"tokens\": [{\"name\": \"tests\", \"token\": \"" + TOKEN + "\", \"apps\": [\"*\"]}]}");
    try (ServerProcess server =
        ServerProcess.session(
            List.of(
                "--tokens-file", tokens.toString(),
                "--tls-cert", cert.toString(),
                "--tls-key", key.toString()))) {
      String uri = "grpcs://" + server.address() + "?ca_file=" + cert;
      Map<String, String> environment = Map.of("ADK_GRPC_SESSION_TOKEN", TOKEN);
      try (GrpcSessionService sessions = new GrpcSessionService(parse(uri, environment))) {
        assertEquals(
            "secured", sessions.createSession("app", "u", null, "secured").blockingGet().id());
      }
      try (GrpcSessionService anonymous = new GrpcSessionService(parse(uri, Map.of()))) {
        StatusRuntimeException error =
            assertThrows(
                StatusRuntimeException.class,
                () -> anonymous.createSession("app", "u", null, null).blockingGet());
        assertEquals(Status.Code.UNAUTHENTICATED, error.getStatus().getCode());
      }
    }
  }
}
