# SPDX-License-Identifier: MIT
"""Decodes what test_pfstacks wrote with tests/lib/ptrace.py and checks it
against what the program wrote. Usage: check_pfstacks.py TRACE"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import ptrace  # noqa: E402

n_pass = n_fail = 0


def check(cond, what):
    global n_pass, n_fail
    if cond:
        n_pass += 1
        print("ok %d - %s" % (n_pass + n_fail, what))
    else:
        n_fail += 1
        print("not ok %d - %s" % (n_pass + n_fail, what))


def main(path):
    t = ptrace.load(path)
    check(t.errors == [], "no decoder errors: %s" % t.errors[:3])
    s = t.perf_samples
    NUNIQUE = 70000
    check(len(s) == 3 + 1 + NUNIQUE + 1, "every sample decoded (%d)" % len(s))
    chain = ["main", "level_a", "level_b", "level_c"]
    check(all(x.functions == chain for x in s[:3]), "first samples: %s" % s[0].functions)
    check(all((x.pid, x.tid, x.cpu) == (100, 101, 1) for x in s), "pid, tid, cpu")
    check([x.ts for x in s[:3]] == [1000001000, 1000002000, 1000003000], "timestamps")
    f = s[0].frames[-1]
    check(f.mapping == "/opt/app/bin/chain" and f.rel_pc == 0x1130 and
          f.build_id == "0123456789abcdef0123456789abcdef01234567",
          "level_c frame: mapping, rel_pc, build id (%r)" % (f,))
    k = s[3]
    check(k.functions == ["main", None, "do_syscall_64"], "kernel sample frames %s" % k.functions)
    check(k.cpu_mode == 1 and s[0].cpu_mode == 2, "cpu_mode kernel / user")
    check(k.frames[1].mapping == "/lib/libfoo.so" and k.frames[1].rel_pc == 0x2222,
          "unsymbolized frame keeps mapping and rel_pc")
    check(k.frames[2].mapping == "/kernel" and k.frames[2].build_id is None,
          "kernel frames in traced_perf's kernel mapping \"/kernel\" (%r)" % (k.frames[2],))
    check(all(x.functions == ["main", "fn_%d" % i] for i, x in enumerate(s[4:4 + NUNIQUE])),
          "the distinct-frame samples")
    check(s[-1].functions == chain, "the first stack again after the interning reset")
    gens = [v["generations"] for v in t.sequences.values() if v["packets"] > NUNIQUE]
    check(gens and gens[0] >= 2, "the sample sequence cleared its state again (%s)" % gens)
    sl = {x.name: x for x in t.slices}
    check(sl["cuStreamSynchronize"].callstack == chain, "backtrace on the slice end")
    check(sl["cuLaunchKernel"].callstack is None, "no callstack on a plain slice")
    print("%d passed, %d failed" % (n_pass, n_fail))
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
