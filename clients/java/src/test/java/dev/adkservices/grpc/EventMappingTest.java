package dev.adkservices.grpc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;

import adk.session.v1.SessionOuterClass;
import com.google.adk.events.Event;
import com.google.adk.events.EventActions;
import com.google.adk.sessions.State;
import com.google.genai.types.Blob;
import com.google.genai.types.CodeExecutionResult;
import com.google.genai.types.Content;
import com.google.genai.types.CustomMetadata;
import com.google.genai.types.ExecutableCode;
import com.google.genai.types.FileData;
import com.google.genai.types.FinishReason;
import com.google.genai.types.FunctionCall;
import com.google.genai.types.FunctionResponse;
import com.google.genai.types.GenerateContentResponseUsageMetadata;
import com.google.genai.types.GroundingMetadata;
import com.google.genai.types.Part;
import com.google.genai.types.StringList;
import com.google.genai.types.Transcription;
import com.google.protobuf.Timestamp;
import java.math.BigInteger;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * Every event of a varied corpus survives the mapping unchanged, and the direct builder gives the
 * same events as the JSON-tree path (compared in ADK Java's JSON form, which compares bytes by
 * value). A null id, invocation id or author reads back as "" (proto strings have no null).
 */
class EventMappingTest {
  static Stream<Event> corpus() {
    Map<String, Object> args = new LinkedHashMap<>();
    args.put("int", 7);
    args.put("big", new BigInteger("9007199254740993"));
    args.put("float", 1.0);
    args.put("nested", Map.of("list", List.of(1, "two", false)));
    Map<String, Object> delta = new HashMap<>();
    delta.put("turns", 3);
    delta.put("app:gone", State.REMOVED);
    delta.put("user:kept", "yes");
    delta.put("gone", State.REMOVED);
    return Stream.of(
        Event.builder().id("plain").author("user").invocationId("i").timestamp(1_000L).build(),
        Event.builder()
            .id("text")
            .author("model")
            .invocationId("i")
            .timestamp(1_767_225_600_125L)
            .content(Content.builder().role("model").parts(Part.fromText("héllo ✓")).build())
            .turnComplete(true)
            .finishReason(new FinishReason(FinishReason.Known.STOP))
            .modelVersion("m-1")
            .branch("root.child")
            .usageMetadata(
                GenerateContentResponseUsageMetadata.builder()
                    .promptTokenCount(12)
                    .candidatesTokenCount(5)
                    .totalTokenCount(17)
                    .build())
            .groundingMetadata(GroundingMetadata.builder().webSearchQueries(List.of("q")).build())
            .build(),
        Event.builder()
            .id("call")
            .invocationId("i")
            .author("model")
            .timestamp(2_000L)
            .content(
                Content.builder()
                    .role("model")
                    .parts(
                        Part.builder()
                            .functionCall(
                                FunctionCall.builder().id("c1").name("tool").args(args).build())
                            .build(),
                        Part.builder()
                            .functionResponse(
                                FunctionResponse.builder()
                                    .id("c1")
                                    .name("tool")
                                    .response(Map.of("ok", true))
                                    .build())
                            .build())
                    .build())
            .longRunningToolIds(Set.of("c1"))
            .build(),
        Event.builder()
            .id("media")
            .invocationId("i")
            .author("user")
            .timestamp(3_000L)
            .content(
                Content.builder()
                    .role("user")
                    .parts(
                        Part.builder()
                            .inlineData(
                                Blob.builder()
                                    .data(new byte[] {0, 1, (byte) 0xfe, (byte) 0xff})
                                    .mimeType("image/png")
                                    .build())
                            .build(),
                        Part.builder()
                            .fileData(
                                FileData.builder()
                                    .fileUri("gs://b/f")
                                    .mimeType("text/plain")
                                    .build())
                            .build(),
                        Part.builder()
                            .executableCode(
                                ExecutableCode.builder()
                                    .code("print(1)")
                                    .language("PYTHON")
                                    .build())
                            .build(),
                        Part.builder()
                            .codeExecutionResult(
                                CodeExecutionResult.builder()
                                    .outcome("OUTCOME_OK")
                                    .output("1")
                                    .build())
                            .build(),
                        Part.builder()
                            .text("thinking")
                            .thought(true)
                            .thoughtSignature(new byte[] {9, 8, 7})
                            .build())
                    .build())
            .build(),
        Event.builder()
            .id("actions")
            .invocationId("i")
            .author("agent")
            .timestamp(4_000L)
            .actions(
                EventActions.builder()
                    .stateDelta(delta)
                    .artifactDelta(Map.of("notes.txt", 2))
                    .skipSummarization(true)
                    .transferToAgent("other")
                    .escalate(true)
                    .endOfAgent(true)
                    .build())
            .errorCode(new FinishReason("error_code"))
            .errorMessage("boom")
            .interrupted(true)
            .partial(false)
            .customMetadata(
                List.of(
                    CustomMetadata.builder().key("s").stringValue("v").build(),
                    CustomMetadata.builder().key("n").numericValue(0.5f).build(),
                    CustomMetadata.builder()
                        .key("l")
                        .stringListValue(StringList.builder().values(List.of("a", "b")).build())
                        .build()))
            .build(),
        Event.builder()
            .id("extra")
            .invocationId("i")
            .author("user")
            .timestamp(5_000L)
            .avgLogprobs(-0.25)
            .inputTranscription(Transcription.builder().text("hi").finished(true).build())
            .outputTranscription(Transcription.builder().text("ho").finished(false).build())
            .build());
  }

