"""How the SQLite store keeps value text: long values and Stream events compressed.

A session's message chunks are JSON that repeats itself (every message names
its fields, and its framework item holds its text again), so they took about
four times the conversation's own JSON. Values of ``COMPRESSED_FROM_CHARS`` or
more are stored as a zlib stream; Stream events, each a few hundred bytes of
the same keys, are compressed with ``EVENT_DICTIONARY`` preset. A compressed value
is a BLOB whose first byte names its format; shorter text stays TEXT, as in
files written before, so every file this module reads stays readable.

What is compressed is the stored text only: a value's size for a Stream's
capacity is still its UTF-8 JSON, and readers get the same text back.
"""

from __future__ import annotations

import threading
import zlib
from collections import OrderedDict

from dex_agents.adapters.local.store_errors import StoredValueError

COMPRESSED_FROM_CHARS = 2048
"""Attribute values this long or longer are stored compressed; shorter ones as text."""

FAST_COMPRESSION_FROM_CHARS = 64 * 1024
"""Attribute values this long or longer are compressed at zlib's fastest level (1), shorter ones
at its default (6).

A value is compressed whole each time it is written, so its cost grows with its
size: a tool's 200 KB result is compressed into its call record, its message and
later its chunk, and at the default level that took a third of such a turn's
CPU. The fastest level is about four times as fast on such text and stores
about a quarter more; the small values of a usual turn keep the default's
smaller size.
"""

ZLIB_VALUE = 0x01
"""First byte of a value stored as ``zlib.compress`` of its UTF-8 text."""

DICTIONARY_EVENT = 0x02
"""First byte of an event stored as a zlib stream of its UTF-8 text with ``EVENT_DICTIONARY`` preset.

A zlib stream, not raw deflate, for its checksum: damaged bytes in the file are
an error when read, never other text, as the JSON of a damaged text value is.
"""

EVENT_BLOCK = 0x03
"""First byte of a block of Stream events (``event_blocks``), deflated as ``DICTIONARY_EVENT`` is."""

HISTORY_FIELD = 0x04
"""First byte of a Step execution's options, or a finished one's wait or wait result, deflated
with ``HISTORY_DICTIONARY`` preset."""

EVENT_DICTIONARY = (
    # Deflate finds the dictionary's last bytes at the shortest distances, so the
    # envelope every event carries comes last. Stored events need this exact text
    # to be read: change it only together with a new format byte.
    b'"mcp.tool_progress""mcp.task_status""compaction_started""compaction_finished"'
    b'"plan_execution_started""plan_updated""timer_started""interrupt_resolved"'
    b'"interrupt_raised""tool_task_started""turn_failed""turn_steered""turn_cancelled"'
    b'"reasoning_delta""interrupt_id":"kind":"question""approval""reason":"error":'
    b'"requires_approval":true"requires_approval":false,"effect":"write"'
    b'"effect":"read","status":"failed""status":"succeeded","arguments":"'
    b'"usage_recorded""tool_call_deferred"{"attempt":1,"payload":{"recorded":'
    b'{"cached_input_tokens":0,"input_tokens":,"model_calls":1,"output_tokens":'
    b',"reasoning_tokens":0},"session":{"cached_input_tokens":0,"input_tokens":'
    b'"turn_completed"{"attempt":1,"payload":{"message_count":'
    b'"turn_started"{"attempt":1,"payload":{"sequence":'
    b'"tool_call_finished""tool_call_started"{"attempt":1,"payload":{"tool_call_id":"call_'
    b'","tool_name":"'
    b'"text_delta"{"attempt":1,"payload":{"text":"'
    b'"},"step_execution_id":"CallTool-"},"step_execution_id":"RunModel-","turn_id":"turn-","type":"'
)
"""The preset dictionary of Stream events: the ``AgentEvent`` wire keys and types."""

HISTORY_DICTIONARY = (
    # As EVENT_DICTIONARY: stored fields need this exact text to be read, so change it only
    # together with a new format byte. The most common texts come last.
    b'"timer_fired":true"timer_fired":false}"total_duration":null},"wait_loads":[]}'
    b'"loads":[],"locks":[],"durability":"async","failure_step":null,'
    b'{"channel":"TurnControlRequests","count":1,"key":null}'
    b'{"channel":"ToolCallResults","count":1,"key":null}'
    b'[{"channel":"TurnControlRequests","count":1,"key":null},'
    b'{"channel":"QueuedUserMessages","count":1,"key":null}]'
    b'{"channel":"QueuedUserMessages","index":1,"messages":["{\\"images\\":[],'
    b'\\"plan_mode\\":false,\\"text\\":\\"'
    b'{"channel":"ToolCallResults","index":0,"messages":["{\\"status\\":\\"succeeded\\",'
    b'\\"tool_call_id\\":\\"call_'
    b'\\"}"],"taken":[[,"","2026-+00:00"]],"timer_fired":false}'
    b'{"durability":"sync","execute_timeout":7200.0,"failure_step":"RecordToolFailure",'
    b'"heartbeat_timeout":60.0,"loads":[["AgentToolCalls","call_'
    b'"]],"locks":[],"retry":{"backoff_coefficient":2.0,"initial_interval":1.0,'
    b'"maximum_attempts":3,"maximum_interval":60.0,"total_duration":null},"wait_loads":[]}'
)
"""The preset dictionary of finished executions' fields: Step options, waits and their results."""

_INFLATED_KEPT = 256
"""How many inflated values ``unpack`` keeps, so a value read again is the same ``str``."""

_KEPT_UP_TO_CHARS = 64 * 1024
"""Only values up to this long are kept, so the kept values stay under 16 MiB."""


