package dev.adkservices.grpc;

import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ChannelCredentials;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ClientInterceptors;
import io.grpc.ForwardingClientCall;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.TlsChannelCredentials;
import io.grpc.netty.shaded.io.grpc.netty.NettyChannelBuilder;
import java.io.File;
import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.function.UnaryOperator;

/**
 * Where and how a service connects: a {@code grpc://host[:port]} (plaintext) or {@code
 * grpcs://host[:port]} (TLS) URI with the query parameters {@code token_env=NAME}, {@code
 * ca_file=PATH} and {@code timeout=SECONDS}; what the URI leaves out comes from the environment
 * ({@code ADK_GRPC_<KIND>_TOKEN} or {@code ADK_GRPC_TOKEN}, {@code ADK_GRPC_<KIND>_CA_FILE} or
 * {@code ADK_GRPC_CA_FILE}, {@code ADK_GRPC_<KIND>_TIMEOUT} or {@code ADK_GRPC_TIMEOUT}, where KIND
 * is SESSION or MEMORY). Anything wrong in it is an {@link IllegalArgumentException} when the
 * client is built, not at the first call.
 */
public final class ServiceEndpoint {
  /** session-svc's default port. */
  public static final int SESSION_PORT = 50051;

  /** memory-svc's default port. */
  public static final int MEMORY_PORT = 50052;

  /**
   * The largest message accepted: an event may be 16 MiB (session-svc's default --max-event-bytes),
   * plus its envelope.
   */
  static final int MAX_MESSAGE_BYTES = (16 << 20) + (1 << 20);

  private static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

  private final String host;
  private final int port;
  private final ChannelCredentials credentials;
  private final Optional<String> token;
  private final Optional<Duration> timeout;

  private ServiceEndpoint(
      String host,
      int port,
      ChannelCredentials credentials,
      Optional<String> token,
      Optional<Duration> timeout) {
    this.host = host;
    this.port = port;
    this.credentials = credentials;
    this.token = token;
    this.timeout = timeout;
  }

  /** A plaintext endpoint at {@code host:port}, with no token and no deadline. */
  public static ServiceEndpoint plaintext(String host, int port) {
    return new ServiceEndpoint(
        host, port, InsecureChannelCredentials.create(), Optional.empty(), Optional.empty());
  }

  static ServiceEndpoint parse(String uri, int defaultPort, String kind) {
    return parse(uri, defaultPort, kind, System::getenv);
  }

  static ServiceEndpoint parse(
      String uri, int defaultPort, String kind, UnaryOperator<String> environment) {
    URI parsed;
    try {
      parsed = new URI(uri);
    } catch (URISyntaxException e) {
      throw new IllegalArgumentException("'" + uri + "' is not a URI: " + e.getMessage(), e);
    }
    String scheme = parsed.getScheme();
    if (!"grpc".equals(scheme) && !"grpcs".equals(scheme)) {
      throw new IllegalArgumentException("expected a grpc:// or grpcs:// URI, got '" + uri + "'");
    }
    if (parsed.getHost() == null) {
      throw new IllegalArgumentException("'" + uri + "' names no host");
    }
    String path = parsed.getRawPath();
    if ((path != null && !path.isEmpty() && !path.equals("/"))
        || parsed.getRawFragment() != null
        || parsed.getRawUserInfo() != null) {
      throw new IllegalArgumentException(
          "a " + scheme + ":// URI names host, port and query parameters only, got '" + uri + "'");
    }
    String upper = kind.toUpperCase(Locale.ROOT);
    UnaryOperator<String> setting =
        name -> {
          String own = nonEmpty(environment.apply("ADK_GRPC_" + upper + "_" + name));
          return own != null ? own : nonEmpty(environment.apply("ADK_GRPC_" + name));
        };
    String token = setting.apply("TOKEN");
    String caFile = setting.apply("CA_FILE");
    String timeoutText = setting.apply("TIMEOUT");
    String query = parsed.getRawQuery();
    if (query != null && !query.isEmpty()) {
      for (String pair : query.split("&")) {
        int eq = pair.indexOf('=');
        String name = decode(eq < 0 ? pair : pair.substring(0, eq));
        String value = eq < 0 ? "" : decode(pair.substring(eq + 1));
        switch (name) {
          case "token_env" -> {
            token = nonEmpty(environment.apply(value));
            if (token == null) {
              throw new IllegalArgumentException(
                  "'" + uri + "': token_env names $" + value + ", which is not set");
            }
          }
          case "ca_file" -> {
            if (!scheme.equals("grpcs")) {
              throw new IllegalArgumentException("'" + uri + "': ca_file needs a grpcs:// URI");
            }
            caFile = value;
          }
          case "timeout" -> timeoutText = value;
          default ->
              throw new IllegalArgumentException(
                  "'"
                      + uri
                      + "': unknown query parameter '"
                      + name
                      + "' (known: token_env, ca_file, timeout)");
        }
      }
    }
    ChannelCredentials credentials = InsecureChannelCredentials.create();
    if (scheme.equals("grpcs")) {
      TlsChannelCredentials.Builder tls = TlsChannelCredentials.newBuilder();
      if (caFile != null) {
        try {
          tls.trustManager(new File(caFile));
        } catch (IOException e) {
          throw new IllegalArgumentException(
              "'" + uri + "': cannot read ca_file " + caFile + ": " + e.getMessage(), e);
        }
      }
      credentials = tls.build();
    }
    int port = parsed.getPort() < 0 ? defaultPort : parsed.getPort();
    return new ServiceEndpoint(
        parsed.getHost(),
        port,
        credentials,
        Optional.ofNullable(token),
        Optional.ofNullable(timeoutText).map(text -> timeout(uri, text)));
  }

