from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class StatusCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SUCCESS: _ClassVar[StatusCode]
    BAD_REQUEST: _ClassVar[StatusCode]
    PERMISSION_DENIED: _ClassVar[StatusCode]
    INTERNAL_SERVER_ERROR: _ClassVar[StatusCode]
    NOT_IMPLEMENTED: _ClassVar[StatusCode]
    STORE_UNAVAILABLE: _ClassVar[StatusCode]
    UNEXPECTED: _ClassVar[StatusCode]
    LEDGER_METADATA_ERROR: _ClassVar[StatusCode]
    LEDGER_EXISTS: _ClassVar[StatusCode]
    LEDGER_NOT_FOUND: _ClassVar[StatusCode]
    BOOKIE_EXISTS: _ClassVar[StatusCode]
    BOOKIE_NOT_FOUND: _ClassVar[StatusCode]
    BAD_VERSION: _ClassVar[StatusCode]

class ChangeType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    NONE: _ClassVar[ChangeType]
    CREATED: _ClassVar[ChangeType]
    UPDATED: _ClassVar[ChangeType]
    DELETED: _ClassVar[ChangeType]
    CURRENT: _ClassVar[ChangeType]
SUCCESS: StatusCode
BAD_REQUEST: StatusCode
PERMISSION_DENIED: StatusCode
INTERNAL_SERVER_ERROR: StatusCode
NOT_IMPLEMENTED: StatusCode
STORE_UNAVAILABLE: StatusCode
UNEXPECTED: StatusCode
LEDGER_METADATA_ERROR: StatusCode
LEDGER_EXISTS: StatusCode
LEDGER_NOT_FOUND: StatusCode
BOOKIE_EXISTS: StatusCode
BOOKIE_NOT_FOUND: StatusCode
BAD_VERSION: StatusCode
NONE: ChangeType
CREATED: ChangeType
UPDATED: ChangeType
DELETED: ChangeType
CURRENT: ChangeType

class LedgerMetadataRequest(_message.Message):
    __slots__ = ("ledger_id", "metadata", "expected_version", "ledger_scope_id", "serialized_metadata", "format_version", "after_sequence", "watch_all", "consistent_read", "known_version")
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    LEDGER_SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    SERIALIZED_METADATA_FIELD_NUMBER: _ClassVar[int]
    FORMAT_VERSION_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    WATCH_ALL_FIELD_NUMBER: _ClassVar[int]
    CONSISTENT_READ_FIELD_NUMBER: _ClassVar[int]
    KNOWN_VERSION_FIELD_NUMBER: _ClassVar[int]
    ledger_id: int
    metadata: bytes
    expected_version: int
    ledger_scope_id: int
    serialized_metadata: bytes
    format_version: int
    after_sequence: int
    watch_all: bool
    consistent_read: bool
    known_version: int
    def __init__(self, ledger_id: _Optional[int] = ..., metadata: _Optional[bytes] = ..., expected_version: _Optional[int] = ..., ledger_scope_id: _Optional[int] = ..., serialized_metadata: _Optional[bytes] = ..., format_version: _Optional[int] = ..., after_sequence: _Optional[int] = ..., watch_all: _Optional[bool] = ..., consistent_read: _Optional[bool] = ..., known_version: _Optional[int] = ...) -> None: ...

class LedgerMetadataResponse(_message.Message):
    __slots__ = ("code", "ledger_id", "version", "metadata", "ledger_scope_id", "serialized_metadata", "message", "change", "sequence", "password_withheld")
    CODE_FIELD_NUMBER: _ClassVar[int]
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    LEDGER_SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    SERIALIZED_METADATA_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_WITHHELD_FIELD_NUMBER: _ClassVar[int]
    code: StatusCode
    ledger_id: int
    version: int
    metadata: bytes
    ledger_scope_id: int
    serialized_metadata: bytes
    message: str
    change: ChangeType
    sequence: int
    password_withheld: bool
    def __init__(self, code: _Optional[_Union[StatusCode, str]] = ..., ledger_id: _Optional[int] = ..., version: _Optional[int] = ..., metadata: _Optional[bytes] = ..., ledger_scope_id: _Optional[int] = ..., serialized_metadata: _Optional[bytes] = ..., message: _Optional[str] = ..., change: _Optional[_Union[ChangeType, str]] = ..., sequence: _Optional[int] = ..., password_withheld: _Optional[bool] = ...) -> None: ...

