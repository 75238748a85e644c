# SPDX-License-Identifier: MIT
"""cgbpf monitor: metrics scraped with a real HTTP client (curl) checked
against what the workloads did and against the flight recorder's own
trace of the same calls; dumps on request and on triggers; clean stop
with no probe left; bad input."""
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time

from harness import (CGBPF, Skip, open_gate, check, clean_trace, env_with, eq, expected_calls, kill_quiet,
                     need_nccl_ranks, start, tmpdir, touch, tp_clean, traced_funcs, wait_for, wl)

import ptrace


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Monitor:
    def __init__(self, args, d):
        import threading
        self.port = free_port()
        self.listen = "127.0.0.1:%d" % self.port
        self.dumps = os.path.join(d, "dumps")
        os.makedirs(self.dumps, exist_ok=True)
        # Workloads started after the monitor have their libraries probed
        # at their exec (their LD_LIBRARY_PATH names the fakes): they wait
        # at the child gate (child_gate.h) until -v says so. wl_env() sets it.
        self.gate = tempfile.mkdtemp(prefix="child-gate-", dir=d)
        self.p = subprocess.Popen([CGBPF, "monitor", "-v", "--listen", self.listen,
                                   "--dump-dir", self.dumps] + args, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env_with())
        self.lines = []
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()
        wait_for(lambda: "monitoring; metrics at" in self.stderr() or self.p.poll() is not None,
                 30, "the monitor to start")
        check(self.p.poll() is None, "monitor running (stderr %r)" % self.stderr())

    def _read(self):
        for line in self.p.stderr:
            if "libbpf:" in line:
                continue  # -v's libbpf debug output
            open_gate(self.gate, line)
            self.lines.append(line)

    def stderr(self):
        return "".join(self.lines)

    def wl_env(self, **kw):
        """A workload's environment: the fakes, and the child gate."""
        return env_with(CGBPF_CHILD_GATE=self.gate, **kw)

    def scrape(self):
        r = subprocess.run(["curl", "-sS", "--max-time", "10", "http://%s/metrics" % self.listen],
                           capture_output=True, text=True, timeout=30)
        eq(r.returncode, 0, "curl exit (stderr %r)" % r.stderr)
        return parse(r.stdout)

    def request_dump(self):
        """cgbpf dump, then the path of the dump once written (the first)."""
        r = subprocess.run([CGBPF, "dump", "--listen", self.listen], capture_output=True,
                           text=True, timeout=30)
        eq(r.returncode, 0, "cgbpf dump exit (stderr %r)" % r.stderr)
        return wait_dump(self, 1, "the requested dump")[0]

    def stop(self):
        self.p.send_signal(signal.SIGTERM)
        rc = self.p.wait(60)
        self.t.join(5)
        if rc:
            print("# monitor exit %d; stderr's end:\n# %s" % (rc, "\n# ".join(
                self.stderr().splitlines()[-40:])))
        return rc


def parse(text):
    """{(name, frozenset(labels)): value} of a Prometheus text exposition."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line)
        check(m, "well-formed metric line %r" % line)
        labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        out[(m.group(1), frozenset(labels.items()))] = float(m.group(4))
    return out


def series(metrics, name, **want):
    return {k: v for k, v in metrics.items()
            if k[0] == name and all((a, str(b)) in k[1] for a, b in want.items())}


def per_func(metrics, name, pid):
    """{func: value} of one process, summed over its series (NCCL calls have
    one per communicator size)."""
    out = {}
    for k, v in series(metrics, name, pid=pid).items():
        f = dict(k[1])["func"]
        out[f] = out.get(f, 0.0) + v
    return out


def wait_dump(mon, n, what):
    wait_for(lambda: len([f for f in os.listdir(mon.dumps) if f.endswith(".perfetto-trace")])
             >= n, 30, what)
    wait_for(lambda: mon.stderr().count("wrote %s/" % mon.dumps) >= n, 30, what + " written")
    return sorted(os.path.join(mon.dumps, f) for f in os.listdir(mon.dumps)
                  if f.endswith(".perfetto-trace"))


def straggler_rows(path):
    """cgbpf stats --report nccl_stragglers --format csv on one file: its
    rows as dicts."""
    import csv
    import io
    p = subprocess.run([CGBPF, "stats", "--report", "nccl_stragglers", "--format", "csv", path],
                       capture_output=True, text=True, timeout=120)
    eq(p.returncode, 0, "cgbpf stats on %s (stderr %r)" % (path, p.stderr[-500:]))
    return list(csv.DictReader(io.StringIO(p.stdout.split("\n\n", 1)[-1].strip())))


def held_links(pid):
    """Ids of the BPF links process pid holds (its fds' fdinfo link_id)."""
    ids = set()
    fd_dir = "/proc/%d/fdinfo" % pid
    for fd in os.listdir(fd_dir):
        try:
            with open(os.path.join(fd_dir, fd)) as f:
                for line in f:
                    if line.startswith("link_id:"):
                        ids.add(int(line.split()[1]))
        except OSError:
            pass  # closed meanwhile
    return ids


def live_links():
    """Ids of every BPF link on the system (bpftool), or None without it."""
    r = subprocess.run(["bpftool", "-j", "link", "show"], capture_output=True, text=True)
    if r.returncode:
        return None
    return {l["id"] for l in json.loads(r.stdout or "[]")}


def test_monitor_metrics_dump_and_stop():
    d = tmpdir()
    # --comm: other GPU processes on the host must not add dumps or series.
    mon = Monitor(["--flight-recorder", "60s", "--trigger-slow", "off", "--interval", "1h",
                   "--comm", "mt,train"], d)
    try:
        mf = os.path.join(d, "mt.json")
        w = start([wl("mt")], env=mon.wl_env(CGBPF_MANIFEST=mf))
        eq(w.wait(60), 0, "workload exit")
        man = json.load(open(mf))
        pid = man["pid"]
        m = mon.scrape()
        calls = {f: int(v) for f, v in per_func(m, "cgbpf_calls_total", pid).items()}
        eq(calls, expected_calls(man["calls"]), "cgbpf_calls_total = the workload's calls")
        check(all(dict(k[1])["comm"] == "mt" for k in series(m, "cgbpf_calls_total", pid=pid)),
              "comm label kept after the process exited")
        byts = per_func(m, "cgbpf_bytes_total", pid)
        eq(byts.get("cuMemcpyHtoDAsync_v2"), float(man["bytes"]["HtoD"]), "bytes copied")
        eq(byts.get("cuMemAlloc_v2"), 40960.0, "bytes allocated (4 x 10 KiB)")
        # Histograms: cumulative buckets, +Inf = count = calls.
        for f, n in calls.items():
            b = sorted(((float(dict(k[1])["le"]) if dict(k[1])["le"] != "+Inf" else float("inf"),
                         v) for k, v in series(m, "cgbpf_call_duration_seconds_bucket", pid=pid,
                                               func=f).items()))
            check(b and all(b[i][1] <= b[i + 1][1] for i in range(len(b) - 1)),
                  "%s buckets cumulative" % f)
            eq(b[-1], (float("inf"), float(n)), "%s +Inf bucket" % f)
            eq(per_func(m, "cgbpf_call_duration_seconds_count", pid)[f], float(n), f + " count")
        sums = per_func(m, "cgbpf_call_duration_seconds_sum", pid)

        # A dump on request: the same calls, with the same timestamps.
        r = subprocess.run([CGBPF, "dump", "--listen", mon.listen], capture_output=True,
                           text=True, timeout=30)
        eq(r.returncode, 0, "cgbpf dump exit (stderr %r)" % r.stderr)
        check("-request.perfetto-trace" in r.stdout, "prints the dump path: %r" % r.stdout)
        files = wait_dump(mon, 1, "the requested dump")
        t = ptrace.load(files[0])
        clean_trace(t)
        got, dur = {}, {}
        for s in t.slices:
            if s.pid == pid:
                got[s.name] = got.get(s.name, 0) + 1
                dur[s.name] = dur.get(s.name, 0) + s.dur
        eq(got, calls, "the dump holds every call of the workload")
        for f in calls:
            # Same clock reads feed both: equal to the ns (metrics print 1 ns).
            check(abs(dur[f] / 1e9 - sums[f]) < 2e-9 * calls[f] + 1e-9,
                  "%s: histogram sum %.9f s = sum of the dump's slices %.9f s" %
                  (f, sums[f], dur[f] / 1e9))
        tr = t.processes.get(pid)
        check(tr is not None and tr.process_name == "mt", "exited process named in the dump")

        # SIGUSR1 dumps too; a process killed by a signal triggers one.
        mon.p.send_signal(signal.SIGUSR1)
        wait_dump(mon, 2, "the SIGUSR1 dump")
        # Killed before any CUDA call, in main's gate (sleeping for a file
        # that never comes): the loader mapped libcuda before main, so the
        # BPF side made it a target by then.
        gate = os.path.join(d, "never")
        victim = start([wl("train"), "--iters", "5"], env=env_with(CGBPF_WAIT_FILE=gate))
        wait_for(lambda: "nanosleep" in open("/proc/%d/wchan" % victim.pid).read(), 30,
                 "the victim to wait at its gate")
        victim.kill()
        victim.wait(10)
        files = wait_dump(mon, 3, "the abnormal-exit dump")
        check(any(re.search(r"-[a-z+]*exit[a-z+]*\.perfetto-trace$", f) for f in files),
          "an exit dump: %r" % files)
        check("exited on signal 9: dumping" in mon.stderr(), "says why: %r" % mon.stderr()[-500:])
        m = mon.scrape()
        eq(sum(v for k, v in series(m, "cgbpf_dumps_total").items()), 3.0, "dumps counted")
        mine = held_links(mon.p.pid)
    finally:
        rc = mon.stop()
    eq(rc, 0, "SIGTERM stops the monitor cleanly (stderr %r)" % mon.stderr()[-400:])
    check("monitor stopped" in mon.stderr(), "says it stopped")
    # Only the monitor's own links: other cgbpf runs on the host (other
    # tests, other users) may add or drop theirs meanwhile.
    check(mine, "the monitor held BPF links while it ran")
    if live_links() is None:
        print("# skipped the left-behind link check: bpftool link show failed")
        return
    try:
        wait_for(lambda: not (mine & live_links()), 10, "the monitor's links to go")
    except AssertionError:
        raise AssertionError("BPF links of the stopped monitor still alive: %r" %
                             sorted(mine & live_links()))


def test_monitor_forgets_exited_processes_and_stays_bounded():
    """Short soak: processes start and exit constantly; the aggregates of
    exited ones go after two intervals and the daemon's memory stays flat."""
    d = tmpdir()
    mon = Monitor(["--interval", "1s", "--comm", "mt,train"], d)
    rss = []
    try:
        for rnd in range(6):
            for _ in range(4):
                # Gated: each run's calls come after its probes.
                w = start([wl("mt")], env=mon.wl_env())
                eq(w.wait(60), 0, "workload exit")
            with open("/proc/%d/status" % mon.p.pid) as f:
                rss.append(int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1)))
        # A process paused after its setup calls: its series must be there
        # while it lives, however slow the host (the exited mt runs' may
        # already be gone by now, one interval after their exit).
        pause = os.path.join(d, "pause")
        live = start([wl("train"), "--iters", "2"],
                     env=mon.wl_env(CGBPF_PAUSE_FILE=pause))
        wait_for(lambda: series(mon.scrape(), "cgbpf_calls_total", pid=live.pid), 30,
                 "series of a live process")
        touch(pause)
        eq(live.wait(60), 0, "train exit")
        # Dropped after one --interval (1 s) past the exit: wait for it
        # rather than guess how long a loaded host takes.
        got = [None]

        def dropped():
            got[0] = mon.scrape()
            return not series(got[0], "cgbpf_calls_total")

        wait_for(dropped, 60, "the series of exited processes to be dropped")
        m = got[0]
        eq(m[("cgbpf_aggregate_series", frozenset())], 0.0, "BPF map emptied")
        eq(m[("cgbpf_traced_processes", frozenset())], 0.0, "no process left in the model")
    finally:
        rc = mon.stop()
    eq(rc, 0, "monitor exit")
    # After warm-up (first rounds), no growth beyond allocator noise.
    check(rss[-1] - rss[1] < 2048, "RSS flat: %r KiB" % rss)


