"""`dg.utils.tensorboard`: `SummaryWriter` for scalars, writing TensorBoard's event files.

PyTorch's writer needs the ``tensorboard`` package; this one writes the file format itself
(TFRecord framing with masked CRC-32C checksums around ``Event`` protocol buffers, encoded
here by hand), so ``tensorboard --logdir`` reads what a training script logs and nothing
has to be installed. Scalars are what it writes (``add_scalar``, ``add_scalars``);
images, histograms, graphs and the rest are not implemented.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from typing import Any

import numpy as np

# ----------------------------------------------------------------- the record format


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1  # Castagnoli, reflected
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of ``data``, as TFRecord uses."""
    crc = 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked(crc: int) -> int:
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(data: bytes) -> bytes:
    """One TFRecord: length, its masked CRC, the data, its masked CRC (little-endian)."""
    length = struct.pack("<Q", len(data))
    return (length + struct.pack("<I", _masked(crc32c(length))) + data
            + struct.pack("<I", _masked(crc32c(data))))


# Protocol-buffer encoding of the few fields an Event with scalars has:
# Event{1: wall_time double, 2: step int64, 3: file_version string, 5: summary Summary},
# Summary{1: repeated value Value}, Value{1: tag string, 2: simple_value float}.


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative int64 values are ten-byte two's complement varints
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _bytes_field(field: int, data: bytes) -> bytes:
    return _key(field, 2) + _varint(len(data)) + data


def event(wall_time: float, step: int = 0, file_version: str | None = None,
          scalars: list[tuple[str, float]] = ()) -> bytes:
    """An ``Event`` message: a file-version header, or scalars ``(tag, value)`` at
    ``step``."""
    out = _key(1, 1) + struct.pack("<d", wall_time)
    if step:
        out += _key(2, 0) + _varint(int(step))
    if file_version is not None:
        out += _bytes_field(3, file_version.encode())
    if scalars:
        values = b"".join(
            _bytes_field(1, _bytes_field(1, tag.encode()) + _key(2, 5)
                         + struct.pack("<f", value))
            for tag, value in scalars)
        out += _bytes_field(5, values)
    return out


# ----------------------------------------------------------------------- the writer


def _scalar(value: Any) -> float:
    arr = np.asarray(value.detach().numpy() if hasattr(value, "detach") else value)
    if arr.size != 1:
        raise ValueError(f"add_scalar: expected a scalar value, got shape {arr.shape}")
    return float(arr.reshape(()))


class SummaryWriter:
    """Writes scalars to an event file in ``log_dir`` (default ``runs/<time>_<host>``
    plus ``comment``), as ``torch.utils.tensorboard.SummaryWriter``.

    ``SummaryWriter(log_dir=None, comment='', purge_step=None, max_queue=10,
    flush_secs=120, filename_suffix='')``: records are buffered and written every
    ``max_queue`` events, every ``flush_secs`` seconds, on `flush` and on `close`.
    ``purge_step`` is accepted; earlier events in other files are not purged.
    """

    def __init__(self, log_dir: str | os.PathLike | None = None, comment: str = "",
                 purge_step: int | None = None, max_queue: int = 10, flush_secs: int = 120,
                 filename_suffix: str = "") -> None:
        if log_dir is None:
            stamp = time.strftime("%b%d_%H-%M-%S")
            log_dir = os.path.join("runs", f"{stamp}_{socket.gethostname()}{comment}")
        self.log_dir = str(log_dir)
        os.makedirs(self.log_dir, exist_ok=True)
        name = (f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}."
                f"{os.getpid()}.0{filename_suffix}")
        self.path = os.path.join(self.log_dir, name)
        self._file: Any = open(self.path, "wb")  # noqa: SIM115 - closed by close()
        self._pending: list[bytes] = [record(event(time.time(),
                                                   file_version="brain.Event:2"))]
        self.max_queue, self.flush_secs = max_queue, flush_secs
        self._last_flush = time.time()
        self.flush()

    def get_logdir(self) -> str:
        return self.log_dir

    def _write(self, data: bytes) -> None:
        if self._file is None:
            raise RuntimeError("SummaryWriter: the writer is closed")
        self._pending.append(record(data))
        if len(self._pending) >= self.max_queue or \
                time.time() - self._last_flush >= self.flush_secs:
            self.flush()

    def add_scalar(self, tag: str, scalar_value: Any, global_step: int | None = None,
                   walltime: float | None = None, new_style: bool = False,
                   double_precision: bool = False) -> None:
        """Log ``scalar_value`` (a number or a one-element tensor) under ``tag``."""
        wall = time.time() if walltime is None else walltime
        self._write(event(wall, global_step or 0, scalars=[(tag, _scalar(scalar_value))]))

    def add_scalars(self, main_tag: str, tag_scalar_dict: dict, global_step: int | None = None,
                    walltime: float | None = None) -> None:
        """Log several scalars as ``main_tag/<tag>`` (PyTorch writes each to its own
        subdirectory run; here they share this writer's file, under those tags)."""
        wall = time.time() if walltime is None else walltime
        scalars = [(f"{main_tag}/{k}", _scalar(v)) for k, v in tag_scalar_dict.items()]
        self._write(event(wall, global_step or 0, scalars=scalars))

    def flush(self) -> None:
        """Write the buffered events to disk."""
        if self._file is None:
            return
        self._file.write(b"".join(self._pending))
        self._file.flush()
        self._pending = []
        self._last_flush = time.time()

    def close(self) -> None:
        if self._file is not None:
            self.flush()
            self._file.close()
            self._file = None

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_file", None) is not None:
            self.close()


__all__ = ["SummaryWriter"]
