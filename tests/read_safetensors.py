#!/usr/bin/python3
"""Reads a safetensors file with the standard library only (json, struct):
the proof that files written by ember follow the format. No torch, no numpy.

Usage: python3 tests/read_safetensors.py FILE

Prints, one line each:
  meta <key> <value>
  tensor <name> <dtype> <shape comma-separated or "scalar"> <values...>
Float values are printed with repr() (exact), bools as 0/1. Exits 1 with a
message on stderr when the file breaks the format.
"""
import json
import math
import struct
import sys

SIZES = {"F32": 4, "F64": 8, "I64": 8, "BOOL": 1, "BF16": 2}
CODES = {"F32": "f", "F64": "d", "I64": "q", "BOOL": "B"}


def fail(msg):
    sys.stderr.write("read_safetensors: %s\n" % msg)
    sys.exit(1)


def fmt(v):
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    return str(int(v))


def main(path):
    with open(path, "rb") as f:
        blob = f.read()
    if len(blob) < 8:
        fail("file shorter than 8 bytes")
    (n,) = struct.unpack("<Q", blob[:8])
    if 8 + n > len(blob):
        fail("header length %d beyond the file" % n)
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    data = blob[8 + n:]
    meta = header.pop("__metadata__", {})
    for k in sorted(meta):
        print("meta %s %s" % (k, meta[k]))
    spans = []
    for name in sorted(header):
        e = header[name]
        dt, shape, (b, end) = e["dtype"], e["shape"], e["data_offsets"]
        count = 1
        for d in shape:
            count *= d
        if end - b != count * SIZES[dt] or end > len(data):
            fail("bad offsets for %s" % name)
        spans.append((b, end))
        raw = data[b:end]
        if dt == "BF16":
            vals = [struct.unpack("<f", struct.pack("<I", h << 16))[0]
                    for (h,) in struct.iter_unpack("<H", raw)]
        else:
            vals = list(struct.unpack("<%d%s" % (count, CODES[dt]), raw))
        shape_s = ",".join(str(d) for d in shape) if shape else "scalar"
        print("tensor %s %s %s %s" % (name, dt, shape_s, " ".join(fmt(v) for v in vals)))
    spans.sort()
    at = 0
    for b, end in spans:
        if b != at:
            fail("gap or overlap at byte %d" % b)
        at = end
    if at != len(data):
        fail("%d data bytes, tensors cover %d" % (len(data), at))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        fail("usage: read_safetensors.py FILE")
    main(sys.argv[1])
