package dev.adkservices.grpc;

import static dev.adkservices.grpc.JsonText.MAPPER;
import static dev.adkservices.grpc.JsonText.NODES;

import adk.session.v1.SessionOuterClass;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.adk.events.Event;
import com.google.adk.sessions.Session;
import com.google.adk.sessions.State;
import com.google.genai.types.Content;
import com.google.genai.types.CustomMetadata;
import com.google.protobuf.ByteString;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Lossless mapping between ADK Java's events and sessions and the {@code adk.session.v1} messages,
 * field for field as ADK Python's client maps its own (so every language reads what another wrote).
 *
 * <p>The pivot is ADK Java's JSON form of an object (its Jackson tree, camelCase). Writing, the
 * typed message fields are taken out of that tree; whatever remains (an ADK field the contract has
 * no field for, such as {@code inputTranscription} or {@code avgLogprobs}) goes, snake_cased, into
 * the message's {@code extra} JSON object. Reading builds the tree back from the typed fields,
 * merges {@code extra} over it and lets ADK's own mapper build the object.
 *
 * <p>Three fields need a rule of their own: {@code State.REMOVED} values of a state delta travel as
 * {@code removed_state_keys} and come back as {@code State.REMOVED}; ADK Java's custom metadata, a
 * list of genai {@code CustomMetadata} entries, travels as the JSON object the other languages hold
 * ({@code key: value}; a string list as a JSON array); and timestamps follow {@link Timestamps}.
 */
final class EventMapping {
  private static final String[] PART_DATA = {
    "text",
    "inlineData",
    "fileData",
    "functionCall",
    "functionResponse",
    "executableCode",
    "codeExecutionResult"
  };

  private EventMapping() {}

  // ------------------------------------------------------------------------------------------
  // Events

  /** The message for {@code event}; its sequence is left 0 for the server. */
  static SessionOuterClass.Event toProto(Event event) {
    ObjectNode tree = MAPPER.valueToTree(event);
    SessionOuterClass.Event.Builder message = SessionOuterClass.Event.newBuilder();
    String id = text(take(tree, "id"));
    if (id != null) {
      message.setId(id);
    }
    String invocationId = text(take(tree, "invocationId"));
    if (invocationId != null) {
      message.setInvocationId(invocationId);
    }
    String author = text(take(tree, "author"));
    if (author != null) {
      message.setAuthor(author);
    }
    take(tree, "timestamp");
    message.setTimestamp(Timestamps.ofMillis(event.timestamp()));
    JsonNode content = take(tree, "content");
    if (content instanceof ObjectNode contentObject) {
      message.setContent(contentToProto(contentObject));
    }
    JsonNode actions = take(tree, "actions");
    if (actions instanceof ObjectNode actionsObject) {
      message.setActions(ActionsMapping.toProto(event.actions(), actionsObject));
    }
    JsonNode toolIds = take(tree, "longRunningToolIds");
    if (toolIds instanceof ArrayNode ids) {
      ids.forEach(node -> message.addLongRunningToolIds(node.asText()));
    }
    Boolean partial = bool(take(tree, "partial"));
    if (partial != null) {
      message.setPartial(partial);
    }
    Boolean turnComplete = bool(take(tree, "turnComplete"));
    if (turnComplete != null) {
      message.setTurnComplete(turnComplete);
    }
    Boolean interrupted = bool(take(tree, "interrupted"));
    if (interrupted != null) {
      message.setInterrupted(interrupted);
    }
    String errorCode = text(take(tree, "errorCode"));
    if (errorCode != null) {
      message.setErrorCode(errorCode);
    }
    String errorMessage = text(take(tree, "errorMessage"));
    if (errorMessage != null) {
      message.setErrorMessage(errorMessage);
    }
    String finishReason = text(take(tree, "finishReason"));
    if (finishReason != null) {
      message.setFinishReason(finishReason);
    }
    String modelVersion = text(take(tree, "modelVersion"));
    if (modelVersion != null) {
      message.setModelVersion(modelVersion);
    }
    String branch = text(take(tree, "branch"));
    if (branch != null) {
      message.setBranch(branch);
    }
    JsonNode usage = take(tree, "usageMetadata");
    if (usage instanceof ObjectNode) {
      message.setUsageMetadata(JsonText.write(JsonText.snakeKeys(usage)));
    }
    JsonNode grounding = take(tree, "groundingMetadata");
    if (grounding instanceof ObjectNode) {
      message.setGroundingMetadata(JsonText.write(JsonText.snakeKeys(grounding)));
    }
    take(tree, "customMetadata");
    event
        .customMetadata()
        .filter(entries -> !entries.isEmpty())
        .ifPresent(entries -> message.setCustomMetadata(customMetadataText(entries)));
    ObjectNode extra = leftovers(tree);
    if (extra != null) {
      message.setExtra(JsonText.write(extra));
    }
    return message.build();
  }

