package dev.adkservices.grpc;

import com.google.adk.sessions.BaseSessionService;
import com.google.adk.sessions.InMemorySessionService;
import org.junit.jupiter.api.BeforeEach;

/**
 * The conformance cases against ADK Java's own InMemorySessionService, so that where it differs the
 * difference is written down (the cases say what it does instead).
 */
class InMemorySessionServiceConformanceTest extends SessionServiceConformance {
  private InMemorySessionService service;

  @BeforeEach
  void fresh() {
    service = new InMemorySessionService();
  }

  @Override
  BaseSessionService service() {
    return service;
  }

  @Override
  boolean durable() {
    return false;
  }
}
