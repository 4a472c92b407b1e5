"""Decoding builds most events without pydantic validation (``mapping._built_event``); these
tests hold it to what validation builds (``mapping._validated_event``), object for object, on a
varied corpus, and check which events take which path."""

from __future__ import annotations

import gc
import random
from typing import Any

import pytest
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.session import Session
from google.genai import types
from google.protobuf.timestamp_pb2 import Timestamp
from pydantic import BaseModel
from pydantic_core import from_json

from adk_grpc_services import mapping
from adk_grpc_services._proto.adk.session.v1 import session_pb2 as pb
from adk_grpc_services.mapping import event_from_proto, event_to_proto


def assert_identical(built: Any, validated: Any, where: str = "event") -> None:
    """Same classes, field sets, ``__dict__`` keys in the same order, and values of the same
    types: stricter than ``==``, which ignores ``model_fields_set``, 1 vs 1.0 vs True and
    key order."""
    assert type(built) is type(validated), where
    if isinstance(built, BaseModel):
        assert built.model_fields_set == validated.model_fields_set, where
        assert built.__pydantic_extra__ == validated.__pydantic_extra__, where
        assert built.__pydantic_private__ == validated.__pydantic_private__, where
        assert_identical(built.__dict__, validated.__dict__, f"{where}.__dict__")
    elif isinstance(built, dict):
        assert list(built) == list(validated), where
        for key in built:
            assert_identical(built[key], validated[key], f"{where}[{key!r}]")
    elif isinstance(built, (list, tuple)):
        assert len(built) == len(validated), where
        for i, (a, b) in enumerate(zip(built, validated, strict=True)):
            assert_identical(a, b, f"{where}[{i}]")
    elif isinstance(built, float):
        assert built.hex() == validated.hex(), where
    else:
        assert built == validated, where


def wire(event: Event) -> pb.Event:
    """The message the server gives back for ``event`` (through bytes)."""
    return pb.Event.FromString(event_to_proto(event).SerializeToString())


def text_event(i: int) -> Event:
    """As bench/adk_compare.py appends them."""
    return Event(
        id=f"ev-{i}",
        invocation_id=f"inv-{i}",
        author="user" if i % 2 == 0 else "model",
        timestamp=1700000000.0 + i / 7,
        content=types.Content(
            role="user" if i % 2 == 0 else "model",
            parts=[types.Part(text=f"turn {i}: " + "lorem ipsum " * 80)],
        ),
        actions=EventActions(
            state_delta={
                "app:last_writer": "user",
                "user:turns": i,
                "turn": i,
                "last_topic": f"topic-{i % 97}",
            }
        ),
    )


JSON_VALUES: list[Any] = [
    0,
    -1,
    2**53 + 1,
    2**70,
    1.0,
    -0.0,
    0.1,
    1e300,
    5e-324,
    True,
    False,
    None,
    "",
    "ünïcødé ✓ 😀",
    'line\nbreak "quoted" \\ back',
    [],
    {},
    [1, "a", None, [2.5]],
    {"nested": {"deeper": [True, {"x": -7}]}},
]


def random_json_object(rng: random.Random) -> dict[str, Any]:
    return {f"k{j}-{rng.randrange(1000)}": rng.choice(JSON_VALUES) for j in range(rng.randrange(5))}


def random_part(rng: random.Random) -> types.Part:
    kind = rng.randrange(9)
    part: types.Part
    if kind == 0:
        part = types.Part(text=rng.choice(["", "hi", "ünïcødé 😀", "x" * 3000]))
    elif kind == 1:
        part = types.Part(
            inline_data=types.Blob(
                data=rng.randbytes(rng.randrange(40)),
                mime_type=rng.choice([None, "", "image/png"]),
                display_name=rng.choice([None, "pic"]),
            )
        )
    elif kind == 2:
        part = types.Part(
            file_data=types.FileData(
                file_uri="gs://bucket/file", mime_type=rng.choice([None, "text/plain"])
            )
        )
    elif kind == 3:
        part = types.Part(
            function_call=types.FunctionCall(
                id=rng.choice([None, "call-1"]),
                name=rng.choice([None, "lookup"]),
                args=rng.choice([None, {}, random_json_object(rng)]),
                will_continue=rng.choice([None, True, False]),
            )
        )
    elif kind == 4:
        part = types.Part(
            function_response=types.FunctionResponse(
                id="call-1",
                name="lookup",
                response=rng.choice([None, {}, random_json_object(rng)]),
                will_continue=rng.choice([None, False]),
            )
        )
    elif kind == 5:
        part = types.Part(
            executable_code=types.ExecutableCode(
                code="print(1)", language=rng.choice([None, *types.Language]), id=None
            )
        )
    elif kind == 6:
        part = types.Part(
            code_execution_result=types.CodeExecutionResult(
                outcome=rng.choice([None, *types.Outcome]), output="1\n", id="c-1"
            )
        )
    elif kind == 7:
        part = types.Part()
    else:
        part = types.Part(text="thinking", thought=rng.choice([None, True, False]))
    if rng.random() < 0.2:
        part.thought_signature = rng.randbytes(rng.randrange(1, 12))
    return part