def test_monitor_bad_input():
    d = tmpdir()
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    port = busy.getsockname()[1]
    afile = os.path.join(d, "file")
    open(afile, "w").close()
    cases = [
        (["--listen", "127.0.0.1:%d" % port, "--dump-dir", d], 1, "Address already in use"),
        (["--listen", "127.0.0.1:%d" % free_port(), "--dump-dir", os.path.join(d, "nope")], 1,
         "--dump-dir"),
        (["--listen", "127.0.0.1:%d" % free_port(), "--dump-dir", afile], 1, "not a directory"),
        (["--listen", "nonsense", "--dump-dir", d], 1, "--listen"),
        (["--flight-recorder", "soon"], 2, "--flight-recorder"),
        (["--comm", "x,,y"], 2, "--comm"),
        (["extra"], 2, "unexpected argument"),
    ]
    try:
        for args, rc, why in cases:
            r = subprocess.run([CGBPF, "monitor"] + args, capture_output=True, text=True,
                               timeout=30)
            eq(r.returncode, rc, "exit for %s (stderr %r)" % (args, r.stderr))
            check(why in r.stderr, "message %r for %s: %r" % (why, args, r.stderr))
    finally:
        busy.close()
    r = subprocess.run([CGBPF, "dump", "--listen", "127.0.0.1:%d" % free_port()],
                       capture_output=True, text=True, timeout=30)
    eq(r.returncode, 1, "dump with no monitor")
    check("no cgbpf monitor at" in r.stderr, "says so: %r" % r.stderr)
    # A config file: its options apply, the command line wins.
    cfg = os.path.join(d, "monitor.conf")
    with open(cfg, "w") as f:
        f.write("# cgbpf monitor\nlisten 127.0.0.1:1\nflight-recorder = 10s\nbogus-option 1\n")
    r = subprocess.run([CGBPF, "monitor", "--config", cfg], capture_output=True, text=True,
                       timeout=30)
    eq(r.returncode, 2, "unknown option in a config file")
    check("bogus-option" in r.stderr, "names it: %r" % r.stderr)


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def closed_by_peer(sock):
    """True once the other end closed sock (EOF or reset), after reading
    whatever it sent; False while it is open."""
    sock.setblocking(False)
    try:
        while True:
            b = sock.recv(65536)
            if not b:
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def test_monitor_http_slow_and_oversized_clients():
    """The endpoint never waits for a client: a slowloris (one byte every
    100 ms: no per-read timeout ever fires), 100 connections that send
    nothing, and requests of 1 MiB neither delay a scrape or a dump nor
    grow the monitor's memory; the slow ones are closed, the oversized
    ones answered 431."""
    import threading
    d = tmpdir()
    mon = Monitor(["--interval", "1h", "--flight-recorder", "5s",
                   "--comm", "cgbpf-none-such"], d)
    addr = ("127.0.0.1", mon.port)
    stop = threading.Event()
    socks = []
    try:
        mon.scrape()
        rss0 = rss_kib(mon.p.pid)
        slow = socket.create_connection(addr)
        socks.append(slow)
        slow.sendall(b"GET /metrics HTTP/1.1\r\n")

        def drip():
            try:
                while not stop.is_set():
                    slow.send(b"X")
                    time.sleep(0.1)
            except OSError:
                pass
        t = threading.Thread(target=drip, daemon=True)
        t.start()
        for _ in range(100):
            socks.append(socket.create_connection(addr))
        big = []
        for _ in range(20):
            b = socket.create_connection(addr)
            b.settimeout(30)
            socks.append(b)
            big.append(b)
        hdr = b"GET /metrics HTTP/1.1\r\nX-Padding: " + b"a" * 65536
        for _ in range(16):
            for b in big:
                try:
                    b.sendall(hdr)
                except OSError:
                    pass	# answered and closed before all of it was sent
        # Every slot is taken by clients that will never finish: the
        # scrape and the dump must still be served.
        m = mon.scrape()
        check(series(m, "cgbpf_scrapes_total"), "scraped while the slow clients hang on")
        r = subprocess.run([CGBPF, "dump", "--listen", mon.listen], capture_output=True,
                           text=True, timeout=30)
        eq(r.returncode, 0, "dump requested while the slow clients hang on (%r)" % r.stderr)
        answers = 0
        for b in big:
            try:
                b.setblocking(True)
                b.settimeout(30)
                data = b.recv(4096)
            except OSError:
                data = b""
            answers += data.startswith(b"HTTP/1.1 431")
        # A client evicted for a newer one gets no answer; most do.
        check(answers >= 1, "oversized requests answered 431 (%d of 20)" % answers)
        grown = rss_kib(mon.p.pid) - rss0
        check(grown < 8 * 1024, "monitor memory grew %d KiB for 20 MiB of requests" % grown)
        wait_for(lambda: closed_by_peer(slow), 30, "the monitor to close the slowloris")
        stop.set()
        # Each of the 100 silent clients is closed, evicted or after
        # HTTP_HEAD_NS (2 s) in its slot, and counted; the last ones
        # accepted may still sit in their slots at this point.
        last = {}

        def all_dropped():
            time.sleep(0.2)
            last["d"] = series(mon.scrape(), "cgbpf_http_dropped_total")
            return last["d"] and list(last["d"].values())[0] >= 100
        try:
            wait_for(all_dropped, 15, "100 dropped connections counted")
        except AssertionError:
            raise AssertionError("dropped connections counted (%r)" % last.get("d"))
    finally:
        stop.set()
        for s_ in socks:
            s_.close()
        eq(mon.stop(), 0, "monitor exit")


