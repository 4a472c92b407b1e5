package dev.adkservices.grpc;

import com.google.adk.sessions.SessionException;

/**
 * An append to a session that another writer moved on since the caller's copy was loaded; nothing
 * was written. Reload the session with {@code getSession} and decide again.
 */
public final class StaleSessionException extends SessionException {
  /** The message ADK Python's database session service gives for the same condition. */
  static final String MESSAGE =
      "The session has been modified in storage since it was loaded. "
          + "Please reload the session before appending more events.";

  StaleSessionException(Throwable cause) {
    super(MESSAGE, cause);
  }
}
