"""Reading a Redis stream entry as the emitter writes it: each event's JSON text is a slice
of the stored list, framed for AG-UI as it is, and decoded once for the translators."""

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from agent_runs.api.sse import sse_frames_stored
from agent_runs.events.codec import epoch_microseconds, stored_entry_read

# Strings that look like the list's separators, a nested list of objects with a "type",
# and text the writer escapes (non-ASCII, a newline, a quote).
EVENTS: list[dict[str, Any]] = [
    {"type": "RUN_STARTED", "threadId": "t", "runId": "r"},
    {
        "type": "CUSTOM",
        "name": "x",
        "value": {"items": [{"type": "a"}, {"type": "b"}], "s": '},{"type":"FAKE"}'},
        "runId": "r",
    },
    {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": 'héllo\n"wörld" ✓'},
]


WRITTEN = datetime(2026, 11, 27, 4, 53, 34, 205_123, tzinfo=UTC)


def entry(events: list[dict[str, Any]], *, seq: bool = True, at: bool = True) -> dict[bytes, bytes]:
    documents = [json.dumps(payload, separators=(",", ":")) for payload in events]
    fields = {
        b"ids": ",".join(str(10 + n) for n in range(len(events))).encode(),
        b"prev": b"9",
        b"data": ("[" + ",".join(documents) + "]").encode(),
    }
    if seq:
        fields[b"seq"] = b"4"
    if at:
        fields[b"at"] = str(epoch_microseconds(WRITTEN)).encode()
    return fields


def test_each_event_is_its_stored_text_with_its_id_ordinal_type_and_run():
    read = stored_entry_read(entry(EVENTS))
    assert (read.ids, read.prev) == ([10, 11, 12], 9)
    assert read.events is not None
    assert [(e.id, e.seq, e.type, e.run_id) for e in read.events] == [
        (10, 4, "RUN_STARTED", "r"),
        (11, 5, "CUSTOM", "r"),
        (12, 6, "TEXT_MESSAGE_CONTENT", None),
    ]
    assert [e.data for e in read.events] == [
        json.dumps(payload, separators=(",", ":")) for payload in EVENTS
    ]
    assert [e.payload for e in read.events] == EVENTS
    assert [e.at for e in read.events] == [WRITTEN] * 3  # to the microsecond


@pytest.mark.parametrize("missing", ["seq", "at"])
def test_an_entry_without_ordinals_or_time_is_left_to_postgresql(missing):
    read = stored_entry_read(entry(EVENTS, **{missing: False}))
    assert read.events is None
    assert read.ids == [10, 11, 12]


@pytest.mark.parametrize(
    "data",
    [b"[]", b'[{"type":"A"}]', b'[{"type":"A"},{"type":"B"},{"type":"C"},{"type":"D"}]'],
    ids=["no events", "one event", "four events"],
)
def test_an_entry_whose_events_do_not_match_its_ids_is_refused(data):
    fields = entry(EVENTS)
    fields[b"data"] = data
    with pytest.raises(ValueError):
        stored_entry_read(fields)


def test_stored_events_are_framed_as_they_are():
    read = stored_entry_read(entry(EVENTS[:1]))
    assert read.events is not None
    assert sse_frames_stored(read.events) == (
        b'id: 10\nevent: RUN_STARTED\ndata: {"type":"RUN_STARTED","threadId":"t","runId":"r"}\n\n'
    )
