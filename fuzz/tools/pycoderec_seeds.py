#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Seeds of fuzz/fuzz_pycoderec.c: REC_PY_CODE records (bpf/pycode_rec.h)
as bpf/pycode.bpf.c makes them, of a 3.12 code object with an ASCII file
and qualname and a real location table, whole and with the table cut.
Usage: pycoderec_seeds.py DIR"""
import os
import struct
import sys

TYPE_TYPE, STR_T, BYTES_T, CODE_T = 0x1000, 0x2000, 0x3000, 0x4000
REC_HDR = struct.Struct("<HHIIIQ")
HEAD = struct.Struct("<QQQQQ8s8siHHQQq")
STR = struct.Struct("<QQqIHH")
ASCII_STATE = 1 << 2 | 1 << 5 | 1 << 6
# 3.12: RESUME on line 8, then 3 units on line 9.
TABLE = bytes([0x80, 0x00, 0x80 | 11 << 3 | 2, 0x04, 0x0a])


def record(file, qual, table, table_sent):
    data = file + qual + table[:table_sent]
    body = HEAD.pack(0x7f0000001000, CODE_T, TYPE_TYPE, TYPE_TYPE, TYPE_TYPE, b"str",
                     b"bytes", 8, table_sent, 0, 0x5000, BYTES_T, len(table))
    body += STR.pack(0x6000, STR_T, len(file), ASCII_STATE, len(file), 0)
    body += STR.pack(0x7000, STR_T, 7, ASCII_STATE, 0, 0)
    body += STR.pack(0x8000, STR_T, len(qual), ASCII_STATE, len(qual), 0)
    size = REC_HDR.size + len(body) + len(data)
    # REC_PY_CODE's number is set by the harness; the row byte 4 is 3.12.
    return bytes([4, 1]) + REC_HDR.pack(0, size, 0, 1, 1, 0) + body + data


def main(out):
    os.makedirs(out, exist_ok=True)
    seeds = {
        "seed-3.12-whole": record(b"/home/me/train.py", b"Model.forward", TABLE, len(TABLE)),
        "seed-3.12-cut-table": record(b"/home/me/train.py", b"Model.forward", TABLE, 3),
    }
    for name, b in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(b)


if __name__ == "__main__":
    main(sys.argv[1])
