"""The event mapping on its own: every ADK and genai field survives a trip through the
``adk.session.v1`` messages, typed fields are used where the contract has them, and ``extra``
holds only what they cannot express."""

from __future__ import annotations

import json
import random
import struct
import time
from collections.abc import Iterator

import pytest
from google.adk.auth.auth_credential import AuthCredential, AuthCredentialTypes, OAuth2Auth
from google.adk.auth.auth_tool import AuthConfig
from google.adk.events.event import Event, NodeInfo
from google.adk.events.event_actions import EventActions, EventCompaction
from google.adk.events.ui_widget import UiWidget
from google.adk.sessions.session import Session
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

from adk_grpc_services import timestamps
from adk_grpc_services._proto.adk.session.v1 import session_pb2 as pb
from adk_grpc_services.mapping import (
    content_from_proto,
    content_to_proto,
    event_from_proto,
    event_to_proto,
    memory_session_to_proto,
    session_to_proto,
)


def round_trip(event: Event) -> Event:
    # Through bytes, as the server stores and returns it.
    return event_from_proto(pb.Event.FromString(event_to_proto(event).SerializeToString()))


def every_field_event() -> Event:
    """An event with every Event, EventActions and Part field ADK 2.13 / genai 2.34 has set."""
    return Event(
        id="ev-1",
        invocation_id="e-123",
        author="root.child",
        branch="root.child",
        isolation_scope="scope",
        timestamp=1700000000.5,
        partial=False,
        turn_complete=True,
        turn_complete_reason=types.TurnCompleteReason.NEED_MORE_INPUT,
        finish_reason=types.FinishReason.STOP,
        error_code="E1",
        error_message="boom",
        interrupted=False,
        model_version="gemini-x",
        interaction_id="int-1",
        environment_id="env-1",
        live_session_id="live-1",
        avg_logprobs=-0.25,
        logprobs_result=types.LogprobsResult(
            chosen_candidates=[types.LogprobsResultCandidate(token="a", log_probability=-0.5)]
        ),
        custom_metadata={"__adk_internal_x": 1, "k": [1, 2.0, None]},
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=3,
            candidates_token_count=4,
            total_token_count=7,
            thoughts_token_count=1,
        ),
        grounding_metadata=types.GroundingMetadata(
            web_search_queries=["q"],
            search_entry_point=types.SearchEntryPoint(
                sdk_blob=b"\x00\xffblob", rendered_content="<b/>"
            ),
            grounding_chunks=[
                types.GroundingChunk(web=types.GroundingChunkWeb(uri="https://x", title="x"))
            ],
        ),
        citation_metadata=types.CitationMetadata(
            citations=[types.Citation(start_index=1, end_index=5, uri="https://c")]
        ),
        input_transcription=types.Transcription(text="in", finished=True),
        output_transcription=types.Transcription(text="out", finished=False),
        go_away=types.LiveServerGoAway(time_left="5s"),
        live_session_resumption_update=types.LiveServerSessionResumptionUpdate(
            new_handle="h", resumable=True
        ),
        long_running_tool_ids={"call-b", "call-a"},
        output={"answer": 42, "ratio": 0.5},
        node_info=NodeInfo(path="root/child", output_for=["root"], message_as_output=True),
        content=types.Content(
            role="model",
            parts=[
                types.Part(text="plain"),
                types.Part(text="thinking", thought=True, thought_signature=b"\xfb\xff\xfe?"),
                types.Part(
                    inline_data=types.Blob(
                        data=b"\x89PNG\x00", mime_type="image/png", display_name="pic"
                    )
                ),
                types.Part(
                    file_data=types.FileData(
                        file_uri="gs://b/f", mime_type="text/plain", display_name="f"
                    )
                ),
                types.Part(
                    function_call=types.FunctionCall(
                        id="call-a",
                        name="lookup",
                        args={
                            "query": "x",
                            "nested": {"ids": [1, 2**53 + 1], "f": 1.0},
                            "none": None,
                        },
                        will_continue=True,
                        partial_args=[types.PartialArg(json_path="$.query", string_value="x")],
                    ),
                    thought_signature=b"sig",
                ),
                types.Part(
                    function_response=types.FunctionResponse(
                        id="call-a",
                        name="lookup",
                        response={"result": ["r"], "count": 1},
                        will_continue=False,
                        scheduling=types.FunctionResponseScheduling.WHEN_IDLE,
                        parts=[
                            types.FunctionResponsePart(
                                inline_data=types.FunctionResponseBlob(
                                    data=b"\x01\x02", mime_type="image/png"
                                )
                            )
                        ],
                    )
                ),
                types.Part(
                    executable_code=types.ExecutableCode(
                        code="print(1)", language=types.Language.PYTHON
                    )
                ),
                types.Part(
                    code_execution_result=types.CodeExecutionResult(
                        outcome=types.Outcome.OUTCOME_OK, output="1\n"
                    )
                ),
                types.Part(
                    text="with video",
                    video_metadata=types.VideoMetadata(start_offset="1s", end_offset="2s", fps=2.5),
                    media_resolution=types.PartMediaResolution(
                        level=types.PartMediaResolutionLevel.MEDIA_RESOLUTION_HIGH
                    ),
                    part_metadata={"source": "cam"},
                ),
                types.Part(text="and a call", function_call=types.FunctionCall(name="second")),
            ],
        ),
        actions=EventActions(
            skip_summarization=True,
            state_delta={"k": 1, "app:a": {"x": [1]}, "user:u": None, "f": 1.0},
            artifact_delta={"report.pdf": 3},
            transfer_to_agent="other",
            transfer_reason="because",
            escalate=False,
            requested_auth_configs={
                "call-a": AuthConfig(
                    auth_scheme={"type": "oauth2", "flows": {}},
                    raw_auth_credential=AuthCredential(
                        auth_type=AuthCredentialTypes.OAUTH2,
                        oauth2=OAuth2Auth(client_id="id", client_secret="secret"),
                    ),
                )
            },
            requested_tool_confirmations={
                "call-a": ToolConfirmation(hint="ok?", confirmed=True, payload={"n": 1})
            },
            compaction=EventCompaction(
                start_timestamp=1700000000.25,
                end_timestamp=1700000001.75,
                compacted_content=types.Content(role="model", parts=[types.Part(text="summary")]),
            ),
            end_of_agent=True,
            agent_state={"step": 2},
            rewind_before_invocation_id="e-000",
            route=["left", 2, True],
            render_ui_widgets=[UiWidget(id="w", provider="p", payload={"a": 1})],
            set_model_response={"structured": True},
        ),
    )


