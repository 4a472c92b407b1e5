"""Lossless mapping between ADK objects and the ``adk.session.v1`` messages.

Covers ``google.adk.events.Event`` (with its ``EventActions``), ``google.genai.types.Content``
and ``google.adk.sessions.Session``. Every field of an event survives ``event_to_proto`` followed
by ``event_from_proto``, including fields the contract has no typed field for.

How: an ADK object is first dumped the way ADK's database backend stores it
(``model_dump(mode="json", exclude_none=True)``: snake_case, bytes as URL-safe base64, enums by
name, sets as sorted lists). The typed proto fields are filled from that dict. The dict is then
rebuilt from the typed fields alone, and whatever differs from the original goes into the
message's ``extra`` JSON object, which decoding merges back over the typed fields (objects key by
key, any other value replaced). So ``extra`` holds exactly what typed fields cannot express: ADK
fields without a proto field (``node_info``, ``output``, transcriptions, ``route`` ...), a second
data field of a Part whose oneof is taken, an empty ``parts`` list, or a timestamp that a
nanosecond ``Timestamp`` cannot hold exactly. Decoding validates the merged dict with ADK's own
model (``model_validate_json``), the inverse of the dump.

That path (dict, JSON text, validation) costs ~35 µs per event, which made ``get_session`` of
1,000 events slower than ADK's own SQLite service. So an event whose message uses typed fields
only (no ``extra`` anywhere, no auth configs, tool confirmations or compaction, enum texts that
name a member) is built directly from its typed fields, the models filled in the state validation
leaves them in (``_Blueprint``); anything else takes the validating path.
``tests/test_mapping_fast_path.py`` checks on a varied corpus that both paths give the same
objects, down to value types and ``model_fields_set``.

Where the optional native module ``adk_grpc_services_native`` is installed (``clients/python/
native``), replies of ``GetSession`` and ``ListSessions`` are read from their bytes by it
instead (``session_from_reply``, ``sessions_from_reply``): it builds the same objects from the
same blueprints through the C API, and calls back here for whatever it does not build itself.
Setting ``ADK_GRPC_NATIVE=0`` turns it off.

JSON values travel as JSON text. ``json`` keeps ints as ints of any size and writes floats with
``repr``, so ``1`` stays ``1``, ``1.0`` stays ``1.0`` and ``2**53 + 1`` stays exact; the parser
of pydantic-core, which reads them back, does the same. Free-form values (state, tool arguments and
responses, metadata) come back as the JSON data they were written as, as with ADK's database
backend: a datetime becomes its ISO text, a pydantic object inside a dict becomes a dict, and a
value that is not JSON-serializable becomes ``str(value)`` (pydantic's ``serialize_unknown``,
which ADK uses; for a function or a plain object that is its repr).
"""

from __future__ import annotations

import base64
import contextlib
import copy
import enum
import functools
import gc
import json
import logging
import os
import typing
from collections.abc import Callable, Iterable, Iterator
from types import UnionType
from typing import Any, Generic, TypeVar

from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.session import Session
from google.genai import types
from google.protobuf.message import Message
from pydantic import BaseModel
from pydantic_core import from_json, to_jsonable_python

from . import timestamps
from ._proto.adk.session.v1 import session_pb2 as pb

JsonObject = dict[str, Any]

# Where a Session carries the sequence of its last stored event; see session_marker().
_MARKER_PREFIX = "seq:"

_EVENT_STRINGS = ("id", "invocation_id", "author")
_EVENT_OPTIONALS = (
    "branch",
    "partial",
    "turn_complete",
    "error_code",
    "error_message",
    "interrupted",
    "model_version",
    "finish_reason",
)
_EVENT_JSON = ("custom_metadata", "usage_metadata", "grounding_metadata", "citation_metadata")
_ACTIONS_OPTIONALS = (
    "skip_summarization",
    "transfer_to_agent",
    "transfer_reason",
    "escalate",
    "end_of_agent",
    "rewind_before_invocation_id",
)
# EventActions dicts that ADK always has (default {}); sent as "" when empty, read back as {}.
_ACTIONS_DEFAULT_JSON = ("state_delta", "requested_auth_configs", "requested_tool_confirmations")
_CALL_OPTIONALS = ("id", "name", "will_continue")
_INT64 = range(-(2**63), 2**63)
# Event fields at ADK's default (node_info={"path": ""} on nearly every event) need not travel in
# extra: validation restores them. id and timestamp are never left to a default.
_EVENT_DEFAULTS = {
    k: v
    for k, v in Event().model_dump(mode="json", exclude_none=True).items()
    if k not in ("id", "timestamp")
}


# --------------------------------------------------------------------------------------------
# JSON text


def dumps(value: Any) -> str:
    """Compact JSON text; NaN/Infinity are refused since the servers accept only strict JSON."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def loads_object(text: str, field: str) -> JsonObject:
    """Parses a JSON-object text field; the empty string means absent, read as ``{}``."""
    if not text:
        return {}
    # pydantic-core's parser: the one validation reads JSON with, and faster than json.loads.
    value = from_json(text)
    if not isinstance(value, dict):
        raise ValueError(f"{field} holds JSON that is not an object: {text[:80]!r}")
    return value


def json_safe(value: Any) -> Any:
    """``value`` as plain JSON data, as ADK's ``make_json_safe_state`` makes state."""
    return to_jsonable_python(value, serialize_unknown=True)