def test_monitor_nccl_bytes():
    """NCCL collectives: calls and count x sizeof(datatype) bytes per
    process against the fake library's own ground truth."""
    need_nccl_ranks()
    d = tmpdir()
    mon = Monitor(["--interval", "1h", "--comm", "nccl_ranks"], d)
    try:
        env = mon.wl_env(FAKENCCL_STATS=os.path.join(d, "stats-%p.json"))
        w = start([wl("nccl_ranks"), "--ranks", "3", "--iters", "3", "--procs"], env=env)
        eq(w.wait(120), 0, "nccl_ranks exit")
        m = mon.scrape()
    finally:
        eq(mon.stop(), 0, "monitor exit")
    stats = [json.load(open(os.path.join(d, f))) for f in os.listdir(d)
             if f.startswith("stats-")]
    check(len(stats) >= 2, "stats of the rank processes (%d files)" % len(stats))
    checked = 0
    for st in stats:
        calls = {f: int(v) for f, v in per_func(m, "cgbpf_calls_total", st["pid"]).items()
                 if f.startswith("nccl")}
        byts = per_func(m, "cgbpf_bytes_total", st["pid"])
        for f, n in st["calls"].items():
            if f in calls or f in ("ncclAllReduce", "ncclBroadcast", "ncclSend"):
                eq(calls.get(f, 0), n, "pid %d: %s calls" % (st["pid"], f))
        for f, b in st["bytes"].items():
            if b:
                eq(byts.get(f, 0.0), float(b), "pid %d: %s bytes" % (st["pid"], f))
                checked += 1
    check(checked >= 4, "bytes of several collectives checked (%d)" % checked)
    # Communicator sizes learned at init label the collectives, and the bus
    # bytes use nccl-tests' factors: all-reduce 2(n-1)/n, all-gather n(n-1)/n.
    bus = {}
    for k, v in m.items():
        lab = dict(k[1])
        if k[0] == "cgbpf_nccl_bus_bytes_total" and lab.get("nranks") == "3":
            bus[(int(lab["pid"]), lab["func"])] = v
    factor = {"ncclAllReduce": 4.0 / 3, "ncclAllGather": 2.0, "ncclBroadcast": 1.0}
    seen = 0
    for st in stats:
        byts = {dict(k[1])["func"]: v for k, v in m.items() if k[0] == "cgbpf_bytes_total"
                and dict(k[1]).get("pid") == str(st["pid"]) and dict(k[1]).get("nranks") == "3"}
        for f, fac in factor.items():
            if f in byts:
                check(abs(bus[(st["pid"], f)] - byts[f] * fac) <= 1,
                      "%s bus bytes = bytes x %.3f" % (f, fac))
                seen += 1
    check(seen >= 3, "bus bytes checked for several ops (%d)" % seen)


def test_monitor_syscall_and_sync_wait():
    """--syscall-threshold adds syscall aggregates; per-process wait sums
    are the sums of their parts."""
    d = tmpdir()
    mon = Monitor(["--interval", "1h", "--syscall-threshold", "1ms", "--comm", "sys_mix"], d)
    try:
        mf = os.path.join(d, "sys.json")
        w = start([wl("sys_mix"), "--sleeps", "3"], env=mon.wl_env(CGBPF_MANIFEST=mf))
        eq(w.wait(60), 0, "sys_mix exit")
        man = json.load(open(mf))
        pid = man["pid"]
        m = mon.scrape()
    finally:
        eq(mon.stop(), 0, "monitor exit")
    sysc = {dict(k[1])["func"]: v for k, v in m.items()
            if k[0] == "cgbpf_calls_total" and ("pid", str(pid)) in k[1]
            and ("lib", "syscall") in k[1]}
    # 3 x nanosleep 20 ms and 3 x clock_nanosleep 10 ms, all over 1 ms.
    check(sysc.get("nanosleep", 0) >= 3, "nanosleep counted: %r" % sysc)
    check(sysc.get("clock_nanosleep", 0) >= 3, "clock_nanosleep counted: %r" % sysc)
    check("getpid" not in sysc, "getpid is under the threshold")
    sums = {dict(k[1])["func"]: v for k, v in m.items()
            if k[0] == "cgbpf_call_duration_seconds_sum" and ("pid", str(pid)) in k[1]}
    want_sys = sum(v for f, v in sums.items() if f in sysc)
    got_sys = m[("cgbpf_syscall_wait_seconds_total",
                 frozenset({("pid", str(pid)), ("comm", "sys_mix")}))]
    check(abs(got_sys - want_sys) < 1e-6, "syscall wait %.6f = sum %.6f" % (got_sys, want_sys))
    check(got_sys >= 0.09, "at least the 90 ms of sleeps: %.3f" % got_sys)
    got_sync = m[("cgbpf_sync_wait_seconds_total",
                  frozenset({("pid", str(pid)), ("comm", "sys_mix")}))]
    eq(round(got_sync, 9), round(sums["cuStreamSynchronize"], 9),
       "sync wait = cuStreamSynchronize's time (the only synchronization call)")


