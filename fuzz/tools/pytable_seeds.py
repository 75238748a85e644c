# SPDX-License-Identifier: MIT
"""Writes fuzz_pytable's seeds into DIR: the line tables of a few code
objects of tests/unit/pycode/sample.py as each CPython compiled them,
taken from tests/unit/pycode_fixtures.h, in the harness's framing (a
version byte, co_firstlineno, the table).

Usage: pytable_seeds.py DIR"""
import os
import re
import struct
import sys

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WANT = {"far_apart", "long_line", "handlers", "back_and_forth", "loop"}


def main(out):
    with open(os.path.join(TOP, "tests", "unit", "pycode_fixtures.h")) as f:
        src = f.read()
    tables = dict(re.findall(r"static const uint8_t (\w+)_table\[\] = \{([^}]*)\};", src))
    n = 0
    for hexv, name, first, tag in re.findall(r'\{ 0x([0-9a-f]+), "([^"]+)", (\d+), (\w+)_table',
                                             src):
        ver, func = name.split(" ", 1)
        if func not in WANT or ver == "3.11.2":
            continue
        minor = (int(hexv, 16) >> 16) & 0xff
        body = bytes(int(x, 16) for x in re.findall(r"0x([0-9a-f]{2})", tables[tag]))
        with open(os.path.join(out, "seed-%s-%s" % (ver, func)), "wb") as f:
            f.write(bytes([minor - 8]) + struct.pack("<i", int(first)) + body)
        n += 1
    print("pytable_seeds: %d seeds in %s" % (n, out))


main(sys.argv[1])
