import datetime

from adk_grpc_services._proto.adk.session.v1 import session_pb2 as _session_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MetadataOperator(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    METADATA_OPERATOR_UNSPECIFIED: _ClassVar[MetadataOperator]
    METADATA_OPERATOR_EQUAL: _ClassVar[MetadataOperator]
    METADATA_OPERATOR_NOT_EQUAL: _ClassVar[MetadataOperator]
    METADATA_OPERATOR_LESS: _ClassVar[MetadataOperator]
    METADATA_OPERATOR_LESS_OR_EQUAL: _ClassVar[MetadataOperator]
    METADATA_OPERATOR_GREATER: _ClassVar[MetadataOperator]
    METADATA_OPERATOR_GREATER_OR_EQUAL: _ClassVar[MetadataOperator]
    METADATA_OPERATOR_EXISTS: _ClassVar[MetadataOperator]

class MemoryKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MEMORY_KIND_UNSPECIFIED: _ClassVar[MemoryKind]
    MEMORY_KIND_RAW: _ClassVar[MemoryKind]
    MEMORY_KIND_GENERATED: _ClassVar[MemoryKind]

class SearchMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEARCH_MODE_UNSPECIFIED: _ClassVar[SearchMode]
    SEARCH_MODE_KEYWORD: _ClassVar[SearchMode]
    SEARCH_MODE_SEMANTIC: _ClassVar[SearchMode]
    SEARCH_MODE_HYBRID: _ClassVar[SearchMode]

class GenerationState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    GENERATION_STATE_UNSPECIFIED: _ClassVar[GenerationState]
    GENERATION_STATE_PENDING: _ClassVar[GenerationState]
    GENERATION_STATE_RUNNING: _ClassVar[GenerationState]
    GENERATION_STATE_SUCCEEDED: _ClassVar[GenerationState]
    GENERATION_STATE_FAILED: _ClassVar[GenerationState]

class RevisionAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    REVISION_ACTION_UNSPECIFIED: _ClassVar[RevisionAction]
    REVISION_ACTION_ADDED: _ClassVar[RevisionAction]
    REVISION_ACTION_UPDATED: _ClassVar[RevisionAction]
    REVISION_ACTION_DELETED: _ClassVar[RevisionAction]
    REVISION_ACTION_ROLLED_BACK: _ClassVar[RevisionAction]
    REVISION_ACTION_INVALIDATED: _ClassVar[RevisionAction]
METADATA_OPERATOR_UNSPECIFIED: MetadataOperator
METADATA_OPERATOR_EQUAL: MetadataOperator
METADATA_OPERATOR_NOT_EQUAL: MetadataOperator
METADATA_OPERATOR_LESS: MetadataOperator
METADATA_OPERATOR_LESS_OR_EQUAL: MetadataOperator
METADATA_OPERATOR_GREATER: MetadataOperator
METADATA_OPERATOR_GREATER_OR_EQUAL: MetadataOperator
METADATA_OPERATOR_EXISTS: MetadataOperator
MEMORY_KIND_UNSPECIFIED: MemoryKind
MEMORY_KIND_RAW: MemoryKind
MEMORY_KIND_GENERATED: MemoryKind
SEARCH_MODE_UNSPECIFIED: SearchMode
SEARCH_MODE_KEYWORD: SearchMode
SEARCH_MODE_SEMANTIC: SearchMode
SEARCH_MODE_HYBRID: SearchMode
GENERATION_STATE_UNSPECIFIED: GenerationState
GENERATION_STATE_PENDING: GenerationState
GENERATION_STATE_RUNNING: GenerationState
GENERATION_STATE_SUCCEEDED: GenerationState
GENERATION_STATE_FAILED: GenerationState
REVISION_ACTION_UNSPECIFIED: RevisionAction
REVISION_ACTION_ADDED: RevisionAction
REVISION_ACTION_UPDATED: RevisionAction
REVISION_ACTION_DELETED: RevisionAction
REVISION_ACTION_ROLLED_BACK: RevisionAction
REVISION_ACTION_INVALIDATED: RevisionAction

class MemoryEntry(_message.Message):
    __slots__ = ("id", "content", "author", "timestamp", "custom_metadata", "session_id", "score", "valid_from", "invalid_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_METADATA_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    INVALID_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    content: _session_pb2.Content
    author: str
    timestamp: _timestamp_pb2.Timestamp
    custom_metadata: str
    session_id: str
    score: float
    valid_from: _timestamp_pb2.Timestamp
    invalid_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., content: _Optional[_Union[_session_pb2.Content, _Mapping]] = ..., author: _Optional[str] = ..., timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., custom_metadata: _Optional[str] = ..., session_id: _Optional[str] = ..., score: _Optional[float] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., invalid_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SessionRef(_message.Message):
    __slots__ = ("app_name", "user_id", "session_id")
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    user_id: str
    session_id: str
    def __init__(self, app_name: _Optional[str] = ..., user_id: _Optional[str] = ..., session_id: _Optional[str] = ...) -> None: ...

class AddSessionToMemoryRequest(_message.Message):
    __slots__ = ("session", "session_ref", "generate")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    SESSION_REF_FIELD_NUMBER: _ClassVar[int]
    GENERATE_FIELD_NUMBER: _ClassVar[int]
    session: _session_pb2.Session
    session_ref: SessionRef
    generate: GenerateOptions
    def __init__(self, session: _Optional[_Union[_session_pb2.Session, _Mapping]] = ..., session_ref: _Optional[_Union[SessionRef, _Mapping]] = ..., generate: _Optional[_Union[GenerateOptions, _Mapping]] = ...) -> None: ...

class AddSessionToMemoryResponse(_message.Message):
    __slots__ = ("entries", "generation")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    entries: int
    generation: GenerationJob
    def __init__(self, entries: _Optional[int] = ..., generation: _Optional[_Union[GenerationJob, _Mapping]] = ...) -> None: ...

class AddEventsToMemoryRequest(_message.Message):
    __slots__ = ("app_name", "user_id", "session_id", "events", "custom_metadata")
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_METADATA_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    user_id: str
    session_id: str
    events: _containers.RepeatedCompositeFieldContainer[_session_pb2.Event]
    custom_metadata: str
    def __init__(self, app_name: _Optional[str] = ..., user_id: _Optional[str] = ..., session_id: _Optional[str] = ..., events: _Optional[_Iterable[_Union[_session_pb2.Event, _Mapping]]] = ..., custom_metadata: _Optional[str] = ...) -> None: ...

class AddEventsToMemoryResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: int
    def __init__(self, entries: _Optional[int] = ...) -> None: ...

class AddMemoryRequest(_message.Message):
    __slots__ = ("app_name", "user_id", "memories", "custom_metadata")
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_METADATA_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    user_id: str
    memories: _containers.RepeatedCompositeFieldContainer[MemoryEntry]
    custom_metadata: str
    def __init__(self, app_name: _Optional[str] = ..., user_id: _Optional[str] = ..., memories: _Optional[_Iterable[_Union[MemoryEntry, _Mapping]]] = ..., custom_metadata: _Optional[str] = ...) -> None: ...

class AddMemoryResponse(_message.Message):
    __slots__ = ("ids",)
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, ids: _Optional[_Iterable[str]] = ...) -> None: ...

class SearchMemoryRequest(_message.Message):
    __slots__ = ("app_name", "user_id", "query", "limit", "after_timestamp", "before_timestamp", "author", "language", "mode", "kind", "filter", "as_of", "include_superseded")
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    AFTER_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    BEFORE_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_SUPERSEDED_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    user_id: str
    query: str
    limit: int
    after_timestamp: _timestamp_pb2.Timestamp
    before_timestamp: _timestamp_pb2.Timestamp
    author: str
    language: str
    mode: SearchMode
    kind: MemoryKind
    filter: MemoryFilter
    as_of: _timestamp_pb2.Timestamp
    include_superseded: bool
    def __init__(self, app_name: _Optional[str] = ..., user_id: _Optional[str] = ..., query: _Optional[str] = ..., limit: _Optional[int] = ..., after_timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., before_timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., author: _Optional[str] = ..., language: _Optional[str] = ..., mode: _Optional[_Union[SearchMode, str]] = ..., kind: _Optional[_Union[MemoryKind, str]] = ..., filter: _Optional[_Union[MemoryFilter, _Mapping]] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., include_superseded: _Optional[bool] = ...) -> None: ...

class MemoryFilter(_message.Message):
    __slots__ = ("any_of", "topics")
    ANY_OF_FIELD_NUMBER: _ClassVar[int]
    TOPICS_FIELD_NUMBER: _ClassVar[int]
    any_of: _containers.RepeatedCompositeFieldContainer[MetadataConditions]
    topics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, any_of: _Optional[_Iterable[_Union[MetadataConditions, _Mapping]]] = ..., topics: _Optional[_Iterable[str]] = ...) -> None: ...

