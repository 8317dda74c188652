"""Parquet page checksums, verified without decoding a page.

A Parquet file written with page checksums (``pq.write_table(..., write_page_checksum=True)``)
stores in each page header the CRC-32 of the page's bytes as written (compressed, after the
header): the ``crc`` field of ``PageHeader`` in the Parquet format's ``parquet.thrift``. This
module walks the pages of every column chunk the footer lists, reads each page header (Thrift
compact protocol) and compares the stored CRC with ``zlib.crc32`` of the page's bytes. Nothing
is decompressed or decoded, so a part is verified at the speed of reading its bytes; polars,
which scoring reads the store with, does not verify page checksums itself.

Pages without a ``crc`` (parts written before checksums were) are counted as unchecked, not
as damage, so old stores still read.
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass

import pyarrow.parquet as pq

from ..errors import PageChecksumError as PageChecksumError  # re-exported

__all__ = ["PageChecksumError", "PageCheck", "verify_page_checksums"]

#: Thrift compact protocol type ids (``TCompactProtocol``).
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY = range(9)
_LIST, _SET, _MAP, _STRUCT = 9, 10, 11, 12
#: ``PageHeader`` field ids: compressed_page_size and crc.
_COMPRESSED_SIZE, _CRC = 3, 4
_MAX_DEPTH = 64


@dataclass(frozen=True)
class PageCheck:
    """What :func:`verify_page_checksums` found in a file without damage.

    Attributes
    ----------
    checked : int
        Pages whose CRC matched.
    unchecked : int
        Pages written without a CRC (nothing to compare).
    """

    checked: int
    unchecked: int


class _Reader:
    """A cursor over a buffer holding Thrift compact-protocol structs."""

    def __init__(self, buf: memoryview, pos: int) -> None:
        self.buf = buf
        self.pos = pos

    def byte(self) -> int:
        """Read one byte."""
        if self.pos >= len(self.buf):
            raise PageChecksumError("page header runs past the column chunk")
        b = self.buf[self.pos]
        self.pos += 1
        return b

    def varint(self) -> int:
        """Read an unsigned LEB128 varint."""
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 70:
                raise PageChecksumError("page header holds a malformed varint")

    def zigzag(self) -> int:
        """Read a zigzag-encoded signed varint."""
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def skip(self, kind: int, depth: int) -> None:
        """Skip one value of compact type ``kind``."""
        if depth > _MAX_DEPTH:
            raise PageChecksumError("page header nests too deeply")
        if kind in (_TRUE, _FALSE):
            return
        if kind == _BYTE:
            self.byte()
        elif kind in (_I16, _I32, _I64):
            self.varint()
        elif kind == _DOUBLE:
            self.advance(8)
        elif kind == _BINARY:
            self.advance(self.varint())
        elif kind in (_LIST, _SET):
            head = self.byte()
            size = head >> 4 if head >> 4 != 15 else self.varint()
            for _ in range(size):
                self.skip_element(head & 0x0F, depth + 1)
        elif kind == _MAP:
            size = self.varint()
            if size:
                types = self.byte()
                for _ in range(size):
                    self.skip_element(types >> 4, depth + 1)
                    self.skip_element(types & 0x0F, depth + 1)
        elif kind == _STRUCT:
            self.struct(depth + 1)
        else:
            raise PageChecksumError(f"page header holds an unknown Thrift type {kind}")

    def skip_element(self, kind: int, depth: int) -> None:
        """Skip a list, set or map element (a boolean element is one byte)."""
        if kind in (_TRUE, _FALSE):
            self.byte()
        else:
            self.skip(kind, depth)

    def advance(self, n: int) -> None:
        """Skip ``n`` bytes."""
        if n < 0 or self.pos + n > len(self.buf):
            raise PageChecksumError("page header runs past the column chunk")
        self.pos += n

    def struct(self, depth: int, wanted: tuple[int, ...] = ()) -> dict[int, int]:
        """Read a struct; return the integer fields whose ids are in ``wanted``."""
        found: dict[int, int] = {}
        last = 0
        while True:
            head = self.byte()
            kind = head & 0x0F
            if kind == _STOP:
                return found
            delta = head >> 4
            fid = last + delta if delta else self.zigzag()
            last = fid
            if fid in wanted and kind in (_I16, _I32, _I64):
                found[fid] = self.zigzag()
            else:
                self.skip(kind, depth)


def _chunk_ranges(meta: pq.FileMetaData) -> list[tuple[int, int, str]]:
    """Return (start, length, column path) of every column chunk in the footer."""
    ranges = []
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        for c in range(group.num_columns):
            col = group.column(c)
            start = col.data_page_offset
            if col.has_dictionary_page and 0 < (col.dictionary_page_offset or 0) < start:
                start = col.dictionary_page_offset
            ranges.append((start, col.total_compressed_size, col.path_in_schema))
    return ranges


def _verify_chunk(data: bytes, column: str, offset: int) -> tuple[int, int]:
    """Verify the pages of one column chunk; return (checked, unchecked) pages.

    The walk is compiled (``_core.traj.verify_pages``, csrc/traj/pages.cpp); :class:`_Reader`
    is the same walk in Python, kept as its reference.
    """
    from .. import _core  # here: tumorboard.traj imports without the compiled core

    checked, unchecked, at, mismatch, why = _core.traj.verify_pages(data)
    if at < 0:
        return checked, unchecked
    if mismatch:
        raise PageChecksumError(
            f"column {column!r}, page at byte {offset + at}: CRC-32 mismatch (the page's "
            "bytes changed after it was written)"
        )
    raise PageChecksumError(f"column {column!r}, byte {offset + at}: {why}")


def _verify_chunk_python(data: memoryview, column: str, offset: int) -> tuple[int, int]:
    """Verify a column chunk as :func:`_verify_chunk` does, in Python (the tests' reference)."""
    checked = unchecked = 0
    pos = 0
    while pos < len(data):
        reader = _Reader(data, pos)
        try:
            fields = reader.struct(0, (_COMPRESSED_SIZE, _CRC))
        except PageChecksumError as exc:
            raise PageChecksumError(f"column {column!r}, byte {offset + pos}: {exc}") from None
        size = fields.get(_COMPRESSED_SIZE)
        end = reader.pos + (size if size is not None else -1)
        if size is None or size < 0 or end > len(data):
            raise PageChecksumError(
                f"column {column!r}, byte {offset + pos}: page header with an impossible size"
            )
        crc = fields.get(_CRC)
        if crc is None:
            unchecked += 1
        elif zlib.crc32(data[reader.pos : end]) != crc & 0xFFFFFFFF:
            raise PageChecksumError(
                f"column {column!r}, page at byte {offset + pos}: CRC-32 mismatch (the page's "
                "bytes changed after it was written)"
            )
        else:
            checked += 1
        pos = end
    return checked, unchecked


def verify_page_checksums(path: str | os.PathLike[str]) -> PageCheck:
    """Verify the CRC-32 of every page of a Parquet file, without decoding any page.

    Parameters
    ----------
    path : str or os.PathLike
        The Parquet file.

    Returns
    -------
    PageCheck
        Pages checked and pages without a CRC.

    Raises
    ------
    PageChecksumError
        A page whose bytes do not match its CRC, or a page header that does not parse (the
        message names the column and the byte offset).
    OSError
        The file cannot be read, or its footer is not Parquet (pyarrow's error).
    """
    with open(path, "rb") as fh:
        meta = pq.ParquetFile(fh).metadata
        checked = unchecked = 0
        for start, length, column in _chunk_ranges(meta):
            fh.seek(start)
            data = fh.read(length)
            if len(data) != length:
                raise PageChecksumError(f"column {column!r}: column chunk runs past end of file")
            c, u = _verify_chunk(data, column, start)
            checked += c
            unchecked += u
    return PageCheck(checked=checked, unchecked=unchecked)
