# metrics_prometheus.py -- rdaxd --metrics against promtool and a real Prometheus
#
# A known workload over the rdax protocol (tcp) and NBD, then:
#  - the exposition passes `promtool check metrics` (Prometheus' own lint);
#  - the counters of the workload are exact in the scrape;
#  - a Prometheus server started here scrapes rdaxd, and queries of its HTTP
#    API return the same exact counts;
#  - HTTP odds and ends: 404 elsewhere, 405 for POST, a malformed request
#    line answered or closed with the daemon still serving.
# Usage: metrics_prometheus.py RDAXD RDAX
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import nbd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from opslib import Daemon, check, cleanup, fail, rdax, sample, workdir  # noqa: E402

rdaxd_bin, rdax_bin = sys.argv[1], sys.argv[2]
d = workdir("metrics")
daemon = Daemon(rdaxd_bin, d)
daemon.start()
srv = daemon.tcp
WRITES, WSIZE, READS, RSIZE = 5, 65536, 3, 4096

# the workload: every rdax run says hello, opens and closes its volume
rdax(rdax_bin, srv, "volume", "create", "v1", "8M")
for i in range(WRITES):
    rdax(rdax_bin, srv, "write", "v1", str(i * WSIZE), "--fsync", stdin=os.urandom(WSIZE))
for i in range(READS):
    p = rdax(rdax_bin, srv, "read", "v1", str(i * RSIZE), str(RSIZE))
    check(len(p.stdout) == RSIZE, "read %d returned %d bytes" % (i, RSIZE))
p = rdax(rdax_bin, srv, "read", "nosuch", "0", "4K", ok=False)
check(p.returncode == 1, "a read of a missing volume fails")
rdax(rdax_bin, srv, "volume", "list")

h = nbd.NBD()
h.set_strict_mode(0)  # the server refuses, not libnbd
h.connect_uri(daemon.nbd + "/v1")
h.pwrite(b"x" * 4096, 0)
h.pwrite(b"y" * 8192, 8192)
h.flush()
check(len(h.pread(4096, 0)) == 4096, "NBD read")
try:
    h.pread(4096, 8 << 20)  # past the end: an error reply
    fail("an NBD read past the end succeeded")
except nbd.Error:
    pass
h.shutdown()
time.sleep(0.5)  # the NBD connection's end reaches its worker

text = daemon.scrape()
with open(os.path.join(d, "scrape.txt"), "w") as f:
    f.write(text)
lint = subprocess.run(["promtool", "check", "metrics"], input=text.encode(),
                      capture_output=True)
check(lint.returncode == 0, "promtool check metrics: %s%s" % (lint.stdout.decode(),
                                                               lint.stderr.decode()))

runs = 1 + WRITES + READS + 1 + 1  # create, writes, reads, the failed read, list
want = {
    ("rdax_requests_total", (("op", "write"), ("transport", "tcp"))): WRITES,
    ("rdax_requests_total", (("op", "read"), ("transport", "tcp"))): READS,
    ("rdax_requests_total", (("op", "hello"), ("transport", "tcp"))): runs,
    ("rdax_requests_total", (("op", "volume_create"), ("transport", "tcp"))): 1,
    ("rdax_requests_total", (("op", "volume_open"), ("transport", "tcp"))): WRITES + READS + 1,
    ("rdax_requests_total", (("op", "volume_list"), ("transport", "tcp"))): 1,
    ("rdax_request_bytes_total", (("op", "write"), ("transport", "tcp"))): WRITES * WSIZE,
    ("rdax_request_bytes_total", (("op", "read"), ("transport", "tcp"))): READS * RSIZE,
    ("rdax_errors_total", (("code", "ENOENT"), ("transport", "tcp"))): 1,
    ("rdax_connections_opened_total", (("transport", "tcp"),)): runs,
    ("rdax_connections", (("transport", "tcp"),)): 0,
    ("rdax_requests_total", (("op", "write"), ("transport", "nbd"))): 2,
    ("rdax_requests_total", (("op", "fsync"), ("transport", "nbd"))): 1,
    ("rdax_requests_total", (("op", "read"), ("transport", "nbd"))): 2,
    ("rdax_request_bytes_total", (("op", "write"), ("transport", "nbd"))): 4096 + 8192,
    ("rdax_request_bytes_total", (("op", "read"), ("transport", "nbd"))): 4096,
    ("rdax_errors_total", (("code", "EINVAL"), ("transport", "nbd"))): 1,
    ("rdax_connections_opened_total", (("transport", "nbd"),)): 1,
    ("rdax_fsync_duration_seconds_count", ()): WRITES + 1,
    ("rdax_fsync_duration_seconds_bucket", (("le", "+Inf"),)): WRITES + 1,
    ("rdax_volume_size_bytes", (("namespace", "0"), ("volume", "v1"))): 8 << 20,
    ("rdax_volume_dirty_bytes", (("namespace", "0"), ("volume", "v1"))): 0,
    ("rdax_namespace_size_bytes", (("namespace", "0"),)): 64 << 20,
    ("rdax_namespace_free_bytes", (("namespace", "0"),)): (64 - 2 - 8) << 20,
    ("rdax_namespace_info", (("namespace", "0"), ("kind", "file"), ("method", "sim"))): 1,
}
for (name, labels), value in want.items():
    got = sample(text, name, dict(labels))
    check(got == value, "%s%s = %s (got %s)" % (name, dict(labels), value, got))
