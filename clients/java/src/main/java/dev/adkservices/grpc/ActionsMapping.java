package dev.adkservices.grpc;

import static dev.adkservices.grpc.EventMapping.bool;
import static dev.adkservices.grpc.EventMapping.take;
import static dev.adkservices.grpc.EventMapping.text;
import static dev.adkservices.grpc.JsonText.NODES;

import adk.session.v1.SessionOuterClass;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.adk.events.EventActions;
import com.google.adk.sessions.State;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * {@link EventActions} and the {@code adk.session.v1.EventActions} message.
 *
 * <p>A state delta's {@code State.REMOVED} values travel as {@code removed_state_keys}, the others
 * as the {@code state_delta} JSON object; {@code temp:} keys are never sent.
 */
final class ActionsMapping {
  private ActionsMapping() {}

  static SessionOuterClass.EventActions toProto(EventActions actions, ObjectNode tree) {
    SessionOuterClass.EventActions.Builder message = SessionOuterClass.EventActions.newBuilder();
    take(tree, "stateDelta");
    Map<String, Object> delta = new LinkedHashMap<>();
    actions
        .stateDelta()
        .forEach(
            (key, value) -> {
              if (key.startsWith(State.TEMP_PREFIX)) {
                return;
              }
              if (value == State.REMOVED) {
                message.addRemovedStateKeys(key);
              } else {
                delta.put(key, value);
              }
            });
    if (!delta.isEmpty()) {
      message.setStateDelta(JsonText.write(delta));
    }
    Boolean skip = bool(take(tree, "skipSummarization"));
    if (skip != null) {
      message.setSkipSummarization(skip);
    }
    String transfer = text(take(tree, "transferToAgent"));
    if (transfer != null) {
      message.setTransferToAgent(transfer);
    }
    Boolean escalate = bool(take(tree, "escalate"));
    if (escalate != null) {
      message.setEscalate(escalate);
    }
    // A primitive in ADK Java, absent (None) by default in the other languages.
    if (Boolean.TRUE.equals(bool(take(tree, "endOfAgent")))) {
      message.setEndOfAgent(true);
    }
    JsonNode artifacts = take(tree, "artifactDelta");
    if (artifacts instanceof ObjectNode artifactObject) {
      artifactObject
          .fields()
          .forEachRemaining(e -> message.putArtifactDelta(e.getKey(), e.getValue().asLong()));
    }
    JsonNode auth = take(tree, "requestedAuthConfigs");
    if (auth instanceof ObjectNode && !auth.isEmpty()) {
      message.setRequestedAuthConfigs(JsonText.write(auth));
    }
    JsonNode confirmations = take(tree, "requestedToolConfirmations");
    if (confirmations instanceof ObjectNode && !confirmations.isEmpty()) {
      message.setRequestedToolConfirmations(JsonText.write(JsonText.snakeKeys(confirmations)));
    }
    JsonNode compaction = take(tree, "compaction");
    if (compaction instanceof ObjectNode compactionObject) {
      SessionOuterClass.EventCompaction.Builder target =
          SessionOuterClass.EventCompaction.newBuilder();
      JsonNode start = take(compactionObject, "startTimestamp");
      if (start != null) {
        target.setStartTimestamp(Timestamps.ofMillis(start.asLong()));
      }
      JsonNode end = take(compactionObject, "endTimestamp");
      if (end != null) {
        target.setEndTimestamp(Timestamps.ofMillis(end.asLong()));
      }
      JsonNode content = take(compactionObject, "compactedContent");
      if (content instanceof ObjectNode) {
        target.setCompactedContent(
            EventMapping.contentToProto(
                JsonText.MAPPER.convertValue(content, com.google.genai.types.Content.class)));
      }
      message.setCompaction(target);
    }
    ObjectNode extra = EventMapping.leftovers(tree);
    if (extra != null) {
      message.setExtra(JsonText.write(extra));
    }
    return message.build();
  }

  /** ADK Java's JSON form of the actions a message holds (removed keys are added by the caller). */
  static ObjectNode tree(SessionOuterClass.EventActions message) {
    ObjectNode tree = NODES.objectNode();
    tree.set(
        "stateDelta", JsonText.readObject(message.getStateDelta(), "EventActions.state_delta"));
    if (message.hasSkipSummarization()) {
      tree.put("skipSummarization", message.getSkipSummarization());
    }
    if (message.hasTransferToAgent()) {
      tree.put("transferToAgent", message.getTransferToAgent());
    }
    if (message.hasEscalate()) {
      tree.put("escalate", message.getEscalate());
    }
    if (message.hasEndOfAgent()) {
      tree.put("endOfAgent", message.getEndOfAgent());
    }
    ObjectNode artifacts = tree.putObject("artifactDelta");
    message.getArtifactDeltaMap().forEach(artifacts::put);
    if (!message.getRequestedAuthConfigs().isEmpty()) {
      tree.set(
          "requestedAuthConfigs",
          JsonText.readObject(
              message.getRequestedAuthConfigs(), "EventActions.requested_auth_configs"));
    }
    if (!message.getRequestedToolConfirmations().isEmpty()) {
      tree.set(
          "requestedToolConfirmations",
          JsonText.camelKeys(
              JsonText.readObject(
                  message.getRequestedToolConfirmations(),
                  "EventActions.requested_tool_confirmations")));
    }
    if (message.hasCompaction()) {
      SessionOuterClass.EventCompaction source = message.getCompaction();
      ObjectNode compaction = tree.putObject("compaction");
      if (source.hasStartTimestamp()) {
        compaction.put("startTimestamp", Timestamps.toMillis(source.getStartTimestamp()));
      }
      if (source.hasEndTimestamp()) {
        compaction.put("endTimestamp", Timestamps.toMillis(source.getEndTimestamp()));
      }
      if (source.hasCompactedContent()) {
        compaction.set("compactedContent", EventMapping.contentTree(source.getCompactedContent()));
      }
    }
    EventMapping.mergeExtra(tree, message.getExtra(), "EventActions.extra");
    return tree;
  }
}