  /** The ADK event a message holds, every field as it was sent. */
  static Event fromProto(SessionOuterClass.Event message) {
    Event built = DirectEvents.build(message);
    return built != null ? built : fromProtoViaTree(message);
  }

  /** {@link #fromProto} through ADK's JSON form, whatever the message holds (slower). */
  static Event fromProtoViaTree(SessionOuterClass.Event message) {
    ObjectNode tree = NODES.objectNode();
    tree.put("id", message.getId());
    tree.put("invocationId", message.getInvocationId());
    tree.put("author", message.getAuthor());
    tree.put("timestamp", Timestamps.toMillis(message.getTimestamp()));
    if (message.hasContent()) {
      tree.set("content", contentTree(message.getContent()));
    }
    tree.set("actions", ActionsMapping.tree(message.getActions()));
    if (message.getLongRunningToolIdsCount() > 0) {
      ArrayNode ids = tree.putArray("longRunningToolIds");
      message.getLongRunningToolIdsList().forEach(ids::add);
    }
    if (message.hasPartial()) {
      tree.put("partial", message.getPartial());
    }
    if (message.hasTurnComplete()) {
      tree.put("turnComplete", message.getTurnComplete());
    }
    if (message.hasInterrupted()) {
      tree.put("interrupted", message.getInterrupted());
    }
    if (message.hasErrorCode()) {
      tree.put("errorCode", message.getErrorCode());
    }
    if (message.hasErrorMessage()) {
      tree.put("errorMessage", message.getErrorMessage());
    }
    if (message.hasFinishReason()) {
      tree.put("finishReason", message.getFinishReason());
    }
    if (message.hasModelVersion()) {
      tree.put("modelVersion", message.getModelVersion());
    }
    if (message.hasBranch()) {
      tree.put("branch", message.getBranch());
    }
    if (!message.getUsageMetadata().isEmpty()) {
      tree.set(
          "usageMetadata",
          JsonText.camelKeys(
              JsonText.readObject(message.getUsageMetadata(), "Event.usage_metadata")));
    }
    if (!message.getGroundingMetadata().isEmpty()) {
      tree.set(
          "groundingMetadata",
          JsonText.camelKeys(
              JsonText.readObject(message.getGroundingMetadata(), "Event.grounding_metadata")));
    }
    if (!message.getCustomMetadata().isEmpty()) {
      tree.set(
          "customMetadata",
          customMetadataTree(
              JsonText.readObject(message.getCustomMetadata(), "Event.custom_metadata")));
    }
    mergeExtra(tree, message.getExtra(), "Event.extra");
    Event event;
    try {
      event = MAPPER.treeToValue(tree, Event.class);
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException(
          "event " + message.getId() + " does not read as an ADK Java Event: " + e.getMessage(), e);
    }
    for (String key : message.getActions().getRemovedStateKeysList()) {
      event.actions().stateDelta().put(key, State.REMOVED);
    }
    return event;
  }

  // ------------------------------------------------------------------------------------------
  // Sessions

  static Session sessionFromProto(
      SessionOuterClass.Session message, List<SessionOuterClass.Event> events) {
    List<Event> built = new ArrayList<>(events.size());
    for (SessionOuterClass.Event event : events) {
      built.add(fromProto(event));
    }
    return Session.builder(message.getId())
        .appName(message.getAppName())
        .userId(message.getUserId())
        .state(new ConcurrentHashMap<>(JsonText.readMap(message.getState(), "Session.state")))
        .events(built)
        .lastUpdateTime(Timestamps.toInstant(message.getLastUpdateTime()))
        .build();
  }

  // ------------------------------------------------------------------------------------------
  // Content and parts

  static SessionOuterClass.Content contentToProto(Content content) {
    return contentToProto((ObjectNode) MAPPER.valueToTree(content));
  }

  static Content contentFromProto(SessionOuterClass.Content message) {
    try {
      return MAPPER.treeToValue(contentTree(message), Content.class);
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException("content does not read as a genai Content", e);
    }
  }

