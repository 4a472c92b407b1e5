import datetime

from adk_grpc_services._proto.adk.session.v1 import session_pb2 as _session_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SearchMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEARCH_MODE_AUTO: _ClassVar[SearchMode]
    SEARCH_MODE_KEYWORD: _ClassVar[SearchMode]
    SEARCH_MODE_SEMANTIC: _ClassVar[SearchMode]
    SEARCH_MODE_HYBRID: _ClassVar[SearchMode]
SEARCH_MODE_AUTO: SearchMode
SEARCH_MODE_KEYWORD: SearchMode
SEARCH_MODE_SEMANTIC: SearchMode
SEARCH_MODE_HYBRID: SearchMode

class MemoryEntry(_message.Message):
    __slots__ = ("id", "content", "author", "timestamp", "custom_metadata", "session_id", "score")
    ID_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    CUSTOM_METADATA_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    id: str
    content: _session_pb2.Content
    author: str
    timestamp: _timestamp_pb2.Timestamp
    custom_metadata: str
    session_id: str
    score: float
    def __init__(self, id: _Optional[str] = ..., content: _Optional[_Union[_session_pb2.Content, _Mapping]] = ..., author: _Optional[str] = ..., timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., custom_metadata: _Optional[str] = ..., session_id: _Optional[str] = ..., score: _Optional[float] = ...) -> None: ...

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
    __slots__ = ("session", "session_ref")
    SESSION_FIELD_NUMBER: _ClassVar[int]
    SESSION_REF_FIELD_NUMBER: _ClassVar[int]
    session: _session_pb2.Session
    session_ref: SessionRef
    def __init__(self, session: _Optional[_Union[_session_pb2.Session, _Mapping]] = ..., session_ref: _Optional[_Union[SessionRef, _Mapping]] = ...) -> None: ...

class AddSessionToMemoryResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: int
    def __init__(self, entries: _Optional[int] = ...) -> None: ...

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
    __slots__ = ("app_name", "user_id", "query", "limit", "after_timestamp", "before_timestamp", "author", "language", "mode")
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    AFTER_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    BEFORE_TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_FIELD_NUMBER: _ClassVar[int]
    LANGUAGE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    user_id: str
    query: str
    limit: int
    after_timestamp: _timestamp_pb2.Timestamp
    before_timestamp: _timestamp_pb2.Timestamp
    author: str
    language: str
    mode: SearchMode
    def __init__(self, app_name: _Optional[str] = ..., user_id: _Optional[str] = ..., query: _Optional[str] = ..., limit: _Optional[int] = ..., after_timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., before_timestamp: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., author: _Optional[str] = ..., language: _Optional[str] = ..., mode: _Optional[_Union[SearchMode, str]] = ...) -> None: ...

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
    __slots__ = ("app_name", "user_id", "page_size", "page_token")
    APP_NAME_FIELD_NUMBER: _ClassVar[int]
    USER_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    app_name: str
    user_id: str
    page_size: int
    page_token: str
    def __init__(self, app_name: _Optional[str] = ..., user_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListMemoriesResponse(_message.Message):
    __slots__ = ("memories", "next_page_token")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[MemoryEntry]
    next_page_token: str
    def __init__(self, memories: _Optional[_Iterable[_Union[MemoryEntry, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...
