package dev.adkservices.grpc;

import adk.memory.v1.Memory;
import java.time.Instant;
import java.util.Optional;

/**
 * Which memories {@link GrpcMemoryService#purgeMemories} deletes: those of one user (else of every
 * user of the app) of one kind, passing a {@link MemoryFilter}, by one author, in a time window
 * (after inclusive, before exclusive), superseded ones too; memory-svc needs at least one of the
 * filter, kind, author and window. Without {@code force} a dry run that deletes nothing.
 */
public record PurgeOptions(
    Optional<String> userId,
    Memory.MemoryKind kind,
    MemoryFilter filter,
    Optional<String> author,
    Optional<Instant> after,
    Optional<Instant> before,
    boolean force) {

  /** A dry run over every user of the app, matching memories that pass {@code filter}. */
  public static PurgeOptions matching(MemoryFilter filter) {
    return new PurgeOptions(
        Optional.empty(),
        Memory.MemoryKind.MEMORY_KIND_UNSPECIFIED,
        filter,
        Optional.empty(),
        Optional.empty(),
        Optional.empty(),
        false);
  }

  /** Only this user's memories. */
  public PurgeOptions forUser(String userId) {
    return new PurgeOptions(Optional.of(userId), kind, filter, author, after, before, force);
  }

  public PurgeOptions withKind(Memory.MemoryKind kind) {
    return new PurgeOptions(userId, kind, filter, author, after, before, force);
  }

  public PurgeOptions withAuthor(String author) {
    return new PurgeOptions(userId, kind, filter, Optional.of(author), after, before, force);
  }

  public PurgeOptions withWindow(Optional<Instant> after, Optional<Instant> before) {
    return new PurgeOptions(userId, kind, filter, author, after, before, force);
  }

  /** With {@code true}, deletes the matching memories instead of counting them. */
  public PurgeOptions withForce(boolean force) {
    return new PurgeOptions(userId, kind, filter, author, after, before, force);
  }

  Memory.PurgeMemoriesRequest toRequest(String appName) {
    Memory.PurgeMemoriesRequest.Builder request =
        Memory.PurgeMemoriesRequest.newBuilder().setAppName(appName).setKind(kind).setForce(force);
    filter.toProto().ifPresent(request::setFilter);
    userId.ifPresent(request::setUserId);
    author.ifPresent(request::setAuthor);
    after.ifPresent(t -> request.setAfterTimestamp(Timestamps.ofInstant(t)));
    before.ifPresent(t -> request.setBeforeTimestamp(Timestamps.ofInstant(t)));
    return request.build();
  }
}
