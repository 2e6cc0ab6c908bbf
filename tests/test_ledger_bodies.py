"""Bodies at rest: large ones are zstd frames on SQLite, digests and seals stay over the text,
reads return the same values, rows written before compression still read, and a frame changed
at rest is refused like any other damaged body."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from _pg_support import LedgerStore
from comal.ledger import LedgerRowDamaged, SQLiteLedger, open_ledger, verify
from comal.ledger._bodies import PACK_MIN, pack, unpack
from comal.messages import Message, ToolCall, message_to_json, sha256_hex

_LOG = "\n".join(f"2025-01-01 12:00:{i % 60:02d} INFO worker {i} done in {i * 7} ms" for i in
                 range(2000))  # fmt: skip


def _raw(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


@given(st.text(min_size=0, max_size=5000))
def test_pack_round_trips_and_the_digest_is_the_texts(text: str) -> None:
    # covers: LED-6
    stored = pack(text, _raw(text))
    assert unpack(stored) == text
    assert sha256_hex(unpack(stored)) == sha256_hex(text)
    if isinstance(stored, bytes):  # only large bodies that shrink by an eighth are framed
        assert len(_raw(text)) >= PACK_MIN and len(stored) * 8 <= len(_raw(text)) * 7


def test_repetitive_large_text_is_framed_and_small_text_is_not() -> None:
    assert isinstance(pack(_LOG, _raw(_LOG)), bytes)
    assert pack("short", b"short") == "short"
    # Something that does not shrink stays text.
    noise = bytes(range(256)).hex() * 3
    assert pack(noise, _raw(noise)) == noise or len(pack(noise, _raw(noise))) < len(noise)


def test_unpack_hands_back_what_is_not_a_sound_frame() -> None:
    assert unpack(b"not a frame") == b"not a frame"
    bad_utf8 = zstandard.ZstdCompressor().compress(b"\xff\xfe")
    assert unpack(bad_utf8) == bad_utf8
    assert unpack(None) is None


def _fill(led: SQLiteLedger) -> None:
    scope = led.create_session("t", "a")
    led.append(scope, [Message.user("read the log")])
    call = ToolCall("c1", "Bash", '{"command": "cat log"}')
    led.append(scope, [Message.assistant("reading", call), Message.tool("c1", _LOG)])
    led.add_record(scope, "event", "output", {"text": _LOG})


def test_both_backends_read_back_the_same_values(ledger_store: LedgerStore) -> None:
    # covers: LED-1, LED-4, LED-6
    with ledger_store.open() as led:
        scope = led.create_session("t", "a")
        call = ToolCall("c1", "Bash", '{"command": "cat log"}')
        out = led.append(scope, [Message.assistant("reading", call), Message.tool("c1", _LOG)])
        rec = led.add_record(scope, "event", "output", {"text": _LOG})
        led._cache.clear()  # read the rows, not what the append cached
        back = led.entries(scope)
        assert [e.message for e in back] == [e.message for e in out]
        assert back[1].digest == sha256_hex(message_to_json(back[1].message))
        assert back[1].output_digest == sha256_hex(_LOG)
        assert back[1].size == len(_raw(message_to_json(back[1].message)))
        assert led.records(scope, "event")[0].body == rec.body == {"text": _LOG}
        assert [h.entry_id for h in led.search(scope, "worker")] == [back[1].id]
        assert verify(led, search=True).ok


def test_sqlite_stores_large_bodies_as_frames(tmp_path: Path) -> None:
    path = tmp_path / "l.db"
    with open_ledger(path) as led:
        _fill(led)
    conn = sqlite3.connect(path)
    kinds = dict(conn.execute("SELECT seq, typeof(body) FROM entries").fetchall())
    sizes = conn.execute("SELECT size, length(body) FROM entries WHERE seq = 2").fetchone()
    rec = conn.execute("SELECT typeof(body) FROM records WHERE kind = 'output'").fetchone()
    codec = conn.execute("SELECT value FROM ledger_meta WHERE name = 'body_codec'").fetchone()
    conn.close()
    assert kinds == {0: "text", 1: "text", 2: "blob"}
    assert sizes[1] * 4 < sizes[0]  # the size column is the text's; the frame is far smaller
    assert rec == ("blob",) and codec == ("zstd",)


def test_bodies_written_as_text_still_read(tmp_path: Path) -> None:
    # covers: LED-4
    path = tmp_path / "l.db"
    with SQLiteLedger(path, compress=False) as led:  # bodies as comal wrote them before 0008
        _fill(led)
    with open_ledger(path) as led:
        scope = led.sessions()[0].scope
        call = ToolCall("c2", "Bash", '{"command": "cat log"}')
        led.append(scope, [Message.assistant("again", call), Message.tool("c2", _LOG)])
        texts = [e.message.text for e in led.entries(scope)]
        assert texts.count(_LOG) == 2
        assert verify(led, search=True).ok
    conn = sqlite3.connect(path)
    kinds = [r[0] for r in conn.execute("SELECT typeof(body) FROM entries ORDER BY seq")]
    conn.close()
    assert kinds == ["text", "text", "text", "text", "blob"]


def _flip(frame: bytes) -> bytes:
    return frame[:-12] + bytes(b ^ 0x5A for b in frame[-12:])


_OTHER = message_to_json(Message.tool("c1", _LOG.replace("done", "DONE")))


@pytest.mark.parametrize(
    ("table", "where", "change"),
    [
        ("entries", "seq = 2", _flip),  # a frame damaged inside
        ("entries", "seq = 2", lambda _: zstandard.ZstdCompressor().compress(_OTHER.encode())),
        ("records", "kind = 'output'", lambda _: b"\x28\xb5\x2f\xfd"),  # a cut frame
    ],
)
def test_a_frame_changed_at_rest_is_damage(
    tmp_path: Path, table: str, where: str, change: Callable[[bytes], bytes]
) -> None:
    # covers: LED-6
    path = tmp_path / "l.db"
    with open_ledger(path) as led:
        _fill(led)
        scope = led.sessions()[0].scope
    conn = sqlite3.connect(path)
    (frame,) = conn.execute(f"SELECT body FROM {table} WHERE {where}").fetchone()
    assert isinstance(frame, bytes)
    conn.execute(f"UPDATE {table} SET body = ? WHERE {where}", (change(frame),))
    conn.commit()
    conn.close()
    with open_ledger(path) as led:
        with pytest.raises(LedgerRowDamaged):
            if table == "records":
                led.records(scope, "event")
            else:
                led.entries(scope)
        assert [f.kind for f in verify(led).faults] == ["digest"]


@given(st.lists(st.sampled_from([_LOG, _LOG[:600], "short", "x" * 4000, "é" * 700]), max_size=80))
def test_a_batch_packs_as_each_body_alone(texts: list[str]) -> None:
    # covers: LED-6
    # 32 large bodies or more are compressed on zstd's threads: the stored values must read
    # back as the same texts, framed exactly where packing each alone frames them.
    from comal.ledger._bodies import pack_many

    raws = [_raw(t) for t in texts]
    stored = pack_many(texts, raws)()
    assert [unpack(s) for s in stored] == texts
    assert [isinstance(s, bytes) for s in stored] == [
        isinstance(pack(t, r), bytes) for t, r in zip(texts, raws, strict=True)
    ]


def test_a_large_batch_is_compressed_on_another_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    # covers: LED-6
    import threading

    from comal.ledger import _bodies

    seen: list[str] = []
    real = _bodies._pack_large

    def spy(*args: object, **kwargs: object) -> list[str | bytes]:
        seen.append(threading.current_thread().name)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_bodies, "_pack_large", spy)
    texts = [f"{k} {_LOG}" for k in range(40)]
    stored = _bodies.pack_many(texts, [_raw(t) for t in texts])()
    assert seen == ["comal-pack"] and all(isinstance(s, bytes) for s in stored)
    assert [unpack(s) for s in stored] == texts
