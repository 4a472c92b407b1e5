package dev.adkservices.grpc;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A real session-svc or memory-svc for the tests: started from {@code $ADK_SERVICES_BIN_DIR}
 * (default: the repository's {@code target/debug}) on port 0 with a temporary data directory, ready
 * once it prints {@code NAME listening on ADDR}. On PostgreSQL a server stores in a fresh schema of
 * the database {@code $ADK_TEST_POSTGRES} names, dropped when it is closed.
 */
final class ServerProcess implements AutoCloseable {
  private final String name;
  private final Path dataDir;
  private final List<String> storeArgs;
  // (database URL, statement) run once the server has stopped: the schema it stored in.
  private List<String> dropOnClose = List.of();
  private Process process;
  private String address;

  private ServerProcess(String name, List<String> storeArgs) throws IOException {
    this.name = name;
    this.dataDir = Files.createTempDirectory(name + "-");
    this.storeArgs = storeArgs;
  }

  static ServerProcess session() throws IOException {
    return start("session-svc", List.of());
  }

  static ServerProcess memory() throws IOException {
    return start("memory-svc", List.of());
  }

  /** memory-svc with further flags (--generator, ...). */
  static ServerProcess memory(List<String> flags) throws IOException {
    return start("memory-svc", flags);
  }

  /** session-svc with further flags (--tokens-file, --tls-cert, ...). */
  static ServerProcess session(List<String> flags) throws IOException {
    return start("session-svc", flags);
  }

  static ServerProcess sessionOnPostgres(String url) throws IOException {
    return onPostgres("session-svc", url);
  }

  static ServerProcess memoryOnPostgres(String url) throws IOException {
    return onPostgres("memory-svc", url);
  }

  /**
   * {@code name} storing in a fresh schema of {@code url}'s database, dropped by {@link #close}.
   */
  private static ServerProcess onPostgres(String name, String url) throws IOException {
    String schema = "java_" + UUID.randomUUID().toString().replace("-", "");
    psql(url, "CREATE SCHEMA " + schema);
    String store = url + (url.contains("?") ? "&" : "?") + "options=-csearch_path%3D" + schema;
    ServerProcess server = new ServerProcess(name, List.of("--store", store));
    server.dropOnClose = List.of(url, "DROP SCHEMA " + schema + " CASCADE");
    server.boot();
    return server;
  }

  private static void psql(String url, String statement) throws IOException {
    run(List.of("psql", url, "-q", "-v", "ON_ERROR_STOP=1", "-c", statement));
  }

  private static ServerProcess start(String name, List<String> storeArgs) throws IOException {
    ServerProcess server = new ServerProcess(name, storeArgs);
    server.boot();
    return server;
  }

  String address() {
    return address;
  }

  String uri() {
    return "grpc://" + address;
  }

  ServiceEndpoint endpoint() {
    int colon = address.lastIndexOf(':');
    return ServiceEndpoint.plaintext(
        address.substring(0, colon), Integer.parseInt(address.substring(colon + 1)));
  }

  /** Stops the server (SIGTERM) and starts it again on the same store and a new port. */
  void restart() throws IOException, InterruptedException {
    stop();
    boot();
  }

  void stop() throws InterruptedException {
    process.destroy();
    if (!process.waitFor(20, TimeUnit.SECONDS)) {
      process.destroyForcibly().waitFor();
    }
  }

  private void boot() throws IOException {
    List<String> command = new ArrayList<>();
    command.add(binDir().resolve(name).toString());
    command.addAll(List.of("--listen", "127.0.0.1:0", "--data-dir", dataDir.toString()));
    command.addAll(storeArgs);
    process =
        new ProcessBuilder(command)
            .redirectError(ProcessBuilder.Redirect.INHERIT)
            .redirectInput(ProcessBuilder.Redirect.PIPE)
            .start();
    BufferedReader out =
        new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8));
    CompletableFuture<String> ready =
        CompletableFuture.supplyAsync(
            () -> {
              try {
                String marker = " listening on ";
                for (String line; (line = out.readLine()) != null; ) {
                  int at = line.indexOf(marker);
                  if (at >= 0) {
                    String found = line.substring(at + marker.length()).trim();
                    // Keep draining stdout so the server never blocks on a full pipe.
                    Thread drain =
                        new Thread(
                            () -> {
                              try {
                                while (out.readLine() != null) {}
                              } catch (IOException ignored) {
                                // The server exited.
                              }
                            });
                    drain.setDaemon(true);
                    drain.start();
                    return found;
                  }
                }
                throw new IllegalStateException(name + " exited before it was ready");
              } catch (IOException e) {
                throw new IllegalStateException(e);
              }
            });
    try {
      address = ready.get(60, TimeUnit.SECONDS);
    } catch (Exception e) {
      process.destroyForcibly();
      throw new IOException(name + " did not start: " + e.getMessage(), e);
    }
  }

  static Path binDir() {
    String configured = System.getenv("ADK_SERVICES_BIN_DIR");
    if (configured != null && !configured.isEmpty()) {
      return Path.of(configured).toAbsolutePath();
    }
    return Path.of("../../target/debug").toAbsolutePath().normalize();
  }

  @Override
  public void close() throws IOException, InterruptedException {
    stop();
    try (Stream<Path> files = Files.walk(dataDir)) {
      files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
    }
    if (!dropOnClose.isEmpty()) {
      psql(dropOnClose.get(0), dropOnClose.get(1));
    }
  }

  static void run(List<String> command) throws IOException {
    try {
      Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
      String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
      if (p.waitFor() != 0) {
        throw new IOException(String.join(" ", command.subList(0, 1)) + " failed: " + output);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IOException(e);
    }
  }
}