def _dump(model: BaseModel) -> JsonObject:
    # fallback=str is what serialize_unknown does in json_safe(), so state values in events and
    # in sessions become the same text.
    return model.model_dump(mode="json", exclude_none=True, fallback=str)


# --------------------------------------------------------------------------------------------
# Public conversions


def event_to_proto(event: Event) -> pb.Event:
    """The ``adk.session.v1.Event`` for ``event`` (``sequence`` left 0 for the server)."""
    data = _dump(event)
    if event.actions.requested_auth_configs:
        # An AuthConfig holds FastAPI OpenAPI models (auth_scheme) whose fields such as `type_`
        # are read back only by their aliases; their by-alias form (ADK's REST form) is the one
        # that validates back to an equal object.
        data["actions"]["requested_auth_configs"] = {
            key: config.model_dump(mode="json", exclude_none=True, by_alias=True, fallback=str)
            if isinstance(config, BaseModel)
            else json_safe(config)
            for key, config in event.actions.requested_auth_configs.items()
        }
    return _event_message(data)


def event_from_proto(message: pb.Event) -> Event:
    """The ADK Event a message holds, every field as it was sent."""
    try:
        return _built_event(message)
    except _NeedsValidation:
        return _validated_event(message)


def _validated_event(message: pb.Event) -> Event:
    """``event_from_proto`` through ADK's validation, whatever the message holds (slower)."""
    return Event.model_validate_json(dumps(_event_data(message)))


def content_to_proto(content: types.Content) -> pb.Content:
    """The ``adk.session.v1.Content`` for a genai Content.

    Content has no ``extra`` of its own: inside an event, what it cannot hold travels in the
    event's ``extra``; on its own (a memory entry) only a Content-level field unknown to the
    contract would be lost, and genai 2.x has none (role and parts).
    """
    return _content_message(_dump(content))


def content_from_proto(message: pb.Content) -> types.Content:
    """The genai Content a message holds."""
    try:
        return _built_content(message)
    except _NeedsValidation:
        return _validated_content(message)


def _validated_content(message: pb.Content) -> types.Content:
    """``content_from_proto`` through genai's validation (slower)."""
    return types.Content.model_validate_json(dumps(_content_data(message)))


def session_marker(last_sequence: int) -> str:
    """The ``Session._storage_update_marker`` for a session whose last stored event has
    ``last_sequence``.

    ADK's Session has a private revision marker that its database backend fills in and that
    takes part in ``==``; carrying the sequence there makes ``get_session() == create_session()``
    hold and travels with ``model_copy``, so two copies of one snapshot both know which revision
    they were loaded at.
    """
    return f"{_MARKER_PREFIX}{last_sequence}"


def sequence_of(session: Session) -> int | None:
    """The last sequence a session was loaded or last appended at, if it came from this package."""
    marker = session._storage_update_marker
    if marker is None or not marker.startswith(_MARKER_PREFIX):
        return None
    digits = marker[len(_MARKER_PREFIX) :]
    return int(digits) if digits.isdigit() else None


def session_from_reply(data: bytes) -> Session | None:
    """The Session an encoded ``GetSession`` reply holds; None when its events continue past
    the reply (a byte-bounded read: the caller reads the rest with ``ListEvents``)."""
    if _NATIVE is not None:
        # Parsed here only for the events the native builder declines, once.
        parsed = functools.cache(lambda: pb.Session.FromString(data))
        with _collector_paused():
            session: Session | None = _NATIVE.session(
                data, lambda index: event_from_proto(parsed().events[index])
            )
        if session is not None:
            return session
    message = pb.Session.FromString(data)
    if message.events and message.events[-1].sequence < message.last_sequence:
        return None
    return session_from_proto(message)


def sessions_from_reply(data: bytes) -> tuple[list[Session], str]:
    """The sessions of an encoded ``ListSessions`` reply, and its next page token."""
    if _NATIVE is not None:
        parsed = functools.cache(lambda: pb.ListSessionsResponse.FromString(data))
        with _collector_paused():
            page: tuple[list[Session], str] = _NATIVE.sessions(
                data, lambda index: session_from_proto(parsed().sessions[index])
            )
        return page
    reply = pb.ListSessionsResponse.FromString(data)
    return sessions_from_proto(reply.sessions), reply.next_page_token


def session_from_proto(message: pb.Session) -> Session:
    """The ADK Session a message holds, with its sequence in the storage marker."""
    # Each access to a message field makes a new wrapper object: read each once.
    proto_events = message.events
    if not proto_events:
        return _session(message, [], timestamps.to_seconds(message.last_update_time))
    last_sequence = message.last_sequence
    with _collector_paused():
        events = [event_from_proto(e) for e in proto_events]
    # last_update_time is the last event's timestamp (S6.8); when that event is here, its exact
    # float is known even where a nanosecond Timestamp cannot hold it.
    if proto_events[-1].sequence == last_sequence > 0:
        last_update_time = events[-1].timestamp
    else:
        last_update_time = timestamps.to_seconds(message.last_update_time)
    return _session(message, events, last_update_time)


