#!/usr/bin/env python3
"""Edits a checkpoint folder (DIR/ckpt-<step>) the way a lying checkpoint would differ from a true
one, for tests/checkpoint/test_checkpoint_refuse.sh. Each edit but `truncate` and `hexedit` then rewrites
state.json's sizes and CRC-32s, so that the reader's deeper checks (shapes, names, the state
against the tensors) are what must refuse it.

usage: ckpt_edit.py CKPT truncate FILE BYTES        cut FILE to BYTES (no CRC fix)
       ckpt_edit.py CKPT hexedit FILE OFFSET        flip the low bit of one byte (no CRC fix)
       ckpt_edit.py CKPT reshape FILE TENSOR D0,D1,...  the same bytes under another shape
       ckpt_edit.py CKPT drop FILE TENSOR           the tensor removed
       ckpt_edit.py CKPT flip FILE TENSOR           the low bit of its first byte flipped
       ckpt_edit.py CKPT setjson KEY/PATH JSON      a value of state.json replaced
"""
import json
import os
import struct
import sys
import zlib


def read_st(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    return header, data[8 + n:]


def write_st(path, header, buf):
    meta = header.pop("__metadata__", None)
    out, blobs, off = {}, [], 0
    if meta is not None:
        out["__metadata__"] = meta
    for name, t in header.items():
        b, e = t["data_offsets"]
        blob = buf[b:e]
        out[name] = {"dtype": t["dtype"], "shape": t["shape"], "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    text = json.dumps(out, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def fix_crc(ckpt):
    p = os.path.join(ckpt, "state.json")
    state = json.load(open(p))
    for name, rec in state["files"].items():
        data = open(os.path.join(ckpt, name), "rb").read()
        rec["bytes"] = len(data)
        rec["crc32"] = "%08x" % (zlib.crc32(data) & 0xFFFFFFFF)
    json.dump(state, open(p, "w"), indent=1)


def main():
    ckpt, op, *args = sys.argv[1:]
    if op == "truncate":
        p = os.path.join(ckpt, args[0])
        os.truncate(p, int(args[1]))
        return 0
    if op == "hexedit":
        p = os.path.join(ckpt, args[0])
        data = bytearray(open(p, "rb").read())
        data[int(args[1])] ^= 1
        open(p, "wb").write(bytes(data))
        return 0
    if op == "setjson":
        p = os.path.join(ckpt, "state.json")
        state = json.load(open(p))
        *path, last = args[0].split("/")
        o = state
        for k in path:
            o = o[int(k)] if isinstance(o, list) else o[k]
        if isinstance(o, list):
            o[int(last)] = json.loads(args[1])
        else:
            o[last] = json.loads(args[1])
        json.dump(state, open(p, "w"), indent=1)
        return 0
    p = os.path.join(ckpt, args[0])
    header, buf = read_st(p)
    name = args[1]
    if name not in header:
        print(f"ckpt_edit: no tensor {name} in {p}", file=sys.stderr)
        return 1
    if op == "reshape":
        header[name]["shape"] = [int(x) for x in args[2].split(",")]
    elif op == "drop":
        del header[name]
    elif op == "flip":
        b = header[name]["data_offsets"][0]
        buf = buf[:b] + bytes([buf[b] ^ 1]) + buf[b + 1:]
    else:
        print(__doc__, file=sys.stderr)
        return 2
    write_st(p, header, buf)
    fix_crc(ckpt)
    return 0


if __name__ == "__main__":
    sys.exit(main())
