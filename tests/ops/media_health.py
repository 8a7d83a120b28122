# media_health.py -- unsafe-shutdown count and bad blocks, end to end
#
# No device here reports either, so the fake-media source (faults.h) stands
# in for libpmem2: PATH.media beside the namespace says "usc N" and
# "badblock OFFSET LENGTH". Checked through the real daemon and clients:
#  - bad blocks: mapped to their volume in `rdax namespace list` (and --json),
#    a read over one gets EIO over the rdax protocol and over NBD while the
#    rest of the volume reads back, the metrics count them, and a bad block
#    added while running is found on demand (by the next namespace list);
#  - unsafe shutdown: a count that changed after a kill -9 (in use) marks the
#    namespace and its volume, the mark survives a clean restart, a count that
#    changed while the namespace was closed marks nothing;
#  - clearing the marks (rdax volume|namespace clear-unsafe): a volume's mark
#    and then the namespace's (with the rest of its volumes) are gone from
#    `namespace list` and the metrics, and stay gone across a power cut right
#    after the acknowledgement (kill -9 in sim mode) and a clean restart; a
#    volume or namespace not marked is a no-op success, an unknown one
#    ENOENT; each clear is logged once with who did it; without the create
#    right (--acl) a clear is refused and the mark stays;
#  - the controls: with no-badblock-check the bad range is served, with
#    usc-no-compare the changed count goes unnoticed, with
#    unsafe-clear-no-commit a clear is acknowledged but never reaches the
#    metadata, with acl-ignore a clear without the right goes through -- and
#    the same checks must then fail.
# Usage: media_health.py RDAXD RDAX
import json
import os
import sys

import nbd

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from opslib import Daemon, check, cleanup, rdax, sample, workdir  # noqa: E402

rdaxd_bin, rdax_bin = sys.argv[1], sys.argv[2]
KiB = 1024
BAD_OFF = 512 * KiB  # in the volume


class Checks:
    """named checks that record instead of exiting, so a control can expect failures"""

    def __init__(self):
        self.failed = []

    def __call__(self, cond, msg):
        print(("ok: " if cond else "not ok: ") + msg, flush=True)
        if not cond:
            self.failed.append(msg)


def ns_list(daemon):
    p = rdax(rdax_bin, daemon.tcp, "namespace", "list", "--json")
    return json.loads(p.stdout)["namespaces"][0]