def sessions_from_proto(messages: Iterable[pb.Session]) -> list[Session]:
    """``session_from_proto`` of each listed session (listings carry no events)."""
    # A page of listed sessions is ~5,000 new containers, none in a reference cycle.
    with _collector_paused():
        return [session_from_proto(m) for m in messages]


def _session(message: pb.Session, events: list[Event], last_update_time: float) -> Session:
    # Every value is what validation would keep (strings, a JSON object, built events, a float):
    # listings build a thousand sessions at a time.
    fields: JsonObject = {
        "id": message.id,
        "app_name": message.app_name,
        "user_id": message.user_id,
        "state": loads_object(message.state, "Session.state"),
        "events": events,
        "last_update_time": last_update_time,
    }
    marker = session_marker(message.last_sequence)
    try:
        return _SESSION.build_all(fields, {"_storage_update_marker": marker})
    except _NeedsValidation:
        session = Session(**fields)
        session._storage_update_marker = marker
        return session


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Holds off Python's cyclic garbage collector while a session's events are built, and
    files what was built with the long-lived objects.

    1,000 events are ~20,000 new containers (models, their dicts and field sets). With the
    collector on, those allocations set off ~30 young-generation collections and, every few
    sessions, a full one over the whole heap (~150,000 objects once ADK and genai are imported):
    as much time as building the events. The events hold no reference cycles, so collecting
    them early finds nothing.

    Merely pausing would leave them all in the young generation, for the first allocation after
    to traverse (about a fifth of building them). ``gc.freeze`` then ``gc.unfreeze`` moves the
    young objects, the events and whatever else was young, to the oldest generation, as if they
    had survived their collections, without traversing them. Where the application keeps
    objects frozen itself, that is skipped: unfreezing would release them. A collector the
    application turned off stays off.
    """
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        gc.enable()


def session_to_proto(session: Session) -> pb.Session:
    """The ``adk.session.v1.Session`` for a Session held by the caller (sent by value)."""
    return pb.Session(
        id=session.id,
        app_name=session.app_name,
        user_id=session.user_id,
        state=dumps(json_safe(session.state)),
        events=[event_to_proto(e) for e in session.events],
        last_update_time=timestamps.to_timestamp(session.last_update_time),
        last_sequence=sequence_of(session) or 0,
    )


def memory_session_to_proto(session: Session) -> pb.Session:
    """What memory-svc reads of ``session``: its name and ``memory_events_to_proto`` of its
    events. What is remembered is the same as from ``session_to_proto``, for a quarter of the
    work (no state, actions or ``extra`` to map)."""
    return pb.Session(
        id=session.id,
        app_name=session.app_name,
        user_id=session.user_id,
        events=memory_events_to_proto(session.events),
    )


def memory_events_to_proto(events: Iterable[Event]) -> list[pb.Event]:
    """What memory-svc reads of each event with content (rules M1.2, M1.3, M1.5): its id,
    author, timestamp and content. An event without content is never remembered, so it is not
    sent; one whose content has no parts is, for the server to check."""
    return [
        pb.Event(
            id=event.id,
            author=event.author,
            timestamp=timestamps.to_timestamp(event.timestamp),
            content=content_to_proto(event.content),
        )
        for event in events
        if event.content is not None
    ]


# --------------------------------------------------------------------------------------------
# Events and actions: dict (ADK's JSON dump) <-> message


def _event_message(data: JsonObject) -> pb.Event:
    message = pb.Event()
    for name in _EVENT_STRINGS:
        _put(message, data, name)
    for name in _EVENT_OPTIONALS:
        _put(message, data, name)
    for name in _EVENT_JSON:
        _put_json(message, data, name)
    if _is_number(data.get("timestamp")):
        message.timestamp.CopyFrom(timestamps.to_timestamp(data["timestamp"]))
    ids = data.get("long_running_tool_ids")
    if isinstance(ids, list) and all(isinstance(i, str) for i in ids):
        message.long_running_tool_ids.extend(ids)
    if isinstance(data.get("content"), dict):
        message.content.CopyFrom(_content_message(data["content"]))
    if isinstance(data.get("actions"), dict):
        message.actions.CopyFrom(_actions_message(data["actions"]))
    _set_extra(message, data, _event_data, "Event", defaults=_EVENT_DEFAULTS)
    return message


def _event_data(message: pb.Event) -> JsonObject:
    data: JsonObject = {name: getattr(message, name) for name in _EVENT_STRINGS}
    _get_optionals(message, _EVENT_OPTIONALS, data)
    for name in _EVENT_JSON:
        _get_json(message, name, data)
    if message.HasField("timestamp"):
        data["timestamp"] = timestamps.to_seconds(message.timestamp)
    if message.long_running_tool_ids:
        data["long_running_tool_ids"] = list(message.long_running_tool_ids)
    if message.HasField("content"):
        data["content"] = _content_data(message.content)
    if message.HasField("actions"):
        data["actions"] = _actions_data(message.actions)
    return _with_extra(data, message.extra, "Event.extra")


def _actions_message(data: JsonObject) -> pb.EventActions:
    message = pb.EventActions()
    for name in _ACTIONS_OPTIONALS:
        _put(message, data, name)
    for name in _ACTIONS_DEFAULT_JSON:
        if data.get(name):
            _put_json(message, data, name)
    _put_json(message, data, "agent_state")
    artifacts = data.get("artifact_delta")
    if isinstance(artifacts, dict) and all(
        type(v) is int and v in _INT64 for v in artifacts.values()
    ):
        message.artifact_delta.update(artifacts)
    compaction = data.get("compaction")
    if isinstance(compaction, dict):
        target = message.compaction
        target.SetInParent()
        for name in ("start_timestamp", "end_timestamp"):
            if _is_number(compaction.get(name)):
                getattr(target, name).CopyFrom(timestamps.to_timestamp(compaction[name]))
        if isinstance(compaction.get("compacted_content"), dict):
            target.compacted_content.CopyFrom(_content_message(compaction["compacted_content"]))
    _set_extra(message, data, _actions_data, "EventActions")
    return message


def _actions_data(message: pb.EventActions) -> JsonObject:
    data: JsonObject = {}
    _get_optionals(message, _ACTIONS_OPTIONALS, data)
    for name in _ACTIONS_DEFAULT_JSON:
        data[name] = loads_object(getattr(message, name), f"EventActions.{name}")
    _get_json(message, "agent_state", data)
    data["artifact_delta"] = dict(message.artifact_delta)
    if message.HasField("compaction"):
        source = message.compaction
        compaction: JsonObject = {}
        for name in ("start_timestamp", "end_timestamp"):
            if source.HasField(name):
                compaction[name] = timestamps.to_seconds(getattr(source, name))
        if source.HasField("compacted_content"):
            compaction["compacted_content"] = _content_data(source.compacted_content)
        data["compaction"] = compaction
    return _with_extra(data, message.extra, "EventActions.extra")


# --------------------------------------------------------------------------------------------
# Content and parts


def _content_message(data: JsonObject) -> pb.Content:
    message = pb.Content()
    _put(message, data, "role")
    parts = data.get("parts")
    if isinstance(parts, list) and all(isinstance(p, dict) for p in parts):
        message.parts.extend(_part_message(p) for p in parts)
    return message


def _content_data(message: pb.Content) -> JsonObject:
    data: JsonObject = {}
    _get_optionals(message, ("role",), data)
    if message.parts:
        data["parts"] = [_part_data(p) for p in message.parts]
    return data


def _part_message(data: JsonObject) -> pb.Part:
    message = pb.Part()
    # The contract's oneof holds one data field; genai allows several, and any further one
    # (rare) travels in extra.
    for name, fill in _PART_DATA:
        if name in data and fill(message, data[name]):
            break
    _put(message, data, "thought")
    signature = data.get("thought_signature")
    if isinstance(signature, str):
        try:
            message.thought_signature = _from_base64(signature)
        except ValueError:
            message.ClearField("thought_signature")
    _set_extra(message, data, _part_data, "Part")
    return message


def _part_data(message: pb.Part) -> JsonObject:
    data: JsonObject = {}
    kind = message.WhichOneof("data")
    if kind == "text":
        data["text"] = message.text
    elif kind in ("function_call", "function_response"):
        data[kind] = _call_data(getattr(message, kind))
    elif kind is not None:
        data[kind] = _simple_data(getattr(message, kind))
    _get_optionals(message, ("thought",), data)
    if message.HasField("thought_signature"):
        data["thought_signature"] = _to_base64(message.thought_signature)
    return _with_extra(data, message.extra, "Part.extra")


def _fill_text(message: pb.Part, value: Any) -> bool:
    if not isinstance(value, str):
        return False
    message.text = value
    return True


def _filler(kind: str) -> Callable[[pb.Part, Any], bool]:
    """Fills the Part's ``kind`` data field from its dict; False when the value cannot go there."""

    def fill(message: pb.Part, value: Any) -> bool:
        if not isinstance(value, dict):
            return False
        target = getattr(message, kind)
        target.SetInParent()
        if kind in ("function_call", "function_response"):
            _fill_call(target, value)
        else:
            _fill_simple(target, value)
        return True

    return fill


