#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""How many bytes the launches of a cgbpf trace would take as Chrome JSON.

    /usr/bin/python3 bench/chrome_json.py TRACE [MAX_LAUNCHES]

Decodes TRACE with the independent decoder (tests/lib/ptrace.py, so the
comparison does not trust cgbpf's writer), takes the first MAX_LAUNCHES
(default 10000) cuLaunchKernel slices and serializes each as a Chrome
trace-event "X" (complete) event with the same args, one per line, the way
a chrome://tracing / Perfetto-importable JSON file holds them:

    {"traceEvents":[
    {"name":"cuLaunchKernel","ph":"X","ts":...,"dur":...,"pid":...,"tid":...,"args":{...}},
    ...
    ]}

ts and dur are microseconds (the format's unit) with three decimals, so the
JSON keeps the nanosecond resolution the Perfetto trace has; separators are
compact, which is the smallest such a file gets (writers that add spaces
make it bigger). Prints key=value lines for bench/run.sh.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "tests", "lib"))
import ptrace  # noqa: E402


def us(ns):
    # Exact decimal microseconds from integer ns: a float would print
    # rounding noise ("1.8620000000000001") and inflate the count.
    return "%d.%03d" % (ns // 1000, ns % 1000)


def main(argv):
    if len(argv) not in (2, 3):
        print("usage: chrome_json.py TRACE [MAX_LAUNCHES]", file=sys.stderr)
        return 2
    limit = int(argv[2]) if len(argv) == 3 else 10000
    t = ptrace.load(argv[1])
    if t.errors:
        print("chrome_json: %s: %d decode errors, first: %s" %
              (argv[1], len(t.errors), t.errors[0]), file=sys.stderr)
        return 1
    lines = []
    for s in t.slices:
        if s.name != "cuLaunchKernel" or s.dur is None:
            continue
        args = json.dumps(s.args, separators=(",", ":"), sort_keys=True)
        lines.append('{"name":%s,"ph":"X","ts":%s,"dur":%s,"pid":%d,"tid":%d,"args":%s}' %
                     (json.dumps(s.name), us(s.ts), us(s.dur), s.pid, s.tid, args))
        if len(lines) == limit:
            break
    if not lines:
        print("chrome_json: %s: no cuLaunchKernel slices" % argv[1], file=sys.stderr)
        return 1
    head, sep, tail = '{"traceEvents":[\n', ",\n", "\n]}\n"
    doc = head + sep.join(lines) + tail
    json.loads(doc)  # it must be a file a viewer would accept
    body = len(doc.encode()) - len(head) - len(tail)
    print("json_launches=%d" % len(lines))
    print("json_bytes=%d" % len(doc.encode()))
    print("json_bytes_per_launch=%.1f" % (body / len(lines)))
    print("json_sample=%s" % lines[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
