/**
 * Conversion between ADK TypeScript's times (epoch milliseconds, a `number`) and the contract's
 * `google.protobuf.Timestamp` (whole seconds and nanoseconds).
 *
 * Writing is exact: a whole number of milliseconds becomes exactly that many nanoseconds, and a
 * fractional one the nearest nanosecond. Reading rounds to the nearest whole millisecond (a
 * half rounds up), which is what `Date.now()` and every ADK TypeScript time hold. So a time
 * written here reads back unchanged, and a time written by Python (float seconds, whose
 * nanoseconds are the float's rounding noise: 1767225610.001 is stored as ...000999928 ns) or
 * Go (exact nanoseconds) reads back as the millisecond it falls in, to the nearest.
 */
import type { Timestamp } from "./gen/google/protobuf/timestamp.js";

const NANOS_PER_MILLI = 1_000_000;

/** The Timestamp of `ms` epoch milliseconds (exact for whole milliseconds). */
export function toTimestamp(ms: number): Timestamp {
  if (!Number.isFinite(ms)) {
    throw new RangeError(`a timestamp must be a finite number of milliseconds, got ${ms}`);
  }
  let seconds = Math.floor(ms / 1000);
  // ms - seconds * 1000 is exact (both operands are within a factor of two of each other or
  // the difference is below 1000 with the operands' own precision).
  let nanos = Math.round((ms - seconds * 1000) * NANOS_PER_MILLI);
  if (nanos >= 1_000_000_000) {
    seconds += 1;
    nanos -= 1_000_000_000;
  }
  return { seconds, nanos };
}

/** The epoch milliseconds of `timestamp`, rounded to the nearest millisecond. */
export function toMillis(timestamp: Timestamp | undefined): number {
  if (timestamp === undefined) {
    return 0;
  }
  return timestamp.seconds * 1000 + Math.floor((timestamp.nanos + NANOS_PER_MILLI / 2) / NANOS_PER_MILLI);
}

/** The Timestamp of a number of seconds of lifetime (for ttl fields), as a Duration. */
export function toDuration(seconds: number): { seconds: number; nanos: number } {
  if (!Number.isFinite(seconds) || seconds <= 0) {
    throw new RangeError(`a lifetime must be a positive number of seconds, got ${seconds}`);
  }
  const whole = Math.floor(seconds);
  return { seconds: whole, nanos: Math.round((seconds - whole) * 1e9) };
}