_PART_DATA: tuple[tuple[str, Callable[[pb.Part, Any], bool]], ...] = (
    ("text", _fill_text),
    *(
        (kind, _filler(kind))
        for kind in (
            "inline_data",
            "file_data",
            "function_call",
            "function_response",
            "executable_code",
            "code_execution_result",
        )
    ),
)


def _fill_call(message: pb.FunctionCall | pb.FunctionResponse, data: JsonObject) -> None:
    payload = "args" if isinstance(message, pb.FunctionCall) else "response"
    for name in _CALL_OPTIONALS:
        _put(message, data, name)
    _put_json(message, data, payload)
    _set_extra(message, data, _call_data, type(message).__name__)


def _call_data(message: pb.FunctionCall | pb.FunctionResponse) -> JsonObject:
    payload = "args" if isinstance(message, pb.FunctionCall) else "response"
    data: JsonObject = {}
    _get_optionals(message, _CALL_OPTIONALS, data)
    _get_json(message, payload, data)
    return _with_extra(data, message.extra, f"{type(message).__name__}.extra")


def _fill_simple(message: Message, data: JsonObject) -> None:
    """Blob, FileData, ExecutableCode, CodeExecutionResult: optional scalars named as in genai."""
    for field in message.DESCRIPTOR.fields:
        if field.name not in data:
            continue
        value = data[field.name]
        try:
            if field.type == field.TYPE_BYTES:
                value = _from_base64(value)
            setattr(message, field.name, value)
        except (TypeError, ValueError):
            message.ClearField(field.name)


