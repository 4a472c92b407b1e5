package dev.adkservices.grpc;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;

/**
 * The filter, validity and purge cases against a real memory-svc on PostgreSQL (a fresh schema of
 * the database {@code ADK_TEST_POSTGRES} names); skipped when it is not set.
 */
class PostgresMemoryFiltersTest extends MemoryFiltersTest {
  @Override
  ServerProcess startServer() throws IOException {
    String url = System.getenv("ADK_TEST_POSTGRES");
    assumeTrue(url != null && !url.isEmpty(), "ADK_TEST_POSTGRES is not set");
    return ServerProcess.memoryOnPostgres(url);
  }
}