def random_event(rng: random.Random, i: int) -> Event:
    """Events of every shape the typed fields can carry."""
    maybe = rng.random
    fields: dict[str, Any] = {
        "id": f"e-{i}",
        "invocation_id": rng.choice(["", f"inv-{i}"]),
        "author": rng.choice(["user", "root.child", ""]),
        # Whole seconds too: a float field must not come back as an int.
        "timestamp": rng.choice([1700000000.0, 1700000000.0 + rng.random() * 1e6, 0.0]),
    }
    if maybe() < 0.8:
        fields["content"] = types.Content(
            role=rng.choice([None, "user", "model"]),
            parts=[random_part(rng) for _ in range(rng.randrange(4))] or None,
        )
    for name, values in (
        ("branch", ["root.child", ""]),
        ("partial", [True, False]),
        ("turn_complete", [True, False]),
        ("error_code", ["E1", ""]),
        ("error_message", ["boom"]),
        ("interrupted", [True, False]),
        ("model_version", ["gemini-x"]),
        ("finish_reason", list(types.FinishReason)),
        ("long_running_tool_ids", [{"call-1", "call-2"}, {"call-3"}]),
        ("custom_metadata", [random_json_object(rng), {}]),
    ):
        if maybe() < 0.3:
            fields[name] = rng.choice(values)
    if maybe() < 0.4:
        fields["usage_metadata"] = types.GenerateContentResponseUsageMetadata(
            prompt_token_count=rng.randrange(100),
            candidates_token_count=rng.choice([None, 0, 7]),
            total_token_count=rng.randrange(200),
            thoughts_token_count=rng.choice([None, 2**40]),
            traffic_type=rng.choice([None, *types.TrafficType]),
            prompt_tokens_details=rng.choice(
                [
                    None,
                    [],
                    [
                        types.ModalityTokenCount(modality=rng.choice(list(types.MediaModality))),
                        types.ModalityTokenCount(modality=types.MediaModality.TEXT, token_count=3),
                    ],
                ]
            ),
        )
    if maybe() < 0.2:
        fields["grounding_metadata"] = types.GroundingMetadata(
            web_search_queries=["q"],
            grounding_chunks=[
                types.GroundingChunk(web=types.GroundingChunkWeb(uri="https://x", title="x"))
            ],
            # bytes: this one is left to validation
            search_entry_point=rng.choice([None, types.SearchEntryPoint(sdk_blob=b"\x00\xff")]),
        )
    if maybe() < 0.2:
        fields["citation_metadata"] = types.CitationMetadata(
            citations=[
                types.Citation(start_index=1, end_index=5, uri="https://c"),
                types.Citation(
                    title="t",
                    license="MIT",
                    publication_date=types.GoogleTypeDate(year=2024, month=rng.choice([None, 2])),
                ),
            ]
        )
    actions: dict[str, Any] = {}
    for name, values in (
        ("state_delta", [random_json_object(rng), {"app:a": 1, "user:b": [2], "c": None}]),
        ("artifact_delta", [{"report.pdf": 3, "b.png": 0}]),
        ("skip_summarization", [True, False]),
        ("transfer_to_agent", ["other"]),
        ("transfer_reason", ["because"]),
        ("escalate", [True, False]),
        ("end_of_agent", [True]),
        ("agent_state", [{}, random_json_object(rng)]),
        ("rewind_before_invocation_id", ["inv-0"]),
    ):
        if maybe() < 0.4:
            actions[name] = rng.choice(values)
    if actions or maybe() < 0.5:
        fields["actions"] = EventActions(**actions)
    return Event(**fields)


def stored(**fields: Any) -> pb.Event:
    """A message as another client could have written it (with a timestamp, so that two
    decodings agree)."""
    return pb.Event(timestamp=Timestamp(seconds=1700000000, nanos=5), **fields)


CORPUS = [text_event(i) for i in range(5)] + [
    random_event(random.Random(seed), seed) for seed in range(400)
]


@pytest.mark.parametrize("event", CORPUS, ids=lambda e: e.id)
def test_built_events_are_the_validated_ones(event: Event) -> None:
    message = wire(event)
    built = mapping._built_event(message)
    assert_identical(built, mapping._validated_event(message))
    assert built == event


def test_usage_metadata_is_built_without_validation() -> None:
    built = mapping._ModelReader.of(types.GenerateContentResponseUsageMetadata)
    for event in CORPUS:
        if event.usage_metadata is not None:
            built(from_json(wire(event).usage_metadata))
    # bytes are not among the types it builds
    with pytest.raises(mapping._NeedsValidation):
        mapping._ModelReader.of(types.SearchEntryPoint)({"sdk_blob": "AP8="})


def test_ordinary_events_are_built_without_validation() -> None:
    # The corpus above has only typed fields: none may quietly take the slow path.
    for event in CORPUS:
        mapping._built_event(wire(event))