def _simple_data(message: Message) -> JsonObject:
    data: JsonObject = {}
    for field in message.DESCRIPTOR.fields:
        if message.HasField(field.name):
            value = getattr(message, field.name)
            data[field.name] = _to_base64(value) if field.type == field.TYPE_BYTES else value
    return data


# --------------------------------------------------------------------------------------------
# Decoding without validation (see the module docstring)


class _NeedsValidation(Exception):
    """The message holds something only validation is trusted to build."""


_Model = TypeVar("_Model", bound=BaseModel)
_Member = TypeVar("_Member", bound=enum.Enum)

# Before-validators that leave the plain data of a decoded message as it is: ADK's moves the
# convenience keywords (message=, state=, ...), which a message never has, to their fields;
# genai's only warns about a model instance of the wrong class.
_HARMLESS_VALIDATORS = frozenset({"_accept_convenience_kwargs", "_check_field_type_mismatches"})
_SCALARS = (type(None), str, bytes, int, float, enum.Enum)
# Bound once: build() runs ~5 times per event.
_new_object = object.__new__
_set_attribute = object.__setattr__


class _Blueprint(Generic[_Model]):
    """Makes instances of a pydantic model as validation leaves them for a dict of field values
    that validation would keep as they are: ``__dict__`` holds every field in declaration order,
    defaults for the missing ones (fresh for mutable defaults), ``model_fields_set`` names the
    given ones, and private attributes hold their defaults.

    ``build`` refuses (``_NeedsValidation``) a model with validators or a post-init hook other
    than ``_HARMLESS_VALIDATORS``, the names in ``also_harmless`` and pydantic's own setting of
    private defaults, a private attribute with a mutable default, or extra fields, so a future
    ADK or genai that adds one falls back to validation instead of skipping it.
    """

    def __init__(self, model: type[_Model], also_harmless: Iterable[str] = ()) -> None:
        self.model = model
        self.names = tuple(model.model_fields)
        self.size = len(self.names)
        self.defaults: JsonObject = {}
        # Fields whose default is made anew for each instance, and how: as FieldInfo.get_default
        # does (factory, or deep copy of a mutable default), but without inspecting the factory's
        # signature on every call.
        self.fresh: list[tuple[str, Callable[[], Any]]] = []
        takes_data = False
        for name, field in model.model_fields.items():
            if field.default_factory is None and isinstance(field.default, _SCALARS):
                self.defaults[name] = field.default
                continue
            self.defaults[name] = None
            if field.default_factory is None:
                self.fresh.append((name, functools.partial(copy.deepcopy, field.default)))
            else:
                takes_data = takes_data or bool(field.default_factory_takes_validated_data)
                self.fresh.append((name, field.default_factory))  # type: ignore[arg-type]
        private = model.__private_attributes__
        # Validation leaves None without private attributes, their defaults with them.
        self.private = (
            {name: attribute.default for name, attribute in private.items()} if private else None
        )
        # What pydantic makes model_post_init when a model with private attributes has none.
        sets_private_defaults = model.model_post_init.__name__ == "init_private_attributes"
        decorators = model.__pydantic_decorators__
        harmless = _HARMLESS_VALIDATORS | set(also_harmless)
        self.usable = (
            decorators.model_validators.keys() <= harmless
            and decorators.field_validators.keys() <= harmless
            and not decorators.validators
            and not decorators.root_validators
            and (
                model.__pydantic_post_init__ is None
                or model.__pydantic_post_init__ in harmless
                or sets_private_defaults
            )
            and all(
                a.default_factory is None and isinstance(a.default, _SCALARS)
                for a in private.values()
            )
            and model.model_config.get("extra") != "allow"
            and not takes_data
        )

    def build_all(self, fields: JsonObject, private: JsonObject) -> _Model:
        """``build`` for ``fields`` that name every field in declaration order and ``private``
        that names every private attribute: nothing to fill in or check per instance."""
        if not self.usable or tuple(fields) != self.names:
            raise _NeedsValidation
        if self.private is None or private.keys() != self.private.keys():
            raise _NeedsValidation
        instance = _new_object(self.model)
        _set_attribute(instance, "__dict__", fields)
        _set_attribute(instance, "__pydantic_fields_set__", set(fields))
        _set_attribute(instance, "__pydantic_extra__", None)
        _set_attribute(instance, "__pydantic_private__", private)
        return instance

    def build(self, values: JsonObject, private: JsonObject | None = None) -> _Model:
        """An instance with these field values and, if given, these private attribute values
        (names the model declares)."""
        if not self.usable:
            raise _NeedsValidation
        # The defaults' order is the declaration order; values replace them in place.
        fields = {**self.defaults, **values}
        if len(fields) != self.size:
            raise _NeedsValidation  # a value for a field this model does not have
        for name, make in self.fresh:
            if name not in values:
                fields[name] = make()
        instance = _new_object(self.model)
        # What BaseModel.model_construct sets, without its per-field loop.
        _set_attribute(instance, "__dict__", fields)
        _set_attribute(instance, "__pydantic_fields_set__", set(values))
        _set_attribute(instance, "__pydantic_extra__", None)
        if private is None:
            private_values = None if self.private is None else self.private.copy()
        elif self.private is not None and private.keys() <= self.private.keys():
            private_values = {**self.private, **private}
        else:
            raise _NeedsValidation  # a private attribute this model does not have
        _set_attribute(instance, "__pydantic_private__", private_values)
        return instance