HOLDER = r"""
#include <cuda.h>
#include <stdio.h>
#include "child_gate.h"
int main(void)
{
    CUdevice dev; CUcontext ctx; CUdeviceptr p[3];
    wl_child_gate();
    cuInit(0);
    cuDeviceGet(&dev, 0);
#if CUDA_VERSION >= 13000
    cuCtxCreate(&ctx, NULL, 0, dev);
#else
    cuCtxCreate(&ctx, 0, dev);
#endif
    for (int i = 0; i < 3; i++)
        cuMemAlloc(&p[i], 1 << 20);
    cuMemFree(p[1]);
    printf("holding\n");
    fflush(stdout);
    getchar();
    cuMemFree(p[0]);
    cuMemFree(p[2]);
    return 0;
}
"""


def build_c(d, name, text):
    """Compiles text as d/NAME against the fake libcuda.so.1 (cuda.h: the
    toolkit's, or the fake's own minimal one without it); its path."""
    from harness import FAKE, REPO
    src, exe = os.path.join(d, name + ".c"), os.path.join(d, name)
    with open(src, "w") as f:
        f.write(text)
    inc = "/usr/local/cuda/include" if os.path.exists("/usr/local/cuda/include/cuda.h") \
        else os.path.join(REPO, "tests", "fake", "include")
    subprocess.run(["gcc", "-I", inc, "-I", os.path.join(REPO, "tests", "workloads"), src,
                    "-o", exe, "-L", FAKE, "-l:libcuda.so.1",
                    "-Wl,-rpath," + FAKE], check=True)
    return exe


def test_monitor_gpu_memory_held():
    """cgbpf_gpu_memory_bytes follows allocations and frees: 3 MiB
    allocated, 1 freed while watched -> 2 MiB held; then 0."""
    d = tmpdir()
    exe = build_c(d, "holder", HOLDER)
    mon = Monitor(["--interval", "1h", "--comm", "holder"], d)
    try:
        w = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env=mon.wl_env())
        eq(w.stdout.readline().strip(), "holding", "the workload holds its memory")
        key = ("cgbpf_gpu_memory_bytes", frozenset({("pid", str(w.pid)), ("comm", "holder")}))
        eq(mon.scrape().get(key), float(2 << 20), "2 MiB held")
        w.stdin.write("\n")
        w.stdin.flush()
        eq(w.wait(30), 0, "workload exit")
        eq(mon.scrape().get(key), 0.0, "all freed")
    finally:
        eq(mon.stop(), 0, "monitor exit")


# Once a line on stdin says go: 200 kernels of 1 ms each (the fake's
# "__ns" suffix), one after another on one stream, then a 64 KiB copy;
# holds until another line.
BUSY = r"""
#include <cuda.h>
#include <stdio.h>
#include "child_gate.h"
int main(void)
{
    CUdevice dev; CUcontext ctx; CUmodule mod; CUfunction fn; CUstream s;
    CUdeviceptr d; static char host[65536]; char line[64];
    wl_child_gate();
    cuInit(0);
    cuDeviceGet(&dev, 0);
#if CUDA_VERSION >= 13000
    cuCtxCreate(&ctx, NULL, 0, dev);
#else
    cuCtxCreate(&ctx, 0, dev);
#endif
    cuModuleLoadData(&mod, "\x7f" "ELF busy");
    cuModuleGetFunction(&fn, mod, "busy__ns1000000");
    cuStreamCreate(&s, 0);
    cuMemAlloc(&d, sizeof(host));
    printf("ready\n");
    fflush(stdout);
    if (!fgets(line, sizeof(line), stdin))
        return 1;
    for (int i = 0; i < 200; i++)
        cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL);
    cuMemcpyHtoDAsync(d, host, sizeof(host), s);
    cuStreamSynchronize(s);
    printf("done\n");
    fflush(stdout);
    if (!fgets(line, sizeof(line), stdin))
        return 1;
    return 0;
}
"""


def test_monitor_gpu_busy():
    """cgbpf_gpu_busy_seconds_total from the CUPTI records of a process
    that loads the injection library (as a service started with
    CUDA_INJECTION64_PATH does, docs/injection.md): 200 kernels of 1 ms
    on one stream and a copy are 200 kernels, 1 other operation and at
    least 0.2 s busy (the fake copy adds its own time); the series go with
    the process."""
    inj = os.path.join(os.path.dirname(CGBPF), "inject", "libcgbpf-inject.so")
    if not os.path.exists(inj):
        raise Skip("no injection library built (no CUDA toolkit)")
    d = tmpdir()
    exe = build_c(d, "busy", BUSY)
    mon = Monitor(["--interval", "1h", "--comm", "busy"], d)
    try:
        w = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env=mon.wl_env(CUDA_INJECTION64_PATH=inj))
        eq(w.stdout.readline().strip(), "ready", "the workload set up")
        # CUPTI records work launched after its library started collecting,
        # which it does once it sees cgbpf attached (20 ms polls).
        wait_for(lambda: "pid %d: GPU activity: status 1" % w.pid in mon.stderr(), 30,
                 "its library collecting")
        w.stdin.write("go\n")
        w.stdin.flush()
        eq(w.stdout.readline().strip(), "done", "the workload ran")
        labels = {("pid", str(w.pid)), ("comm", "busy"), ("gpu", "0")}
        kern = ("cgbpf_gpu_operations_total", frozenset(labels | {("kind", "kernel")}))
        other = ("cgbpf_gpu_operations_total", frozenset(labels | {("kind", "other")}))
        busy = ("cgbpf_gpu_busy_seconds_total", frozenset(labels))
        got = {}

        def counted():
            time.sleep(0.2)
            got.update(mon.scrape())
            return got.get(kern) == 200 and got.get(other) == 1
        # Written once the reorder window (2 s) has passed them.
        try:
            wait_for(counted, 30, "200 kernels and a copy counted")
        except AssertionError:
            raise AssertionError("not counted: %r\n%s" % (
                {k: v for k, v in got.items() if k[0].startswith("cgbpf_gpu_")},
                mon.stderr()[-3000:]))
        check(0.2 - 1e-6 <= got[busy] < 0.25, "busy 0.2 s and the copy's time: %r" % got[busy])
        w.stdin.write("\n")
        w.stdin.flush()
        eq(w.wait(30), 0, "workload exit")
        wait_for(lambda: busy not in mon.scrape(), 30, "its series gone with it")
        # Its other series outlive it for an interval, under its own name
        # (not its last thread's: the injection library's watcher).
        names = {dict(k[1]).get("comm") for k in mon.scrape()
                 if dict(k[1]).get("pid") == str(w.pid)}
        eq(names, {"busy"}, "the exited process's name in its series")
        print("# 200 x 1 ms kernels and a copy: busy %.6f s" % got[busy])
    finally:
        eq(mon.stop(), 0, "monitor exit")


# --python-sites: a program with more call sites than the monitor tracks
# per process (PYSITES_CAP_MIN, 64, for --python-sites 3), each made from
# its own line N times; it waits for GATE before its calls and lives a
# moment after them (its code objects are read while it lives).
MANY_SITES = 100
MANY = """import ctypes, os, sys, time
cu = ctypes.CDLL("libcuda.so.1")
gate, n = sys.argv[1], int(sys.argv[2])
while not os.path.exists(gate):
    time.sleep(0.005)
%s
for _ in range(n):
    for f in FS:
        f()
time.sleep(1.0)
"""


def write_many(path):
    """MANY with MANY_SITES functions; {site text: line}."""
    body, sites = [], {}
    first = MANY.split("\n").index("%s") + 1
    for i in range(MANY_SITES):
        body.append("def f%d(): cu.cuInit(0)" % i)
        sites["%s:%d f%d" % (path, first + i, i)] = first + i
    body.append("FS = [%s]" % ", ".join("f%d" % i for i in range(MANY_SITES)))
    with open(path, "w") as f:
        f.write(MANY % "\n".join(body))
    return sites