  private static SessionOuterClass.Content contentToProto(ObjectNode tree) {
    SessionOuterClass.Content.Builder message = SessionOuterClass.Content.newBuilder();
    String role = text(tree.get("role"));
    if (role != null) {
      message.setRole(role);
    }
    JsonNode parts = tree.get("parts");
    if (parts instanceof ArrayNode array) {
      for (JsonNode part : array) {
        if (part instanceof ObjectNode partObject) {
          message.addParts(partToProto(partObject.deepCopy()));
        }
      }
    }
    return message.build();
  }

  static ObjectNode contentTree(SessionOuterClass.Content message) {
    ObjectNode tree = NODES.objectNode();
    if (message.hasRole()) {
      tree.put("role", message.getRole());
    }
    if (message.getPartsCount() > 0) {
      ArrayNode parts = tree.putArray("parts");
      for (SessionOuterClass.Part part : message.getPartsList()) {
        parts.add(partTree(part));
      }
    }
    return tree;
  }

  private static SessionOuterClass.Part partToProto(ObjectNode tree) {
    SessionOuterClass.Part.Builder message = SessionOuterClass.Part.newBuilder();
    ObjectNode extra = NODES.objectNode();
    // The contract's oneof holds one data field; genai allows several, and any further one
    // travels in extra.
    for (String kind : PART_DATA) {
      JsonNode value = tree.get(kind);
      if (value == null || value.isNull() || message.getDataCase().getNumber() != 0) {
        continue;
      }
      tree.remove(kind);
      if (kind.equals("text")) {
        message.setText(value.asText());
        continue;
      }
      ObjectNode data = ((ObjectNode) value).deepCopy();
      switch (kind) {
        case "inlineData" -> message.setInlineData(blob(data));
        case "fileData" -> message.setFileData(fileData(data));
        case "functionCall" -> message.setFunctionCall(functionCall(data));
        case "functionResponse" -> message.setFunctionResponse(functionResponse(data));
        case "executableCode" -> message.setExecutableCode(executableCode(data));
        default -> message.setCodeExecutionResult(codeExecutionResult(data));
      }
      ObjectNode rest = leftovers(data);
      if (rest != null) {
        extra.set(JsonText.snake(kind), rest);
      }
    }
    Boolean thought = bool(take(tree, "thought"));
    if (thought != null) {
      message.setThought(thought);
    }
    JsonNode signature = take(tree, "thoughtSignature");
    if (signature != null && !signature.isNull()) {
      message.setThoughtSignature(ByteString.copyFrom(bytes(signature)));
    }
    ObjectNode rest = leftovers(tree);
    if (rest != null) {
      JsonText.merge(extra, rest);
    }
    if (!extra.isEmpty()) {
      message.setExtra(JsonText.write(extra));
    }
    return message.build();
  }

  private static ObjectNode partTree(SessionOuterClass.Part message) {
    ObjectNode tree = NODES.objectNode();
    switch (message.getDataCase()) {
      case TEXT -> tree.put("text", message.getText());
      case INLINE_DATA -> {
        SessionOuterClass.Blob blob = message.getInlineData();
        ObjectNode data = tree.putObject("inlineData");
        if (blob.hasData()) {
          data.put("data", blob.getData().toByteArray());
        }
        putIf(data, "mimeType", blob.hasMimeType(), blob.getMimeType());
        putIf(data, "displayName", blob.hasDisplayName(), blob.getDisplayName());
      }
      case FILE_DATA -> {
        SessionOuterClass.FileData file = message.getFileData();
        ObjectNode data = tree.putObject("fileData");
        putIf(data, "fileUri", file.hasFileUri(), file.getFileUri());
        putIf(data, "mimeType", file.hasMimeType(), file.getMimeType());
        putIf(data, "displayName", file.hasDisplayName(), file.getDisplayName());
      }
      case FUNCTION_CALL -> {
        SessionOuterClass.FunctionCall call = message.getFunctionCall();
        ObjectNode data = tree.putObject("functionCall");
        putIf(data, "id", call.hasId(), call.getId());
        putIf(data, "name", call.hasName(), call.getName());
        if (!call.getArgs().isEmpty()) {
          data.set("args", JsonText.readObject(call.getArgs(), "FunctionCall.args"));
        }
        if (call.hasWillContinue()) {
          data.put("willContinue", call.getWillContinue());
        }
        mergeExtra(data, call.getExtra(), "FunctionCall.extra");
      }
      case FUNCTION_RESPONSE -> {
        SessionOuterClass.FunctionResponse response = message.getFunctionResponse();
        ObjectNode data = tree.putObject("functionResponse");
        putIf(data, "id", response.hasId(), response.getId());
        putIf(data, "name", response.hasName(), response.getName());
        if (!response.getResponse().isEmpty()) {
          data.set(
              "response", JsonText.readObject(response.getResponse(), "FunctionResponse.response"));
        }
        if (response.hasWillContinue()) {
          data.put("willContinue", response.getWillContinue());
        }
        mergeExtra(data, response.getExtra(), "FunctionResponse.extra");
      }
      case EXECUTABLE_CODE -> {
        SessionOuterClass.ExecutableCode code = message.getExecutableCode();
        ObjectNode data = tree.putObject("executableCode");
        putIf(data, "code", code.hasCode(), code.getCode());
        putIf(data, "language", code.hasLanguage(), code.getLanguage());
        putIf(data, "id", code.hasId(), code.getId());
      }
      case CODE_EXECUTION_RESULT -> {
        SessionOuterClass.CodeExecutionResult result = message.getCodeExecutionResult();
        ObjectNode data = tree.putObject("codeExecutionResult");
        putIf(data, "outcome", result.hasOutcome(), result.getOutcome());
        putIf(data, "output", result.hasOutput(), result.getOutput());
        putIf(data, "id", result.hasId(), result.getId());
      }
      case DATA_NOT_SET -> {}
    }
    if (message.hasThought()) {
      tree.put("thought", message.getThought());
    }
    if (message.hasThoughtSignature()) {
      tree.put("thoughtSignature", message.getThoughtSignature().toByteArray());
    }
    mergeExtra(tree, message.getExtra(), "Part.extra");
    return tree;
  }

