package dev.adkservices.grpc;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import com.google.adk.sessions.BaseSessionService;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/**
 * The conformance cases against a real session-svc on PostgreSQL (a fresh schema of the database
 * {@code ADK_TEST_POSTGRES} names); skipped when it is not set.
 */
class PostgresSessionServiceTest extends SessionServiceConformance {
  private ServerProcess server;
  private GrpcSessionService service;

  @BeforeAll
  void start() throws Exception {
    String url = System.getenv("ADK_TEST_POSTGRES");
    assumeTrue(url != null && !url.isEmpty(), "ADK_TEST_POSTGRES is not set");
    server = ServerProcess.sessionOnPostgres(url);
    service = new GrpcSessionService(server.endpoint());
  }

  @AfterAll
  void stop() throws Exception {
    if (server != null) {
      service.close();
      server.close();
    }
  }

  @Override
  BaseSessionService service() {
    return service;
  }

  @Override
  boolean durable() {
    return true;
  }
}
