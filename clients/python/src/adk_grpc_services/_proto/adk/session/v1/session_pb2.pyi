import datetime

from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import empty_pb2 as _empty_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SessionOrder(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SESSION_ORDER_UNSPECIFIED: _ClassVar[SessionOrder]
    SESSION_ORDER_OLDEST_FIRST: _ClassVar[SessionOrder]
    SESSION_ORDER_NEWEST_FIRST: _ClassVar[SessionOrder]
SESSION_ORDER_UNSPECIFIED: SessionOrder
SESSION_ORDER_OLDEST_FIRST: SessionOrder
SESSION_ORDER_NEWEST_FIRST: SessionOrder

class Session(_message.Message):
    __slots__ = ("id", "app_name", "user_id", "state", "events", "create_time", "last_update_time", "last_sequence", "expire_time")
    ID_FIELD_NUMBER: _ClassVar[int]
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    id: str
    app_name: str
    user_id: str
    state: str
    events: _containers.RepeatedCompositeFieldContainer[Event]
    create_time: _timestamp_pb2.Timestamp
    last_update_time: _timestamp_pb2.Timestamp
    last_sequence: int
    expire_time: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., app_name: _Optional[str] = ..., user_id: _Optional[str] = ..., state: _Optional[str] = ..., events: _Optional[_Iterable[_Union[Event, _Mapping]]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., last_sequence: _Optional[int] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class Event(_message.Message):
    __slots__ = ("id", "invocation_id", "author", "content", "actions", "branch", "timestamp", "partial", "turn_complete", "error_code", "error_message", "interrupted", "long_running_tool_ids", "custom_metadata", "usage_metadata", "grounding_metadata", "citation_metadata", "model_version", "finish_reason", "sequence", "extra")
    ID_FIELD_NUMBER: _ClassVar[int]
    INVOCATION_ID_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    ACTIONS_FIELD_NUMBER: _ClassVar[int]
    BRANCH_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_FIELD_NUMBER: _ClassVar[int]
    TURN_COMPLETE_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    INTERRUPTED_FIELD_NUMBER: _ClassVar[int]
    LONG_RUNNING_TOOL_IDS_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_METADATA_FIELD_NUMBER: _ClassVar[int]
    USAGE_METADATA_FIELD_NUMBER: _ClassVar[int]
    GROUNDING_METADATA_FIELD_NUMBER: _ClassVar[int]
    CITATION_METADATA_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    id: str
    invocation_id: str
    author: str
    content: Content
    actions: EventActions
    branch: str
    timestamp: _timestamp_pb2.Timestamp
    partial: bool
    turn_complete: bool
    error_code: str
    error_message: str
    interrupted: bool
    long_running_tool_ids: _containers.RepeatedScalarFieldContainer[str]
    custom_metadata: str
    usage_metadata: str
    grounding_metadata: str
    citation_metadata: str
    model_version: str
    finish_reason: str
    sequence: int
    extra: str
    def __init__(self, id: _Optional[str] = ..., invocation_id: _Optional[str] = ..., author: _Optional[str] = ..., content: _Optional[_Union[Content, _Mapping]] = ..., actions: _Optional[_Union[EventActions, _Mapping]] = ..., branch: _Optional[str] = ..., timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., partial: _Optional[bool] = ..., turn_complete: _Optional[bool] = ..., error_code: _Optional[str] = ..., error_message: _Optional[str] = ..., interrupted: _Optional[bool] = ..., long_running_tool_ids: _Optional[_Iterable[str]] = ..., custom_metadata: _Optional[str] = ..., usage_metadata: _Optional[str] = ..., grounding_metadata: _Optional[str] = ..., citation_metadata: _Optional[str] = ..., model_version: _Optional[str] = ..., finish_reason: _Optional[str] = ..., sequence: _Optional[int] = ..., extra: _Optional[str] = ...) -> None: ...

class Content(_message.Message):
    __slots__ = ("role", "parts")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    role: str
    parts: _containers.RepeatedCompositeFieldContainer[Part]
    def __init__(self, role: _Optional[str] = ..., parts: _Optional[_Iterable[_Union[Part, _Mapping]]] = ...) -> None: ...

class Part(_message.Message):
    __slots__ = ("text", "inline_data", "file_data", "function_call", "function_response", "executable_code", "code_execution_result", "thought", "thought_signature", "extra")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    INLINE_DATA_FIELD_NUMBER: _ClassVar[int]
    FILE_DATA_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_CALL_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    EXECUTABLE_CODE_FIELD_NUMBER: _ClassVar[int]
    CODE_EXECUTION_RESULT_FIELD_NUMBER: _ClassVar[int]
    THOUGHT_FIELD_NUMBER: _ClassVar[int]
    THOUGHT_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    text: str
    inline_data: Blob
    file_data: FileData
    function_call: FunctionCall
    function_response: FunctionResponse
    executable_code: ExecutableCode
    code_execution_result: CodeExecutionResult
    thought: bool
    thought_signature: bytes
    extra: str
    def __init__(self, text: _Optional[str] = ..., inline_data: _Optional[_Union[Blob, _Mapping]] = ..., file_data: _Optional[_Union[FileData, _Mapping]] = ..., function_call: _Optional[_Union[FunctionCall, _Mapping]] = ..., function_response: _Optional[_Union[FunctionResponse, _Mapping]] = ..., executable_code: _Optional[_Union[ExecutableCode, _Mapping]] = ..., code_execution_result: _Optional[_Union[CodeExecutionResult, _Mapping]] = ..., thought: _Optional[bool] = ..., thought_signature: _Optional[bytes] = ..., extra: _Optional[str] = ...) -> None: ...

class Blob(_message.Message):
    __slots__ = ("data", "mime_type", "display_name")
    DATA_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    mime_type: str
    display_name: str
    def __init__(self, data: _Optional[bytes] = ..., mime_type: _Optional[str] = ..., display_name: _Optional[str] = ...) -> None: ...

class FileData(_message.Message):
    __slots__ = ("file_uri", "mime_type", "display_name")
    FILE_URI_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    file_uri: str
    mime_type: str
    display_name: str
    def __init__(self, file_uri: _Optional[str] = ..., mime_type: _Optional[str] = ..., display_name: _Optional[str] = ...) -> None: ...

class FunctionCall(_message.Message):
    __slots__ = ("id", "name", "args", "will_continue", "extra")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    WILL_CONTINUE_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    args: str
    will_continue: bool
    extra: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., args: _Optional[str] = ..., will_continue: _Optional[bool] = ..., extra: _Optional[str] = ...) -> None: ...

class FunctionResponse(_message.Message):
    __slots__ = ("id", "name", "response", "will_continue", "extra")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    RESPONSE_FIELD_NUMBER: _ClassVar[int]
    WILL_CONTINUE_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    response: str
    will_continue: bool
    extra: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., response: _Optional[str] = ..., will_continue: _Optional[bool] = ..., extra: _Optional[str] = ...) -> None: ...