def pack_value(text: str) -> str | bytes:
    """What the store writes for an Attribute value: long text compressed, the rest as it is.

    The level by ``FAST_COMPRESSION_FROM_CHARS``; readers need not know it.
    """
    if len(text) < COMPRESSED_FROM_CHARS:
        return text
    level = 1 if len(text) >= FAST_COMPRESSION_FROM_CHARS else 6
    return bytes((ZLIB_VALUE,)) + zlib.compress(text.encode("utf-8"), level)


def _primed(dictionary: bytes) -> zlib._Compress:
    # A compressor with its dictionary already set, copied for each value: setting it
    # anew hashed the whole dictionary every time. A 4 KiB window (zlib's default is
    # 32 KiB) holds the dictionary and a usual value, and a small hash table keeps the
    # state near 30 KiB: the default's 270 KiB was cleared for every event, pushing
    # the rest of a turn's work out of the CPU's caches. Readers take the window from
    # the stream's header, so values written either way read alike.
    return zlib.compressobj(6, zlib.DEFLATED, 12, 5, zdict=dictionary)


_EVENT_DEFLATE = _primed(EVENT_DICTIONARY)
_HISTORY_DEFLATE = _primed(HISTORY_DICTIONARY)


def pack_event(text: str) -> str | bytes:
    """What the store writes for a Stream event: deflated when that is shorter than the text."""
    encoded = text.encode("utf-8")
    deflate = _EVENT_DEFLATE.copy()
    packed = bytes((DICTIONARY_EVENT,)) + deflate.compress(encoded) + deflate.flush()
    return packed if len(packed) < len(encoded) else text


def pack_history_field(text: str) -> str | bytes:
    """What the store writes for an execution's options, or a finished one's wait or wait result.

    Deflated when that is shorter than the text. A finished execution's fields
    are read once it is history; a running one's options are read again while it
    runs, and ``unpack`` keeps what it inflated of them.
    """
    encoded = text.encode("utf-8")
    deflate = _HISTORY_DEFLATE.copy()
    packed = bytes((HISTORY_FIELD,)) + deflate.compress(encoded) + deflate.flush()
    return packed if len(packed) < len(encoded) else text


def pack_event_block(text: str) -> bytes:
    """What the store writes for the text of a block of Stream events: always deflated."""
    deflate = zlib.compressobj(level=9, zdict=EVENT_DICTIONARY)
    return bytes((EVENT_BLOCK,)) + deflate.compress(text.encode("utf-8")) + deflate.flush()


def unpack(stored: str | bytes) -> str:
    """The text of a stored value or event, whichever way it was written.

    Raises ``StoredValueError`` for a BLOB that no format here reads: the file
    was damaged, or written by another program.
    """
    if isinstance(stored, str):
        return stored
    if not isinstance(stored, bytes):
        raise StoredValueError(f"a stored value is {type(stored).__name__}, not text")
    kept = _KEPT_BY_FORMAT.get(stored[:1])
    return _inflated(stored) if kept is None else kept.inflate(stored)


_DICTIONARIES = {
    DICTIONARY_EVENT: EVENT_DICTIONARY,
    EVENT_BLOCK: EVENT_DICTIONARY,
    HISTORY_FIELD: HISTORY_DICTIONARY,
}


class _KeptValues:
    """Inflated texts read again, by their stored bytes, least recently read dropped first.

    A long value read again (the message index, read by every Step) comes back
    as the same ``str``, so the decoded-value cache finds it without hashing it
    anew, and it is not inflated again; a block is read again by each trim of
    the Stream while it is the oldest; a running execution's options by each
    read of its row. Single events are read once each, so they are not kept.
    """

    def __init__(self) -> None:
        self._texts: OrderedDict[bytes, str] = OrderedDict()
        self._lock = threading.Lock()

    def inflate(self, stored: bytes) -> str:
        with self._lock:
            text = self._texts.get(stored)
            if text is not None:
                self._texts.move_to_end(stored)
                return text
        text = _inflated(stored)
        if len(text) <= _KEPT_UP_TO_CHARS:
            with self._lock:
                self._texts[stored] = text
                if len(self._texts) > _INFLATED_KEPT:
                    self._texts.popitem(last=False)
        return text


_KEPT = _KeptValues()
# Apart from the long values, so that listing a Step history (a few fields of each of up to
# 1,000 executions) does not push the message index out: a running execution's options,
# read while it runs, are the fields read again.
_KEPT_FIELDS = _KeptValues()
_KEPT_BY_FORMAT = {
    bytes((ZLIB_VALUE,)): _KEPT,
    bytes((EVENT_BLOCK,)): _KEPT,
    bytes((HISTORY_FIELD,)): _KEPT_FIELDS,
}
"""Where the inflated text of each format read again is kept; single events are not."""


def _inflated(stored: bytes) -> str:
    form, body = stored[0] if stored else None, stored[1:]
    try:
        if form == ZLIB_VALUE:
            return zlib.decompress(body).decode("utf-8")
        if form in _DICTIONARIES:
            inflate = zlib.decompressobj(zdict=_DICTIONARIES[form])
            text = inflate.decompress(body) + inflate.flush()
            if not inflate.eof:
                raise zlib.error("the deflate stream ends early")
            return text.decode("utf-8")
    except (zlib.error, UnicodeDecodeError) as error:
        raise StoredValueError(f"a stored value does not decompress: {error}") from None
    raise StoredValueError(
        f"a stored value is {len(stored)} bytes in no known format"
        f" (first byte {form}; dex-agents writes {ZLIB_VALUE} to {HISTORY_FIELD})"
    )