def test_monitor_python_sites():
    """--python-sites 3 --python-site-sample 1 (every call, so the counts
    are exact): launches.py's sites by API time, named as record names
    them (the innermost user frame), the rest under site="other", the
    calls of every site adding up to the process's calls; a program with
    100 sites: at most 64 tracked, the others evicted into "other", the
    total still exact."""
    import json
    from test_python import WRAP, pyenv_python
    exe = pyenv_python(12)
    d = tmpdir()
    mon = Monitor(["--python-sites", "3", "--python-site-sample", "1"], d)
    try:
        man, pause = os.path.join(d, "manifest.json"), os.path.join(d, "pause")
        w = start([exe, "-c", WRAP, "--iters", "20", "--threads", "2",
                   "--only", "plain,nested,method,library,threads"],
                  env=mon.wl_env(CGBPF_MANIFEST=man, CGBPF_PAUSE_FILE=pause))
        wait_for(lambda: os.path.exists(pause + ".ready") or w.poll() is not None, 60,
                 "launches.py to pause after its setup")
        wait_for(lambda: "pid %d: Python" % w.pid in mon.stderr() and
                 "reading Python frames" in mon.stderr(), 30,
                 "the monitor to find the interpreter (stderr %r)" % mon.stderr()[-500:])
        touch(pause)
        eq(w.wait(120), 0, "launches.py exit")
        with open(man) as f:
            m = json.load(f)
        want, traced = {}, traced_funcs()
        for rec in m["records"]:
            if rec["scenario"] != "setup" and rec["call"] in traced:
                fr = rec["user"] or rec["leaf"]
                key = "%s:%d %s" % (fr["file"], fr["line"], fr["func"])
                want[key] = want.get(key, 0) + 1
        got = mon.scrape()
        calls = {dict(k[1])["site"]: v for k, v in
                 series(got, "cgbpf_python_site_calls_total", pid=w.pid).items()}
        secs = {dict(k[1])["site"]: v for k, v in
                series(got, "cgbpf_python_site_seconds_total", pid=w.pid).items()}
        named = [s for s in calls if s != "other"]
        eq(len(named), 3, "named sites of launches.py (%r)" % calls)
        check("other" in calls, "site=\"other\" holds the rest: %r" % calls)
        eq(sorted(secs), sorted(calls), "the same sites in both metrics")
        for s in named:
            check(s in want or "pywl.py" in s, "%r is a site of the manifest (%r)" % (s, want))
            if s in want:
                eq(calls[s], want[s], "calls from %s" % s)
            check(secs[s] > 0, "time of %s" % s)
        # Every call after the pause was sampled: the process's sites add
        # up to at least them (setup calls count where their frames were
        # read) and to at most every call it made.
        total = sum(per_func(got, "cgbpf_calls_total", w.pid).values())
        check(sum(want.values()) <= sum(calls.values()) <= total,
              "site calls %d between the calls after the pause %d and all %d" %
              (sum(calls.values()), sum(want.values()), total))
        # The bound: a process with 100 sites.
        prog = os.path.join(d, "many.py")
        sites = write_many(prog)
        gate = os.path.join(d, "gate")
        p = start([exe, prog, gate, "3"], env=mon.wl_env())
        wait_for(lambda: "pid %d: Python" % p.pid in mon.stderr(), 30,
                 "the monitor to find the interpreter of many.py")
        touch(gate)
        eq(p.wait(60), 0, "many.py exit")
        got = mon.scrape()
        calls = {dict(k[1])["site"]: v for k, v in
                 series(got, "cgbpf_python_site_calls_total", pid=p.pid).items()}
        named = [s for s in calls if s != "other"]
        eq(len(named), 3, "named sites of many.py (%r)" % calls)
        for s in named:
            check(s in sites, "%r is one of many.py's sites" % s)
            # Named by API time: a site evicted and tracked again (its
            # earlier calls in "other") may lead when one of its later
            # calls was slow (CI once named one with 2 calls).
            check(calls[s] in (1.0, 2.0, 3.0), "calls from %s: %r" % (s, calls[s]))
        eq(sum(calls.values()), 3.0 * MANY_SITES, "calls of many.py, evicted sites included")
        eq([v for v in series(got, "cgbpf_python_sites_tracked", pid=p.pid).values()], [64.0],
           "sites tracked for many.py: the bound")
        check(got[("cgbpf_python_sites_evicted_total", frozenset())] >= MANY_SITES - 64,
              "evicted sites: %r" % got[("cgbpf_python_sites_evicted_total", frozenset())])
    finally:
        rc = mon.stop()
    eq(rc, 0, "monitor exit")


def test_monitor_python_sites_bad_input():
    for args, why in [(["--python-sites", "0"], "--python-sites"),
                      (["--python-sites", "101"], "--python-sites"),
                      (["--python-sites", "3x"], "--python-sites"),
                      (["--python-sites", "3", "--python-site-sample", "0"],
                       "--python-site-sample"),
                      (["--python-site-sample", "4"], "needs --python-sites")]:
        r = subprocess.run([CGBPF, "monitor"] + args, capture_output=True, text=True, timeout=30)
        eq(r.returncode, 2, "exit for %s (stderr %r)" % (args, r.stderr))
        check(why in r.stderr, "message %r for %s: %r" % (why, args, r.stderr))


def test_monitor_nccl_last_seq_and_hang():
    """A 4-rank job whose rank 2 stops for 4 s before its 4th all-reduce,
    without a flight recorder: during the hang cgbpf_nccl_last_seq shows
    rank 2 one behind the others on the world communicator, the hang is
    said on stderr; after the job every rank has the same last_seq and
    ops; two sweeps after the exit the rows are gone (bounded labels)."""
    need_nccl_ranks()
    d = tmpdir()
    mon = Monitor(["--interval", "1s", "--comm", "nccl_ranks", "--nccl-hang-after", "1s"], d)
    try:
        w = start([wl("nccl_ranks"), "--ranks", "4", "--iters", "6", "--procs", "--hang-rank", "2",
                   "--hang-ms", "4000"], env=mon.wl_env())
        wait_for(lambda: "NCCL hang?" in mon.stderr(), 20, "the hang said")
        m = mon.scrape()
        seq = {int(dict(k[1])["rank"]): v for k, v in series(m, "cgbpf_nccl_last_seq",
                                                             nranks=4).items()}
        eq(sorted(seq), [0, 1, 2, 3], "a last_seq per rank of the world: %r" % seq)
        eq(seq[0], seq[1], "ranks 0 and 1 at the same operation")
        eq(seq[3], seq[0], "rank 3 too")
        eq(seq[2], seq[0] - 1, "rank 2 one behind: %r" % seq)
        check(re.search(r"NCCL hang\? ncclAllReduce #4 .* 0 \(pid \d+\), 1 \(pid \d+\), "
                        r"3 \(pid \d+\) entered it", mon.stderr()), "the waiting ranks said")
        eq(w.wait(120), 0, "nccl_ranks exit")
        m = mon.scrape()
        seq = {int(dict(k[1])["rank"]): v for k, v in series(m, "cgbpf_nccl_last_seq",
                                                             nranks=4).items()}
        ops = {int(dict(k[1])["rank"]): v for k, v in series(m, "cgbpf_nccl_ops_total",
                                                             nranks=4).items()}
        check(len(set(seq.values())) == 1 and len(seq) == 4, "every rank at the end: %r" % seq)
        eq(seq[0], 6 + 8, "6 all-reduces and 8 other collectives numbered")
        check(min(ops.values()) >= 14, "operations counted: %r" % ops)
        wait_for(lambda: not series(mon.scrape(), "cgbpf_nccl_last_seq"), 10,
                 "the exited ranks' rows dropped")
    finally:
        eq(mon.stop(), 0, "monitor exit")