# Event.model_post_init gives an event without id a new one; such events take the validating path.
_EVENT = _Blueprint(Event, also_harmless=("model_post_init",))
# Only non-empty requested_auth_configs are parsed; those take the validating path.
_ACTIONS = _Blueprint(EventActions, also_harmless=("_parse_auth_configs",))
_CONTENT = _Blueprint(types.Content)
_SESSION = _Blueprint(Session)
_PART = _Blueprint(types.Part)
_CALLS: dict[str, tuple[_Blueprint[Any], str]] = {
    "function_call": (_Blueprint(types.FunctionCall), "args"),
    "function_response": (_Blueprint(types.FunctionResponse), "response"),
}
# The other Part data messages: optional scalars named as in genai, some of them enums.
_SIMPLE: dict[str, tuple[_Blueprint[Any], dict[str, type[enum.Enum]]]] = {
    "inline_data": (_Blueprint(types.Blob), {}),
    "file_data": (_Blueprint(types.FileData), {}),
    "executable_code": (_Blueprint(types.ExecutableCode), {"language": types.Language}),
    "code_execution_result": (_Blueprint(types.CodeExecutionResult), {"outcome": types.Outcome}),
}


def _json_reader(annotation: Any) -> Callable[[Any], Any] | None:
    """How validation turns parsed JSON into a value of ``annotation``, for the shapes where that
    is plain: the value itself for int, str and bool, the member for an enum, item by item for a
    list, field by field for a model. None for any other annotation (bytes, floats, unions ...),
    and a reader refuses (``_NeedsValidation``) a value not exactly of its type."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, UnionType):
        if len(args) != 2 or type(None) not in args:
            return None
        inner = _json_reader(args[0] if args[1] is type(None) else args[1])
        return None if inner is None else functools.partial(_optional, inner)
    if annotation in (int, str, bool):
        return functools.partial(_exactly, annotation)
    if typing.get_origin(annotation) is list:
        item = _json_reader(args[0])
        return None if item is None else functools.partial(_items, item)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return functools.partial(_enum_member, annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _ModelReader.of(annotation)
    return None


def _optional(read: Callable[[Any], Any], value: Any) -> Any:
    return None if value is None else read(value)


def _exactly(kind: type, value: Any) -> Any:
    # Validation would convert (or refuse) 1.0 or True for an int, say; leave those to it.
    if type(value) is not kind:
        raise _NeedsValidation
    return value


def _items(read: Callable[[Any], Any], value: Any) -> list[Any]:
    if type(value) is not list:
        raise _NeedsValidation
    return [read(item) for item in value]


def _enum_member(kind: type[enum.Enum], value: Any) -> enum.Enum:
    if type(value) is not str:
        raise _NeedsValidation
    return _member(kind, value)


class _ModelReader:
    """Builds a genai model from its parsed JSON dump, field by field (``_json_reader``)."""

    _made: dict[type[BaseModel], _ModelReader] = {}

    @classmethod
    def of(cls, model: type[BaseModel]) -> _ModelReader:
        # One per model, and fields read lazily: genai models refer to each other in cycles.
        if model not in cls._made:
            cls._made[model] = cls(model)
        return cls._made[model]

    def __init__(self, model: type[BaseModel]) -> None:
        self.model = model
        self.blueprint = _Blueprint(model)
        self.fields: dict[str, Callable[[Any], Any] | None] = {}

    def __call__(self, data: Any) -> Any:
        if type(data) is not dict:
            raise _NeedsValidation
        values: JsonObject = {}
        for name, value in data.items():
            if name not in self.fields:
                field = self.model.model_fields.get(name)
                self.fields[name] = None if field is None else _json_reader(field.annotation)
            read = self.fields[name]
            if read is None:
                raise _NeedsValidation
            values[name] = read(value)
        return self.blueprint.build(values)


def _model_from_json(model: type[_Model], text: str) -> _Model:
    """``model.model_validate_json(text)``, built by ``_ModelReader`` when it can."""
    try:
        built: _Model = _ModelReader.of(model)(from_json(text))
    except _NeedsValidation:
        return model.model_validate_json(text)
    return built


# genai models held as JSON text (usage metadata is on most model responses).
_EVENT_MODELS: tuple[tuple[str, type[BaseModel]], ...] = (
    ("usage_metadata", types.GenerateContentResponseUsageMetadata),
    ("grounding_metadata", types.GroundingMetadata),
    ("citation_metadata", types.CitationMetadata),
)


def _member(kind: type[_Member], value: str) -> _Member:
    """The enum member whose value is ``value``; an unknown text is left to validation (genai
    enums then match case-insensitively or make a pseudo-member with a warning)."""
    member = kind._value2member_map_.get(value)
    if member is None:
        raise _NeedsValidation
    return member  # type: ignore[return-value]


# Event fields read by _built_event as they are. Each message is read with one ListFields()
# call, which names only the fields that are set: a HasField() or getattr() per field costs
# more than the rest of the event.
_EVENT_PLAIN = frozenset(("id", "invocation_id", "author", *_EVENT_OPTIONALS)) - {"finish_reason"}
_EVENT_MODEL_OF = dict(_EVENT_MODELS)
_ACTIONS_PLAIN = frozenset(_ACTIONS_OPTIONALS)


def _built_event(message: pb.Event) -> Event:
    # Strings always given (the empty ones are not listed).
    values: JsonObject = {"id": "", "invocation_id": "", "author": ""}
    for field, value in message.ListFields():
        name = field.name
        if name in _EVENT_PLAIN:
            values[name] = value
        elif name == "content":
            values["content"] = _built_content(value)
        elif name == "actions":
            values["actions"] = _built_actions(value)
        elif name == "timestamp":
            values["timestamp"] = timestamps.to_seconds(value)
        elif name == "sequence":
            continue
        elif name in _EVENT_MODEL_OF:
            values[name] = _model_from_json(_EVENT_MODEL_OF[name], value)
        elif name == "finish_reason":
            values["finish_reason"] = _member(types.FinishReason, value)
        elif name == "custom_metadata":
            values["custom_metadata"] = loads_object(value, "Event.custom_metadata")
        elif name == "long_running_tool_ids":
            values["long_running_tool_ids"] = set(value)
        else:
            # extra, or a field this version does not know.
            raise _NeedsValidation
    if not values["id"]:
        raise _NeedsValidation
    return _EVENT.build(values)


def _built_actions(message: pb.EventActions) -> EventActions:
    values: JsonObject = {
        "state_delta": {},
        "requested_auth_configs": {},
        "requested_tool_confirmations": {},
        "artifact_delta": {},
    }
    for field, value in message.ListFields():
        name = field.name
        if name == "state_delta":
            values["state_delta"] = loads_object(value, "EventActions.state_delta")
        elif name in _ACTIONS_PLAIN:
            values[name] = value
        elif name == "artifact_delta":
            values["artifact_delta"] = dict(value)
        elif name == "agent_state":
            values["agent_state"] = loads_object(value, "EventActions.agent_state")
        else:
            # extra, auth configs, tool confirmations, compaction, or a field unknown here.
            raise _NeedsValidation
    return _ACTIONS.build(values)


def _built_content(message: pb.Content) -> types.Content:
    values: JsonObject = {}
    if message.HasField("role"):
        values["role"] = message.role
    parts = message.parts
    if parts:
        values["parts"] = [_built_part(p) for p in parts]
    return _CONTENT.build(values)


def _built_part(message: pb.Part) -> types.Part:
    if message.extra:
        raise _NeedsValidation
    values: JsonObject = {}
    kind = message.WhichOneof("data")
    if kind == "text":
        values["text"] = message.text
    elif kind in _CALLS:
        blueprint, payload = _CALLS[kind]
        call = getattr(message, kind)
        if call.extra:
            raise _NeedsValidation
        call_values: JsonObject = {}
        _get_optionals(call, _CALL_OPTIONALS, call_values)
        _get_json(call, payload, call_values)
        values[kind] = blueprint.build(call_values)
    elif kind is not None:
        blueprint, enums = _SIMPLE[kind]
        simple_values: JsonObject = {}
        for field, value in getattr(message, kind).ListFields():
            enum_type = enums.get(field.name)
            simple_values[field.name] = value if enum_type is None else _member(enum_type, value)
        values[kind] = blueprint.build(simple_values)
    if message.HasField("thought"):
        values["thought"] = message.thought
    if message.HasField("thought_signature"):
        values["thought_signature"] = message.thought_signature
    return _PART.build(values)


# --------------------------------------------------------------------------------------------
# Field helpers


def _put(message: Message, data: JsonObject, name: str) -> None:
    """Sets a scalar field from ``data[name]`` if present and of the field's type."""
    if name not in data:
        return
    try:
        setattr(message, name, data[name])
    except (TypeError, ValueError):
        # Left unset, the value is carried by extra.
        message.ClearField(name)


