package dev.adkservices.grpc;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JavaType;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import com.google.adk.JsonBaseModel;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * The contract's JSON text fields: one JSON document per string, the empty string meaning absent.
 *
 * <p>Values are written with ADK Java's own {@link ObjectMapper}, so a state value serializes as
 * ADK's JSON form of it. Field names of models carried as JSON text ({@code extra}, usage or
 * grounding metadata) are snake_case on the wire, as ADK Python writes them; reading accepts either
 * case. Free-form objects (state, tool arguments and responses, metadata) keep their keys as
 * written.
 */
final class JsonText {
  static final ObjectMapper MAPPER = JsonBaseModel.getMapper();
  static final JsonNodeFactory NODES = JsonNodeFactory.instance;
  static final JavaType OBJECT_MAP =
      MAPPER.getTypeFactory().constructMapType(LinkedHashMap.class, String.class, Object.class);

  private JsonText() {}

  /** Compact JSON text of {@code value}, as ADK's mapper writes it. */
  static String write(Object value) {
    try {
      return MAPPER.writeValueAsString(value);
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException("value is not JSON-serializable: " + e.getMessage(), e);
    }
  }

  /** The JSON object a text field holds; empty for the empty string. */
  static ObjectNode readObject(String text, String field) {
    if (text.isEmpty()) {
      return NODES.objectNode();
    }
    JsonNode node;
    try {
      node = MAPPER.readTree(text);
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException(field + " holds text that is not JSON", e);
    }
    if (!(node instanceof ObjectNode object)) {
      throw new IllegalArgumentException(field + " holds JSON that is not an object");
    }
    return object;
  }

  /**
   * A JSON object text as a mutable map of plain Java values. ADK Java's state maps cannot hold
   * null, so a top-level null (which ADK Python and Go may store) is left out: the key reads as
   * absent.
   */
  static Map<String, Object> readMap(String text, String field) {
    if (text.isEmpty()) {
      return new LinkedHashMap<>();
    }
    Map<String, Object> map;
    try {
      map = MAPPER.readValue(text, OBJECT_MAP);
    } catch (JsonProcessingException e) {
      throw new IllegalArgumentException(field + " holds text that is not a JSON object", e);
    }
    map.values().removeIf(Objects::isNull);
    return map;
  }

  /** A copy of a model's JSON tree with its field names in snake_case. */
  static JsonNode snakeKeys(JsonNode node) {
    return renameKeys(node, true);
  }

  /** A copy of a model's JSON tree with its field names in camelCase. */
  static JsonNode camelKeys(JsonNode node) {
    return renameKeys(node, false);
  }

  private static JsonNode renameKeys(JsonNode node, boolean toSnake) {
    if (node instanceof ObjectNode object) {
      ObjectNode renamed = NODES.objectNode();
      object
          .fields()
          .forEachRemaining(
              e ->
                  renamed.set(
                      toSnake ? snake(e.getKey()) : camel(e.getKey()),
                      renameKeys(e.getValue(), toSnake)));
      return renamed;
    }
    if (node instanceof ArrayNode array) {
      ArrayNode renamed = NODES.arrayNode(array.size());
      array.forEach(item -> renamed.add(renameKeys(item, toSnake)));
      return renamed;
    }
    return node;
  }

  static String snake(String name) {
    StringBuilder out = new StringBuilder(name.length() + 4);
    for (int i = 0; i < name.length(); i++) {
      char c = name.charAt(i);
      if (Character.isUpperCase(c)) {
        if (i > 0) {
          out.append('_');
        }
        out.append(Character.toLowerCase(c));
      } else {
        out.append(c);
      }
    }
    return out.toString();
  }

  static String camel(String name) {
    if (name.indexOf('_') < 0) {
      return name;
    }
    StringBuilder out = new StringBuilder(name.length());
    boolean upper = false;
    for (int i = 0; i < name.length(); i++) {
      char c = name.charAt(i);
      if (c == '_' && out.length() > 0) {
        upper = true;
      } else {
        out.append(upper ? Character.toUpperCase(c) : c);
        upper = false;
      }
    }
    return out.toString();
  }

  /** Merges {@code patch} into {@code base}: objects key by key, any other value replaced. */
  static void merge(ObjectNode base, ObjectNode patch) {
    patch
        .fields()
        .forEachRemaining(
            e -> {
              JsonNode existing = base.get(e.getKey());
              if (existing instanceof ObjectNode existingObject
                  && e.getValue() instanceof ObjectNode patchObject) {
                merge(existingObject, patchObject);
              } else {
                base.set(e.getKey(), e.getValue());
              }
            });
  }
}