class GetLedgerRangesRequest(_message.Message):
    __slots__ = ("limit_per_response", "ledger_scope_id", "all_scopes")
    LIMIT_PER_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    LEDGER_SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    ALL_SCOPES_FIELD_NUMBER: _ClassVar[int]
    limit_per_response: int
    ledger_scope_id: int
    all_scopes: bool
    def __init__(self, limit_per_response: _Optional[int] = ..., ledger_scope_id: _Optional[int] = ..., all_scopes: _Optional[bool] = ...) -> None: ...

class LedgerRange(_message.Message):
    __slots__ = ("first", "count")
    FIRST_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    first: int
    count: int
    def __init__(self, first: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...

class LedgerRangeList(_message.Message):
    __slots__ = ("ledger_scope_id", "ranges")
    LEDGER_SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    RANGES_FIELD_NUMBER: _ClassVar[int]
    ledger_scope_id: int
    ranges: _containers.RepeatedCompositeFieldContainer[LedgerRange]
    def __init__(self, ledger_scope_id: _Optional[int] = ..., ranges: _Optional[_Iterable[_Union[LedgerRange, _Mapping]]] = ...) -> None: ...

class GetLedgerRangesResponse(_message.Message):
    __slots__ = ("code", "count", "serialized_ranges", "ledger_scope_id", "message")
    CODE_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    SERIALIZED_RANGES_FIELD_NUMBER: _ClassVar[int]
    LEDGER_SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: StatusCode
    count: int
    serialized_ranges: bytes
    ledger_scope_id: int
    message: str
    def __init__(self, code: _Optional[_Union[StatusCode, str]] = ..., count: _Optional[int] = ..., serialized_ranges: _Optional[bytes] = ..., ledger_scope_id: _Optional[int] = ..., message: _Optional[str] = ...) -> None: ...

class LedgerKey(_message.Message):
    __slots__ = ("ledger_scope_id", "ledger_id")
    LEDGER_SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    ledger_scope_id: int
    ledger_id: int
    def __init__(self, ledger_scope_id: _Optional[int] = ..., ledger_id: _Optional[int] = ...) -> None: ...

class ReadLedgersRequest(_message.Message):
    __slots__ = ("start", "end", "page_size", "format_version")
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    FORMAT_VERSION_FIELD_NUMBER: _ClassVar[int]
    start: LedgerKey
    end: LedgerKey
    page_size: int
    format_version: int
    def __init__(self, start: _Optional[_Union[LedgerKey, _Mapping]] = ..., end: _Optional[_Union[LedgerKey, _Mapping]] = ..., page_size: _Optional[int] = ..., format_version: _Optional[int] = ...) -> None: ...

class StoredLedger(_message.Message):
    __slots__ = ("ledger_scope_id", "ledger_id", "version", "serialized_metadata", "password_withheld")
    LEDGER_SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    LEDGER_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SERIALIZED_METADATA_FIELD_NUMBER: _ClassVar[int]
    PASSWORD_WITHHELD_FIELD_NUMBER: _ClassVar[int]
    ledger_scope_id: int
    ledger_id: int
    version: int
    serialized_metadata: bytes
    password_withheld: bool
    def __init__(self, ledger_scope_id: _Optional[int] = ..., ledger_id: _Optional[int] = ..., version: _Optional[int] = ..., serialized_metadata: _Optional[bytes] = ..., password_withheld: _Optional[bool] = ...) -> None: ...

class ReadLedgersResponse(_message.Message):
    __slots__ = ("code", "message", "ledgers")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LEDGERS_FIELD_NUMBER: _ClassVar[int]
    code: StatusCode
    message: str
    ledgers: _containers.RepeatedCompositeFieldContainer[StoredLedger]
    def __init__(self, code: _Optional[_Union[StatusCode, str]] = ..., message: _Optional[str] = ..., ledgers: _Optional[_Iterable[_Union[StoredLedger, _Mapping]]] = ...) -> None: ...

class LedgerBatchRequest(_message.Message):
    __slots__ = ("requests",)
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    requests: _containers.RepeatedCompositeFieldContainer[LedgerMetadataRequest]
    def __init__(self, requests: _Optional[_Iterable[_Union[LedgerMetadataRequest, _Mapping]]] = ...) -> None: ...

class LedgerBatchResponse(_message.Message):
    __slots__ = ("code", "message", "responses")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RESPONSES_FIELD_NUMBER: _ClassVar[int]
    code: StatusCode
    message: str
    responses: _containers.RepeatedCompositeFieldContainer[LedgerMetadataResponse]
    def __init__(self, code: _Optional[_Union[StatusCode, str]] = ..., message: _Optional[str] = ..., responses: _Optional[_Iterable[_Union[LedgerMetadataResponse, _Mapping]]] = ...) -> None: ...

class BookieServiceInfoFormat(_message.Message):
    __slots__ = ("endpoints", "properties")
    class Endpoint(_message.Message):
        __slots__ = ("id", "port", "host", "protocol", "auth", "extensions")
        ID_FIELD_NUMBER: _ClassVar[int]
        PORT_FIELD_NUMBER: _ClassVar[int]
        HOST_FIELD_NUMBER: _ClassVar[int]
        PROTOCOL_FIELD_NUMBER: _ClassVar[int]
        AUTH_FIELD_NUMBER: _ClassVar[int]
        EXTENSIONS_FIELD_NUMBER: _ClassVar[int]
        id: str
        port: int
        host: str
        protocol: str
        auth: _containers.RepeatedScalarFieldContainer[str]
        extensions: _containers.RepeatedScalarFieldContainer[str]
        def __init__(self, id: _Optional[str] = ..., port: _Optional[int] = ..., host: _Optional[str] = ..., protocol: _Optional[str] = ..., auth: _Optional[_Iterable[str]] = ..., extensions: _Optional[_Iterable[str]] = ...) -> None: ...
    class PropertiesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ENDPOINTS_FIELD_NUMBER: _ClassVar[int]
    PROPERTIES_FIELD_NUMBER: _ClassVar[int]
    endpoints: _containers.RepeatedCompositeFieldContainer[BookieServiceInfoFormat.Endpoint]
    properties: _containers.ScalarMap[str, str]
    def __init__(self, endpoints: _Optional[_Iterable[_Union[BookieServiceInfoFormat.Endpoint, _Mapping]]] = ..., properties: _Optional[_Mapping[str, str]] = ...) -> None: ...

class BookieRequest(_message.Message):
    __slots__ = ("bookie_id", "read_only", "info", "ledger_scope_id", "after_sequence")
    BOOKIE_ID_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    LEDGER_SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    bookie_id: str
    read_only: bool
    info: BookieServiceInfoFormat
    ledger_scope_id: int
    after_sequence: int
    def __init__(self, bookie_id: _Optional[str] = ..., read_only: _Optional[bool] = ..., info: _Optional[_Union[BookieServiceInfoFormat, _Mapping]] = ..., ledger_scope_id: _Optional[int] = ..., after_sequence: _Optional[int] = ...) -> None: ...

class BookieInfo(_message.Message):
    __slots__ = ("bookie_id", "read_only", "info")
    BOOKIE_ID_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_FIELD_NUMBER: _ClassVar[int]
    INFO_FIELD_NUMBER: _ClassVar[int]
    bookie_id: str
    read_only: bool
    info: BookieServiceInfoFormat
    def __init__(self, bookie_id: _Optional[str] = ..., read_only: _Optional[bool] = ..., info: _Optional[_Union[BookieServiceInfoFormat, _Mapping]] = ...) -> None: ...

class BookieResponse(_message.Message):
    __slots__ = ("code", "message", "bookies", "change", "sequence", "ledger_scope_id")
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    BOOKIES_FIELD_NUMBER: _ClassVar[int]
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    LEDGER_SCOPE_ID_FIELD_NUMBER: _ClassVar[int]
    code: StatusCode
    message: str
    bookies: _containers.RepeatedCompositeFieldContainer[BookieInfo]
    change: ChangeType
    sequence: int
    ledger_scope_id: int
    def __init__(self, code: _Optional[_Union[StatusCode, str]] = ..., message: _Optional[str] = ..., bookies: _Optional[_Iterable[_Union[BookieInfo, _Mapping]]] = ..., change: _Optional[_Union[ChangeType, str]] = ..., sequence: _Optional[int] = ..., ledger_scope_id: _Optional[int] = ...) -> None: ...
