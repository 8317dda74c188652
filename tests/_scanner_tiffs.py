"""Pyramidal TIFFs with JPEG tiles written the way slide scanners write them.

tifffile's own JPEG tiles are complete JFIF streams. Scanners store abbreviated tile streams that
share one JPEGTables stream (TIFF Technical Note 2), and Aperio stores RGB tiles (photometric RGB,
components numbered 1, 2, 3, no JFIF or Adobe marker: a decoder left alone guesses YCbCr).
:func:`write_tables_pyramid` writes both kinds ("rgb": Aperio-like, "ycbcr": 2x2 subsampled),
128 px tiles, 2x levels at 0.5 um/px.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

TILE = 128


def segments(stream: bytes) -> list[tuple[int, bytes]]:
    """Split a JPEG stream into (marker, segment) pairs up to SOS; then (-1, the rest)."""
    out, pos = [], 2
    while True:
        marker = stream[pos + 1]
        (length,) = struct.unpack_from(">H", stream, pos + 2)
        out.append((marker, stream[pos : pos + 2 + length]))
        pos += 2 + length
        if marker == 0xDA:
            return out + [(-1, stream[pos:])]  # entropy-coded data and EOI


def _aperio_ids(stream: bytes) -> bytes:
    """Renumber components R, G, B (libjpeg's RGB hint) as 1, 2, 3, as Aperio's tiles are."""
    parts = []
    for marker, seg in segments(stream):
        b = bytearray(seg)
        if marker == 0xC0:
            for i in range(3):
                b[10 + 3 * i] = i + 1
        elif marker == 0xDA:
            for i in range(3):
                b[5 + 2 * i] = i + 1
        parts.append(bytes(b))
    return b"\xff\xd8" + b"".join(parts)


def _abbreviate(stream: bytes) -> tuple[bytes, bytes]:
    """Split a JPEG stream into JPEGTables (DQT, DHT) and a tile stream without tables or APPn."""
    segs = segments(stream)
    tables = b"\xff\xd8" + b"".join(s for m, s in segs if m in (0xDB, 0xC4)) + b"\xff\xd9"
    keep = b"".join(s for m, s in segs if m not in (0xDB, 0xC4) and not 0xE0 <= m <= 0xEF)
    return tables, b"\xff\xd8" + keep


def write_tables_pyramid(path: Path, img: np.ndarray, kind: str, levels: int = 2) -> Path:
    """Write ``img`` as a pyramid of abbreviated JPEG tiles sharing JPEGTables; see above."""
    import imagecodecs
    import tifffile

    with tifffile.TiffWriter(path) as tif:
        for i in range(levels):
            lv = np.ascontiguousarray(img[:: 2**i, :: 2**i])
            h, w = lv.shape[:2]
            tiles, tables = [], None
            for y in range(0, h, TILE):
                for x in range(0, w, TILE):
                    t = np.zeros((TILE, TILE, 3), np.uint8)
                    part = lv[y : y + TILE, x : x + TILE]
                    t[: part.shape[0], : part.shape[1]] = part
                    if kind == "rgb":
                        s = _aperio_ids(imagecodecs.jpeg8_encode(
                            t, 85, colorspace="rgb", outcolorspace="rgb"))  # fmt: skip
                    else:
                        s = imagecodecs.jpeg8_encode(t, 85, subsampling=(2, 2))
                    tb, tile = _abbreviate(s)
                    assert tables in (None, tb)  # the same tables for every tile
                    tables = tb
                    tiles.append(tile)
            res = 1e4 / (0.5 * 2**i)
            tif.write(iter(tiles), shape=(h, w, 3), dtype=np.uint8, tile=(TILE, TILE),
                      compression="jpeg", photometric=kind, jpegtables=tables,
                      subsampling=(1, 1) if kind == "rgb" else (2, 2),
                      compressionargs={"outcolorspace": kind}, subfiletype=1 if i else 0,
                      resolution=(res, res), resolutionunit="CENTIMETER")  # fmt: skip
    return path