def need_plugin_job():
    """The injection library's path, for an nccl_ranks job with it as
    NCCL's profiler plugin; skips without nccl_ranks, the fake NCCL or
    the library."""
    from harness import FAKE, OUT
    lib = os.path.join(OUT, "inject", "libcgbpf-inject.so")
    if not os.path.exists(wl("nccl_ranks")) or not os.path.exists(
            os.path.join(FAKE, "libnccl.so.2")) or not os.path.exists(lib):
        raise Skip("nccl_ranks, the fake libnccl.so.2 or libcgbpf-inject.so not built")
    return lib


def test_monitor_nccl_plugin_last_seq_and_hang_of_an_older_job():
    """A 4-rank job (one process per rank) with NCCL's profiler plugin
    loaded, started before the monitor: the host side never saw its
    communicators created and exports no cgbpf_nccl_last_seq for them;
    the plugin's task entries give cgbpf_nccl_plugin_last_seq per rank
    (rank 2, stopped before its 4th all-reduce, one behind) and the hang
    line. The job waits 5 s after creating its communicators, calling the
    driver every 100 ms: the monitor must be up and the plugin on (at
    each rank's first call it sees) before its first all-reduce (a
    collective its ranks entered before is not watched)."""
    lib = need_plugin_job()
    d = tmpdir()
    w = start([wl("nccl_ranks"), "--ranks", "4", "--iters", "6", "--procs", "--hang-rank", "2",
               "--hang-ms", "5000", "--start-delay-ms", "5000"],
              env=env_with(NCCL_PROFILER_PLUGIN=lib, CUDA_INJECTION64_PATH=lib))
    mon = None
    try:
        mon = Monitor(["--interval", "1h", "--comm", "nccl_ranks", "--nccl-hang-after", "1s"], d)
        wait_for(lambda: "NCCL hang?" in mon.stderr(), 30, "the hang said")
        check(re.search(r"NCCL hang\? ncclAllReduce #4 \(\d+ bytes\) on communicator \w+ \(4 "
                        r"ranks; NCCL's profiler plugin[^)]*\): rank\(s\) 0 \(pid \d+\), 1 "
                        r"\(pid \d+\), 3 \(pid \d+\) entered it", mon.stderr()),
              "the plugin's hang line: %r" % mon.stderr()[-3000:])
        m = mon.scrape()
        seq = {int(dict(k[1])["rank"]): v for k, v in series(m, "cgbpf_nccl_plugin_last_seq",
                                                             nranks=4).items()}
        eq(sorted(seq), [0, 1, 2, 3], "a plugin last_seq per rank: %r" % seq)
        eq(seq[0], seq[1], "ranks 0 and 1 at the same operation")
        eq(seq[3], seq[0], "rank 3 too")
        eq(seq[2], seq[0] - 1, "rank 2 one behind: %r" % seq)
        eq(series(m, "cgbpf_nccl_last_seq", nranks=4), {},
           "no host-side series: its communicators' creation was not traced")
        eq(w.wait(120), 0, "nccl_ranks exit")
    finally:
        kill_quiet(w)
        if mon:
            eq(mon.stop(), 0, "monitor exit")


def test_monitor_gpu_side_straggler_of_an_older_job():
    """A 4-rank job (one process per rank) with NCCL's profiler plugin,
    started before the monitor, rank 2 10 ms late into every all-reduce:
    the host side matches nothing (its communicators' creation was not
    traced), the GPU side (each rank's kernel start, NCCL's numbers)
    matches the operations and counts rank 2 last in nearly all, with
    the others waiting for it; its comm label is the plugin's last_seq's."""
    lib = need_plugin_job()
    d = tmpdir()
    w = start([wl("nccl_ranks"), "--ranks", "4", "--iters", "400", "--procs", "--slow-rank", "2",
               "--slow-us", "10000", "--start-delay-ms", "3000"],
              env=env_with(NCCL_PROFILER_PLUGIN=lib, CUDA_INJECTION64_PATH=lib))
    mon = None
    try:
        mon = Monitor(["--interval", "1h", "--comm", "nccl_ranks"], d)
        got = {}

        def enough():
            nonlocal got
            m = mon.scrape()
            got = {name: {int(dict(k[1])["rank"]): (dict(k[1])["comm"], v)
                          for k, v in series(m, name, nranks=4).items()}
                   for name in ("cgbpf_nccl_gpu_matched_total", "cgbpf_nccl_gpu_entered_last_total",
                                "cgbpf_nccl_gpu_others_waited_seconds_total",
                                "cgbpf_nccl_plugin_last_seq", "cgbpf_nccl_matched_total")}
            matched = got["cgbpf_nccl_gpu_matched_total"]
            return len(matched) == 4 and all(v >= 50 for _, v in matched.values())
        wait_for(lambda: enough() or w.poll() is not None, 60, "50 matched operations per rank")
        matched = got["cgbpf_nccl_gpu_matched_total"]
        eq(sorted(matched), [0, 1, 2, 3], "a GPU-side matched count per rank: %r" % got)
        last = {r: v for r, (_, v) in got["cgbpf_nccl_gpu_entered_last_total"].items()}
        print("# GPU side: matched %s, last %s" % (
            {r: int(v) for r, (_, v) in sorted(matched.items())},
            {r: int(v) for r, v in sorted(last.items())}))
        check(last.get(2, 0) >= 0.8 * matched[2][1] and
              all(last.get(r, 0) <= 0.2 * matched[r][1] for r in (0, 1, 3)),
              "rank 2's kernel started last in most: %r of %r" % (last, matched))
        waited = {r: v for r, (_, v) in got["cgbpf_nccl_gpu_others_waited_seconds_total"].items()}
        check(waited.get(2, 0) > max(waited.get(r, 0) for r in (0, 1, 3)),
              "the others waited for rank 2: %r" % waited)
        comms = {c for c, _ in matched.values()}
        eq(comms, {c for c, _ in got["cgbpf_nccl_plugin_last_seq"].values()},
           "one comm label, the plugin last_seq's")
        eq(got["cgbpf_nccl_matched_total"], {}, "no host-side matches")
        eq(w.wait(120), 0, "nccl_ranks exit")
    finally:
        kill_quiet(w)
        if mon:
            eq(mon.stop(), 0, "monitor exit")


