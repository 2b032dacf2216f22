"""`dg.utils.tensorboard.SummaryWriter`: the event file it writes is TensorBoard's format
(TFRecord frames with valid masked CRC-32C checksums, Event protocol buffers), read back
here by an independent decoder."""

from __future__ import annotations

import struct

import pytest

import dualgraph as dg
from dualgraph.utils.tensorboard import SummaryWriter, crc32c


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return value, i


def _fields(buf: bytes) -> list[tuple[int, object]]:
    """(field number, value) pairs of one protocol-buffer message."""
    out, i = [], 0
    while i < len(buf):
        key, i = _varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 1:
            value, i = struct.unpack("<d", buf[i:i + 8])[0], i + 8
        elif wire == 5:
            value, i = struct.unpack("<f", buf[i:i + 4])[0], i + 4
        else:
            n, i = _varint(buf, i)
            value, i = buf[i:i + n], i + n
        out.append((field, value))
    return out


def _unmask(masked: int) -> int:
    rot = (masked - 0xA282EAD8) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


def _records(path) -> list[bytes]:
    data, i, out = path.read_bytes(), 0, []
    while i < len(data):
        header = data[i:i + 8]
        (n,) = struct.unpack("<Q", header)
        assert _unmask(struct.unpack("<I", data[i + 8:i + 12])[0]) == crc32c(header)
        body = data[i + 12:i + 12 + n]
        assert _unmask(struct.unpack("<I", data[i + 12 + n:i + 16 + n])[0]) == crc32c(body)
        out.append(body)
        i += 16 + n
    return out


def test_crc32c_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283


def test_scalars_round_trip(tmp_path) -> None:
    with SummaryWriter(log_dir=tmp_path / "run") as writer:
        writer.add_scalar("Loss/train", dg.tensor(0.25), 3)
        writer.add_scalar("lr", 1e-3, 500)
        writer.add_scalars("loss", {"a": 1.0, "b": 2.0}, 7)
        assert writer.get_logdir() == str(tmp_path / "run")
    (path,) = (tmp_path / "run").iterdir()
    assert path.name.startswith("events.out.tfevents.")
    events = [dict(_fields(r)) for r in _records(path)]
    assert events[0][3] == b"brain.Event:2"
    got = []
    for e in events[1:]:
        for field, value in _fields(e[5]):
            assert field == 1
            v = dict(_fields(value))
            got.append((e.get(2, 0), v[1].decode(), v[2]))
    assert got == [(3, "Loss/train", 0.25), (500, "lr", pytest.approx(1e-3)),
                   (7, "loss/a", 1.0), (7, "loss/b", 2.0)]


def test_closed_writer_and_bad_values_are_refused(tmp_path) -> None:
    writer = SummaryWriter(log_dir=tmp_path)
    with pytest.raises(ValueError, match="expected a scalar"):
        writer.add_scalar("x", dg.ones(2))
    writer.close()
    with pytest.raises(RuntimeError, match="closed"):
        writer.add_scalar("x", 1.0)
