# SPDX-License-Identifier: MIT
"""park: Python threads parked at known places, for reading stacks from
outside (cgbpf check --python, issue 12).

Usage: python park.py [--threads T] [--kinds]      (default 2 threads)

Starts T threads named "py-park-0".. that go worker() -> middle() ->
park_here(), and parks the main thread in park_here() too (called from
main()); park_here() sleeps in a loop on one line, so every parked thread's
innermost frame is park_here() at that line (time.sleep is C: no Python
frame above it). With --kinds, two more threads park from other kinds of
frames: "py-park-gen" in a generator's body (worker_gen() -> parked_gen()
-> park_here()) and "py-park-async" in a coroutine run by asyncio
(worker_async() -> asyncio.run -> ... -> parked_coro() -> park_here()).
Once every worker is seen parked (sys._current_frames()), writes the
manifest and parks until killed (SIGTERM or SIGKILL).

Manifest (CGBPF_MANIFEST, written atomically, then "<it>.ready" is
created): {"pid", "python", "hexversion", "executable",
 "park_line": the sleep line, "park_file",
 "threads": [{"name", "tid": native id, "ident": pthread id (threading
   .get_ident()), "main": bool, "stack": [FRAME, ...] innermost first}]}
FRAME is pywl's (file, line, name, qualname, func, firstlineno, user).
"""
import argparse
import asyncio
import os
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import pywl  # noqa: E402


def park_here(who):
    while True:
        time.sleep(3600)  # PARK: every parked thread's innermost line


PARK_LINE = park_here.__code__.co_firstlineno + 2


def middle(who):
    park_here(who)


def worker(who):
    middle(who)


def parked_gen(who):
    yield 1
    park_here(who)
    yield 2


def worker_gen(who):
    for _ in parked_gen(who):
        pass


async def parked_coro(who):
    await asyncio.sleep(0)
    park_here(who)


def worker_async(who):
    asyncio.run(parked_coro(who))


def parked(frame):
    return frame.f_code is park_here.__code__ and frame.f_lineno == PARK_LINE


def report(main_outer, workers):
    """Writes the manifest: each worker as seen parked, main as it will be."""
    for _ in range(30000):
        frames = sys._current_frames()
        if all(t.ident in frames and parked(frames[t.ident]) for t in workers):
            break
        time.sleep(0.001)
    else:
        sys.exit("park: workers did not park within 30 s")
    park = pywl.frame_info(frames[workers[0].ident])
    me = threading.current_thread()
    out = [{"name": me.name, "tid": threading.get_native_id(), "ident": me.ident,
            "main": True, "stack": [park] + main_outer}]
    for t in workers:
        out.append({"name": t.name, "tid": t.native_id, "ident": t.ident, "main": False,
                    "stack": pywl.stack_of(frames[t.ident])})
    pywl.write_manifest(park_line=PARK_LINE, park_file=park["file"], threads=out)
    path = os.environ.get("CGBPF_MANIFEST")
    if path:
        with open(path + ".ready", "w"):
            pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kinds", action="store_true")
    a = ap.parse_args()
    if a.threads < 1:
        ap.error("--threads must be >= 1")
    workers = [threading.Thread(target=worker, args=(i,), name="py-park-%d" % i, daemon=True)
               for i in range(a.threads)]
    if a.kinds:
        workers.append(threading.Thread(target=worker_gen, args=("gen",), name="py-park-gen",
                                        daemon=True))
        workers.append(threading.Thread(target=worker_async, args=("async",),
                                        name="py-park-async", daemon=True))
    for t in workers:
        t.start()
    report(pywl.stack_of(sys._getframe()), workers); park_here("main")  # noqa: E702


if __name__ == "__main__":
    main()