def test_monitor_dump_has_the_gpu_side():
    """A dump of a job with the injection library as NCCL's profiler
    plugin and CUPTI agent (the fakes): beside the host calls, the GPU
    batches the ring holds go through the GPU side as record writes it:
    a plugin group per rank with its all-reduces' channel spans (NCCL's
    numbers, algorithm, protocol), and CUPTI's synchronizations."""
    lib = need_plugin_job()
    d = tmpdir()
    mon = Monitor(["--flight-recorder", "60s", "--trigger-slow", "off", "--no-trigger-errors",
                   "--interval", "1h", "--comm", "nccl_ranks"], d)
    w = None
    try:
        w = start([wl("nccl_ranks"), "--ranks", "4", "--iters", "100", "--procs", "--sync",
                   "--slow-rank", "1", "--slow-us", "5000"],
                  env=mon.wl_env(NCCL_PROFILER_PLUGIN=lib, CUDA_INJECTION64_PATH=lib,
                                 FAKENCCL_CHANNELS="2"))
        # Dumped after the job: its library sent what CUPTI held at exit,
        # and the ring keeps the processes gone since.
        eq(w.wait(120), 0, "nccl_ranks exit")
        files = [mon.request_dump()]
        t = ptrace.load(files[0])
        clean_trace(t)
        groups = {x.uuid: x.name for x in t.tracks.values()
                  if (x.name or "").endswith(": GPU (NCCL profiler)")}
        ranks = sorted(int(re.search(r" rank (\d+)/4:", n).group(1)) for n in groups.values()
                       if re.search(r" rank \d+/4:", n))
        eq(ranks, [0, 1, 2, 3], "a plugin group per rank of the world: %r" % sorted(groups.values()))
        per = {}
        for tr in t.tracks.values():
            if tr.parent_uuid in groups and "/4:" in groups[tr.parent_uuid] and \
               (tr.name or "").startswith("channel "):
                for x in t.slices_on(track_uuid=tr.uuid):
                    if x.name == "AllReduce":
                        per.setdefault(groups[tr.parent_uuid], []).append(x)
        check(len(per) == 4 and all(len({x.args.get("seq") for x in v}) >= 90
                                    for v in per.values()),
              "each rank's all-reduces on its channels (100 each): %r" %
              {k: len(v) for k, v in per.items()})
        spans = [x for v in per.values() for x in v]
        check(all(x.args.get("algo") and x.args.get("proto") for x in spans),
              "each span with its algorithm and protocol")
        syncs = [tr.uuid for tr in t.tracks.values() if tr.name == "CUDA synchronization"]
        check(any(True for u in syncs for _ in t.slices_on(track_uuid=u)),
              "CUPTI's synchronizations (each all-reduce's cuStreamSynchronize) in the dump: "
              "%r; monitor: %r" % (sorted({tr.name for tr in t.tracks.values() if "GPU" in
                                           (tr.name or "") or "CUDA" in (tr.name or "")}),
                                   [ln for ln in mon.stderr().splitlines() if "GPU" in ln][:8]))
        calls = [x for x in t.slices if x.name == "ncclAllReduce"]
        check(len(calls) >= 400, "the host calls too (%d)" % len(calls))
        tp_clean(files[0], t)
    finally:
        kill_quiet(w)
        eq(mon.stop(), 0, "monitor exit")


LEFT_MAIN = r"""
#define _GNU_SOURCE
#include <cuda.h>
#include <pthread.h>
#include <time.h>
#include "child_gate.h"
static void *worker(void *arg)
{
    struct timespec nap = { 0, 200000000 };
    pthread_setname_np(pthread_self(), "late-worker");
    nanosleep(&nap, NULL);      /* the main thread is gone by now */
    for (int i = 0; i < 50; i++)
        cuCtxSynchronize();
    return arg;
}
int main(void)
{
    pthread_t t;
    wl_child_gate();
    cuInit(0);
    pthread_create(&t, NULL, worker, NULL);
    pthread_exit(NULL);         /* the process lives on in its worker */
}
"""


def test_monitor_dump_names_an_exited_process_after_its_main_thread():
    """A process whose main thread left first and whose last thread was
    a worker named "late-worker": once it has exited, a dump names it
    after its main thread (its program), not after the thread that
    exited last."""
    d = tmpdir()
    exe = build_c(d, "leftmain", LEFT_MAIN)
    mon = Monitor(["--flight-recorder", "60s", "--trigger-slow", "off", "--no-trigger-errors",
                   "--interval", "1h", "--comm", "leftmain"], d)
    try:
        w = subprocess.Popen([exe], env=mon.wl_env())
        eq(w.wait(30), 0, "leftmain exit")
        t = ptrace.load(mon.request_dump())
        calls = [x for x in t.slices if x.pid == w.pid and x.name == "cuCtxSynchronize"]
        eq(len(calls), 50, "the worker's calls in the dump: %r" %
           sorted({(x.pid, x.name) for x in t.slices})[:20])
        names = {tr.process_name for tr in t.tracks.values()
                 if tr.pid == w.pid and tr.process_name}
        eq(names, {"leftmain"}, "the process named after its main thread")
    finally:
        eq(mon.stop(), 0, "monitor exit")


def test_monitor_nccl_hang_dumps_the_flight_recorder():
    """With a flight recorder, a hang is a trigger: the dump is named
    after it, written while the hang lasts, and holds the ranks'
    all-reduces before it on the world communicator's tracks, as record
    writes them ("NCCL comm ID rank r/4"), which cgbpf stats reads: the
    straggler report has the world's four ranks."""
    need_nccl_ranks()
    d = tmpdir()
    # The job's deliberate error returns would dump too: not those.
    mon = Monitor(["--flight-recorder", "60s", "--trigger-slow", "off", "--no-trigger-errors",
                   "--interval", "1h", "--comm", "nccl_ranks", "--nccl-hang-after", "1s"], d)
    try:
        w = start([wl("nccl_ranks"), "--ranks", "4", "--iters", "6", "--procs", "--hang-rank", "2",
                   "--hang-ms", "4000"], env=mon.wl_env())
        files = wait_dump(mon, 1, "the hang's dump")
        check(w.poll() is None, "written while the job hangs")
        check("NCCL hang?" in mon.stderr(), "the hang said (dumps %r; stderr %r)"
              % (files, mon.stderr()[-1500:]))
        check(re.search(r"-[a-z+-]*nccl-hang[a-z+-]*\.perfetto-trace$", files[0]),
              "the dump named after the trigger: %r" % files)
        t = ptrace.load(files[0])
        clean_trace(t)
        # The ranks' calls before the hang: three all-reduces each, on
        # the world communicator.
        per = {}
        for x in t.slices:
            m = re.match(r"^\w+ rank (\d)/4$", x.args.get("comm", ""))
            if x.name == "ncclAllReduce" and x.dur is not None and m:
                per.setdefault(int(m.group(1)), set()).add(x.pid)
                per.setdefault((int(m.group(1)), "n"), []).append(x.ts)
        eq(sorted(k for k in per if isinstance(k, int)), [0, 1, 2, 3],
           "the 4 ranks' all-reduces on the world communicator in the dump: %r" % per)
        check(all(len(per.get((r, "n"), [])) >= 3 for r in range(4)),
              "three each before the hang: %r" % per)
        comm = {u: k.name for u, k in t.tracks.items()
                if re.match(r"^NCCL comm [0-9a-f]{4} rank \d/4$", k.name or "")}
        eq(sorted(int(n.split()[4][0]) for n in comm.values()), [0, 1, 2, 3],
           "the world's four rank tracks in the dump: %r" % sorted(comm.values()))
        ons = {comm[u]: sum(1 for x in t.slices_on(track_uuid=u) if x.name == "ncclAllReduce")
               for u in comm}
        check(all(v >= 3 for v in ons.values()), "three all-reduces on each: %r" % ons)
        wid = list(comm.values())[0].split()[2]
        rows = straggler_rows(files[0])
        eq(sorted(x["rank"] for x in rows if x["comm"] == wid), ["0", "1", "2", "3"],
           "the straggler report's world rows from the dump: %r" % rows)
        eq(w.wait(120), 0, "nccl_ranks exit")
    finally:
        eq(mon.stop(), 0, "monitor exit")