class MetadataConditions(_message.Message):
    __slots__ = ("all_of",)
    ALL_OF_FIELD_NUMBER: _ClassVar[int]
    all_of: _containers.RepeatedCompositeFieldContainer[MetadataCondition]
    def __init__(self, all_of: _Optional[_Iterable[_Union[MetadataCondition, _Mapping]]] = ...) -> None: ...

class MetadataCondition(_message.Message):
    __slots__ = ("key", "operator", "string_value", "number_value", "bool_value", "time_value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    OPERATOR_FIELD_NUMBER: _ClassVar[int]
    STRING_VALUE_FIELD_NUMBER: _ClassVar[int]
    NUMBER_VALUE_FIELD_NUMBER: _ClassVar[int]
    BOOL_VALUE_FIELD_NUMBER: _ClassVar[int]
    TIME_VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    operator: MetadataOperator
    string_value: str
    number_value: float
    bool_value: bool
    time_value: _timestamp_pb2.Timestamp
    def __init__(self, key: _Optional[str] = ..., operator: _Optional[_Union[MetadataOperator, str]] = ..., string_value: _Optional[str] = ..., number_value: _Optional[float] = ..., bool_value: _Optional[bool] = ..., time_value: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SearchMemoryResponse(_message.Message):
    __slots__ = ("memories",)
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[MemoryEntry]
    def __init__(self, memories: _Optional[_Iterable[_Union[MemoryEntry, _Mapping]]] = ...) -> None: ...

class DeleteMemoryRequest(_message.Message):
    __slots__ = ("app_name", "user_id", "memory_id", "session_id", "all")
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ALL_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    user_id: str
    memory_id: str
    session_id: str
    all: bool
    def __init__(self, app_name: _Optional[str] = ..., user_id: _Optional[str] = ..., memory_id: _Optional[str] = ..., session_id: _Optional[str] = ..., all: _Optional[bool] = ...) -> None: ...

class DeleteMemoryResponse(_message.Message):
    __slots__ = ("deleted",)
    DELETED_FIELD_NUMBER: _ClassVar[int]
    deleted: int
    def __init__(self, deleted: _Optional[int] = ...) -> None: ...

class ListMemoriesRequest(_message.Message):
    __slots__ = ("app_name", "user_id", "page_size", "page_token", "kind", "filter", "after_timestamp", "before_timestamp", "author", "as_of", "include_superseded")
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    AFTER_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    BEFORE_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_SUPERSEDED_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    user_id: str
    page_size: int
    page_token: str
    kind: MemoryKind
    filter: MemoryFilter
    after_timestamp: _timestamp_pb2.Timestamp
    before_timestamp: _timestamp_pb2.Timestamp
    author: str
    as_of: _timestamp_pb2.Timestamp
    include_superseded: bool
    def __init__(self, app_name: _Optional[str] = ..., user_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., kind: _Optional[_Union[MemoryKind, str]] = ..., filter: _Optional[_Union[MemoryFilter, _Mapping]] = ..., after_timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., before_timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., author: _Optional[str] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., include_superseded: _Optional[bool] = ...) -> None: ...

class ListMemoriesResponse(_message.Message):
    __slots__ = ("memories", "next_page_token")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[MemoryEntry]
    next_page_token: str
    def __init__(self, memories: _Optional[_Iterable[_Union[MemoryEntry, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GenerateOptions(_message.Message):
    __slots__ = ("wait", "disable_consolidation", "ttl", "allowed_topics")
    WAIT_FIELD_NUMBER: _ClassVar[int]
    DISABLE_CONSOLIDATION_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    ALLOWED_TOPICS_FIELD_NUMBER: _ClassVar[int]
    wait: bool
    disable_consolidation: bool
    ttl: _duration_pb2.Duration
    allowed_topics: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, wait: _Optional[bool] = ..., disable_consolidation: _Optional[bool] = ..., ttl: _Optional[_Union[datetime.timedelta, _duration_pb2.Duration, _Mapping]] = ..., allowed_topics: _Optional[_Iterable[str]] = ...) -> None: ...

class EventList(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_session_pb2.Event]
    def __init__(self, events: _Optional[_Iterable[_Union[_session_pb2.Event, _Mapping]]] = ...) -> None: ...

class ExtractedFact(_message.Message):
    __slots__ = ("text", "topic", "custom_metadata", "valid_from")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOPIC_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_METADATA_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    text: str
    topic: str
    custom_metadata: str
    valid_from: _timestamp_pb2.Timestamp
    def __init__(self, text: _Optional[str] = ..., topic: _Optional[str] = ..., custom_metadata: _Optional[str] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class FactList(_message.Message):
    __slots__ = ("facts",)
    FACTS_FIELD_NUMBER: _ClassVar[int]
    facts: _containers.RepeatedCompositeFieldContainer[ExtractedFact]
    def __init__(self, facts: _Optional[_Iterable[_Union[ExtractedFact, _Mapping]]] = ...) -> None: ...

class GenerateMemoriesRequest(_message.Message):
    __slots__ = ("app_name", "user_id", "session", "session_ref", "events", "facts", "options")
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_FIELD_NUMBER: _ClassVar[int]
    SESSION_REF_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    FACTS_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    user_id: str
    session: _session_pb2.Session
    session_ref: SessionRef
    events: EventList
    facts: FactList
    options: GenerateOptions
    def __init__(self, app_name: _Optional[str] = ..., user_id: _Optional[str] = ..., session: _Optional[_Union[_session_pb2.Session, _Mapping]] = ..., session_ref: _Optional[_Union[SessionRef, _Mapping]] = ..., events: _Optional[_Union[EventList, _Mapping]] = ..., facts: _Optional[_Union[FactList, _Mapping]] = ..., options: _Optional[_Union[GenerateOptions, _Mapping]] = ...) -> None: ...

class GenerateMemoriesResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: GenerationJob
    def __init__(self, job: _Optional[_Union[GenerationJob, _Mapping]] = ...) -> None: ...

class GenerationJob(_message.Message):
    __slots__ = ("id", "app_name", "user_id", "state", "attempts", "error", "create_time", "update_time", "added", "updated", "deleted", "kept", "invalidated")
    ID_FIELD_NUMBER: _ClassVar[int]
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TIME_FIELD_NUMBER: _ClassVar[int]
    ADDED_FIELD_NUMBER: _ClassVar[int]
    UPDATED_FIELD_NUMBER: _ClassVar[int]
    DELETED_FIELD_NUMBER: _ClassVar[int]
    KEPT_FIELD_NUMBER: _ClassVar[int]
    INVALIDATED_FIELD_NUMBER: _ClassVar[int]
    id: str
    app_name: str
    user_id: str
    state: GenerationState
    attempts: int
    error: str
    create_time: _timestamp_pb2.Timestamp
    update_time: _timestamp_pb2.Timestamp
    added: int
    updated: int
    deleted: int
    kept: int
    invalidated: int
    def __init__(self, id: _Optional[str] = ..., app_name: _Optional[str] = ..., user_id: _Optional[str] = ..., state: _Optional[_Union[GenerationState, str]] = ..., attempts: _Optional[int] = ..., error: _Optional[str] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., update_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., added: _Optional[int] = ..., updated: _Optional[int] = ..., deleted: _Optional[int] = ..., kept: _Optional[int] = ..., invalidated: _Optional[int] = ...) -> None: ...

class GetGenerationJobRequest(_message.Message):
    __slots__ = ("app_name", "user_id", "job_id")
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    user_id: str
    job_id: str
    def __init__(self, app_name: _Optional[str] = ..., user_id: _Optional[str] = ..., job_id: _Optional[str] = ...) -> None: ...

class MemoryRevision(_message.Message):
    __slots__ = ("memory_id", "action", "previous_fact", "new_fact", "source_event_ids", "create_time", "job_id", "revision_id", "restored_revision_id", "valid_from", "invalid_at", "superseded_by")
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_FACT_FIELD_NUMBER: _ClassVar[int]
    NEW_FACT_FIELD_NUMBER: _ClassVar[int]
    SOURCE_EVENT_IDS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TIME_FIELD_NUMBER: _ClassVar[int]
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REVISION_ID_FIELD_NUMBER: _ClassVar[int]
    RESTORED_REVISION_ID_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    INVALID_AT_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_BY_FIELD_NUMBER: _ClassVar[int]
    memory_id: str
    action: RevisionAction
    previous_fact: str
    new_fact: str
    source_event_ids: _containers.RepeatedScalarFieldContainer[str]
    create_time: _timestamp_pb2.Timestamp
    job_id: str
    revision_id: str
    restored_revision_id: str
    valid_from: _timestamp_pb2.Timestamp
    invalid_at: _timestamp_pb2.Timestamp
    superseded_by: str
    def __init__(self, memory_id: _Optional[str] = ..., action: _Optional[_Union[RevisionAction, str]] = ..., previous_fact: _Optional[str] = ..., new_fact: _Optional[str] = ..., source_event_ids: _Optional[_Iterable[str]] = ..., create_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., job_id: _Optional[str] = ..., revision_id: _Optional[str] = ..., restored_revision_id: _Optional[str] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., invalid_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., superseded_by: _Optional[str] = ...) -> None: ...

class ListMemoryRevisionsRequest(_message.Message):
    __slots__ = ("app_name", "user_id", "memory_id", "page_size", "page_token")
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    user_id: str
    memory_id: str
    page_size: int
    page_token: str
    def __init__(self, app_name: _Optional[str] = ..., user_id: _Optional[str] = ..., memory_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListMemoryRevisionsResponse(_message.Message):
    __slots__ = ("revisions", "next_page_token")
    REVISIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    revisions: _containers.RepeatedCompositeFieldContainer[MemoryRevision]
    next_page_token: str
    def __init__(self, revisions: _Optional[_Iterable[_Union[MemoryRevision, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class RollbackMemoryRequest(_message.Message):
    __slots__ = ("app_name", "user_id", "memory_id", "revision_id")
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    REVISION_ID_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    user_id: str
    memory_id: str
    revision_id: str
    def __init__(self, app_name: _Optional[str] = ..., user_id: _Optional[str] = ..., memory_id: _Optional[str] = ..., revision_id: _Optional[str] = ...) -> None: ...

class RollbackMemoryResponse(_message.Message):
    __slots__ = ("revision",)
    REVISION_FIELD_NUMBER: _ClassVar[int]
    revision: MemoryRevision
    def __init__(self, revision: _Optional[_Union[MemoryRevision, _Mapping]] = ...) -> None: ...

class PurgeMemoriesRequest(_message.Message):
    __slots__ = ("app_name", "user_id", "filter", "kind", "author", "after_timestamp", "before_timestamp", "force")
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    FILTER_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    AFTER_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    BEFORE_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    user_id: str
    filter: MemoryFilter
    kind: MemoryKind
    author: str
    after_timestamp: _timestamp_pb2.Timestamp
    before_timestamp: _timestamp_pb2.Timestamp
    force: bool
    def __init__(self, app_name: _Optional[str] = ..., user_id: _Optional[str] = ..., filter: _Optional[_Union[MemoryFilter, _Mapping]] = ..., kind: _Optional[_Union[MemoryKind, str]] = ..., author: _Optional[str] = ..., after_timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., before_timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., force: _Optional[bool] = ...) -> None: ...

class PurgeMemoriesResponse(_message.Message):
    __slots__ = ("count", "sample", "operation_id")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    SAMPLE_FIELD_NUMBER: _ClassVar[int]
    OPERATION_ID_FIELD_NUMBER: _ClassVar[int]
    count: int
    sample: _containers.RepeatedCompositeFieldContainer[MemoryEntry]
    operation_id: str
    def __init__(self, count: _Optional[int] = ..., sample: _Optional[_Iterable[_Union[MemoryEntry, _Mapping]]] = ..., operation_id: _Optional[str] = ...) -> None: ...

class AppendMemoryStreamRequest(_message.Message):
    __slots__ = ("app_name", "user_id", "stream_id", "events")
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    STREAM_ID_FIELD_NUMBER: _ClassVar[int]
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    user_id: str
    stream_id: str
    events: _containers.RepeatedCompositeFieldContainer[_session_pb2.Event]
    def __init__(self, app_name: _Optional[str] = ..., user_id: _Optional[str] = ..., stream_id: _Optional[str] = ..., events: _Optional[_Iterable[_Union[_session_pb2.Event, _Mapping]]] = ...) -> None: ...

class AppendMemoryStreamResponse(_message.Message):
    __slots__ = ("appended", "buffered", "job")
    APPENDED_FIELD_NUMBER: _ClassVar[int]
    BUFFERED_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    appended: int
    buffered: int
    job: GenerationJob
    def __init__(self, appended: _Optional[int] = ..., buffered: _Optional[int] = ..., job: _Optional[_Union[GenerationJob, _Mapping]] = ...) -> None: ...

class FlushMemoryStreamRequest(_message.Message):
    __slots__ = ("app_name", "user_id", "stream_id")
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    STREAM_ID_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    user_id: str
    stream_id: str
    def __init__(self, app_name: _Optional[str] = ..., user_id: _Optional[str] = ..., stream_id: _Optional[str] = ...) -> None: ...

class FlushMemoryStreamResponse(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: GenerationJob
    def __init__(self, job: _Optional[_Union[GenerationJob, _Mapping]] = ...) -> None: ...

class ListMemoryStreamsRequest(_message.Message):
    __slots__ = ("app_name", "user_id")
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    user_id: str
    def __init__(self, app_name: _Optional[str] = ..., user_id: _Optional[str] = ...) -> None: ...

class MemoryStream(_message.Message):
    __slots__ = ("stream_id", "buffered", "last_append_time")
    STREAM_ID_FIELD_NUMBER: _ClassVar[int]
    BUFFERED_FIELD_NUMBER: _ClassVar[int]
    LAST_APPEND_TIME_FIELD_NUMBER: _ClassVar[int]
    stream_id: str
    buffered: int
    last_append_time: _timestamp_pb2.Timestamp
    def __init__(self, stream_id: _Optional[str] = ..., buffered: _Optional[int] = ..., last_append_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListMemoryStreamsResponse(_message.Message):
    __slots__ = ("streams",)
    STREAMS_FIELD_NUMBER: _ClassVar[int]
    streams: _containers.RepeatedCompositeFieldContainer[MemoryStream]
    def __init__(self, streams: _Optional[_Iterable[_Union[MemoryStream, _Mapping]]] = ...) -> None: ...
