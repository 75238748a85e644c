# SPDX-License-Identifier: MIT
"""dist/prometheus and dist/grafana against a real Prometheus (Debian's
prometheus package, which scripts/install-deps.sh installs; started here
on free loopback ports, never the packaged service): promtool checks the
rules and runs their unit tests; Prometheus scrapes `cgbpf monitor` while
rank 2 of a 4-rank job stops for 12 s, evaluates the rules (their windows
shortened for the test) and fires CgbpfNcclRankBehind for rank 2 alone;
every PromQL expression of the Grafana dashboard evaluates without error."""
import json
import os
import shutil
import subprocess
import urllib.parse
import urllib.request

from harness import Skip, check, eq, need_nccl_ranks, start, tmpdir, wait_for, wl
from test_monitor import Monitor, free_port

HERE = os.path.dirname(os.path.abspath(__file__))
DIST = os.path.join(HERE, "..", "..", "dist")
RULES = os.path.join(DIST, "prometheus", "cgbpf-nccl.rules.yml")


def need():
    for tool in ("prometheus", "promtool"):
        if not shutil.which(tool):
            raise Skip("no %s (Debian's prometheus package: scripts/install-deps.sh)" % tool)
    need_nccl_ranks()


def test_promtool_checks_and_unit_tests():
    need()
    p = subprocess.run(["promtool", "check", "rules", RULES], capture_output=True, text=True,
                       timeout=60)
    eq(p.returncode, 0, "promtool check rules: %s%s" % (p.stdout, p.stderr))
    p = subprocess.run(["promtool", "test", "rules", "cgbpf-nccl.tests.yml"],
                       cwd=os.path.join(DIST, "prometheus"), capture_output=True, text=True,
                       timeout=60)
    eq(p.returncode, 0, "promtool test rules: %s%s" % (p.stdout, p.stderr))


def api(port, path, **q):
    url = "http://127.0.0.1:%d/api/v1/%s?%s" % (port, path, urllib.parse.urlencode(q))
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


def firing(port):
    out = []
    for a in api(port, "alerts")["data"]["alerts"]:
        if a["labels"].get("alertname") == "CgbpfNcclRankBehind" and a["state"] == "firing":
            out.append(a["labels"])
    return out


def test_prometheus_fires_behind_for_the_stuck_rank():
    need()
    d = tmpdir()
    mon = Monitor(["--interval", "1h", "--comm", "nccl_ranks"], d)
    prom = None
    try:
        # The rules with their windows shortened: 30 s -> 4 s, for 15 s -> 2 s.
        with open(RULES) as f:
            rules = f.read().replace("[30s]", "[4s]").replace("for: 15s", "for: 2s")
        with open(os.path.join(d, "rules.yml"), "w") as f:
            f.write(rules)
        with open(os.path.join(d, "prometheus.yml"), "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "rule_files:\n  - rules.yml\n"
                    "scrape_configs:\n  - job_name: cgbpf\n    static_configs:\n"
                    "      - targets: ['%s']\n" % mon.listen)
        port = free_port()
        prom = subprocess.Popen(["prometheus", "--config.file", os.path.join(d, "prometheus.yml"),
                                 "--storage.tsdb.path", os.path.join(d, "tsdb"),
                                 "--web.listen-address", "127.0.0.1:%d" % port],
                                stdout=subprocess.DEVNULL, stderr=open(os.path.join(d, "prom.log"),
                                                                       "w"))

        def up():
            try:
                return api(port, "query", query="up")["status"] == "success"
            except OSError:
                return False
        wait_for(up, 30, "Prometheus to serve")
        w = start([wl("nccl_ranks"), "--ranks", "4", "--iters", "6", "--procs", "--hang-rank",
                   "2", "--hang-ms", "12000"], env=mon.wl_env())
        wait_for(lambda: firing(port), 25, "CgbpfNcclRankBehind to fire")
        alerts = firing(port)
        eq(sorted(a["rank"] for a in alerts), ["2"], "only rank 2 behind: %r" % alerts)
        eq(alerts[0]["nranks"], "4", "its communicator's size")
        # Every expression of the dashboard evaluates.
        with open(os.path.join(DIST, "grafana", "cgbpf-nccl.json")) as f:
            dash = json.load(f)
        exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
        check(len(exprs) >= 8, "the dashboard's panels")
        for e in exprs:
            r = api(port, "query", query=e)
            eq(r["status"], "success", "dashboard expression %r: %r" % (e, r))
        lag = api(port, "query", query="cgbpf:nccl_rank_lag")["data"]["result"]
        check(any(x["metric"].get("rank") == "2" and float(x["value"][1]) >= 1 for x in lag),
              "the recorded lag of rank 2: %r" % lag)
        eq(w.wait(120), 0, "nccl_ranks exit")
    finally:
        if prom:
            prom.terminate()
            try:
                prom.wait(30)
            except subprocess.TimeoutExpired:
                prom.kill()
        eq(mon.stop(), 0, "monitor exit")