  private static SessionOuterClass.Blob blob(ObjectNode data) {
    SessionOuterClass.Blob.Builder blob = SessionOuterClass.Blob.newBuilder();
    JsonNode bytes = take(data, "data");
    if (bytes != null && !bytes.isNull()) {
      blob.setData(ByteString.copyFrom(bytes(bytes)));
    }
    String mimeType = text(take(data, "mimeType"));
    if (mimeType != null) {
      blob.setMimeType(mimeType);
    }
    String displayName = text(take(data, "displayName"));
    if (displayName != null) {
      blob.setDisplayName(displayName);
    }
    return blob.build();
  }

  private static SessionOuterClass.FileData fileData(ObjectNode data) {
    SessionOuterClass.FileData.Builder file = SessionOuterClass.FileData.newBuilder();
    String uri = text(take(data, "fileUri"));
    if (uri != null) {
      file.setFileUri(uri);
    }
    String mimeType = text(take(data, "mimeType"));
    if (mimeType != null) {
      file.setMimeType(mimeType);
    }
    String displayName = text(take(data, "displayName"));
    if (displayName != null) {
      file.setDisplayName(displayName);
    }
    return file.build();
  }

  private static SessionOuterClass.FunctionCall functionCall(ObjectNode data) {
    SessionOuterClass.FunctionCall.Builder call = SessionOuterClass.FunctionCall.newBuilder();
    String id = text(take(data, "id"));
    if (id != null) {
      call.setId(id);
    }
    String name = text(take(data, "name"));
    if (name != null) {
      call.setName(name);
    }
    JsonNode args = take(data, "args");
    if (args instanceof ObjectNode) {
      call.setArgs(JsonText.write(args));
    }
    Boolean willContinue = bool(take(data, "willContinue"));
    if (willContinue != null) {
      call.setWillContinue(willContinue);
    }
    ObjectNode extra = leftovers(data);
    if (extra != null) {
      call.setExtra(JsonText.write(extra));
    }
    return call.build();
  }

  private static SessionOuterClass.FunctionResponse functionResponse(ObjectNode data) {
    SessionOuterClass.FunctionResponse.Builder response =
        SessionOuterClass.FunctionResponse.newBuilder();
    String id = text(take(data, "id"));
    if (id != null) {
      response.setId(id);
    }
    String name = text(take(data, "name"));
    if (name != null) {
      response.setName(name);
    }
    JsonNode payload = take(data, "response");
    if (payload instanceof ObjectNode) {
      response.setResponse(JsonText.write(payload));
    }
    Boolean willContinue = bool(take(data, "willContinue"));
    if (willContinue != null) {
      response.setWillContinue(willContinue);
    }
    ObjectNode extra = leftovers(data);
    if (extra != null) {
      response.setExtra(JsonText.write(extra));
    }
    return response.build();
  }

  private static SessionOuterClass.ExecutableCode executableCode(ObjectNode data) {
    SessionOuterClass.ExecutableCode.Builder code = SessionOuterClass.ExecutableCode.newBuilder();
    String text = text(take(data, "code"));
    if (text != null) {
      code.setCode(text);
    }
    String language = text(take(data, "language"));
    if (language != null) {
      code.setLanguage(language);
    }
    String id = text(take(data, "id"));
    if (id != null) {
      code.setId(id);
    }
    return code.build();
  }

