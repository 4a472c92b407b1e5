package dev.adkservices.grpc;

import adk.memory.v1.Memory;
import java.time.Instant;
import java.util.Optional;

/**
 * What {@link GrpcMemoryService#search} may narrow a search with, beyond ADK's query: at most
 * {@code limit} results (server default 10, at most 100), a time window (after inclusive, before
 * exclusive), one author, the query's language (ISO 639-1), the ranking mode and the kind of
 * memories searched.
 */
public record SearchOptions(
    int limit,
    Optional<Instant> after,
    Optional<Instant> before,
    Optional<String> author,
    Optional<String> language,
    Memory.SearchMode mode,
    Memory.MemoryKind kind) {

  /** No narrowing: the server's defaults. */
  public static SearchOptions defaults() {
    return new SearchOptions(
        0,
        Optional.empty(),
        Optional.empty(),
        Optional.empty(),
        Optional.empty(),
        Memory.SearchMode.SEARCH_MODE_UNSPECIFIED,
        Memory.MemoryKind.MEMORY_KIND_UNSPECIFIED);
  }

  public SearchOptions withLimit(int limit) {
    return new SearchOptions(limit, after, before, author, language, mode, kind);
  }

  public SearchOptions withWindow(Optional<Instant> after, Optional<Instant> before) {
    return new SearchOptions(limit, after, before, author, language, mode, kind);
  }

  public SearchOptions withAuthor(String author) {
    return new SearchOptions(limit, after, before, Optional.of(author), language, mode, kind);
  }

  public SearchOptions withLanguage(String language) {
    return new SearchOptions(limit, after, before, author, Optional.of(language), mode, kind);
  }

  public SearchOptions withMode(Memory.SearchMode mode) {
    return new SearchOptions(limit, after, before, author, language, mode, kind);
  }

  public SearchOptions withKind(Memory.MemoryKind kind) {
    return new SearchOptions(limit, after, before, author, language, mode, kind);
  }

  void fill(Memory.SearchMemoryRequest.Builder request) {
    if (limit < 0) {
      throw new IllegalArgumentException("SearchOptions.limit must not be negative: " + limit);
    }
    request.setLimit(limit).setMode(mode).setKind(kind);
    after.ifPresent(t -> request.setAfterTimestamp(Timestamps.ofInstant(t)));
    before.ifPresent(t -> request.setBeforeTimestamp(Timestamps.ofInstant(t)));
    author.ifPresent(request::setAuthor);
    language.ifPresent(request::setLanguage);
  }
}