def bad_blocks(faults):
    """the bad-block scenario; returns the names of the checks that failed"""
    c = Checks()
    d = workdir("badblocks")
    pattern = os.urandom(1024 * KiB)
    daemon = Daemon(rdaxd_bin, d, faults="fake-media" + faults)
    daemon.start()
    rdax(rdax_bin, daemon.tcp, "volume", "create", "v1", "8M")
    rdax(rdax_bin, daemon.tcp, "write", "v1", "0", "--fsync", stdin=pattern)
    info = json.loads(rdax(rdax_bin, daemon.tcp, "volume", "info", "v1", "--json").stdout)
    noff = info["namespace_offset"]
    c(ns_list(daemon)["health"] == "ok", "no .media file: health ok")
    daemon.stop()

    with open(os.path.join(d, "ns.media"), "w") as f:
        f.write("badblock %d 4096\n" % (noff + BAD_OFF))
    daemon.start()
    ns = ns_list(daemon)
    c(ns["health"] == "bad-blocks" and ns["badblocks_supported"], "health bad-blocks")
    c(ns["bad_blocks"] == [{"offset": noff + BAD_OFF, "length": 4096, "volume": "v1",
                            "volume_offset": BAD_OFF}],
      "the bad block is mapped to v1 at %d: %s" % (BAD_OFF, ns["bad_blocks"]))
    c(daemon.log_text().count("bad block at offset %d" % (noff + BAD_OFF)) == 1,
      "the bad block is logged once at start, with its volume")
    table = rdax(rdax_bin, daemon.tcp, "namespace", "list").stdout.decode()
    c("bad-blocks" in table and "volume v1 at %d" % BAD_OFF in table,
      "the table names the bad block and its volume")

    p = rdax(rdax_bin, daemon.tcp, "read", "v1", str(BAD_OFF), "4K", ok=False)
    c(p.returncode == 1 and b"bad block" in p.stderr,
      "rdax read over the bad block fails with its reason: %s" % p.stderr.decode().strip())
    p = rdax(rdax_bin, daemon.tcp, "read", "v1", str(BAD_OFF - 8 * KiB), "16K", ok=False)
    c(p.returncode == 1, "a read that only overlaps the bad block fails too")
    p = rdax(rdax_bin, daemon.tcp, "read", "v1", "0", "256K")
    c(p.stdout == pattern[: 256 * KiB], "the rest of the volume reads back")

    h = nbd.NBD()
    h.connect_uri(daemon.nbd + "/v1")
    try:
        h.pread(4096, BAD_OFF)
        c(False, "NBD read over the bad block gets EIO (it succeeded)")
    except nbd.Error as e:
        c(e.errno in (5, "EIO"), "NBD read over the bad block gets EIO (errno %s)" % e.errno)
    c(h.pread(4096, 0) == pattern[:4096], "NBD reads the rest")
    h.shutdown()

    text = daemon.scrape()
    c(sample(text, "rdax_volume_bad_block_bytes", {"volume": "v1"}) == 4096,
      "rdax_volume_bad_block_bytes{v1} = 4096")
    c(sample(text, "rdax_namespace_bad_blocks", {"namespace": "0"}) == 1,
      "rdax_namespace_bad_blocks = 1")
    c(sample(text, "rdax_errors_total", {"code": "EIO", "transport": "tcp"}) == 2,
      "two EIO replies over tcp counted")
    c(sample(text, "rdax_errors_total", {"code": "EIO", "transport": "nbd"}) == 1,
      "one EIO reply over NBD counted")

    # on demand: a new bad block is found by the next namespace list
    with open(os.path.join(d, "ns.media"), "a") as f:
        f.write("badblock %d 8192\n" % (noff + 2 * 1024 * KiB))
    ns = ns_list(daemon)
    c(len(ns["bad_blocks"]) == 2 and ns["bad_blocks"][1]["volume_offset"] == 2 * 1024 * KiB,
      "a bad block added while running is found by namespace list")
    p = rdax(rdax_bin, daemon.tcp, "read", "v1", str(2 * 1024 * KiB + 4096), "4K", ok=False)
    c(p.returncode == 1, "and reads of it fail from then on")
    daemon.stop()
    cleanup(d)
    return c.failed


def unsafe_shutdown(faults):
    """the unsafe-shutdown scenarios; returns the names of the checks that failed"""
    c = Checks()
    d = workdir("usc")
    media = os.path.join(d, "ns.media")
    with open(media, "w") as f:
        f.write("usc 7\n")
    daemon = Daemon(rdaxd_bin, d, faults="fake-media" + faults)
    daemon.start()
    ns = ns_list(daemon)
    c(ns["health"] == "ok" and ns["unsafe_shutdown_count"] == 7, "count 7 recorded, health ok")
    rdax(rdax_bin, daemon.tcp, "volume", "create", "v1", "4M")
    rdax(rdax_bin, daemon.tcp, "write", "v1", "0", "--fsync", stdin=b"z" * 4096)
    daemon.kill9()  # the namespace was in use
    with open(media, "w") as f:
        f.write("usc 8\n")
    daemon.start()
    ns = ns_list(daemon)
    c(ns["health"] == "unsafe-shutdown" and ns["unsafe_shutdown"],
      "a count changed while in use: unsafe-shutdown (%s)" % ns["health"])
    c(ns["marked_volumes"] == ["v1"], "v1 is marked: %s" % ns["marked_volumes"])
    text = daemon.scrape()
    c(sample(text, "rdax_namespace_unsafe_shutdown", {"namespace": "0"}) == 1,
      "rdax_namespace_unsafe_shutdown = 1")
    c(sample(text, "rdax_volume_unsafe_shutdown", {"volume": "v1"}) == 1,
      "rdax_volume_unsafe_shutdown{v1} = 1")
    log = daemon.log_text()
    c(log.count("unsafe shutdown while it was in use") == 1, "the log says so, once")
    c(log.count('created volume "v1"') == 1, "the volume's creation is logged once")
    daemon.stop()
    daemon.start()
    ns = ns_list(daemon)
    c(ns["health"] == "unsafe-shutdown" and ns["marked_volumes"] == ["v1"],
      "the mark survives a clean restart")
    daemon.stop()
    cleanup(d)

    # a count that changed while the namespace was closed: nothing was at risk
    d = workdir("usc-closed")
    media = os.path.join(d, "ns.media")
    with open(media, "w") as f:
        f.write("usc 3\n")
    daemon = Daemon(rdaxd_bin, d, faults="fake-media" + faults)
    daemon.start()
    rdax(rdax_bin, daemon.tcp, "volume", "create", "v1", "4M")
    daemon.stop()
    with open(media, "w") as f:
        f.write("usc 4\n")
    daemon.start()
    ns = ns_list(daemon)
    c(ns["health"] == "ok" and ns["unsafe_shutdown_count"] == 4 and not ns["marked_volumes"],
      "a count changed while closed marks nothing")
    daemon.stop()
    cleanup(d)
    return c.failed


