package dev.adkservices.grpc;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.adk.events.Event;
import com.google.adk.sessions.Session;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;
import java.util.Optional;

/**
 * The cross-language fidelity tool (clients/fidelity/README.md) for ADK Java: {@code write} creates
 * a session from the fixture and appends its events through {@link GrpcSessionService}; {@code
 * read} prints the session as ADK Java serializes it, its custom metadata in the cross-language
 * object form.
 *
 * <pre>
 * fidelity write --uri grpc://HOST:PORT --app APP --user USER --session ID --fixture FILE
 * fidelity read  --uri grpc://HOST:PORT --app APP --user USER --session ID
 * </pre>
 */
public final class Fidelity {
  private Fidelity() {}

  public static void main(String[] args) throws Exception {
    if (args.length == 0 || (!args[0].equals("write") && !args[0].equals("read"))) {
      System.err.println(
          "usage: fidelity write|read --uri URI --app APP --user USER --session ID"
              + " [--fixture FILE]");
      System.exit(2);
    }
    Map<String, String> options = new HashMap<>();
    for (int i = 1; i + 1 < args.length; i += 2) {
      options.put(args[i], args[i + 1]);
    }
    String app = required(options, "--app");
    String user = required(options, "--user");
    String id = required(options, "--session");
    try (GrpcSessionService service = GrpcSessionService.fromUri(required(options, "--uri"))) {
      if (args[0].equals("write")) {
        write(service, app, user, id, Path.of(required(options, "--fixture")));
      } else {
        read(service, app, user, id);
      }
    }
  }

  private static void write(
      GrpcSessionService service, String app, String user, String id, Path fixture)
      throws IOException {
    JsonNode root = JsonText.MAPPER.readTree(Files.readString(fixture));
    Map<String, Object> state = JsonText.readMap(JsonText.write(root.get("state")), "state");
    Session session = service.createSession(app, user, state, id).blockingGet();
    for (JsonNode node : root.get("events")) {
      ObjectNode tree = ((ObjectNode) node).deepCopy();
      // Epoch seconds with millisecond precision in the fixture; epoch milliseconds in ADK Java.
      tree.put("timestamp", Math.round(node.get("timestamp").asDouble() * 1000));
      JsonNode metadata = tree.remove("customMetadata");
      if (metadata instanceof ObjectNode object) {
        tree.set("customMetadata", EventMapping.customMetadataTree(object));
      }
      Event event = JsonText.MAPPER.treeToValue(tree, Event.class);
      service.appendEvent(session, event).blockingGet();
    }
  }

  private static void read(GrpcSessionService service, String app, String user, String id) {
    Optional<Session> found =
        Optional.ofNullable(service.getSession(app, user, id, Optional.empty()).blockingGet());
    Session session = found.orElseThrow(() -> new IllegalStateException("no session " + id));
    ObjectNode out = JsonText.NODES.objectNode();
    out.set("state", JsonText.MAPPER.valueToTree(session.state()));
    var events = out.putArray("events");
    for (Event event : session.events()) {
      ObjectNode tree = JsonText.MAPPER.valueToTree(event);
      event
          .customMetadata()
          .ifPresent(
              entries ->
                  tree.set(
                      "customMetadata",
                      JsonText.readObject(
                          EventMapping.customMetadataText(entries), "customMetadata")));
      if (tree.get("actions") instanceof ObjectNode actions
          && !actions.path("endOfAgent").asBoolean(false)) {
        // A primitive in ADK Java: false stands for absent.
        actions.remove("endOfAgent");
      }
      events.add(tree);
    }
    System.out.println(JsonText.write(out));
  }

  private static String required(Map<String, String> options, String name) {
    String value = options.get(name);
    if (value == null) {
      throw new IllegalArgumentException("missing " + name);
    }
    return value;
  }
}
