# opslib.py -- what the operations tests share: a temporary directory, rdaxd
# started on a sim-mode namespace and stopped with SIGTERM (a test fails if
# it does not exit), the rdax command, and reads of the metrics endpoint.
import atexit
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)
    print("ok: " + msg, flush=True)


class Daemon:
    """rdaxd on DIR/ns (sim mode), tcp and nbd on loopback, metrics on a free port."""

    def __init__(self, rdaxd, workdir, faults="", extra=()):
        self.rdaxd = rdaxd
        self.dir = workdir
        self.faults = faults
        self.extra = list(extra)
        self.proc = None
        atexit.register(self._reap)  # a failed check exits: leave no daemon behind

    def _reap(self):
        if self.proc:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def start(self):
        env = dict(os.environ)
        env.pop("RDAX_FAULTS", None)
        if self.faults:
            env["RDAX_FAULTS"] = self.faults
        self.log = open(os.path.join(self.dir, "rdaxd.log"), "a")
        args = [self.rdaxd, "--namespace", os.path.join(self.dir, "ns") + ",size=64M,mode=sim",
                "--listen", "tcp://127.0.0.1:0", "--listen", "nbd://127.0.0.1:0",
                "--metrics", "http://127.0.0.1:0", "--threads", "2"] + self.extra
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log, env=env,
                                     text=True)
        deadline = time.time() + 30
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                break
            if line.startswith("rdaxd: ready"):
                self.ready = line.strip()
                self.tcp = re.search(r"(tcp://127\.0\.0\.1:\d+)", line).group(1)
                self.nbd = re.search(r"(nbd://127\.0\.0\.1:\d+)", line).group(1)
                self.metrics = re.search(r"metrics (http://\S+/metrics)", line).group(1)
                return
        self.proc.kill()
        fail("rdaxd did not become ready; its log: " + self.log_text())

    def log_text(self):
        with open(os.path.join(self.dir, "rdaxd.log")) as f:
            return f.read()

    def stop(self):
        """SIGTERM, and fail unless it exits 0 within 30 s"""
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            fail("rdaxd did not exit after SIGTERM")
        if rc != 0:
            fail("rdaxd exited %d after SIGTERM" % rc)
        self.proc = None

    def kill9(self):
        """a power cut as far as the namespace's in-use flag goes"""
        self.proc.kill()
        self.proc.wait()
        self.proc = None

    def scrape(self):
        with urllib.request.urlopen(self.metrics, timeout=10) as r:
            check_type = r.headers.get("Content-Type", "")
            if not check_type.startswith("text/plain; version=0.0.4"):
                fail("Content-Type of /metrics: " + check_type)
            return r.read().decode()


def sample(text, name, labels=None):
    """the value of one sample of the exposition, None if absent"""
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)$", line)
        if not m or m.group(1) != name:
            continue
        got = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        if all(got.get(k) == v for k, v in (labels or {}).items()):
            return float(m.group(3))
    return None


def rdax(cli, server, *args, stdin=None, ok=True):
    """run rdax; with ok, fail unless it exits 0. Returns the CompletedProcess"""
    p = subprocess.run([cli, "--server", server] + list(args), input=stdin,
                       capture_output=True, timeout=60)
    if ok and p.returncode != 0:
        fail("rdax %s: exit %d: %s" % (" ".join(args), p.returncode, p.stderr.decode()))
    return p


def workdir(name):
    d = tempfile.mkdtemp(prefix="rdax-%s-" % name)
    return d


def cleanup(d):
    shutil.rmtree(d, ignore_errors=True)
