package dev.adkservices.grpc;

import adk.memory.v1.Memory;
import java.time.Instant;
import java.util.Optional;

/**
 * What {@link GrpcMemoryService#search} may narrow a search with, beyond ADK's query: at most
 * {@code limit} results (server default 10, at most 100), a time window (after inclusive, before
 * exclusive), one author, the query's language (ISO 639-1), the ranking mode, the kind of memories
 * searched, a {@link MemoryFilter} (the limit applies after it), and their validity: those valid
 * now, or valid at {@code asOf}, and with {@code includeSuperseded} those a later fact superseded
 * too.
 */
public record SearchOptions(
    int limit,
    Optional<Instant> after,
    Optional<Instant> before,
    Optional<String> author,
    Optional<String> language,
    Memory.SearchMode mode,
    Memory.MemoryKind kind,
    MemoryFilter filter,
    Optional<Instant> asOf,
    boolean includeSuperseded) {

  /** No narrowing: the server's defaults. */
  public static SearchOptions defaults() {
    return new SearchOptions(
        0,
        Optional.empty(),
        Optional.empty(),
        Optional.empty(),
        Optional.empty(),
        Memory.SearchMode.SEARCH_MODE_UNSPECIFIED,
        Memory.MemoryKind.MEMORY_KIND_UNSPECIFIED,
        MemoryFilter.none(),
        Optional.empty(),
        false);
  }

  public SearchOptions withLimit(int limit) {
    return new SearchOptions(
        limit, after, before, author, language, mode, kind, filter, asOf, includeSuperseded);
  }

  public SearchOptions withWindow(Optional<Instant> after, Optional<Instant> before) {
    return new SearchOptions(
        limit, after, before, author, language, mode, kind, filter, asOf, includeSuperseded);
  }

  public SearchOptions withAuthor(String author) {
    return new SearchOptions(
        limit,
        after,
        before,
        Optional.of(author),
        language,
        mode,
        kind,
        filter,
        asOf,
        includeSuperseded);
  }

  public SearchOptions withLanguage(String language) {
    return new SearchOptions(
        limit,
        after,
        before,
        author,
        Optional.of(language),
        mode,
        kind,
        filter,
        asOf,
        includeSuperseded);
  }

  public SearchOptions withMode(Memory.SearchMode mode) {
    return new SearchOptions(
        limit, after, before, author, language, mode, kind, filter, asOf, includeSuperseded);
  }

  public SearchOptions withKind(Memory.MemoryKind kind) {
    return new SearchOptions(
        limit, after, before, author, language, mode, kind, filter, asOf, includeSuperseded);
  }

  public SearchOptions withFilter(MemoryFilter filter) {
    return new SearchOptions(
        limit, after, before, author, language, mode, kind, filter, asOf, includeSuperseded);
  }

  /** Memories valid at this time instead of now. */
  public SearchOptions withAsOf(Instant asOf) {
    return new SearchOptions(
        limit,
        after,
        before,
        author,
        language,
        mode,
        kind,
        filter,
        Optional.of(asOf),
        includeSuperseded);
  }

  /** With {@code true}, memories valid from {@code asOf} (or now) or before, superseded or not. */
  public SearchOptions withIncludeSuperseded(boolean includeSuperseded) {
    return new SearchOptions(
        limit, after, before, author, language, mode, kind, filter, asOf, includeSuperseded);
  }

  void fill(Memory.SearchMemoryRequest.Builder request) {
    if (limit < 0) {
      throw new IllegalArgumentException("SearchOptions.limit must not be negative: " + limit);
    }
    request.setLimit(limit).setMode(mode).setKind(kind).setIncludeSuperseded(includeSuperseded);
    filter.toProto().ifPresent(request::setFilter);
    after.ifPresent(t -> request.setAfterTimestamp(Timestamps.ofInstant(t)));
    before.ifPresent(t -> request.setBeforeTimestamp(Timestamps.ofInstant(t)));
    author.ifPresent(request::setAuthor);
    language.ifPresent(request::setLanguage);
    asOf.ifPresent(t -> request.setAsOf(Timestamps.ofInstant(t)));
  }
}
