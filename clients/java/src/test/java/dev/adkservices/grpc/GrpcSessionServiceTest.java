package dev.adkservices.grpc;

import com.google.adk.sessions.BaseSessionService;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;

/** The conformance cases against a real session-svc on sled. */
class GrpcSessionServiceTest extends SessionServiceConformance {
  private ServerProcess server;
  private GrpcSessionService service;

  @BeforeAll
  void start() throws Exception {
    server = ServerProcess.session();
    service = new GrpcSessionService(server.endpoint());
  }

  @AfterAll
  void stop() throws Exception {
    service.close();
    server.close();
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
