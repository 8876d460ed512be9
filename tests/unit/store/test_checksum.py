"""The log's CRC-32 is zlib's checksum, whichever library computes it."""

from __future__ import annotations

import zlib

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from service.store import checksum
from service.store.log import frame_parts


@given(st.binary(max_size=4096), st.binary(max_size=4096), st.integers(0, 2**32 - 1))
def test_it_is_zlib_s_crc32_whole_chained_and_from_any_start(
    first: bytes, second: bytes, start: int
) -> None:
    assert checksum.crc32(first) == zlib.crc32(first)
    assert checksum.crc32(second, checksum.crc32(first)) == zlib.crc32(first + second)
    assert checksum.crc32(first, start) == zlib.crc32(first, start)


def test_it_takes_the_buffers_the_log_is_given() -> None:
    data = bytes(range(256)) * 400
    view = memoryview(data)[7:90_001]
    assert checksum.crc32(view) == zlib.crc32(view)
    assert checksum.crc32(pa.py_buffer(data)) == zlib.crc32(data)
    assert checksum.crc32(bytearray(data)) == zlib.crc32(data)


def test_the_fast_one_is_used_where_installed() -> None:
    # isal is a dependency (pyproject.toml): the zlib fallback is for platforms without it.
    from isal import isal_zlib

    assert checksum.crc32 is isal_zlib.crc32


def test_a_frame_s_checksums_are_the_format_s() -> None:
    # The frame header: magic, length, CRC-32 of the payload, CRC-32 of those 12 bytes
    # (docs/durability.md): a log written before reads now, and the other way round.
    head, *parts = frame_parts([b"header", b"body"])
    assert parts == [b"header", b"body"]
    assert int.from_bytes(head[8:12], "little") == zlib.crc32(b"headerbody")
    assert int.from_bytes(head[12:16], "little") == zlib.crc32(head[:12])
