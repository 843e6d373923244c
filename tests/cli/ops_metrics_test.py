"""Prometheus metrics with real parts (issue 15): `promtool check metrics`
accepts `ccpool status --prometheus` and the /metrics endpoint in both formats,
and a real Prometheus server on loopback scrapes the endpoint and answers the
hit count through its HTTP API. Exit 125 when promtool or prometheus is absent
(Debian package `prometheus`, installed by scripts/setup-deps.sh)."""
import http.client
import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "service", "support"))
from harness import CCPOOL, HANG_GUARD_S, ServiceCase, end_process, main, wait_until  # noqa: E402

OPENMETRICS_ACCEPT = ("application/openmetrics-text;version=1.0.0,application/openmetrics-text;"
                      "version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1")
SOURCE = "int answer(void) { return 42; }\n"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(port, path="/metrics", accept=None, method="GET"):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request(method, path, headers={"Accept": accept} if accept else {})
    r = conn.getresponse()
    body = r.read().decode()
    conn.close()
    return r.status, r.getheader("Content-Type"), body


class MetricsTest(ServiceCase):
    def need(self, tool):
        if shutil.which(tool) is None:
            self.skipTest(f"'{tool}' is not installed (Debian package prometheus; run scripts/setup-deps.sh)")

    def compile_n(self, n):
        self.write("work/k.c", SOURCE)
        for _ in range(n):
            rc, out, err = self.run_exec(["gcc", "-c", "k.c", "-o", "k.o"])
            self.assertEqual(rc, 0, err)

    def promtool_check(self, text):
        r = subprocess.run(["promtool", "check", "metrics"], input=text.encode(),
                           capture_output=True, timeout=60)
        self.assertEqual(r.returncode, 0, f"promtool rejected the metrics:\n{r.stdout}\n{r.stderr}\n{text}")

    def test_promtool_accepts_both_renderings(self):
        self.need("promtool")
        self.need("gcc")
        self.start_service("--metrics-port", "0")
        self.compile_n(3)  # one miss, two hits
        port = self.status()["metrics_port"]
        self.assertGreater(port, 0)

        cli = subprocess.run([CCPOOL, "status", "--socket", self.sock, "--prometheus"], env=self.env,
                             capture_output=True, timeout=60)
        self.assertEqual(cli.returncode, 0, cli.stderr)
        text = cli.stdout.decode()
        self.promtool_check(text)
        self.assertIn('ccpool_requests_total{result="hit"} 2\n', text)
        self.assertIn('ccpool_requests_total{result="miss"} 1\n', text)
        self.assertIn("ccpool_hit_duration_seconds_count 2\n", text)
        self.assertIn('ccpool_hit_duration_seconds_bucket{le="+Inf"} 2\n', text)
        # The hits' time by stage: every stage of a served hit is timed, and
        # the stages are parts of the hit's time, no more.
        stages = self.status()["hit_stage_seconds"]
        self.assertEqual(sorted(stages), sorted(["handoff", "plan", "lookup", "fetch", "deliver", "reply"]))
        for stage in ("plan", "lookup", "deliver", "reply"):
            self.assertGreater(stages[stage], 0, stages)
            self.assertIn(f'ccpool_hit_stage_seconds_total{{stage="{stage}"}} ', text)
        self.assertLessEqual(sum(stages.values()), self.status()["hit_latency"]["sum_s"] + 1e-6, stages)
        # Every request read the node store (manifests, then results); no
        # cluster tier, no cluster series.
        node = [l for l in text.split("\n") if l.startswith('ccpool_tier_lookup_duration_seconds_count{tier="node"}')]
        self.assertEqual(len(node), 1)
        self.assertGreaterEqual(int(node[0].split()[1]), 3)
        self.assertNotIn('tier="cluster"', text)

        status, ctype, body = http_get(port)
        self.assertEqual((status, ctype), (200, "text/plain; version=0.0.4; charset=utf-8"))
        self.promtool_check(body)
        self.assertIn('ccpool_requests_total{result="hit"} 2\n', body)

        status, ctype, body = http_get(port, accept=OPENMETRICS_ACCEPT)
        self.assertEqual(status, 200)
        self.assertTrue(ctype.startswith("application/openmetrics-text; version=1.0.0"), ctype)
        self.assertTrue(body.endswith("# EOF\n"))
        self.assertIn("# TYPE ccpool_requests counter\n", body)
        self.assertIn('ccpool_requests_total{result="hit"} 2\n', body)

        self.assertEqual(http_get(port, "/")[0], 404)
        self.assertEqual(http_get(port, method="POST")[0], 405)
        status, _, body = http_get(port, method="HEAD")
        self.assertEqual((status, body), (200, ""))

    def test_endpoint_is_loopback_only_and_bounded(self):
        self.start_service("--metrics-port", "0")
        port = self.status()["metrics_port"]
        listeners = open("/proc/net/tcp").read().split("\n")[1:]
        local = [l.split()[1] for l in listeners if l.split() and l.split()[3] == "0A"]
        self.assertIn(f"0100007F:{port:04X}", local, "metrics must listen on 127.0.0.1 only")
        # An oversized request head gets 431 and its connection closed.
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 10000 + b"\r\n\r\n")
            self.assertTrue(s.recv(64).startswith(b"HTTP/1.1 431"))
        # Idle connections up to the bound and beyond: compiles and status are
        # untouched, and a scrape is answered once the idle ones time out.
        idle = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(12)]
        try:
            self.assertIsNotNone(self.try_status())
            rc, out, err = self.run_exec(["/bin/echo", "served"])
            self.assertEqual((rc, out), (0, b"served\n"), err)
            self.assertEqual(self.status()["requests"], 1)
            status, _, body = http_get(port)
            self.assertEqual(status, 200)
            self.assertIn("ccpool_requests_received_total 1\n", body)
        finally:
            for s in idle:
                s.close()

    def test_idle_connections_of_one_uid_cannot_starve_a_scraper(self):
        """Issue 23: any local user could hold the endpoint's 8 connections (and
        queue more behind them), so a scraper was answered only after idle ones
        hit their deadline. Now one uid holds at most kMaxPerUid (4): another
        uid's scrape is answered at once while uid 65534 keeps 64 idle
        connections coming. Counted: none of the holder's connections may have
        been closed by its deadline (EOF without a reply) before the scrape."""
        if os.geteuid() != 0 or shutil.which("setpriv") is None or shutil.which("curl") is None:
            self.skipTest("needs root, setpriv and curl to hold connections as uid 65534 and scrape as root")
        self.start_service("--metrics-port", "0")
        port = self.status()["metrics_port"]
        holder_src = r"""
import errno, json, select, socket, sys
port = int(sys.argv[1])
socks = []
for _ in range(64):
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex(("127.0.0.1", port))
    socks.append(s)
select.select([], socks, [], 3)  # connected (or queued by the kernel)
print("ready", flush=True)
sys.stdin.readline()
seen = {"open": 0, "refused_503": 0, "closed_silently": 0, "other": 0}
for s in socks:
    try:
        data = s.recv(4096)
        kind = "refused_503" if data.startswith(b"HTTP/1.1 503") else "closed_silently" if not data else "other"
    except OSError as e:
        kind = "open" if e.errno in (errno.EAGAIN, errno.EWOULDBLOCK) else "closed_silently"
    seen[kind] += 1
print(json.dumps(seen), flush=True)
"""
        holder = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                   "/usr/bin/python3", "-c", holder_src, str(port)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.clients.append(holder)
        self.assertEqual(holder.stdout.readline().strip(), "ready")
        scrape = subprocess.run(["curl", "-s", "-m", "120", "-o", "-", "-w", "\n%{http_code}",
                                 f"http://127.0.0.1:{port}/metrics"], capture_output=True, text=True, timeout=150)
        holder.stdin.write("report\n")
        holder.stdin.flush()
        seen = json.loads(holder.stdout.readline())
        holder.wait(30)
        self.assertTrue(scrape.stdout.endswith("\n200"), scrape.stdout[-300:])
        self.assertIn("ccpool_requests_received_total", scrape.stdout)
        self.assertEqual(seen["closed_silently"], 0, f"the scrape waited for idle connections to time out: {seen}")
        self.assertEqual(seen["open"], 4, seen)
        self.assertEqual(seen["refused_503"], 60, seen)

    def test_cluster_tier_series_and_latency_histogram(self):
        self.need("promtool")
        self.need("gcc")
        self.need("redis-server")
        redis_port = free_port()
        redis = subprocess.Popen(["redis-server", "--port", str(redis_port), "--bind", "127.0.0.1",
                                  "--save", "", "--appendonly", "no", "--dir", self.dir],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            def redis_up():
                try:
                    socket.create_connection(("127.0.0.1", redis_port), timeout=1).close()
                    return True
                except OSError:
                    return False
            wait_until(redis_up, "redis-server to listen")
            key = self.write("remote.key", "metrics-test-key\n", 0o600)
            self.start_service("--metrics-port", "0", "--remote", f"redis://127.0.0.1:{redis_port}",
                               "--remote-key-file", key)
            self.compile_n(1)  # a local miss asks the cluster tier once
            port = self.status()["metrics_port"]
            status, _, body = http_get(port)
            self.assertEqual(status, 200)
            self.promtool_check(body)
            samples = dict(l.rsplit(" ", 1) for l in body.split("\n") if l and not l.startswith("#"))
            # Each cluster lookup is one observation; here each one missed (the
            # pipeline asks before leading and again after taking the lease),
            # after a node-store lookup that missed too.
            misses = int(samples["ccpool_cluster_misses_total"])
            self.assertGreaterEqual(int(samples['ccpool_tier_lookup_duration_seconds_count{tier="node"}']), misses)
            self.assertGreaterEqual(misses, 1)
            self.assertEqual(samples["ccpool_cluster_hits_total"], "0")
            self.assertEqual(samples["ccpool_cluster_errors_total"], "0")
            self.assertEqual(samples["ccpool_cluster_breaker_open"], "0")
            self.assertEqual(int(samples['ccpool_tier_lookup_duration_seconds_count{tier="cluster"}']), misses)
            self.assertEqual(int(samples['ccpool_tier_lookup_duration_seconds_bucket{tier="cluster",le="+Inf"}']),
                             misses)
        finally:
            redis.terminate()
            redis.wait(30)

    def test_prometheus_server_scrapes_hit_count(self):
        self.need("prometheus")
        self.need("gcc")
        self.start_service("--metrics-port", "0")
        port = self.status()["metrics_port"]
        web_port = free_port()
        # A second target records the Accept header Prometheus scrapes with, so
        # the test knows which format the ccpool target was parsed in.
        accepts = []

        class Recorder(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                accepts.append(self.headers.get("Accept", ""))
                body = b"probe_up 1\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        recorder = http.server.HTTPServer(("127.0.0.1", 0), Recorder)
        threading.Thread(target=recorder.serve_forever, daemon=True).start()
        self.addCleanup(recorder.shutdown)
        config = self.write("prometheus.yml", f"""global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: ccpool
    static_configs:
      - targets: ['127.0.0.1:{port}']
  - job_name: recorder
    static_configs:
      - targets: ['127.0.0.1:{recorder.server_address[1]}']
""")
        log = open(self.path("prometheus.log"), "wb")
        prom = subprocess.Popen(["prometheus", f"--config.file={config}",
                                 f"--storage.tsdb.path={self.path('tsdb')}",
                                 f"--web.listen-address=127.0.0.1:{web_port}"],
                                stdout=log, stderr=subprocess.STDOUT, cwd=self.dir)
        try:
            self.compile_n(4)  # one miss, three hits

            def query(expr):
                url = f"http://127.0.0.1:{web_port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
                try:
                    with urllib.request.urlopen(url, timeout=10) as r:
                        data = json.load(r)
                except OSError:
                    return None
                if prom.poll() is not None:
                    raise AssertionError(f"prometheus exited {prom.returncode}; see {self.path('prometheus.log')}")
                result = data.get("data", {}).get("result", [])
                return result[0]["value"][1] if result else None

            hits = wait_until(lambda: (lambda v: v if v == "3" else None)(
                query('ccpool_requests_total{job="ccpool",result="hit"}')),
                "Prometheus to report 3 hits", timeout=HANG_GUARD_S, step=0.5)
            self.assertEqual(hits, "3")
            self.assertEqual(query('up{job="ccpool"}'), "1")
            self.assertEqual(query('ccpool_requests_total{result="miss"}'), "1")
            self.assertEqual(query('ccpool_hit_duration_seconds_count'), "3")
            def targets_up():
                with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/api/v1/targets", timeout=10) as r:
                    targets = json.load(r)["data"]["activeTargets"]
                return targets if sorted(t["health"] for t in targets) == ["up", "up"] else None
            targets = wait_until(targets_up, "both targets to be scraped", timeout=HANG_GUARD_S, step=0.5)
            ccpool_target = [t for t in targets if t["labels"]["job"] == "ccpool"]
            self.assertEqual([t["lastError"] for t in ccpool_target], [""])
            # Prometheus asked for OpenMetrics first, so that is what it parsed.
            self.assertTrue(accepts and accepts[0].startswith("application/openmetrics-text"), accepts)
        finally:
            end_process(prom)
            log.close()


if __name__ == "__main__":
    main()
