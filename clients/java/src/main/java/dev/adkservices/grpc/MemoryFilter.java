package dev.adkservices.grpc;

import adk.memory.v1.Memory;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * Which memories a search, a listing or a purge considers: conditions on {@code custom_metadata} as
 * an OR of AND groups (a memory passes when every condition of at least one group holds), and
 * topics (a memory's {@code "topic"} key is one of them). Empty parts hold for every memory.
 *
 * <pre>{@code
 * MemoryFilter.where(equal("color", "red"), greaterOrEqual("n", 10)).or(exists("vip"))
 * }</pre>
 */
public record MemoryFilter(List<List<MetadataCondition>> anyOf, List<String> topics) {

  public MemoryFilter {
    List<List<MetadataCondition>> groups = new ArrayList<>(anyOf.size());
    anyOf.forEach(group -> groups.add(List.copyOf(group)));
    anyOf = List.copyOf(groups);
    topics = List.copyOf(topics);
  }

  /** No condition: every memory passes. */
  public static MemoryFilter none() {
    return new MemoryFilter(List.of(), List.of());
  }

  /** Memories for which every one of these conditions holds. */
  public static MemoryFilter where(MetadataCondition... allOf) {
    return none().or(allOf);
  }

  /** Memories of one of these topics. */
  public static MemoryFilter ofTopics(String... topics) {
    return none().withTopics(topics);
  }

  /** This filter's memories and those for which every one of these conditions holds. */
  public MemoryFilter or(MetadataCondition... allOf) {
    List<List<MetadataCondition>> groups = new ArrayList<>(anyOf);
    groups.add(List.of(allOf));
    return new MemoryFilter(groups, topics);
  }

  /** This filter, narrowed to memories of one of these topics. */
  public MemoryFilter withTopics(String... topics) {
    return new MemoryFilter(anyOf, List.of(topics));
  }

  /** The wire's filter; empty for no condition, so that a purge sees no filter given. */
  Optional<Memory.MemoryFilter> toProto() {
    if (anyOf.isEmpty() && topics.isEmpty()) {
      return Optional.empty();
    }
    Memory.MemoryFilter.Builder message = Memory.MemoryFilter.newBuilder().addAllTopics(topics);
    for (List<MetadataCondition> group : anyOf) {
      Memory.MetadataConditions.Builder conditions = message.addAnyOfBuilder();
      group.forEach(c -> conditions.addAllOf(c.toProto()));
    }
    return Optional.of(message.build());
  }
}
