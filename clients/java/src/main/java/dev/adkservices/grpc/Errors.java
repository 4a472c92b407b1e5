package dev.adkservices.grpc;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;

/**
 * The exception an ADK caller gets for a failed call that has no more specific meaning: malformed
 * input (INVALID_ARGUMENT, whose message names the field) becomes an {@link
 * IllegalArgumentException}, as ADK's own services throw for bad input; any other failure stays the
 * {@link StatusRuntimeException}, which carries its status code.
 */
final class Errors {
  private Errors() {}

  static Status.Code code(Throwable error) {
    return error instanceof StatusRuntimeException e ? e.getStatus().getCode() : null;
  }

  static Throwable translate(Throwable error) {
    if (code(error) == Status.Code.INVALID_ARGUMENT) {
      String message = ((StatusRuntimeException) error).getStatus().getDescription();
      return new IllegalArgumentException(message == null ? "invalid argument" : message, error);
    }
    return error;
  }
}