# every fsync wrote back at least what its write put there
wb = sample(text, "rdax_fsync_written_back_bytes_total")
check(wb is not None and wb >= WRITES * WSIZE + 4096 + 8192,
      "rdax_fsync_written_back_bytes_total %s >= the bytes written" % wb)


# ---- a real Prometheus scrapes it ----
def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


target = urllib.parse.urlparse(daemon.metrics).netloc
pport = free_port()
with open(os.path.join(d, "prometheus.yml"), "w") as f:
    f.write("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            "scrape_configs:\n  - job_name: rdaxd\n    static_configs:\n"
            "      - targets: ['%s']\n" % target)
plog = open(os.path.join(d, "prometheus.log"), "w")
prom = subprocess.Popen(["prometheus", "--config.file=" + os.path.join(d, "prometheus.yml"),
                         "--storage.tsdb.path=" + os.path.join(d, "tsdb"),
                         "--web.listen-address=127.0.0.1:%d" % pport],
                        stdout=plog, stderr=plog)


def query(q):
    url = "http://127.0.0.1:%d/api/v1/query?query=%s" % (pport, urllib.parse.quote(q))
    with urllib.request.urlopen(url, timeout=5) as r:
        res = json.load(r)
    if res.get("status") != "success":
        return None
    out = res["data"]["result"]
    return float(out[0]["value"][1]) if out else None


try:
    deadline = time.time() + 90
    up = None
    while time.time() < deadline:
        try:
            up = query('up{job="rdaxd"}')
            if up == 1 and query('rdax_requests_total{op="write",transport="tcp"}') is not None:
                break
        except (urllib.error.URLError, ConnectionError, OSError):
            pass
        time.sleep(1)
    check(up == 1, "Prometheus scrapes rdaxd (up == 1)")
    for q, value in [
        ('rdax_requests_total{op="write",transport="tcp"}', WRITES),
        ('rdax_request_bytes_total{op="write",transport="tcp"}', WRITES * WSIZE),
        ('rdax_requests_total{op="read",transport="tcp"}', READS),
        ('rdax_errors_total{code="ENOENT",transport="tcp"}', 1),
        ('rdax_requests_total{op="fsync",transport="nbd"}', 1),
        ('rdax_fsync_duration_seconds_count', WRITES + 1),
        ('histogram_quantile(1, rate(rdax_fsync_duration_seconds_bucket[1m])) >= 0', None),
        ('rdax_volume_size_bytes{volume="v1"}', 8 << 20),
    ]:
        got = query(q)
        if value is None:
            check(got is None or got >= 0, "query %s evaluates" % q)
        else:
            check(got == value, "Prometheus query %s = %s (got %s)" % (q, value, got))
finally:
    prom.terminate()
    try:
        prom.wait(30)
    except subprocess.TimeoutExpired:
        prom.kill()

# ---- HTTP odds and ends ----
base = daemon.metrics[: -len("/metrics")]
try:
    urllib.request.urlopen(base + "/nothing", timeout=5)
    fail("/nothing answered 200")
except urllib.error.HTTPError as e:
    check(e.code == 404, "GET /nothing is 404")
try:
    urllib.request.urlopen(urllib.request.Request(daemon.metrics, data=b"x", method="POST"),
                           timeout=5)
    fail("POST /metrics answered 200")
except urllib.error.HTTPError as e:
    check(e.code == 405, "POST /metrics is 405")
host, port = target.rsplit(":", 1)
for junk in [b"\x00\xff garbage\r\n\r\n", b"GET " + b"A" * 100000 + b" HTTP/1.1\r\n\r\n",
             b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + b"X: y\r\n" * 5000 + b"\r\n"]:
    s = socket.create_connection((host, int(port)), timeout=5)
    try:
        s.sendall(junk)
        s.recv(1024)
    except OSError:
        pass
    s.close()
check(sample(daemon.scrape(), "rdax_build_info", {}) == 1,
      "the endpoint still serves after malformed requests")
daemon.stop()
cleanup(d)
print("1 passed, 0 failed")