def marked_namespace(name, faults, volumes):
    """a workdir and a daemon whose namespace and @volumes are marked by an unsafe shutdown"""
    d = workdir(name)
    media = os.path.join(d, "ns.media")
    with open(media, "w") as f:
        f.write("usc 7\n")
    daemon = Daemon(rdaxd_bin, d, faults="fake-media" + faults)
    daemon.start()
    for v in volumes:
        rdax(rdax_bin, daemon.tcp, "volume", "create", v, "4M")
    rdax(rdax_bin, daemon.tcp, "write", volumes[0], "0", "--fsync", stdin=b"z" * 4096)
    daemon.kill9()
    with open(media, "w") as f:
        f.write("usc 8\n")
    daemon.start()
    return d, daemon


def clear_json(daemon, *args):
    """rdax ... clear-unsafe ... --json: the object printed (fails the test on an error)"""
    return json.loads(rdax(rdax_bin, daemon.tcp, *args, "--json").stdout)


def marks(daemon):
    """(namespace marked, [marked volumes]) from namespace list and from the metrics"""
    ns = ns_list(daemon)
    text = daemon.scrape()
    listed = (ns["unsafe_shutdown"], sorted(ns["marked_volumes"]))
    vols = sorted(v for v in ("v1", "v2", "v3")
                  if sample(text, "rdax_volume_unsafe_shutdown", {"volume": v}) == 1)
    scraped = (sample(text, "rdax_namespace_unsafe_shutdown", {"namespace": "0"}) == 1, vols)
    return listed, scraped


def clear_marks(faults):
    """clearing the marks, and that a clear survives a power cut; the names of failed checks"""
    c = Checks()
    d, daemon = marked_namespace("usc-clear", faults, ["v1", "v2", "v3"])
    everything = (True, ["v1", "v2", "v3"])
    c(marks(daemon) == (everything, everything), "all marked: %s" % (marks(daemon),))

    got = clear_json(daemon, "volume", "clear-unsafe", "v1")
    c(got == {"name": "v1", "cleared": True}, "volume clear-unsafe v1 --json: %s" % got)
    after_v1 = (True, ["v2", "v3"])
    c(marks(daemon) == (after_v1, after_v1),
      "v1's mark is gone from namespace list and the metrics, the rest stay: %s" %
      (marks(daemon),))
    c(ns_list(daemon)["health"] == "unsafe-shutdown", "the namespace is still marked")
    log = daemon.log_text()
    c(log.count('volume "v1" (namespace %s/ns): unsafe-shutdown mark cleared by local' % d) == 1,
      "the clear is logged once, at info, with who cleared it")

    p = rdax(rdax_bin, daemon.tcp, "volume", "clear-unsafe", "v1")
    c(p.stdout == b"volume v1: not marked, nothing to clear\n",
      "clearing it again: a no-op success (%r)" % p.stdout)
    c(daemon.log_text().count("unsafe-shutdown mark cleared") == 1, "and no second record")
    p = rdax(rdax_bin, daemon.tcp, "volume", "clear-unsafe", "nope", ok=False)
    c(p.returncode == 1 and b'no volume "nope"' in p.stderr,
      "an unknown volume: exit 1, %s" % p.stderr.decode().strip())
    p = rdax(rdax_bin, daemon.tcp, "namespace", "clear-unsafe", "/no/such", ok=False)
    c(p.returncode == 1 and b'no namespace "/no/such"' in p.stderr,
      "an unknown namespace: exit 1, %s" % p.stderr.decode().strip())

    # acknowledged means durable: a power cut right after it keeps the clear
    daemon.kill9()
    daemon.start()
    c(marks(daemon) == (after_v1, after_v1),
      "after a power cut right after the clear, v1 stays cleared: %s" % (marks(daemon),))

    got = clear_json(daemon, "namespace", "clear-unsafe", os.path.join(d, "ns"))
    c(got == {"namespace": {"id": 0, "path": os.path.join(d, "ns")}, "cleared": True,
              "cleared_volumes": ["v2", "v3"]},
      "namespace clear-unsafe PATH --json: %s" % got)
    ns = ns_list(daemon)
    none = (False, [])
    c(ns["health"] == "ok" and marks(daemon) == (none, none),
      "the namespace and every volume unmarked: %s, %s" % (ns["health"], marks(daemon)))
    c(daemon.log_text().count("unsafe-shutdown mark cleared by local") == 2,
      "the namespace's clear is logged once")
    got = clear_json(daemon, "namespace", "clear-unsafe", "0")
    c(got["cleared"] is False and got["cleared_volumes"] == [],
      "clearing it again by id: a no-op success (%s)" % got)
    n = sample(daemon.scrape(), "rdax_requests_total", {"op": "unsafe_clear", "transport": "tcp"})
    c(n == 2, "the metrics count the two clears since the restart as op unsafe_clear (%s)" % n)

    daemon.kill9()
    daemon.start()
    c(ns_list(daemon)["health"] == "ok" and marks(daemon) == (none, none),
      "after a power cut right after the clear, nothing is marked: %s" % (marks(daemon),))
    daemon.stop()
    daemon.start()
    c(ns_list(daemon)["health"] == "ok" and marks(daemon) == (none, none),
      "after a clean restart, nothing is marked")
    daemon.stop()
    cleanup(d)
    return c.failed


