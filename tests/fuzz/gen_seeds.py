#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz harnesses (tests/fuzz/<harness>/).

Run from anywhere: python3 tests/fuzz/gen_seeds.py. Standard library only.
The seeds are small valid inputs and near misses, so libFuzzer starts from
the interesting paths; the files are committed, this script says how they
were made.
"""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(harness, name, data):
    d = os.path.join(HERE, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def safetensors(entries, meta=None, raw_header=None, pad=True):
    """entries: list of (name, dtype, shape, bytes)."""
    header, data, off = {}, b"", 0
    if meta is not None:
        header["__metadata__"] = meta
    for name, dt, shape, b in entries:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(b)]}
        data += b
        off += len(b)
    h = raw_header if raw_header is not None else json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def seeds_safetensors():
    f32 = struct.pack("<6f", 1, 2, 3, 4, 5, 6)
    write("safetensors", "two_tensors", safetensors(
        [("w", "F32", [2, 3], f32), ("b", "F64", [1], struct.pack("<d", 0.5))], {"step": "3"}))
    write("safetensors", "all_dtypes", safetensors([
        ("f32", "F32", [1], struct.pack("<f", 1)), ("f64", "F64", [], struct.pack("<d", 2)),
        ("i64", "I64", [2], struct.pack("<2q", -1, 2**62)), ("bool", "BOOL", [3], b"\x01\x00\x01"),
        ("bf16", "BF16", [2], b"\x80\x3f\x00\x40"), ("empty", "F32", [0, 4], b"")]))
    write("safetensors", "empty_header", safetensors([], raw_header=b"{}"))
    write("safetensors", "meta_only", safetensors([], {"a": "b", "c": ""}))
    write("safetensors", "bad_bool", safetensors([("m", "BOOL", [2], b"\x01\x02")]))
    write("safetensors", "overlap", safetensors([], raw_header=(
        b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
        b'"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}')) + b"\0" * 4)
    write("safetensors", "nul_key", safetensors([], raw_header=(
        b'{"\\u0000x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}')) + b"\0" * 4)
    # found by fuzz_safetensors: cJSON loads a bad \u escape as an empty name
    write("safetensors", "bad_u_escape", safetensors([], raw_header=(
        b'{"\\u0/00x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}')) + b"\0" * 4)
    write("safetensors", "truncated", safetensors([("w", "F32", [2, 3], f32)])[:-5])


def elf(segments, phoff=64, e_type=3, machine=62, extra=b""):
    """A minimal little-endian ELF64 with the given (p_type, offset, filesz)
    program headers and no section headers."""
    phnum = len(segments)
    eh = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    eh += struct.pack("<HHIQQQIHHHHHH", e_type, machine, 1, 0, phoff, 0, 0, 64, 56, phnum, 64, 0, 0)
    body = bytearray(eh)
    body += b"\0" * (phoff - len(body))
    for p_type, off, filesz in segments:
        body += struct.pack("<IIQQQQQQ", p_type, 5, off, off, off, filesz, filesz, 4096)
    body += extra
    return bytes(body)


def seeds_plugin_check():
    size = 64 + 2 * 56 + 64
    good = elf([(1, 0, size), (2, 176, 32)], extra=b"\0" * 64)
    write("plugin_check", "minimal_so", good)
    write("plugin_check", "cut_segment", good[:150])
    write("plugin_check", "cut_header", good[:40])
    write("plugin_check", "executable", elf([(1, 0, 176)], e_type=2))
    write("plugin_check", "other_machine", elf([(1, 0, 176)], machine=183))
    write("plugin_check", "phdrs_past_end", elf([(1, 0, 64)], phoff=4000))
    write("plugin_check", "not_elf", b"GROUP ( libc.so.6 )\n")
    # as plugin info: abi (odd first byte = forced valid), kind, name
    write("plugin_check", "info_attention", struct.pack("<II", 1, 2) + b"standard")
    write("plugin_check", "info_backend", struct.pack("<II", 1, 1) + b"cpu")
    write("plugin_check", "info_bad_name", struct.pack("<II", 1, 2) + b"has space/slash")


def seeds_tensor_table():
    def num(d):
        return b"\x00" + struct.pack(">d", d)
    def lst(*items):
        return b"\x03" + bytes([len(items)]) + b"".join(items)
    write("tensor_table", "matrix_f32", b"\x01" + lst(lst(num(1), num(2)), lst(num(3), num(4))))
    write("tensor_table", "ints_i64", b"\x03" + lst(b"\x01\x05", b"\x01\xfb", b"\x04\x08"))
    write("tensor_table", "bools", b"\x04" + lst(b"\x02\x01", b"\x02\x00"))
    write("tensor_table", "ragged", b"\x02" + lst(lst(num(1)), lst(num(1), num(2))))
    write("tensor_table", "nan_inf_bf16", b"\x05" + lst(b"\x04\x00", b"\x04\x01", b"\x04\x02"))
    write("tensor_table", "string_leaf", b"\x01" + lst(b"\x05\x02ab"))
    write("tensor_table", "odd_key", b"\x01\x06\x02" + num(1) + num(2) + b"\x00" + num(3))
    write("tensor_table", "deep", b"\x07" + b"\x03\x01" * 9 + num(1))


def seeds_attn_options():
    # variant, n, then per option: name pick, type, kind, 8 bytes, small, strlen, str, str?
    opt = lambda pick, t, kind, small: bytes([pick, t, kind]) + b"\0" * 8 + bytes([small, 0, 1])
    for v in range(6):
        write("attn_options", "variant%d_defaults" % v, bytes([v, 0, 2, 16, 16, 1]))
        write("attn_options", "variant%d_two" % v, bytes([v, 2]) + opt(1, 0, 2, 8) + opt(2, 1, 2, 3) + bytes([2, 16, 16, 1]))


if __name__ == "__main__":
    seeds_safetensors()
    seeds_plugin_check()
    seeds_tensor_table()
    seeds_attn_options()
