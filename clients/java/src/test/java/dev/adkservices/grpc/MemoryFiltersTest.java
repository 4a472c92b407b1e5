package dev.adkservices.grpc;

import static dev.adkservices.grpc.MetadataCondition.equal;
import static dev.adkservices.grpc.MetadataCondition.exists;
import static dev.adkservices.grpc.MetadataCondition.greater;
import static dev.adkservices.grpc.MetadataCondition.greaterOrEqual;
import static dev.adkservices.grpc.MetadataCondition.less;
import static dev.adkservices.grpc.MetadataCondition.lessOrEqual;
import static dev.adkservices.grpc.MetadataCondition.notEqual;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import adk.memory.v1.Memory;
import adk.session.v1.SessionOuterClass;
import java.io.IOException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.function.IntPredicate;
import java.util.stream.IntStream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * Filters, validity in time and purges through {@link GrpcMemoryService} against a real memory-svc:
 * every metadata operator on numbers, times, strings and booleans, OR of AND groups, topics, author
 * and time windows, as-of searches and listings, dry and forced purges.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class MemoryFiltersTest {
  private static final String USER = "filter-user";
  private static final Instant T0 = Instant.parse("2026-01-01T00:00:00Z");
  private static final int COUNT = 20;

  private ServerProcess server;
  private GrpcMemoryService memory;
  private String app;

  /** The memory-svc the cases run against: on sled here. */
  ServerProcess startServer() throws IOException {
    return ServerProcess.memory();
  }

  @BeforeAll
  void start() throws Exception {
    server = startServer();
    memory = new GrpcMemoryService(server.endpoint());
  }

  @AfterAll
  void stop() throws Exception {
    if (server != null) {
      memory.close();
      server.close();
    }
  }

  @BeforeEach
  void freshApp() {
    app = "filters-" + UUID.randomUUID();
  }

  private static SessionOuterClass.Content text(String text) {
    return SessionOuterClass.Content.newBuilder()
        .setRole("user")
        .addParts(SessionOuterClass.Part.newBuilder().setText(text))
        .build();
  }

  /**
   * Entry i: n = i, color red/green/blue by i % 3, seen = T0 + i hours (an RFC 3339 string), vip =
   * whether i is even, topic "pets" when i % 5 == 0; by alice when i is odd, else bob; its
   * timestamp T0 + i seconds.
   */
  private static Memory.MemoryEntry entry(int i) {
    Map<String, Object> metadata = new java.util.LinkedHashMap<>();
    metadata.put("n", i);
    metadata.put("color", List.of("red", "green", "blue").get(i % 3));
    metadata.put("seen", T0.plus(Duration.ofHours(i)).toString());
    metadata.put("vip", i % 2 == 0);
    if (i % 5 == 0) {
      metadata.put("topic", "pets");
    }
    return Memory.MemoryEntry.newBuilder()
        .setId(String.format("m%02d", i))
        .setAuthor(i % 2 == 1 ? "alice" : "bob")
        .setTimestamp(Timestamps.ofInstant(T0.plusSeconds(i)))
        .setContent(text("garden note " + i))
        .setCustomMetadata(JsonText.write(metadata))
        .build();
  }

  private void addEntries() {
    List<Memory.MemoryEntry> entries = new ArrayList<>();
    IntStream.range(0, COUNT).forEach(i -> entries.add(entry(i)));
    memory.addMemory(app, USER, entries).blockingGet();
  }

  private static List<String> ids(IntPredicate keep) {
    return IntStream.range(0, COUNT).filter(keep).mapToObj(i -> String.format("m%02d", i)).toList();
  }

  private List<String> listed(ListOptions options) {
    return memory
        .listMemories(app, USER, options)
        .map(GrpcMemoryService.FoundMemory::id)
        .toList()
        .blockingGet();
  }

  private List<String> listed(MemoryFilter filter) {
    return listed(ListOptions.defaults().withFilter(filter));
  }

  @Test
  void everyOperatorOnNumbers() {
    addEntries();
    assertEquals(ids(i -> i == 4), listed(MemoryFilter.where(equal("n", 4))));
    assertEquals(
        ids(i -> i != 4 && i < 6), listed(MemoryFilter.where(notEqual("n", 4), less("n", 6))));
    assertEquals(ids(i -> i < 3), listed(MemoryFilter.where(less("n", 3))));
    assertEquals(ids(i -> i <= 3), listed(MemoryFilter.where(lessOrEqual("n", 3))));
    assertEquals(ids(i -> i > 16), listed(MemoryFilter.where(greater("n", 16))));
    assertEquals(ids(i -> i >= 16), listed(MemoryFilter.where(greaterOrEqual("n", 16))));
    assertEquals(
        ids(i -> i > 2.5 && i < 5.5),
        listed(MemoryFilter.where(greater("n", 2.5), less("n", 5.5))));
  }

  @Test
  void everyOperatorOnTimes() {
    addEntries();
    Instant fifth = T0.plus(Duration.ofHours(5));
    Instant seventeenth = T0.plus(Duration.ofHours(17));
    assertEquals(ids(i -> i == 5), listed(MemoryFilter.where(equal("seen", fifth))));
    assertEquals(
        ids(i -> i != 5 && i < 7),
        listed(
            MemoryFilter.where(
                notEqual("seen", fifth), less("seen", T0.plus(Duration.ofHours(7))))));
    assertEquals(ids(i -> i < 5), listed(MemoryFilter.where(less("seen", fifth))));
    assertEquals(ids(i -> i <= 5), listed(MemoryFilter.where(lessOrEqual("seen", fifth))));
    assertEquals(ids(i -> i > 17), listed(MemoryFilter.where(greater("seen", seventeenth))));
    assertEquals(
        ids(i -> i >= 17), listed(MemoryFilter.where(greaterOrEqual("seen", seventeenth))));
  }

  @Test
  void stringsBooleansExistenceAndOrOfAnds() {
    addEntries();
    assertEquals(ids(i -> i % 3 == 0), listed(MemoryFilter.where(equal("color", "red"))));
    assertEquals(
        ids(i -> i % 3 != 0 && i <= 4),
        listed(MemoryFilter.where(notEqual("color", "red"), lessOrEqual("n", 4))));
    assertEquals(
        ids(i -> i % 2 == 0 && i < 6),
        listed(MemoryFilter.where(equal("vip", true), less("n", 6))));
    assertEquals(ids(i -> i % 2 == 1), listed(MemoryFilter.where(equal("vip", false))));
    assertEquals(
        ids(i -> i % 2 == 1 && i < 6),
        listed(MemoryFilter.where(notEqual("vip", true), less("n", 6))));
    assertEquals(ids(i -> i % 5 == 0), listed(MemoryFilter.where(exists("topic"))));
    assertEquals(List.of(), listed(MemoryFilter.where(exists("nothing"))));
    // A key absent holds NOT_EQUAL only.
    assertEquals(ids(i -> true), listed(MemoryFilter.where(notEqual("nothing", "x"))));
    assertEquals(
        ids(i -> (i % 3 == 0 && i >= 10) || (i % 2 == 1 && i <= 3) || i % 5 == 0),
        listed(
            MemoryFilter.where(equal("color", "red"), greaterOrEqual("n", 10))
                .or(equal("vip", false), lessOrEqual("n", 3))
                .or(exists("topic"))));
  }

  @Test
  void topicsAuthorWindowAndSearch() {
    addEntries();
    assertEquals(
        ids(i -> i % 5 == 0 && i % 2 == 0),
        listed(ListOptions.defaults().withFilter(MemoryFilter.ofTopics("pets")).withAuthor("bob")));
    assertEquals(
        ids(i -> i >= 5 && i < 8),
        listed(
            ListOptions.defaults()
                .withWindow(Optional.of(T0.plusSeconds(5)), Optional.of(T0.plusSeconds(8)))));
    assertEquals(
        ids(i -> i % 5 == 0 && i > 5),
        listed(MemoryFilter.where(greater("n", 5)).withTopics("pets")));
    // A search ranks among the memories that pass; the limit applies after filtering.
    List<GrpcMemoryService.FoundMemory> found =
        memory
            .search(
                app,
                USER,
                "garden note",
                SearchOptions.defaults().withFilter(MemoryFilter.where(greaterOrEqual("n", 15))))
            .blockingGet();
    assertEquals(ids(i -> i >= 15), found.stream().map(f -> f.id()).sorted().toList());
    assertTrue(found.stream().allMatch(f -> ((Number) f.metadata().get("n")).intValue() >= 15));
  }

  @Test
  void listingPagesThroughEveryMemory() {
    List<Memory.MemoryEntry> entries = new ArrayList<>();
    IntStream.range(0, 230).forEach(i -> entries.add(entry(i)));
    memory.addMemory(app, USER, entries).blockingGet();
    List<String> all = listed(ListOptions.defaults());
    assertEquals(IntStream.range(0, 230).mapToObj(i -> String.format("m%02d", i)).toList(), all);
  }

  @Test
  void badConditionsAreRefused() {
    // Refused by the client: nothing the server could read.
    assertThrows(IllegalArgumentException.class, () -> less("n", Double.NaN));
    assertThrows(IllegalArgumentException.class, () -> greater("n", Double.POSITIVE_INFINITY));
    assertThrows(
        IllegalArgumentException.class,
        () ->
            new MetadataCondition(
                "n", MetadataCondition.Operator.EXISTS, Optional.of((Object) 1.0)));
    assertThrows(
        IllegalArgumentException.class,
        () -> new MetadataCondition("n", MetadataCondition.Operator.LESS, Optional.empty()));
    assertThrows(
        IllegalArgumentException.class,
        () ->
            new MetadataCondition("n", MetadataCondition.Operator.EQUAL, Optional.of((Object) 1)));
    // Judged by the server, which names the field: a string has no order.
    MetadataCondition ordered =
        new MetadataCondition("color", MetadataCondition.Operator.LESS, Optional.of("red"));
    IllegalArgumentException refused =
        assertThrows(
            IllegalArgumentException.class,
            () ->
                memory
                    .search(
                        app,
                        USER,
                        "garden",
                        SearchOptions.defaults().withFilter(MemoryFilter.where(ordered)))
                    .blockingGet());
    assertTrue(
        refused.getMessage().contains("filter.any_of[0].all_of[0].value"), refused.getMessage());
  }

  @Test
  void memoriesAreFoundWhenTheyWereValid() {
    Instant berlinFrom = Instant.parse("2024-01-10T09:00:00Z");
    Instant moved = Instant.parse("2025-05-01T00:00:00Z");
    memory
        .addMemory(
            app,
            USER,
            List.of(
                Memory.MemoryEntry.newBuilder()
                    .setId("berlin")
                    .setContent(text("Alice lives in Berlin."))
                    .setValidFrom(Timestamps.ofInstant(berlinFrom))
                    .setInvalidAt(Timestamps.ofInstant(moved))
                    .build(),
                Memory.MemoryEntry.newBuilder()
                    .setId("lisbon")
                    .setContent(text("Alice lives in Lisbon."))
                    .setValidFrom(Timestamps.ofInstant(moved))
                    .build()))
        .blockingGet();

    assertEquals(List.of("lisbon"), searched(SearchOptions.defaults()));
    assertEquals(
        List.of("berlin"), searched(SearchOptions.defaults().withAsOf(moved.minusSeconds(86400))));
    assertEquals(List.of("lisbon"), searched(SearchOptions.defaults().withAsOf(moved)));
    assertEquals(
        List.of(), searched(SearchOptions.defaults().withAsOf(berlinFrom.minusSeconds(1))));
    assertEquals(
        List.of("berlin", "lisbon"),
        searched(SearchOptions.defaults().withIncludeSuperseded(true)));

    List<GrpcMemoryService.FoundMemory> all =
        memory
            .listMemories(app, USER, ListOptions.defaults().withIncludeSuperseded(true))
            .toList()
            .blockingGet();
    assertEquals(List.of("berlin", "lisbon"), all.stream().map(f -> f.id()).toList());
    assertEquals(Optional.of(berlinFrom), all.get(0).validFrom());
    assertEquals(Optional.of(moved), all.get(0).invalidAt());
    assertEquals(Optional.of(moved), all.get(1).validFrom());
    assertEquals(Optional.empty(), all.get(1).invalidAt());
    assertEquals(List.of("lisbon"), listed(ListOptions.defaults()));
    assertEquals(List.of("berlin"), listed(ListOptions.defaults().withAsOf(berlinFrom)));
  }

  private List<String> searched(SearchOptions options) {
    return memory.search(app, USER, "Alice lives", options).blockingGet().stream()
        .map(f -> f.id())
        .sorted()
        .toList();
  }

  @Test
  void purgeIsADryRunUnlessForced() {
    addEntries();
    memory.addMemory(app, "other-user", List.of(entry(17))).blockingGet();
    MemoryFilter late = MemoryFilter.where(greaterOrEqual("n", 15));

    GrpcMemoryService.PurgeResult dry =
        memory.purgeMemories(app, PurgeOptions.matching(late)).blockingGet();
    assertEquals(6, dry.count());
    assertEquals(Optional.empty(), dry.operationId());
    assertEquals(6, dry.sample().size());
    assertEquals(ids(i -> true), listed(ListOptions.defaults()));

    GrpcMemoryService.PurgeResult forced =
        memory
            .purgeMemories(app, PurgeOptions.matching(late).forUser(USER).withForce(true))
            .blockingGet();
    assertEquals(5, forced.count());
    assertTrue(forced.operationId().isPresent());
    assertEquals(ids(i -> i < 15), listed(ListOptions.defaults()));
    // The other user's matching memory was not in the forced purge's scope.
    assertEquals(
        List.of("m17"),
        memory
            .listMemories(app, "other-user", ListOptions.defaults())
            .map(GrpcMemoryService.FoundMemory::id)
            .toList()
            .blockingGet());

    IllegalArgumentException refused =
        assertThrows(
            IllegalArgumentException.class,
            () ->
                memory
                    .purgeMemories(app, PurgeOptions.matching(MemoryFilter.none()).withForce(true))
                    .blockingGet());
    assertTrue(refused.getMessage().contains("filter"), refused.getMessage());
    assertEquals(ids(i -> i < 15), listed(ListOptions.defaults()));
  }
}
