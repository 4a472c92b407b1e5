"""Exact conversion between ADK's float seconds and ``google.protobuf.Timestamp``.

ADK keeps times as float Unix seconds (``Event.timestamp``, ``Session.last_update_time``); the
contract carries them as ``Timestamp`` (whole seconds + nanoseconds). A float is converted to the
nearest nanosecond using exact integer arithmetic, and back with one correctly rounded division.
Whenever two adjacent floats are more than a nanosecond apart, which holds for every time after
mid-1970 (|t| >= 2**24 s), the float that comes back is the one that went in. For the few that do
not survive (tiny values with sub-nanosecond digits, such as 0.1 + 1e-12), ``round_trips`` tells
the caller to carry the exact float alongside.
"""

from __future__ import annotations

from datetime import datetime

from google.protobuf.timestamp_pb2 import Timestamp

_NANOS_PER_SECOND = 1_000_000_000


def to_timestamp(seconds: float) -> Timestamp:
    """The Timestamp nearest to ``seconds`` (a tie rounds up)."""
    numerator, denominator = float(seconds).as_integer_ratio()
    # Nearest whole nanosecond of numerator / denominator seconds, without float rounding.
    total_nanos = (2 * numerator * _NANOS_PER_SECOND + denominator) // (2 * denominator)
    whole, nanos = divmod(total_nanos, _NANOS_PER_SECOND)
    return Timestamp(seconds=whole, nanos=nanos)


def to_seconds(timestamp: Timestamp) -> float:
    """The float nearest to ``timestamp`` (Python's int / int division is correctly rounded)."""
    return (timestamp.seconds * _NANOS_PER_SECOND + timestamp.nanos) / _NANOS_PER_SECOND


def round_trips(seconds: float) -> bool:
    """Whether ``to_seconds(to_timestamp(seconds))`` gives back exactly ``seconds``."""
    return to_seconds(to_timestamp(seconds)) == seconds


def to_local_iso(timestamp: Timestamp) -> str:
    """The naive local-time ISO 8601 text ADK puts in ``MemoryEntry.timestamp``.

    Same expression as ``google.adk.memory._utils.format_timestamp``, applied to the exact float.
    """
    return datetime.fromtimestamp(to_seconds(timestamp)).isoformat()


def from_iso(text: str) -> Timestamp:
    """Parses an ISO 8601 ``MemoryEntry.timestamp``; naive means local time, as ADK writes it."""
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as e:
        raise ValueError(
            f"MemoryEntry.timestamp must be an ISO 8601 date-time, got {text!r}"
        ) from e
    # datetime.timestamp() of a naive datetime assumes local time, the inverse of to_local_iso.
    return to_timestamp(moment.timestamp())
