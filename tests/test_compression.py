"""protocol.compression: round trips, bounds, framings, and kafka-python's codecs as a referee."""

from __future__ import annotations

import gzip
import struct
import tracemalloc

import lz4.frame
import pytest
import snappy
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka import codec as kcodec

from protocol.compression import (
    XERIAL_MAGIC,
    Codec,
    CorruptRecordError,
    RecordError,
    RecordTooLargeError,
    UnsupportedCompressionError,
    compress,
    decompress,
    gzip_compress,
    gzip_decompress,
    lz4_compress,
    lz4_decompress,
    snappy_compress,
    snappy_decompress,
    zstd_compress,
    zstd_decompress,
)
from protocol.errors import ErrorCode, KafkaError

CODECS = list(Codec)
COMPRESSED = [c for c in Codec if c != Codec.NONE]
MB = 1024 * 1024

# Binary that is sometimes random, sometimes very repetitive (so codecs really compress).
payloads = st.one_of(
    st.binary(max_size=2048),
    st.builds(lambda b, n: b * n, st.binary(min_size=1, max_size=40), st.integers(1, 3000)),
)


@given(codec=st.sampled_from(CODECS), data=payloads)
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_round_trip(codec: Codec, data: bytes) -> None:
    blob = compress(codec, data)
    assert decompress(codec, blob, len(data)) == data
    assert decompress(codec, memoryview(bytearray(blob)), len(data) + 10) == data


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_large_multi_block(codec: Codec) -> None:
    data = bytes(range(256)) * 4096 + b"tail" * 100_000  # > 32 KiB / 64 KiB / 128 KiB blocks
    assert decompress(codec, compress(codec, data), len(data)) == data


@pytest.mark.parametrize("codec", CODECS)
def test_bound_is_inclusive(codec: Codec) -> None:
    data = b"0123456789" * 1000
    blob = compress(codec, data)
    assert decompress(codec, blob, len(data)) == data
    with pytest.raises(RecordTooLargeError) as e:
        decompress(codec, blob, len(data) - 1)
    assert e.value.code == ErrorCode.MESSAGE_TOO_LARGE


