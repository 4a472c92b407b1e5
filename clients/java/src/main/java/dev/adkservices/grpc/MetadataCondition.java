package dev.adkservices.grpc;

import adk.memory.v1.Memory;
import java.time.Instant;
import java.util.Objects;
import java.util.Optional;

/**
 * A condition on one top-level key of a memory's {@code custom_metadata}, for a {@link
 * MemoryFilter}. The value is a {@code String}, a finite {@code Double}, a {@code Boolean} or an
 * {@link Instant} (compared with RFC 3339 strings); {@link Operator#EXISTS} takes none. A key
 * absent, or holding a value of another type, fails every operator but {@link Operator#NOT_EQUAL}.
 *
 * <p>The factories ({@code equal("color", "red")}, {@code less("n", 3)}, {@code exists("vip")},
 * ...) offer the ordering operators for numbers and times only; memory-svc judges the rest (key
 * length, a string compared by order).
 */
public record MetadataCondition(String key, Operator operator, Optional<Object> value) {

  /** How the key's value is compared with the condition's. */
  public enum Operator {
    EQUAL(Memory.MetadataOperator.METADATA_OPERATOR_EQUAL),
    /** Not {@link #EQUAL}: the key is absent or holds another value. */
    NOT_EQUAL(Memory.MetadataOperator.METADATA_OPERATOR_NOT_EQUAL),
    LESS(Memory.MetadataOperator.METADATA_OPERATOR_LESS),
    LESS_OR_EQUAL(Memory.MetadataOperator.METADATA_OPERATOR_LESS_OR_EQUAL),
    GREATER(Memory.MetadataOperator.METADATA_OPERATOR_GREATER),
    GREATER_OR_EQUAL(Memory.MetadataOperator.METADATA_OPERATOR_GREATER_OR_EQUAL),
    /** The key is present, whatever its value. */
    EXISTS(Memory.MetadataOperator.METADATA_OPERATOR_EXISTS);

    private final Memory.MetadataOperator wire;

    Operator(Memory.MetadataOperator wire) {
      this.wire = wire;
    }
  }

  /**
   * Refuses only what cannot be put on the wire: a value for {@code EXISTS}, none for another
   * operator, a value of another type than the four, a number that is not finite.
   */
  public MetadataCondition {
    Objects.requireNonNull(key, "key");
    Objects.requireNonNull(operator, "operator");
    Objects.requireNonNull(value, "value");
    if (operator == Operator.EXISTS && value.isPresent()) {
      throw new IllegalArgumentException(key + ": EXISTS takes no value");
    }
    if (operator != Operator.EXISTS && value.isEmpty()) {
      throw new IllegalArgumentException(key + ": " + operator + " needs a value");
    }
    if (value.isPresent()) {
      Object v = value.get();
      if (!(v instanceof String
          || v instanceof Double
          || v instanceof Boolean
          || v instanceof Instant)) {
        throw new IllegalArgumentException(
            key + ": " + v.getClass().getName() + " is not a String, Double, Boolean or Instant");
      }
      if (v instanceof Double d && !Double.isFinite(d)) {
        throw new IllegalArgumentException(key + ": " + d + " is not a finite number");
      }
    }
  }

  private static MetadataCondition of(String key, Operator operator, Object value) {
    return new MetadataCondition(key, operator, Optional.of(value));
  }

  public static MetadataCondition equal(String key, String value) {
    return of(key, Operator.EQUAL, value);
  }

  public static MetadataCondition equal(String key, double value) {
    return of(key, Operator.EQUAL, value);
  }

  public static MetadataCondition equal(String key, boolean value) {
    return of(key, Operator.EQUAL, value);
  }

  public static MetadataCondition equal(String key, Instant value) {
    return of(key, Operator.EQUAL, value);
  }

  public static MetadataCondition notEqual(String key, String value) {
    return of(key, Operator.NOT_EQUAL, value);
  }

  public static MetadataCondition notEqual(String key, double value) {
    return of(key, Operator.NOT_EQUAL, value);
  }

  public static MetadataCondition notEqual(String key, boolean value) {
    return of(key, Operator.NOT_EQUAL, value);
  }

  public static MetadataCondition notEqual(String key, Instant value) {
    return of(key, Operator.NOT_EQUAL, value);
  }

  public static MetadataCondition less(String key, double value) {
    return of(key, Operator.LESS, value);
  }

  public static MetadataCondition less(String key, Instant value) {
    return of(key, Operator.LESS, value);
  }

  public static MetadataCondition lessOrEqual(String key, double value) {
    return of(key, Operator.LESS_OR_EQUAL, value);
  }

  public static MetadataCondition lessOrEqual(String key, Instant value) {
    return of(key, Operator.LESS_OR_EQUAL, value);
  }

  public static MetadataCondition greater(String key, double value) {
    return of(key, Operator.GREATER, value);
  }

  public static MetadataCondition greater(String key, Instant value) {
    return of(key, Operator.GREATER, value);
  }

  public static MetadataCondition greaterOrEqual(String key, double value) {
    return of(key, Operator.GREATER_OR_EQUAL, value);
  }

  public static MetadataCondition greaterOrEqual(String key, Instant value) {
    return of(key, Operator.GREATER_OR_EQUAL, value);
  }

  public static MetadataCondition exists(String key) {
    return new MetadataCondition(key, Operator.EXISTS, Optional.empty());
  }

  Memory.MetadataCondition toProto() {
    Memory.MetadataCondition.Builder message =
        Memory.MetadataCondition.newBuilder().setKey(key).setOperator(operator.wire);
    value.ifPresent(
        v -> {
          if (v instanceof String s) {
            message.setStringValue(s);
          } else if (v instanceof Double d) {
            message.setNumberValue(d);
          } else if (v instanceof Boolean b) {
            message.setBoolValue(b);
          } else if (v instanceof Instant t) {
            message.setTimeValue(Timestamps.ofInstant(t));
          }
        });
    return message.build();
  }
}