def test_monitor_nccl_straggler_counts():
    """Rank 2 sleeps 10 ms before each of its 30 all-reduces: the monitor
    counts it entered last in those, and the waiting it caused, on the
    world communicator (every rank traced here); the other ranks entered
    last in few."""
    need_nccl_ranks()
    d = tmpdir()
    mon = Monitor(["--interval", "1h", "--comm", "nccl_ranks"], d)
    try:
        w = start([wl("nccl_ranks"), "--ranks", "4", "--iters", "30", "--procs", "--slow-rank", "2",
                   "--slow-us", "10000"], env=mon.wl_env())
        eq(w.wait(120), 0, "nccl_ranks exit")
        m = mon.scrape()
    finally:
        eq(mon.stop(), 0, "monitor exit")

    def by_rank(name):
        return {int(dict(k[1])["rank"]): v for k, v in series(m, name, nranks=4).items()}
    matched, last = by_rank("cgbpf_nccl_matched_total"), by_rank("cgbpf_nccl_entered_last_total")
    waited = by_rank("cgbpf_nccl_others_waited_seconds_total")
    eq(sorted(matched), [0, 1, 2, 3], "rows of the world's ranks: %r" % matched)
    check(min(matched.values()) >= 30 + 8, "every collective matched: %r" % matched)
    check(last[2] >= 24, "rank 2 last in (most of) its slow all-reduces: %r" % last)
    check(all(last[r] < last[2] / 2 for r in (0, 1, 3)), "the others last in few: %r" % last)
    check(waited[2] >= 24 * 3 * 0.005, "the waiting it caused: %r" % waited)
    late = by_rank("cgbpf_nccl_late_seconds_total")
    check(late[2] >= 24 * 0.005 and all(late[r] < late[2] / 2 for r in (0, 1, 3)),
          "its lateness, ~10 ms a time, far above the others': %r" % late)


def test_monitor_dump_names_communicators_created_before_its_ring():
    """A dump whose ring (1 s) starts long after the job created its
    communicators: the world's tracks are still "NCCL comm ID rank r/4",
    the live model's, and its all-reduces are numbered as the live model
    numbered them (the same number for the same operation in every rank,
    not from 1), so cgbpf stats on the dump matches them and names the
    slow rank."""
    need_nccl_ranks()
    d = tmpdir()
    mon = Monitor(["--flight-recorder", "1s", "--trigger-slow", "off", "--no-trigger-errors",
                   "--interval", "1h", "--comm", "nccl_ranks"], d)
    w = None
    try:
        w = start([wl("nccl_ranks"), "--ranks", "4", "--iters", "100", "--procs",
                   "--slow-rank", "2", "--slow-us", "40000"], env=mon.wl_env())

        def far_enough():
            seqs = series(mon.scrape(), "cgbpf_nccl_last_seq", nranks=4)
            return len(seqs) >= 4 and min(seqs.values()) >= 45
        # 45 all-reduces of 40 ms: 1.8 s after the communicators' creation.
        wait_for(far_enough, 60, "45 all-reduces in every rank")
        dump = mon.request_dump()
        t = ptrace.load(dump)
        clean_trace(t)
        check(not any(x.name.startswith("ncclCommInit") for x in t.slices),
              "the ring starts after the communicators' creation")
        world = {u: k.name for u, k in t.tracks.items()
                 if re.match(r"^NCCL comm [0-9a-f]{4} rank \d/4$", k.name or "")}
        eq(sorted(int(n.split()[4][0]) for n in world.values()), [0, 1, 2, 3],
           "the world's four rank tracks: %r" % sorted(k.name for k in t.tracks.values()
                                                     if (k.name or "").startswith("NCCL")))
        seqs = {}
        for u, n in world.items():
            seqs[n] = sorted(x.args["seq"] for x in t.slices_on(track_uuid=u)
                             if x.name == "ncclAllReduce" and "seq" in x.args)
        check(all(v and v[0] > 1 for v in seqs.values()),
              "numbered as the live model did, not from 1: %r" %
              {k: v[:3] for k, v in seqs.items()})
        check(all(v == list(range(v[0], v[0] + len(v))) for v in seqs.values()),
              "each rank's numbers consecutive: %r" % seqs)
        common = set.intersection(*(set(v) for v in seqs.values()))
        check(len(common) >= 10, "the same numbers in every rank: %r" % seqs)
        wid = list(world.values())[0].split()[2]
        rows = {x["rank"]: x for x in straggler_rows(dump) if x["comm"] == wid}
        eq(sorted(rows), ["0", "1", "2", "3"], "the world's rows: %r" % rows)
        check(int(rows["2"]["collectives"]) >= 10 and float(rows["2"]["last_pct"]) >= 80,
              "rank 2 entered last in most of its matched all-reduces: %r" % rows)
    finally:
        kill_quiet(w)
        eq(mon.stop(), 0, "monitor exit")


def test_monitor_dump_keeps_a_reused_handle_apart():
    """A communicator created before the ring (1 s) and destroyed inside
    it, and a new one created at the same handle: the dump's all-reduces
    on the old one are not given the new one's identity (the live model's
    seed for that handle is the new one), and the new one's are numbered
    from 1, as it was created inside the ring."""
    import select
    need_nccl_ranks()
    d = tmpdir()
    mon = Monitor(["--flight-recorder", "1s", "--trigger-slow", "off", "--no-trigger-errors",
                   "--interval", "1h", "--comm", "nccl_ranks"], d)
    w = None
    try:
        # 45 all-reduces of 40 ms on the first communicator (1.8 s), then
        # 55 on the second.
        w = start([wl("nccl_ranks"), "--ranks", "1", "--iters", "100", "--slow-rank", "0",
                   "--slow-us", "40000", "--reinit-after", "45"], env=mon.wl_env())
        line, end = "", time.time() + 60
        while not line.startswith("reinit") and time.time() < end:
            if select.select([w.stdout], [], [], 1)[0]:
                line = w.stdout.readline()
                if not line:
                    break
        check(line.startswith("reinit"), "the workload's reinit line (got %r)" % line)
        old, new = line.split()[1:3]
        eq(old, new, "the fake gave the new communicator the destroyed one's handle")

        def new_one_seen():
            seqs = series(mon.scrape(), "cgbpf_nccl_last_seq", nranks=1)
            return any(5 <= v <= 15 for v in seqs.values())
        # The monitor's model at the new communicator's 5th to 15th
        # all-reduce (0.2 to 0.6 s after it): the 1 s ring still holds
        # the old one's last all-reduces and its destroy.
        wait_for(new_one_seen, 60, "the monitor at the new communicator's 5th all-reduce")
        dump = mon.request_dump()
        t = ptrace.load(dump)
        clean_trace(t)
        inits = [x for x in t.slices if x.name == "ncclCommInitRank"]
        eq(len(inits), 1, "the ring holds the second communicator's creation only")
        destroys = [x for x in t.slices if x.name == "ncclCommDestroy"]
        check(destroys and destroys[0].ts < inits[0].ts, "the destroy, then the creation")
        label = "%s rank 0/1" % inits[0].args.get("comm_id")
        # The rank thread's slices (each is on its communicator's track too).
        ars = sorted((x for x in t.slices if x.name == "ncclAllReduce" and "comm" in x.args
                      and x.tid is not None), key=lambda x: x.ts)
        before = [x for x in ars if x.ts < destroys[0].ts]
        after = [x for x in ars if x.ts > inits[0].ts]
        check(len(before) >= 3 and len(after) >= 3,
              "all-reduces on both sides of the reinit (%d, %d)" % (len(before), len(after)))
        eq(sorted({x.args["comm"] for x in after}), [label], "the new communicator's label")
        eq([x.args.get("seq") for x in after], list(range(1, len(after) + 1)),
           "the new communicator's all-reduces numbered from 1")
        olds = sorted({x.args["comm"] for x in before})
        check(label not in olds and all(re.match(r"^\(0x[0-9a-f]+\) rank \?/\?$", n) for n in olds),
              "the old communicator's all-reduces are an unknown one's, not the new one's: %r" %
              olds)
    finally:
        kill_quiet(w)
        eq(mon.stop(), 0, "monitor exit")
