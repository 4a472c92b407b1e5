package dev.adkservices.grpc;

import com.google.protobuf.Timestamp;
import java.time.Instant;

/**
 * Conversions between ADK Java's times and {@code google.protobuf.Timestamp}.
 *
 * <p>ADK Java holds an event's time as epoch milliseconds; the wire holds nanoseconds. Written
 * milliseconds are exact on the wire. A timestamp read back is rounded to the nearest millisecond
 * (a half millisecond rounds up), so an event written by a language holding finer times (Python's
 * float seconds, Go's nanoseconds) reads as the nearest millisecond: Python's float {@code
 * 1767225610.001} is stored as {@code ...610.000999928} and reads as {@code ...610001} ms. Session
 * times ({@code Instant}) keep every nanosecond.
 */
final class Timestamps {
  private static final long NANOS_PER_MILLI = 1_000_000L;

  private Timestamps() {}

  static Timestamp ofMillis(long millis) {
    return Timestamp.newBuilder()
        .setSeconds(Math.floorDiv(millis, 1000L))
        .setNanos((int) (Math.floorMod(millis, 1000L) * NANOS_PER_MILLI))
        .build();
  }

  /** The nearest millisecond; a tie rounds up. */
  static long toMillis(Timestamp timestamp) {
    return Math.addExact(
        Math.multiplyExact(timestamp.getSeconds(), 1000L),
        (timestamp.getNanos() + NANOS_PER_MILLI / 2) / NANOS_PER_MILLI);
  }

  static Timestamp ofInstant(Instant instant) {
    return Timestamp.newBuilder()
        .setSeconds(instant.getEpochSecond())
        .setNanos(instant.getNano())
        .build();
  }

  static Instant toInstant(Timestamp timestamp) {
    return Instant.ofEpochSecond(timestamp.getSeconds(), timestamp.getNanos());
  }
}