def clear_refused(faults):
    """clears without the create right are refused and change nothing; the failed checks"""
    c = Checks()
    d, daemon = marked_namespace("usc-acl", faults, ["v1", "v2"])
    daemon.stop()
    acl = os.path.join(d, "acl")
    with open(acl, "w") as f:
        f.write("local * rw\n")
    daemon.extra = ["--acl", acl]
    daemon.start()
    p = rdax(rdax_bin, daemon.tcp, "volume", "clear-unsafe", "v1", ok=False)
    c(p.returncode == 1 and b"may not clear the unsafe-shutdown mark" in p.stderr,
      "volume clear-unsafe without the create right is refused: %s" %
      p.stderr.decode().strip())
    p = rdax(rdax_bin, daemon.tcp, "namespace", "clear-unsafe", "0", ok=False)
    c(p.returncode == 1 and b"may not clear the unsafe-shutdown mark" in p.stderr,
      "namespace clear-unsafe without the create right is refused: %s" %
      p.stderr.decode().strip())
    c(ns_list(daemon)["marked_volumes"] == ["v1", "v2"], "refused: the marks stay")
    daemon.stop()

    # the create right on v*: the volumes' marks, not the namespace's (needs a rule for *)
    with open(acl, "w") as f:
        f.write("local * rw\nlocal v* create\n")
    daemon.start()
    got = clear_json(daemon, "volume", "clear-unsafe", "v1")
    c(got["cleared"] is True, "with the create right on v1 its clear goes through")
    p = rdax(rdax_bin, daemon.tcp, "namespace", "clear-unsafe", "0", ok=False)
    c(p.returncode == 1 and b'a rule for "*"' in p.stderr,
      "namespace clear-unsafe with the create right on v* only is refused: %s" %
      p.stderr.decode().strip())
    ns = ns_list(daemon)
    c(ns["unsafe_shutdown"] and ns["marked_volumes"] == ["v2"],
      "refused: the namespace's mark and v2's stay")
    daemon.stop()
    cleanup(d)
    return c.failed


failed = bad_blocks("") + unsafe_shutdown("") + clear_marks("") + clear_refused("")
check(not failed, "every check passes: %s" % failed)
# the controls: the mechanism broken on purpose, the same checks must notice
failed = bad_blocks(",no-badblock-check")
check(any("rdax read over the bad block" in f for f in failed) and
      any("NBD read over the bad block" in f for f in failed),
      "control no-badblock-check: the served bad range is caught")
failed = unsafe_shutdown(",usc-no-compare")
check(any("unsafe-shutdown" in f for f in failed),
      "control usc-no-compare: the unnoticed unsafe shutdown is caught")
failed = clear_marks(",unsafe-clear-no-commit")
check(any("after a power cut right after the clear" in f for f in failed),
      "control unsafe-clear-no-commit: a clear that never reached the metadata is caught")
failed = clear_refused(",acl-ignore")
check(any("refused" in f for f in failed),
      "control acl-ignore: a clear without the right that goes through is caught")
print("1 passed, 0 failed")
