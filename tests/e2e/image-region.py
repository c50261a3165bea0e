#!/usr/bin/python3
"""Compares a region of two screenshots (PNGs carrel encoded: 8-bit RGB, no row filters, or
binary PPMs), stdlib only.
  image-region.py diff A B X Y W H      prints how many pixels of the region differ
  image-region.py crop A X Y W H OUT    writes the region, 3x larger, as a PPM (for tesseract)"""
import re
import struct
import sys
import zlib


def load(path):
    data = open(path, "rb").read()
    if data[:4] != b"\x89PNG":
        head = re.match(rb"P6\s+(\d+)\s+(\d+)\s+255\s", data)
        if not head:
            raise ValueError(f"{path}: not a P6 PPM with maxval 255")
        return int(head[1]), int(head[2]), data[head.end():]
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            if (depth, colour) != (8, 2):
                raise ValueError(f"{path}: not 8-bit RGB")
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * 3
    rows = []
    for y in range(height):
        row = raw[y * (stride + 1):(y + 1) * (stride + 1)]
        if row[0] != 0:
            raise ValueError(f"{path}: row {y} uses PNG filter {row[0]} (carrel writes none)")
        rows.append(row[1:])
    return width, height, b"".join(rows)


def region(image, x, y, w, h):
    width, height, px = image
    if x + w > width or y + h > height:
        raise ValueError(f"region {x},{y},{w},{h} is not inside {width}x{height}")
    return [px[(y + r) * width * 3 + x * 3:(y + r) * width * 3 + (x + w) * 3] for r in range(h)]


def main(argv):
    if argv[1] == "diff":
        a, b = load(argv[2]), load(argv[3])
        x, y, w, h = map(int, argv[4:8])
        ra, rb = region(a, x, y, w, h), region(b, x, y, w, h)
        print(sum(1 for la, lb in zip(ra, rb) for i in range(0, len(la), 3)
                  if la[i:i + 3] != lb[i:i + 3]))
        return 0
    if argv[1] == "crop":
        x, y, w, h = map(int, argv[3:7])
        rows = region(load(argv[2]), x, y, w, h)
        with open(argv[7], "wb") as out:
            out.write(b"P6\n%d %d\n255\n" % (w * 3, h * 3))
            for line in rows:
                big = b"".join(line[i:i + 3] * 3 for i in range(0, len(line), 3))
                out.write(big * 3)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