  @ParameterizedTest
  @MethodSource("corpus")
  void roundTripsUnchanged(Event event) {
    SessionOuterClass.Event message = EventMapping.toProto(event);
    assertEquals(event.toJson(), EventMapping.fromProto(message).toJson());
    assertEquals(event.toJson(), EventMapping.fromProtoViaTree(message).toJson());
  }

  @ParameterizedTest
  @MethodSource("corpus")
  void directBuilderMatchesTheTreePath(Event event) {
    SessionOuterClass.Event message = EventMapping.toProto(event);
    Event direct = DirectEvents.build(message);
    if (message.getExtra().isEmpty()) {
      assertNotNull(direct);
      assertEquals(EventMapping.fromProtoViaTree(message).toJson(), direct.toJson());
    } else {
      assertNull(direct);
    }
  }

  @Test
  void removedKeysTravelApartAndComeBackAsRemoved() {
    Event event = corpus().filter(e -> e.id().equals("actions")).findFirst().orElseThrow();
    SessionOuterClass.EventActions actions = EventMapping.toProto(event).getActions();
    assertEquals(Set.of("app:gone", "gone"), Set.copyOf(actions.getRemovedStateKeysList()));
    assertEquals(
        Map.of("turns", 3, "user:kept", "yes"),
        JsonText.readMap(actions.getStateDelta(), "state_delta"));
    Event back = EventMapping.fromProto(EventMapping.toProto(event));
    assertSame(State.REMOVED, back.actions().stateDelta().get("app:gone"));
  }

  @Test
  void extraHoldsSnakeCasedFieldsAsAdkPythonWritesThem() {
    Event event = corpus().filter(e -> e.id().equals("extra")).findFirst().orElseThrow();
    assertEquals(
        Map.of(
            "avg_logprobs", -0.25,
            "input_transcription", Map.of("text", "hi", "finished", true),
            "output_transcription", Map.of("text", "ho", "finished", false)),
        JsonText.readMap(EventMapping.toProto(event).getExtra(), "extra"));
  }

  @Test
  void timestampsRoundToTheNearestMillisecond() {
    // ADK Python's float 1767225610.001 is stored as ...610.000999928.
    assertEquals(
        1_767_225_610_001L,
        Timestamps.toMillis(
            Timestamp.newBuilder().setSeconds(1_767_225_610L).setNanos(999_928).build()));
    assertEquals(
        1_001L,
        Timestamps.toMillis(Timestamp.newBuilder().setSeconds(1).setNanos(500_000).build()));
    assertEquals(
        1_000L,
        Timestamps.toMillis(Timestamp.newBuilder().setSeconds(1).setNanos(499_999).build()));
    assertEquals(-1_500L, Timestamps.toMillis(Timestamps.ofMillis(-1_500L)));
    assertEquals(
        Timestamps.ofMillis(-1L),
        Timestamp.newBuilder().setSeconds(-1).setNanos(999_000_000).build());
  }
}
