package dev.adkservices.grpc;

import adk.memory.v1.Memory;
import java.time.Instant;
import java.util.Optional;

/**
 * Which memories {@link GrpcMemoryService#listMemories(String, String, ListOptions)} returns: of
 * one kind, passing a {@link MemoryFilter}, in a time window (after inclusive, before exclusive),
 * by one author; valid now, or valid at {@code asOf}, and with {@code includeSuperseded} those a
 * later fact superseded too.
 */
public record ListOptions(
    Memory.MemoryKind kind,
    MemoryFilter filter,
    Optional<Instant> after,
    Optional<Instant> before,
    Optional<String> author,
    Optional<Instant> asOf,
    boolean includeSuperseded) {

  /** Every memory valid now. */
  public static ListOptions defaults() {
    return new ListOptions(
        Memory.MemoryKind.MEMORY_KIND_UNSPECIFIED,
        MemoryFilter.none(),
        Optional.empty(),
        Optional.empty(),
        Optional.empty(),
        Optional.empty(),
        false);
  }

  public ListOptions withKind(Memory.MemoryKind kind) {
    return new ListOptions(kind, filter, after, before, author, asOf, includeSuperseded);
  }

  public ListOptions withFilter(MemoryFilter filter) {
    return new ListOptions(kind, filter, after, before, author, asOf, includeSuperseded);
  }

  public ListOptions withWindow(Optional<Instant> after, Optional<Instant> before) {
    return new ListOptions(kind, filter, after, before, author, asOf, includeSuperseded);
  }

  public ListOptions withAuthor(String author) {
    return new ListOptions(
        kind, filter, after, before, Optional.of(author), asOf, includeSuperseded);
  }

  /** Memories valid at this time instead of now. */
  public ListOptions withAsOf(Instant asOf) {
    return new ListOptions(
        kind, filter, after, before, author, Optional.of(asOf), includeSuperseded);
  }

  /** With {@code true}, memories valid from {@code asOf} (or now) or before, superseded or not. */
  public ListOptions withIncludeSuperseded(boolean includeSuperseded) {
    return new ListOptions(kind, filter, after, before, author, asOf, includeSuperseded);
  }

  void fill(Memory.ListMemoriesRequest.Builder request) {
    request.setKind(kind).setIncludeSuperseded(includeSuperseded);
    filter.toProto().ifPresent(request::setFilter);
    after.ifPresent(t -> request.setAfterTimestamp(Timestamps.ofInstant(t)));
    before.ifPresent(t -> request.setBeforeTimestamp(Timestamps.ofInstant(t)));
    author.ifPresent(request::setAuthor);
    asOf.ifPresent(t -> request.setAsOf(Timestamps.ofInstant(t)));
  }
}