def _get_optionals(message: Message, names: Iterable[str], data: JsonObject) -> None:
    for name in names:
        if message.HasField(name):
            data[name] = getattr(message, name)


def _put_json(message: Message, data: JsonObject, name: str) -> None:
    value = data.get(name)
    if isinstance(value, dict):
        setattr(message, name, dumps(value))


def _get_json(message: Message, name: str, data: JsonObject) -> None:
    text = getattr(message, name)
    if text:
        data[name] = loads_object(text, f"{type(message).__name__}.{name}")


def _set_extra(
    message: Any,
    data: JsonObject,
    read_back: Callable[[Any], JsonObject],
    where: str,
    defaults: JsonObject | None = None,
) -> None:
    """Stores in ``message.extra`` what the typed fields of ``message`` do not give back,
    leaving out untyped top-level values equal to the model's ``defaults``."""
    base = read_back(message)
    patch = _patch(data, base, where)
    if defaults:
        patch = {
            k: v
            for k, v in patch.items()
            if k in base or k not in defaults or not _json_equal(v, defaults[k])
        }
    if patch:
        message.extra = dumps(patch)


def _with_extra(data: JsonObject, extra: str, field: str) -> JsonObject:
    return _merge(data, loads_object(extra, field))


def _patch(target: JsonObject, base: JsonObject, where: str) -> JsonObject:
    """The smallest object that ``_merge`` turns ``base`` into ``target`` with."""
    invented = base.keys() - target.keys()
    if invented:
        # A merge can add and replace but not remove, so the typed read-back must never produce
        # a key the ADK dump lacks. Failing here beats storing a different event.
        raise RuntimeError(
            f"{where}: typed fields read back as {sorted(invented)}, which the event does not "
            "have; this is a bug in adk_grpc_services.mapping"
        )
    patch: JsonObject = {}
    for key, value in target.items():
        if key not in base:
            patch[key] = value
        elif isinstance(value, dict) and isinstance(base[key], dict):
            nested = _patch(value, base[key], f"{where}.{key}")
            if nested:
                patch[key] = nested
        elif not _json_equal(value, base[key]):
            patch[key] = value
    return patch