@pytest.mark.parametrize("codec", COMPRESSED)
def test_bomb_is_refused_without_a_big_allocation(codec: Codec) -> None:
    bomb = compress(codec, bytes(64 * MB))
    tracemalloc.start()
    try:
        with pytest.raises(RecordTooLargeError):
            decompress(codec, bomb, MB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 * MB


def test_snappy_raw_preamble_checked_before_decoding() -> None:
    # A raw block claiming 4 GiB - 1 of output, with no data behind it.
    with pytest.raises(RecordTooLargeError):
        snappy_decompress(b"\xff\xff\xff\xff\x0f" + b"\x00" * 10, MB)
    with pytest.raises(CorruptRecordError):
        snappy_decompress(b"\xff\xff\xff\xff\x7f", 1 << 40)  # beyond uint32


def test_zstd_declared_content_size_checked_first() -> None:
    blob = zstd_compress(bytes(10 * MB))
    assert zstandard.get_frame_parameters(blob).content_size == 10 * MB
    with pytest.raises(RecordTooLargeError):
        zstd_decompress(blob, MB)


@pytest.mark.parametrize("codec", CODECS)
def test_unknown_codec_and_bad_bound(codec: Codec) -> None:
    with pytest.raises(ValueError):
        decompress(codec, compress(codec, b"x"), -1)


@pytest.mark.parametrize("codec_id", [5, 6, 7, 99])
def test_unknown_codec_ids(codec_id: int) -> None:
    with pytest.raises(UnsupportedCompressionError) as e:
        decompress(codec_id, b"abc", 100)
    assert e.value.code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    with pytest.raises(UnsupportedCompressionError):
        compress(codec_id, b"abc")


def test_error_types_carry_kafka_codes() -> None:
    err = CorruptRecordError("x")
    assert isinstance(err, RecordError) and isinstance(err, KafkaError)
    assert err.code == ErrorCode.CORRUPT_MESSAGE and err.message == "x"


# --- snappy framings ----------------------------------------------------------------------


def test_snappy_writes_xerial_framing_like_snappy_java() -> None:
    data = bytes(range(256)) * 300  # 76800 bytes -> 3 blocks of <= 32 KiB input
    blob = snappy_compress(data)
    assert blob[:8] == XERIAL_MAGIC
    assert struct.unpack_from(">ii", blob, 8) == (1, 1)
    pos, blocks, total = 16, 0, 0
    while pos < len(blob):
        (n,) = struct.unpack_from(">i", blob, pos)
        raw = snappy.decompress(blob[pos + 4 : pos + 4 + n])
        assert len(raw) <= 32 * 1024
        total += len(raw)
        blocks += 1
        pos += 4 + n
    assert (blocks, total) == (3, len(data))
    empty = snappy_compress(b"")
    assert empty == XERIAL_MAGIC + struct.pack(">ii", 1, 1) + struct.pack(">i", 1) + b"\x00"
    assert snappy_decompress(empty, 0) == b""
    assert snappy_decompress(empty[:16], 0) == b""  # header only


def test_snappy_reads_raw_blocks_as_librdkafka_writes_them() -> None:
    data = b"librdkafka writes one raw snappy block " * 200
    raw = snappy.compress(data)
    assert raw[:8] != XERIAL_MAGIC
    assert snappy_decompress(raw, len(data)) == data
    assert snappy_decompress(snappy_compress(data, xerial=False), len(data)) == data
    assert snappy_decompress(kcodec.snappy_encode(data, xerial_compatible=False), len(data)) == data
    assert decompress(Codec.SNAPPY, raw, len(data)) == data


def test_snappy_xerial_version_fields_are_ignored() -> None:
    # Some writers store version/compat little-endian (kafka-python #2414); librdkafka ignores them.
    data = b"abc" * 5000
    blob = bytearray(snappy_compress(data))
    blob[8:16] = struct.pack("<ii", 1, 1)
    assert snappy_decompress(blob, len(data)) == data
    blob[8:16] = b"\xde\xad\xbe\xef" * 2
    assert snappy_decompress(blob, len(data)) == data


@pytest.mark.parametrize(
    "tail",
    [
        b"\x00\x00",  # partial block length
        struct.pack(">i", 100) + b"abc",  # block longer than the payload
        struct.pack(">i", -1),
        struct.pack(">i", 0),  # an empty block is not a snappy block
        struct.pack(">i", 3) + b"\x05ab",  # block shorter than its preamble says
    ],
)
def test_snappy_xerial_bad_blocks(tail: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        snappy_decompress(snappy_compress(b"hello" * 10) + tail, MB)


# --- lz4 ----------------------------------------------------------------------------------


def test_lz4_frame_layout_matches_the_java_client() -> None:
    blob = lz4_compress(b"x" * 200_000)
    assert blob[:4] == b"\x04\x22\x4d\x18"  # frame magic 0x184D2204
    assert blob[4] == 0x60  # FLG: version 01, independent blocks, no checksums, no size
    assert blob[5] == 0x40  # BD: 64 KiB blocks
    info = lz4.frame.get_frame_info(blob)
    assert not info["block_linked"] and not info["content_checksum"]


def test_lz4_reads_linked_blocks_checksums_and_several_frames() -> None:
    data = bytes(range(256)) * 2000
    linked = lz4.frame.compress(data, block_linked=True, content_checksum=True, block_checksum=True)
    assert lz4_decompress(linked, len(data)) == data
    two = lz4_compress(data) + lz4.frame.compress(b"second")
    assert lz4_decompress(two, len(data) + 6) == data + b"second"


def test_lz4_declared_content_size_checked_first() -> None:
    blob = lz4.frame.compress(bytes(10 * MB), store_size=True)
    assert lz4.frame.get_frame_info(blob)["content_size"] == 10 * MB
    tracemalloc.start()
    try:
        with pytest.raises(RecordTooLargeError):
            lz4_decompress(blob, MB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < MB


def test_lz4_content_checksum_mismatch() -> None:
    blob = bytearray(lz4.frame.compress(b"abc" * 1000, content_checksum=True))
    blob[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        lz4_decompress(blob, MB)


# --- zstd ---------------------------------------------------------------------------------


def test_zstd_frames_without_content_size_and_with_checksum() -> None:
    data = b"zstd streaming frame " * 30_000  # > 128 KiB: several blocks
    cctx = zstandard.ZstdCompressor(write_content_size=False, write_checksum=True)
    blob = cctx.compress(data)
    assert zstandard.get_frame_parameters(blob).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert zstd_decompress(blob, len(data)) == data
    with pytest.raises(RecordTooLargeError):
        zstd_decompress(blob, len(data) - 1)
    # streamed output, as zstd-jni's ZstdOutputStream writes it
    chunks = zstandard.ZstdCompressor().compressobj()
    streamed = chunks.compress(data) + chunks.flush()
    assert zstd_decompress(streamed, len(data)) == data


def test_zstd_several_and_skippable_frames() -> None:
    one = zstd_compress(b"one")
    two = zstandard.ZstdCompressor(write_content_size=False).compress(b"two")
    skippable = struct.pack("<II", 0x184D2A53, 4) + b"skip"
    assert zstd_decompress(one + two, 6) == b"onetwo"
    assert zstd_decompress(skippable + one + skippable, 3) == b"one"
    assert zstd_decompress(zstd_compress(b""), 0) == b""


@pytest.mark.parametrize(
    "mangle",
    [
        lambda b: b[:-1],  # truncated
        lambda b: b[:5],
        lambda b: b + b"garbage",  # trailing bytes that are not a frame
        lambda b: b + b"\x28\xb5\x2f",  # partial magic
        lambda b: b"",
    ],
)
def test_zstd_truncation_and_trailing_garbage(mangle: object) -> None:
    blob = zstandard.ZstdCompressor(write_content_size=False).compress(b"payload " * 5000)
    with pytest.raises(CorruptRecordError):
        zstd_decompress(mangle(blob), MB)  # type: ignore[operator]


# --- gzip ---------------------------------------------------------------------------------


def test_gzip_members_and_garbage() -> None:
    a, b = b"first member " * 100, b"second member " * 100
    assert gzip_decompress(gzip.compress(a) + gzip_compress(b), MB) == a + b
    with pytest.raises(CorruptRecordError):
        gzip_decompress(gzip_compress(a) + b"junk", MB)
    with pytest.raises(CorruptRecordError):
        gzip_decompress(gzip_compress(a)[:-5], MB)
    blob = bytearray(gzip_compress(a))
    blob[-8] ^= 1  # CRC32 of the member
    with pytest.raises(CorruptRecordError):
        gzip_decompress(blob, MB)


# --- hostile input ------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
@given(blob=st.binary(max_size=300))
def test_arbitrary_bytes_raise_only_record_errors(codec: Codec, blob: bytes) -> None:
    try:
        out = decompress(codec, blob, 64 * 1024)
    except RecordError:
        return
    assert len(out) <= 64 * 1024


@pytest.mark.parametrize("codec", COMPRESSED)
@given(data=st.binary(min_size=1, max_size=3000), cut=st.integers(0, 10_000), flip=st.integers())
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_damaged_payloads_raise_only_record_errors(
    codec: Codec, data: bytes, cut: int, flip: int
) -> None:
    blob = bytearray(compress(codec, data * 3))
    for damaged in (blob[: cut % len(blob)], _flip(blob, flip)):
        try:
            decompress(codec, damaged, 64 * 1024)
        except RecordError:
            pass


def _flip(blob: bytearray, where: int) -> bytearray:
    out = bytearray(blob)
    out[where % len(out)] ^= 1 << (where % 8)
    return out


# --- kafka-python as an independent referee -----------------------------------------------

KP_ENCODE = {
    Codec.GZIP: kcodec.gzip_encode,
    Codec.SNAPPY: kcodec.snappy_encode,
    Codec.LZ4: kcodec.lz4_encode,
    Codec.ZSTD: kcodec.zstd_encode,
}
KP_DECODE = {
    Codec.GZIP: kcodec.gzip_decode,
    Codec.SNAPPY: kcodec.snappy_decode,
    Codec.LZ4: kcodec.lz4_decode,
    Codec.ZSTD: kcodec.zstd_decode,
}


@pytest.mark.parametrize("codec", COMPRESSED)
@given(data=payloads)
@settings(suppress_health_check=[HealthCheck.too_slow])
def test_kafka_python_codecs_agree(codec: Codec, data: bytes) -> None:
    assert decompress(codec, KP_ENCODE[codec](data), len(data)) == data
    assert bytes(KP_DECODE[codec](compress(codec, data))) == data