# Messages only validation builds (each for its own reason).
VALIDATED_ONLY: list[pb.Event] = [
    # Typed fields cannot hold these; they travel in extra.
    wire(Event(id="e", output={"answer": 42})),
    wire(Event(id="e", long_running_tool_ids=set())),
    wire(
        Event(
            id="e",
            content=types.Content(
                parts=[types.Part(text="a", function_call=types.FunctionCall(name="f"))]
            ),
        )
    ),
    # No id: validation gives the event a new one.
    stored(invocation_id="i", author="user"),
    # An enum text that is not a member's value: genai matches it case-insensitively.
    stored(id="e", finish_reason="stop"),
    stored(
        id="e",
        content=pb.Content(
            parts=[pb.Part(executable_code=pb.ExecutableCode(code="1", language="python"))]
        ),
    ),
    # Models that only validation builds (auth configs are parsed by an ADK validator).
    stored(id="e", actions=pb.EventActions(requested_auth_configs="{}")),
    stored(id="e", actions=pb.EventActions(requested_tool_confirmations="{}")),
    stored(
        id="e",
        actions=pb.EventActions(
            compaction=pb.EventCompaction(
                start_timestamp=Timestamp(seconds=1),
                end_timestamp=Timestamp(seconds=2),
                compacted_content=pb.Content(role="model"),
            )
        ),
    ),
]


@pytest.mark.parametrize("message", VALIDATED_ONLY, ids=repr)
def test_anything_else_takes_the_validating_path(message: pb.Event) -> None:
    with pytest.raises(mapping._NeedsValidation):
        mapping._built_event(message)
    decoded = event_from_proto(message)
    if message.id:
        assert_identical(decoded, mapping._validated_event(message))


def test_unknown_enum_texts_decode_as_validation_does() -> None:
    event = event_from_proto(stored(id="e", finish_reason="stop"))
    assert event.finish_reason is types.FinishReason.STOP


def test_contents_on_their_own() -> None:
    for event in CORPUS:
        if event.content is not None:
            message = mapping.content_to_proto(event.content)
            built = mapping._built_content(message)
            assert_identical(built, mapping._validated_content(message), "content")
            assert mapping.content_from_proto(message) == event.content


def test_a_model_with_unknown_validation_is_not_built() -> None:
    class Checked(BaseModel):
        value: int = 0

        def model_post_init(self, context: Any) -> None:
            pass

    with pytest.raises(mapping._NeedsValidation):
        mapping._Blueprint(Checked).build({"value": 1})
    with pytest.raises(mapping._NeedsValidation):
        mapping._Blueprint(types.Part).build({"not_a_field": 1})


def test_sessions_are_built_as_validation_builds_them() -> None:
    """Listed sessions (no events) and read ones, one at a time and a page at a time."""
    message = pb.Session(
        id="s1", app_name="app", user_id="u", state='{"n":1,"app:x":[1,2.5]}', last_sequence=7
    )
    message.last_update_time.FromNanoseconds(1_700_000_000_123_456_789)
    read = pb.Session()
    read.CopyFrom(message)
    read.events.extend(wire(text_event(i)) for i in range(3))
    read.events[-1].sequence = 7
    for built, events in (
        (mapping.session_from_proto(message), []),
        (mapping.sessions_from_proto([message, message])[1], []),
        (mapping.session_from_proto(read), [event_from_proto(e) for e in read.events]),
    ):
        validated = Session(
            id="s1",
            app_name="app",
            user_id="u",
            state={"n": 1, "app:x": [1, 2.5]},
            events=events,
            last_update_time=events[-1].timestamp
            if events
            else mapping.timestamps.to_seconds(message.last_update_time),
        )
        validated._storage_update_marker = "seq:7"
        assert_identical(built, validated, "session")


def test_sessions_in_another_field_order_are_validated() -> None:
    fields = {"app_name": "app", "id": "s1", "user_id": "u", "state": {}, "events": []}
    fields["last_update_time"] = 1.5
    with pytest.raises(mapping._NeedsValidation):
        mapping._SESSION.build_all(fields, {"_storage_update_marker": None})


def test_built_sessions_are_filed_with_the_long_lived_objects() -> None:
    """Building pauses the collector and moves what it built to the oldest generation (no
    young-generation pass over it); a collector the application turned off, and objects it
    froze, are left as they were."""
    read = pb.Session(id="s1", app_name="app", user_id="u", last_sequence=3)
    read.events.extend(wire(text_event(i)) for i in range(3))
    read.events[-1].sequence = 3

    def generation_of(obj: object) -> int | None:
        return next((g for g in range(3) if any(o is obj for o in gc.get_objects(g))), None)

    assert gc.isenabled()
    session = mapping.session_from_proto(read)
    assert gc.isenabled()
    assert generation_of(session.events[0]) == 2

    gc.disable()
    try:
        session = mapping.session_from_proto(read)
        assert not gc.isenabled()
    finally:
        gc.enable()

    kept = {"held": ["frozen"]}
    gc.freeze()
    try:
        assert generation_of(kept) is None
        session = mapping.session_from_proto(read)
        assert generation_of(kept) is None, "the application's frozen objects were unfrozen"
        assert generation_of(session.events[0]) != 2
    finally:
        gc.unfreeze()
    assert generation_of(kept) == 2