def test_every_field_survives() -> None:
    event = every_field_event()
    back = round_trip(event)
    assert back == event
    assert back.model_dump(mode="json") == event.model_dump(mode="json")


def test_memory_gets_of_each_event_with_content_what_it_reads() -> None:
    """``memory_session_to_proto`` sends what memory-svc reads (id, author, timestamp, content)
    as ``session_to_proto`` has it, for events with content only."""
    rich = every_field_event()
    without = Event(id="bare", author="model", timestamp=1700000001.5)
    no_parts = Event(
        id="empty", author="user", content=types.Content(role="user"), timestamp=1700000002.0
    )
    session = Session(
        id="s", app_name="app", user_id="u", state={"k": 1}, events=[rich, without, no_parts]
    )
    full = session_to_proto(session)
    sent = memory_session_to_proto(session)
    assert (sent.id, sent.app_name, sent.user_id) == ("s", "app", "u")
    assert [e.id for e in sent.events] == [rich.id, "empty"]
    for event in sent.events:
        whole = next(e for e in full.events if e.id == event.id)
        assert event.author == whole.author
        assert event.timestamp == whole.timestamp
        assert event.content == whole.content
        assert {field.name for field, _ in event.ListFields()} == {
            "id",
            "author",
            "content",
            "timestamp",
        }
    assert sent.events[0].content.parts


def test_typed_fields_carry_what_the_contract_has_fields_for() -> None:
    message = event_to_proto(every_field_event())
    assert (message.id, message.invocation_id, message.author, message.branch) == (
        "ev-1",
        "e-123",
        "root.child",
        "root.child",
    )
    assert (message.timestamp.seconds, message.timestamp.nanos) == (1700000000, 500_000_000)
    assert message.finish_reason == "STOP" and message.model_version == "gemini-x"
    assert message.HasField("partial") and message.partial is False
    assert list(message.long_running_tool_ids) == ["call-a", "call-b"]  # a set, sent sorted
    assert json.loads(message.usage_metadata)["total_token_count"] == 7
    parts = message.content.parts
    assert [p.WhichOneof("data") for p in parts] == [
        "text",
        "text",
        "inline_data",
        "file_data",
        "function_call",
        "function_response",
        "executable_code",
        "code_execution_result",
        "text",
        "text",
    ]
    assert parts[1].thought and parts[1].thought_signature == b"\xfb\xff\xfe?"
    assert parts[2].inline_data.data == b"\x89PNG\x00"
    assert (
        parts[4].function_call.args
        == '{"query":"x","nested":{"ids":[1,9007199254740993],"f":1.0},"none":null}'
    )
    assert json.loads(parts[4].function_call.extra) == {
        "partial_args": [{"json_path": "$.query", "string_value": "x"}]
    }
    assert json.loads(parts[5].function_response.extra)["scheduling"] == "WHEN_IDLE"
    assert parts[6].executable_code.language == "PYTHON"
    assert parts[7].code_execution_result.outcome == "OUTCOME_OK"
    # The oneof holds the text; the second data field rides in the part's extra.
    assert json.loads(parts[9].extra) == {"function_call": {"name": "second"}}
    actions = message.actions
    assert json.loads(actions.state_delta) == {
        "k": 1,
        "app:a": {"x": [1]},
        "user:u": None,
        "f": 1.0,
    }
    assert dict(actions.artifact_delta) == {"report.pdf": 3}
    assert actions.compaction.compacted_content.parts[0].text == "summary"
    assert set(json.loads(actions.extra)) == {"route", "render_ui_widgets", "set_model_response"}
    assert set(json.loads(message.extra)) == {
        "isolation_scope",
        "turn_complete_reason",
        "interaction_id",
        "environment_id",
        "live_session_id",
        "avg_logprobs",
        "logprobs_result",
        "input_transcription",
        "output_transcription",
        "go_away",
        "live_session_resumption_update",
        "output",
        "node_info",
    }