def _merge(base: JsonObject, patch: JsonObject) -> JsonObject:
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
    return base


def _json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON text: 1, 1.0 and true differ, and so do 0.0 and -0.0."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return bool(a.keys() == b.keys()) and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return bool(a.hex() == b.hex())
    return bool(a == b)


def _is_number(value: Any) -> bool:
    return type(value) in (int, float)


def _to_base64(data: bytes) -> str:
    # The form pydantic writes for genai and ADK bytes: URL-safe alphabet with padding.
    return base64.urlsafe_b64encode(data).decode("ascii")


def _from_base64(text: Any) -> bytes:
    if not isinstance(text, str):
        raise TypeError("base64 text expected")
    return base64.urlsafe_b64decode(text)


# --------------------------------------------------------------------------------------------
# The native builder (see the module docstring)


def _native_builder() -> Any:
    """``adk_grpc_services_native.Builder`` over this module's blueprints and helpers, or None
    where the module is not installed, is turned off, or does not fill these models (an ADK or
    genai whose models it does not know)."""
    if os.environ.get("ADK_GRPC_NATIVE", "1") == "0":
        return None
    try:
        import adk_grpc_services_native
    except ImportError:
        return None
    blueprints: dict[str, _Blueprint[Any]] = {
        "Event": _EVENT,
        "EventActions": _ACTIONS,
        "Content": _CONTENT,
        "Part": _PART,
        "FunctionCall": _CALLS["function_call"][0],
        "FunctionResponse": _CALLS["function_response"][0],
        "Blob": _SIMPLE["inline_data"][0],
        "FileData": _SIMPLE["file_data"][0],
        "ExecutableCode": _SIMPLE["executable_code"][0],
        "CodeExecutionResult": _SIMPLE["code_execution_result"][0],
        "Session": _SESSION,
    }
    # Default factories that are model classes (Event's node_info and actions): an instance
    # with no fields given is what validating nothing makes, when the model needs no validation.
    known = {blueprint.model: blueprint for blueprint in blueprints.values()}
    factories: dict[type[BaseModel], _Blueprint[Any]] = {}
    for blueprint in blueprints.values():
        for _, make in blueprint.fresh:
            if isinstance(make, type) and issubclass(make, BaseModel):
                made = known.get(make) or _Blueprint(make)
                if made.usable:
                    factories[make] = made
    try:
        return adk_grpc_services_native.Builder(
            blueprints=blueprints,
            factories=factories,
            from_json=from_json,
            model_from_json=_model_from_json,
            metadata_models=(
                _EVENT_MODEL_OF["usage_metadata"],
                _EVENT_MODEL_OF["grounding_metadata"],
                _EVENT_MODEL_OF["citation_metadata"],
            ),
            finish_reasons=types.FinishReason._value2member_map_,
            languages=types.Language._value2member_map_,
            outcomes=types.Outcome._value2member_map_,
        )
    except ValueError as e:
        logging.getLogger(__name__).warning(
            "adk_grpc_services_native cannot build this ADK's sessions (%s); "
            "reading them without it",
            e,
        )
        return None


_NATIVE = _native_builder()
