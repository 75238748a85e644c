# SPDX-License-Identifier: MIT
"""Dumps the line tables of every code object in sample.py, as this
interpreter compiles it, with the line CPython itself gives each
instruction (dis.findlinestarts for 3.8/3.9, co_lines() for 3.10+, and
co_positions() agreeing with it for 3.11+): JSON on stdout. Run by gen.py
with each interpreter; runs on 3.8-3.13."""
import dis
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def codes(co, prefix=""):
    name = getattr(co, "co_qualname", co.co_name)
    yield co, name
    for c in co.co_consts:
        if hasattr(c, "co_code"):
            for sub in codes(c):
                yield sub


def lines_of(co):
    n = len(co.co_code) // 2
    out = [None] * n
    if sys.version_info < (3, 10):
        starts = list(dis.findlinestarts(co))
        for i in range(n):
            line = None
            for off, ln in starts:
                if off <= 2 * i:
                    line = ln
            out[i] = line
        return out
    for start, end, line in co.co_lines():
        for off in range(start, end, 2):
            out[off // 2] = line
    if sys.version_info >= (3, 11):
        pos = [p[0] for p in co.co_positions()]
        assert pos == out, (co.co_name, pos, out)
    return out


def main():
    with open(os.path.join(HERE, "sample.py")) as f:
        top = compile(f.read(), "sample.py", "exec")
    table = "co_lnotab" if sys.version_info < (3, 10) else "co_linetable"
    out = []
    for co, name in codes(top):
        out.append({
            "name": name,
            "firstlineno": co.co_firstlineno,
            "table": list(getattr(co, table)),
            "lines": [-1 if x is None else x for x in lines_of(co)],
        })
    json.dump({"hexversion": sys.hexversion, "version": "%d.%d.%d" % sys.version_info[:3],
               "codes": out}, sys.stdout)


main()
