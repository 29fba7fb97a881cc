"""Reading a PNG's pixels without a library: enough for the screenshots headless Chromium writes.

8-bit greyscale, RGB or RGBA, not interlaced; the five row filters of the PNG standard. Decodes
only; nothing here draws or judges a picture.
"""

from __future__ import annotations

import struct
import zlib

CHANNELS = {0: 1, 2: 3, 6: 4}  # colour type -> samples per pixel


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def pixels(data: bytes) -> tuple[int, int, set[tuple[int, int, int]]]:
    """(width, height, the set of RGB colours drawn)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, b""
    width = height = depth = kind = interlace = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        chunk, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if chunk == b"IHDR":
            width, height, depth, kind, _, _, interlace = struct.unpack(">IIBBBBB", body)
        elif chunk == b"IDAT":
            idat += body
        pos += 12 + length
    assert depth == 8 and kind in CHANNELS and not interlace, f"unsupported PNG (depth {depth}, type {kind})"
    n = CHANNELS[kind]
    raw, stride = zlib.decompress(idat), width * n
    prev = bytearray(stride)
    colours: set[tuple[int, int, int]] = set()
    for y in range(height):
        start = y * (stride + 1)
        kind_of_filter, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            a = line[i - n] if i >= n else 0
            b, c = prev[i], prev[i - n] if i >= n else 0
            if kind_of_filter == 1:
                line[i] = (line[i] + a) & 255
            elif kind_of_filter == 2:
                line[i] = (line[i] + b) & 255
            elif kind_of_filter == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind_of_filter == 4:
                line[i] = (line[i] + _paeth(a, b, c)) & 255
        for x in range(0, stride, n):
            px = line[x : x + n]
            colours.add((px[0], px[0], px[0]) if n == 1 else (px[0], px[1], px[2]))
        prev = line
    return width, height, colours
