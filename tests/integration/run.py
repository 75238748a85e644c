# SPDX-License-Identifier: MIT
"""Runs tests/integration/test_*.py: every function test_* takes no
argument; it passes, fails (AssertionError or any exception) or raises
harness.Skip. Usage: run.py [substring filter...]"""
import importlib.util
import os
import shutil
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import harness  # noqa: E402


def main(argv):
    filters = argv[1:]
    passed = failed = skipped = 0
    n = 0
    if os.geteuid() != 0:
        print("skip - integration tests load BPF programs and need root")
        print("0 passed, 0 failed, 1 skipped")
        return 0
    if not os.path.exists(harness.CGBPF):
        print("not ok - %s missing: run make first" % harness.CGBPF)
        print("0 passed, 1 failed")
        return 1
    for fn in sorted(os.listdir(HERE)):
        if not (fn.startswith("test_") and fn.endswith(".py")):
            continue
        spec = importlib.util.spec_from_file_location(fn[:-3], os.path.join(HERE, fn))
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        failed_before = failed
        for name in sorted(k for k in vars(mod) if k.startswith("test_")):
            full = "%s::%s" % (fn[:-3], name)
            if filters and not any(f in full for f in filters):
                continue
            n += 1
            t0 = time.time()
            try:
                try:
                    getattr(mod, name)()
                finally:
                    # A failed test may leave a capture running (a -a one
                    # would probe every later test's processes).
                    harness.kill_leftovers()
            except harness.Skip as e:
                skipped += 1
                print("ok %d - %s # SKIP %s" % (n, full, e))
                continue
            except Exception as e:  # noqa: BLE001 - report every failure
                failed += 1
                print("not ok %d - %s (%.1fs): %s: %s" % (n, full, time.time() - t0,
                                                        type(e).__name__, e))
                for line in traceback.format_exc().splitlines()[-8:]:
                    print("#   " + line)
                continue
            passed += 1
            print("ok %d - %s (%.1fs)" % (n, full, time.time() - t0))
            sys.stdout.flush()
        # A file's tests may share one recording, so its folders go only
        # after the last of them.
        if failed == failed_before:
            for d in harness.made_dirs:
                shutil.rmtree(d, ignore_errors=True)
        elif harness.made_dirs:
            print("# %s: a test failed; its files are kept in %s" %
                  (fn, " ".join(harness.made_dirs)))
        del harness.made_dirs[:]
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