class ExecutableCode(_message.Message):
    __slots__ = ("code", "language", "id")
    CODE_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    code: str
    language: str
    id: str
    def __init__(self, code: _Optional[str] = ..., language: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class CodeExecutionResult(_message.Message):
    __slots__ = ("outcome", "output", "id")
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    outcome: str
    output: str
    id: str
    def __init__(self, outcome: _Optional[str] = ..., output: _Optional[str] = ..., id: _Optional[str] = ...) -> None: ...

class EventActions(_message.Message):
    __slots__ = ("skip_summarization", "state_delta", "artifact_delta", "transfer_to_agent", "transfer_reason", "escalate", "requested_auth_configs", "requested_tool_confirmations", "compaction", "end_of_agent", "agent_state", "rewind_before_invocation_id", "extra", "removed_state_keys")
    class ArtifactDeltaEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    SKIP_SUMMARIZATION_FIELD_NUMBER: _ClassVar[int]
    STATE_DELTA_FIELD_NUMBER: _ClassVar[int]
    ARTIFACT_DELTA_FIELD_NUMBER: _ClassVar[int]
    TRANSFER_TO_AGENT_FIELD_NUMBER: _ClassVar[int]
    TRANSFER_REASON_FIELD_NUMBER: _ClassVar[int]
    ESCALATE_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_AUTH_CONFIGS_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_TOOL_CONFIRMATIONS_FIELD_NUMBER: _ClassVar[int]
    COMPACTION_FIELD_NUMBER: _ClassVar[int]
    END_OF_AGENT_FIELD_NUMBER: _ClassVar[int]
    AGENT_STATE_FIELD_NUMBER: _ClassVar[int]
    REWIND_BEFORE_INVOCATION_ID_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    REMOVED_STATE_KEYS_FIELD_NUMBER: _ClassVar[int]
    skip_summarization: bool
    state_delta: str
    artifact_delta: _containers.ScalarMap[str, int]
    transfer_to_agent: str
    transfer_reason: str
    escalate: bool
    requested_auth_configs: str
    requested_tool_confirmations: str
    compaction: EventCompaction
    end_of_agent: bool
    agent_state: str
    rewind_before_invocation_id: str
    extra: str
    removed_state_keys: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, skip_summarization: _Optional[bool] = ..., state_delta: _Optional[str] = ..., artifact_delta: _Optional[_Mapping[str, int]] = ..., transfer_to_agent: _Optional[str] = ..., transfer_reason: _Optional[str] = ..., escalate: _Optional[bool] = ..., requested_auth_configs: _Optional[str] = ..., requested_tool_confirmations: _Optional[str] = ..., compaction: _Optional[_Union[EventCompaction, _Mapping]] = ..., end_of_agent: _Optional[bool] = ..., agent_state: _Optional[str] = ..., rewind_before_invocation_id: _Optional[str] = ..., extra: _Optional[str] = ..., removed_state_keys: _Optional[_Iterable[str]] = ...) -> None: ...