  /** The same endpoint with this deadline for every call. */
  public ServiceEndpoint withTimeout(Duration timeout) {
    return new ServiceEndpoint(host, port, credentials, token, Optional.of(timeout));
  }

  /** The same endpoint sending {@code authorization: Bearer TOKEN} with every call. */
  public ServiceEndpoint withToken(String token) {
    return new ServiceEndpoint(host, port, credentials, Optional.of(token), timeout);
  }

  /** {@code host:port}. */
  public String target() {
    return host + ":" + port;
  }

  Optional<Duration> timeout() {
    return timeout;
  }

  /**
   * A channel to the endpoint. Calls listed in {@code retried} are retried on UNAVAILABLE (at most
   * 4 attempts, backoff from 100 ms doubling to 2 s), by gRPC's own retry machinery.
   */
  ManagedChannel open(String service, List<String> retried) {
    Map<String, Object> retryPolicy =
        Map.of(
            "maxAttempts",
            4.0,
            "initialBackoff",
            "0.1s",
            "maxBackoff",
            "2s",
            "backoffMultiplier",
            2.0,
            "retryableStatusCodes",
            List.of("UNAVAILABLE"));
    List<Object> names =
        retried.stream()
            .map(method -> (Object) Map.of("service", service, "method", method))
            .toList();
    Map<String, Object> config =
        Map.of("methodConfig", List.of(Map.of("name", names, "retryPolicy", retryPolicy)));
    return NettyChannelBuilder.forAddress(host, port, credentials)
        .maxInboundMessageSize(MAX_MESSAGE_BYTES)
        .defaultServiceConfig(config)
        .enableRetry()
        .build();
  }

  /** {@code channel} with this endpoint's token on every call. */
  Channel authorized(Channel channel) {
    if (token.isEmpty()) {
      return channel;
    }
    String value = "Bearer " + token.get();
    ClientInterceptor bearer =
        new ClientInterceptor() {
          @Override
          public <Q, R> ClientCall<Q, R> interceptCall(
              MethodDescriptor<Q, R> method, CallOptions options, Channel next) {
            return new ForwardingClientCall.SimpleForwardingClientCall<>(
                next.newCall(method, options)) {
              @Override
              public void start(Listener<R> listener, Metadata headers) {
                headers.put(AUTHORIZATION, value);
                super.start(listener, headers);
              }
            };
          }
        };
    return ClientInterceptors.intercept(channel, bearer);
  }

  private static Duration timeout(String uri, String text) {
    double seconds;
    try {
      seconds = Double.parseDouble(text);
    } catch (NumberFormatException e) {
      seconds = Double.NaN;
    }
    if (!(seconds > 0) || Double.isInfinite(seconds)) {
      throw new IllegalArgumentException(
          "'" + uri + "': timeout must be a positive number of seconds, got '" + text + "'");
    }
    return Duration.ofNanos((long) (seconds * 1e9));
  }

  private static String nonEmpty(String value) {
    return value == null || value.isEmpty() ? null : value;
  }

  private static String decode(String text) {
    return URLDecoder.decode(text, StandardCharsets.UTF_8);
  }
}