  private static SessionOuterClass.CodeExecutionResult codeExecutionResult(ObjectNode data) {
    SessionOuterClass.CodeExecutionResult.Builder result =
        SessionOuterClass.CodeExecutionResult.newBuilder();
    String outcome = text(take(data, "outcome"));
    if (outcome != null) {
      result.setOutcome(outcome);
    }
    String output = text(take(data, "output"));
    if (output != null) {
      result.setOutput(output);
    }
    String id = text(take(data, "id"));
    if (id != null) {
      result.setId(id);
    }
    return result.build();
  }

  // ------------------------------------------------------------------------------------------
  // Custom metadata: genai CustomMetadata entries <-> a JSON object

  static String customMetadataText(List<CustomMetadata> entries) {
    ObjectNode object = NODES.objectNode();
    for (CustomMetadata entry : entries) {
      String key = entry.key().orElse("");
      if (entry.stringValue().isPresent()) {
        object.put(key, entry.stringValue().get());
      } else if (entry.numericValue().isPresent()) {
        // The float's shortest decimal text, so 0.1f travels as 0.1.
        object.set(
            key, NODES.numberNode(Double.parseDouble(entry.numericValue().get().toString())));
      } else if (entry.stringListValue().isPresent()) {
        ArrayNode values = object.putArray(key);
        entry.stringListValue().get().values().orElse(List.of()).forEach(values::add);
      } else {
        object.putNull(key);
      }
    }
    return JsonText.write(object);
  }

  /**
   * ADK Java's form of a custom metadata object: a string, a number and a list of strings map to
   * the entry's string, numeric and string-list value; any other value (an object, a boolean, a
   * mixed list) becomes a string value holding its JSON text.
   */
  static ArrayNode customMetadataTree(ObjectNode object) {
    ArrayNode entries = NODES.arrayNode();
    object
        .fields()
        .forEachRemaining(
            field -> {
              ObjectNode entry = entries.addObject();
              entry.put("key", field.getKey());
              JsonNode value = field.getValue();
              if (value.isTextual()) {
                entry.put("stringValue", value.asText());
              } else if (value.isNumber()) {
                entry.put("numericValue", value.floatValue());
              } else if (value.isArray() && allText(value)) {
                entry.putObject("stringListValue").set("values", value);
              } else if (!value.isNull()) {
                entry.put("stringValue", JsonText.write(value));
              }
            });
    return entries;
  }

  private static boolean allText(JsonNode array) {
    for (JsonNode item : array) {
      if (!item.isTextual()) {
        return false;
      }
    }
    return true;
  }

  // ------------------------------------------------------------------------------------------
  // Tree helpers

  static JsonNode take(ObjectNode tree, String name) {
    JsonNode value = tree.remove(name);
    return value == null || value.isNull() ? null : value;
  }

  static String text(JsonNode node) {
    return node == null ? null : node.asText();
  }

  static Boolean bool(JsonNode node) {
    return node == null || !node.isBoolean() ? null : node.booleanValue();
  }

  private static byte[] bytes(JsonNode node) {
    try {
      if (node.isTextual()) {
        // ADK Python writes URL-safe base64; Jackson's default is the standard alphabet.
        return Base64.getDecoder().decode(node.asText().replace('-', '+').replace('_', '/'));
      }
      return node.binaryValue();
    } catch (IOException | IllegalArgumentException e) {
      throw new IllegalArgumentException("bytes field is not base64", e);
    }
  }

  private static void putIf(ObjectNode tree, String name, boolean present, String value) {
    if (present) {
      tree.put(name, value);
    }
  }

  /** What remains of a tree once its typed fields are taken, snake_cased; null when nothing. */
  static ObjectNode leftovers(ObjectNode tree) {
    ObjectNode rest = NODES.objectNode();
    for (Map.Entry<String, JsonNode> field : (Iterable<Map.Entry<String, JsonNode>>) tree::fields) {
      JsonNode value = field.getValue();
      if (value.isNull() || (value.isContainerNode() && value.isEmpty())) {
        continue;
      }
      rest.set(JsonText.snake(field.getKey()), JsonText.snakeKeys(value));
    }
    return rest.isEmpty() ? null : rest;
  }

  static void mergeExtra(ObjectNode tree, String extra, String field) {
    if (!extra.isEmpty()) {
      JsonText.merge(tree, (ObjectNode) JsonText.camelKeys(JsonText.readObject(extra, field)));
    }
  }
}