class EventCompaction(_message.Message):
    __slots__ = ("start_timestamp", "end_timestamp", "compacted_content")
    START_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    END_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    COMPACTED_CONTENT_FIELD_NUMBER: _ClassVar[int]
    start_timestamp: _timestamp_pb2.Timestamp
    end_timestamp: _timestamp_pb2.Timestamp
    compacted_content: Content
    def __init__(self, start_timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., compacted_content: _Optional[_Union[Content, _Mapping]] = ...) -> None: ...

class CreateSessionRequest(_message.Message):
    __slots__ = ("app_name", "user_id", "session_id", "state", "ttl", "expire_time")
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    EXPIRE_TIME_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    user_id: str
    session_id: str
    state: str
    ttl: _duration_pb2.Duration
    expire_time: _timestamp_pb2.Timestamp
    def __init__(self, app_name: _Optional[str] = ..., user_id: _Optional[str] = ..., session_id: _Optional[str] = ..., state: _Optional[str] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., expire_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetSessionRequest(_message.Message):
    __slots__ = ("app_name", "user_id", "session_id", "num_recent_events", "after_timestamp", "max_reply_event_bytes")
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    NUM_RECENT_EVENTS_FIELD_NUMBER: _ClassVar[int]
    AFTER_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    MAX_REPLY_EVENT_BYTES_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    user_id: str
    session_id: str
    num_recent_events: int
    after_timestamp: _timestamp_pb2.Timestamp
    max_reply_event_bytes: int
    def __init__(self, app_name: _Optional[str] = ..., user_id: _Optional[str] = ..., session_id: _Optional[str] = ..., num_recent_events: _Optional[int] = ..., after_timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., max_reply_event_bytes: _Optional[int] = ...) -> None: ...

class ListSessionsRequest(_message.Message):
    __slots__ = ("app_name", "user_id", "page_size", "page_token", "order", "offset", "include_total_size")
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ORDER_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    user_id: str
    page_size: int
    page_token: str
    order: SessionOrder
    offset: int
    include_total_size: bool
    def __init__(self, app_name: _Optional[str] = ..., user_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., order: _Optional[_Union[SessionOrder, str]] = ..., offset: _Optional[int] = ..., include_total_size: _Optional[bool] = ...) -> None: ...

class ListSessionsResponse(_message.Message):
    __slots__ = ("sessions", "next_page_token", "total_size")
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    sessions: _containers.RepeatedCompositeFieldContainer[Session]
    next_page_token: str
    total_size: int
    def __init__(self, sessions: _Optional[_Iterable[_Union[Session, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_size: _Optional[int] = ...) -> None: ...

class DeleteSessionRequest(_message.Message):
    __slots__ = ("app_name", "user_id", "session_id")
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    user_id: str
    session_id: str
    def __init__(self, app_name: _Optional[str] = ..., user_id: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class AppendEventRequest(_message.Message):
    __slots__ = ("app_name", "user_id", "session_id", "event", "expected_last_sequence")
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    user_id: str
    session_id: str
    event: Event
    expected_last_sequence: int
    def __init__(self, app_name: _Optional[str] = ..., user_id: _Optional[str] = ..., session_id: _Optional[str] = ..., event: _Optional[_Union[Event, _Mapping]] = ..., expected_last_sequence: _Optional[int] = ...) -> None: ...

class AppendEventResponse(_message.Message):
    __slots__ = ("event", "last_sequence", "last_update_time", "code", "message")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    LAST_UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    event: Event
    last_sequence: int
    last_update_time: _timestamp_pb2.Timestamp
    code: int
    message: str
    def __init__(self, event: _Optional[_Union[Event, _Mapping]] = ..., last_sequence: _Optional[int] = ..., last_update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., code: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class ListEventsRequest(_message.Message):
    __slots__ = ("app_name", "user_id", "session_id", "after_sequence", "page_size", "page_token", "max_reply_event_bytes")
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    MAX_REPLY_EVENT_BYTES_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    user_id: str
    session_id: str
    after_sequence: int
    page_size: int
    page_token: str
    max_reply_event_bytes: int
    def __init__(self, app_name: _Optional[str] = ..., user_id: _Optional[str] = ..., session_id: _Optional[str] = ..., after_sequence: _Optional[int] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., max_reply_event_bytes: _Optional[int] = ...) -> None: ...

class ListEventsResponse(_message.Message):
    __slots__ = ("events", "next_page_token")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[Event]
    next_page_token: str
    def __init__(self, events: _Optional[_Iterable[_Union[Event, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class WatchSessionRequest(_message.Message):
    __slots__ = ("app_name", "user_id", "session_id", "after_sequence", "include_partial")
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_PARTIAL_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    user_id: str
    session_id: str
    after_sequence: int
    include_partial: bool
    def __init__(self, app_name: _Optional[str] = ..., user_id: _Optional[str] = ..., session_id: _Optional[str] = ..., after_sequence: _Optional[int] = ..., include_partial: _Optional[bool] = ...) -> None: ...

class WatchSessionResponse(_message.Message):
    __slots__ = ("event", "deleted")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    event: Event
    deleted: SessionDeleted
    def __init__(self, event: _Optional[_Union[Event, _Mapping]] = ..., deleted: _Optional[_Union[SessionDeleted, _Mapping]] = ...) -> None: ...

class SessionDeleted(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WatchEventsRequest(_message.Message):
    __slots__ = ("app_name", "user_id", "cursor")
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    user_id: str
    cursor: str
    def __init__(self, app_name: _Optional[str] = ..., user_id: _Optional[str] = ..., cursor: _Optional[str] = ...) -> None: ...

class WatchEventsResponse(_message.Message):
    __slots__ = ("user_id", "session_id", "event", "cursor")
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    CURSOR_FIELD_NUMBER: _ClassVar[int]
    user_id: str
    session_id: str
    event: Event
    cursor: str
    def __init__(self, user_id: _Optional[str] = ..., session_id: _Optional[str] = ..., event: _Optional[_Union[Event, _Mapping]] = ..., cursor: _Optional[str] = ...) -> None: ...

class GetUserStateRequest(_message.Message):
    __slots__ = ("app_name", "user_id")
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    user_id: str
    def __init__(self, app_name: _Optional[str] = ..., user_id: _Optional[str] = ...) -> None: ...

class GetAppStateRequest(_message.Message):
    __slots__ = ("app_name",)
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    def __init__(self, app_name: _Optional[str] = ...) -> None: ...

class ListAppsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListAppsResponse(_message.Message):
    __slots__ = ("app_names",)
    APP_NAMES_FIELD_NUMBER: _ClassVar[int]
    app_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, app_names: _Optional[_Iterable[str]] = ...) -> None: ...

class StateResponse(_message.Message):
    __slots__ = ("state",)
    STATE_FIELD_NUMBER: _ClassVar[int]
    state: str
    def __init__(self, state: _Optional[str] = ...) -> None: ...