def test_an_ordinary_event_needs_no_extra() -> None:
    event = Event(
        invocation_id="e-1",
        author="user",
        content=types.Content(role="user", parts=[types.Part(text="hi")]),
        actions=EventActions(state_delta={"k": 1}),
        timestamp=1700000000.5,
    )
    message = event_to_proto(event)
    assert message.extra == "" and message.actions.extra == ""
    assert message.content.parts[0].extra == ""
    assert round_trip(event) == event


@pytest.mark.parametrize(
    "event",
    [
        Event(),
        Event(content=types.Content(role="user", parts=[])),
        Event(content=types.Content()),
        Event(long_running_tool_ids=set()),
        Event(custom_metadata={}),
        Event(content=types.Content(parts=[types.Part()])),
        Event(content=types.Content(parts=[types.Part(text="")])),
        Event(content=types.Content(parts=[types.Part(function_call=types.FunctionCall())])),
        Event(content=types.Content(parts=[types.Part(function_call=types.FunctionCall(args={}))])),
        Event(actions=EventActions(artifact_delta={"huge": 2**70})),
        Event(actions=EventActions(agent_state={})),
        Event(timestamp=0.1 + 1e-12),
        Event(
            actions=EventActions(
                compaction=EventCompaction(
                    start_timestamp=1e-9 / 3, end_timestamp=-0.0, compacted_content=types.Content()
                )
            )
        ),
    ],
    ids=repr,
)
def test_empty_and_edge_values_survive(event: Event) -> None:
    assert round_trip(event) == event
    assert round_trip(event).model_dump(mode="json") == event.model_dump(mode="json")


def test_json_numbers_keep_their_type_and_digits() -> None:
    delta = {"int": 1, "float": 1.0, "big": 2**53 + 1, "neg_zero": -0.0, "e": 1e300, "bool": True}
    back = round_trip(Event(actions=EventActions(state_delta=delta)))
    for key, value in delta.items():
        got = back.actions.state_delta[key]
        assert type(got) is type(value) and repr(got) == repr(value)


def test_random_floats_survive() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        (value,) = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))
        if value != value or value in (float("inf"), float("-inf")):
            continue
        back = round_trip(Event(output=value, custom_metadata={"v": value}))
        assert back.output == value and back.custom_metadata == {"v": value}


def test_non_serializable_values_become_their_text() -> None:
    class Opaque:
        def __repr__(self) -> str:
            return "<Opaque>"

    back = round_trip(
        Event(output=Opaque(), actions=EventActions(state_delta={"o": Opaque(), "fn": len}))
    )
    assert back.output == "<Opaque>"
    assert back.actions.state_delta == {"o": "<Opaque>", "fn": repr(len)}


def test_content_round_trip_on_its_own() -> None:
    content = every_field_event().content
    assert content is not None
    assert content_from_proto(content_to_proto(content)) == content


def test_timestamps_are_exact_for_clock_readings() -> None:
    rng = random.Random(11)
    for _ in range(20000):
        seconds = rng.uniform(2**24, 4e9)
        assert timestamps.round_trips(seconds)
    one_and_a_half = timestamps.to_timestamp(1.5)
    assert (one_and_a_half.seconds, one_and_a_half.nanos) == (1, 500_000_000)
    assert (timestamps.to_timestamp(-0.25).seconds, timestamps.to_timestamp(-0.25).nanos) == (
        -1,
        750_000_000,
    )
    assert not timestamps.round_trips(0.1 + 1e-12)


@pytest.fixture
def local_time_india(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local time fixed at UTC+5:30 (a POSIX TZ rule: no time zone database needed)."""
    monkeypatch.setenv("TZ", "IST-5:30")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_memory_timestamps_are_naive_local_iso(local_time_india: None) -> None:
    # 2023-11-14T22:13:20.25Z is 03:43:20.25 the next day at UTC+5:30; ADK writes it without an
    # offset.
    ts = timestamps.to_timestamp(1700000000.25)
    assert timestamps.to_local_iso(ts) == "2023-11-15T03:43:20.250000"
    assert timestamps.from_iso(timestamps.to_local_iso(ts)) == ts
    assert timestamps.from_iso("2023-11-14T22:13:20+00:00") == timestamps.to_timestamp(1700000000.0)
    with pytest.raises(ValueError, match="ISO 8601"):
        timestamps.from_iso("yesterday")
