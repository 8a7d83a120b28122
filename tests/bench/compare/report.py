#!/usr/bin/env python3
"""report.py -- the comparative benchmark's bookkeeping and its markdown report.

Subcommands (run.sh calls them; Python standard library only):
  env        print the run's environment as JSON (machine, tools, options)
  placement  print where a server process's threads may run and last ran
  nssize     the namespace size that holds a volume of SIZE (with metadata room)
  callgrind  instructions per operation from the dumps of run.sh --callgrind
  report     read RAW/*.json, write OUT/report.md, the plot data and the PNGs

Every figure in the report stands beside its same-run peer (nbdkit's memory
plugin, driven by the same client) and its floor (the loopback TCP cost of
the same shape), as ratios. Targets are reported as met / not met; nothing
here passes or fails.
"""

import argparse
import datetime
import json
import os
import platform
import re
import subprocess
import sys

# --- helpers ------------------------------------------------------------------


def run_text(argv):
    """The first line of a command's output, or "" if it cannot run."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        text = (p.stdout or p.stderr).strip()
        return text.splitlines()[0] if text else ""
    except (OSError, subprocess.SubprocessError):
        return ""


def parse_size(s):
    m = re.fullmatch(r"(\d+)([KMGkmg]?)", s)
    if not m:
        raise SystemExit("report.py: bad size %r" % s)
    shift = {"": 0, "k": 10, "m": 20, "g": 30}[m.group(2).lower()]
    return int(m.group(1)) << shift


def load(raw, name):
    """RAW/name.json as an object, None if absent or unreadable (fio prefixes log lines)."""
    path = os.path.join(raw, name + ".json")
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    start = text.find("{")
    if start < 0:
        return None
    try:
        return json.loads(text[start:])
    except ValueError:
        return None


def skipped(raw, name):
    try:
        with open(os.path.join(raw, "skipped_%s.txt" % name)) as f:
            return f.read().strip()
    except OSError:
        return None


# --- subcommands: env, placement, nssize ------------------------------------------


def cmd_env(a):
    cpu_model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    commit = run_text(["git", "-C", a.repo, "rev-parse", "--short", "HEAD"])
    dirty = run_text(["git", "-C", a.repo, "status", "--porcelain", "--untracked-files=no"])
    fstype = run_text(["stat", "-f", "-c", "%T", a.tmp])
    env = {
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "profile": a.profile,
        "seconds": float(a.seconds),
        "rounds": int(a.rounds),
        "client_cpu": int(a.client_cpu),
        "server_cpu": int(a.server_cpu),
        "tmp": a.tmp,
        "tmp_fstype": fstype,
        "size": a.size,
        "kernel": platform.release(),
        "cpu_model": cpu_model,
        "ncpu": os.cpu_count(),
        "commit": commit + ("+local changes" if dirty else ""),
        "rdaxd": run_text([a.rdaxd, "--version"]),
        "fio": run_text(["fio", "--version"]),
        "nbdkit": run_text(["nbdkit", "--version"]),
        "iperf3": run_text(["iperf3", "--version"]),
        "libnbd": run_text(["dpkg-query", "-W", "-f", "${Version}", "libnbd0"]),
        "gnuplot": run_text(["gnuplot", "--version"]),
    }
    json.dump(env, sys.stdout, indent=1)
    print()


def cmd_placement(a):
    """Cpus_allowed_list of the process and, per thread, the CPU it last ran on."""
    pid = a.pid
    res = {"name": a.name, "pid": int(pid), "allowed": "", "threads": []}
    try:
        with open("/proc/%s/status" % pid) as f:
            for line in f:
                if line.startswith("Cpus_allowed_list:"):
                    res["allowed"] = line.split(":", 1)[1].strip()
        for tid in sorted(os.listdir("/proc/%s/task" % pid), key=int):
            with open("/proc/%s/task/%s/stat" % (pid, tid)) as f:
                stat = f.read()
            comm = stat[stat.index("(") + 1:stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2:].split()
            # field 39 of stat (processor) is the 37th after "pid (comm)"
            res["threads"].append({"tid": int(tid), "comm": comm, "cpu": int(fields[36])})
    except (OSError, ValueError, IndexError) as e:
        res["error"] = str(e)
    json.dump(res, sys.stdout)
    print()


def cmd_nssize(a):
    """A namespace with room for its metadata in front of the volume (64 MiB, generous)."""
    print("%dM" % ((parse_size(a.size) >> 20) + 64))


# --- subcommand: callgrind -------------------------------------------------------------


def annotate_top(path, n, total):
    """The @n functions with the most inclusive cost in a callgrind dump, leaving out the
    roots every operation passes through (thread start, the event loop: >= 60% of @total).
    Inclusive, because a dump taken while the threads sit inside their loops attributes
    self cost to the thread entry. [(name, Ir)]"""
    try:
        p = subprocess.run(["callgrind_annotate", "--inclusive=yes", path],
                           capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return []
    top = []
    started = False
    for line in p.stdout.splitlines():
        if "file:function" in line:
            started = True
            continue
        if not started:
            continue
        m = re.match(r"\s*([\d,]+)\s+\([\s\d.]+%\)\s+(\S+)", line)
        if not m:
            if top:
                break
            continue
        where = m.group(2)
        fn = where.rsplit(":", 1)[-1]
        src = os.path.basename(where.rsplit(":", 1)[0]) if ":" in where else ""
        if src in ("???", ""):
            lib = re.search(r"\[(.*?)\]", line)
            src = os.path.basename(lib.group(1)) if lib else "?"
        ir = int(m.group(1).replace(",", ""))
        name = "%s (%s)" % (fn, src)
        # a function appears once more per recursion level or cycle ('2): keep the first
        if ir >= 0.6 * total or any(t[0] == name for t in top):
            continue
        top.append((name, ir))
        if len(top) >= n:
            break
    return top


def steal_share(raw):
    """Share of CPU time stolen by the hypervisor between two /proc/stat samples, or None."""
    try:
        with open(os.path.join(raw, "stat_start.txt")) as f:
            a = [int(x) for x in f.read().split()[1:]]
        with open(os.path.join(raw, "stat_rounds_end.txt")) as f:
            b = [int(x) for x in f.read().split()[1:]]
    except (OSError, ValueError):
        return None
    # user nice system idle iowait irq softirq steal (guest time is inside user)
    d = [y - x for x, y in zip(a[:8], b[:8])]
    total = sum(d)
    return d[7] / total if total > 0 and len(d) == 8 else None


def cmd_callgrind(a):
    """Instructions per operation from the dumps of run.sh --callgrind."""
    res = {}
    for f in sorted(os.listdir(a.dir)):
        if not re.search(r"\.\d+\.\d+$", f):
            continue
        path = os.path.join(a.dir, f)
        trigger, total = None, None
        with open(path, errors="replace") as fh:
            for line in fh:
                if line.startswith("desc: Trigger:"):
                    trigger = line.split("dump", 1)[-1].strip()
                elif line.startswith("summary:") or line.startswith("totals:"):
                    total = int(line.split()[1])
                    break
        if not trigger or total is None:
            continue
        doc = load(a.dir, trigger) or {}
        shape = trigger.rsplit("_", 1)[-1]
        ops = doc.get(shape, {}).get("ops") or int(a.ops)
        # the helper ran ops / 10 more as warm-up inside the same dump
        ops_all = ops + ops // 10
        res[trigger] = {"ir": total, "ops": ops_all, "ir_per_op": total / ops_all,
                        "top": [(fn, ir / ops_all) for fn, ir in annotate_top(path, 16, total)]}
    json.dump(res, sys.stdout, indent=1)
    print()


# --- the report -------------------------------------------------------------------


def us(ns):
    return None if ns is None else ns / 1000.0


def fmt_us(v):
    if v is None:
        return "n/a"
    if v >= 1000:
        return "%.2f ms" % (v / 1000.0)
    if v >= 100:
        return "%.0f us" % v
    if v >= 10:
        return "%.1f us" % v
    return "%.2f us" % v


def fmt_ratio(x):
    if x is None:
        return "n/a"
    if x >= 1000:
        return "{:,.0f}x".format(x)
    if x >= 10:
        return "%.1fx" % x
    if x < 0.1:
        return "%.2gx" % x
    return "%.2fx" % x


def fmt_rate(v, unit):
    if v is None:
        return "n/a"
    if unit == "IOPS":
        return "{:,.0f} IOPS".format(v)
    return "{:,.0f} MiB/s".format(v)


def ratio(a, b):
    if a is None or b is None or b == 0:
        return None
    return a / b


class Fig:
    """One system's figures for one shape: latency percentiles (us) and a rate."""

    def __init__(self, label, tool, pct=None, rate=None, cpu=(None, None)):
        self.label = label
        self.tool = tool
        self.pct = pct or {}  # "p50" -> us, ...
        self.rate = rate  # ops/s or MiB/s
        self.cpu = cpu  # CPU busy per wall second: (client, server), None if unknown
        self.cost = {}  # per operation: client_cpu_ns, server_cpu_ns, server_ctxsw

    def p(self, k):
        return self.pct.get(k)


def fig_from_cmp(doc, shape, label, tool, mib=False):
    if not doc or shape not in doc:
        return None
    s = doc[shape]
    lat = s["lat"]
    pct = {k: us(lat.get(k + "_ns")) for k in ("p50", "p90", "p99", "p99.9")}
    fg = Fig(label, tool, pct, s["mib_per_s"] if mib else s["ops_per_s"],
             (s.get("client_cpu_util"), s.get("server_cpu_util")))
    for k in ("client_cpu_ns", "server_cpu_ns", "server_ctxsw"):
        if k + "_per_op" in s:
            fg.cost[k] = s[k + "_per_op"]
    return fg


def fio_pct(lat, key):
    """fio's percentile dict has keys like '99.900000'."""
    if not lat or "percentile" not in lat:
        return None
    for k, v in lat["percentile"].items():
        if abs(float(k) - key) < 1e-6:
            return v / 1000.0
    return None


def fig_from_fio(doc, label, shape, mib=False):
    if not doc:
        return None
    job = doc["jobs"][0]
    w = job["read" if shape in READ_SHAPES else "write"]
    pct = {}
    keys = {"p50": 50, "p90": 90, "p99": 99, "p99.9": 99.9}
    for name, key in keys.items():
        v = fio_pct(w.get("lat_ns"), key)
        if shape == "wflush":
            # fio times the write and the flush apart: a pair is at least their sum
            f = fio_pct(job.get("sync", {}).get("lat_ns"), key)
            v = None if v is None or f is None else v + f
        pct[name] = v
    rate = w["bw_bytes"] / 1048576.0 if mib else w["iops"]
    client = (job.get("usr_cpu", 0) + job.get("sys_cpu", 0)) / 100.0 if "usr_cpu" in job else None
    return Fig(label, "fio", pct, rate, (client, None))


SYSTEMS = [
    # key, label
    ("rdax_native", "rdax, native protocol"),
    ("rdax_nbd", "rdax, NBD export"),
    ("nbdkit_memory", "nbdkit memory"),
    ("nbdkit_file", "nbdkit file (tmpfs)"),
]


ROUND_DOCS = ["floor_ping", "floor_ping4kw", "floor_ping4kr", "floor_pipe4k", "floor_pipe1m", "floor_iperf3", "rdax_native",
              "rdax_nbd_cmp", "nbdkit_memory_cmp", "nbdkit_file_cmp"] + [
    "%s_fio_%s" % (s, j) for s in ("rdax_nbd", "nbdkit_memory", "nbdkit_file")
    for j in ("wflush", "qd32", "seq1m", "read", "rqd32", "rseq1m")]

READ_SHAPES = ("read", "rqd32", "rseq1m")
MIB_SHAPES = ("seq1m", "rseq1m")


def collect(raw):
    """The run's documents: d[name] for the run as a whole, d["rounds"] = [{name: doc}]."""
    d = {name: load(raw, name) for name in ("env", "engine")}
    d["rounds"] = []
    dirs = sorted((x for x in os.listdir(raw) if re.fullmatch(r"round\d+", x)),
                  key=lambda x: int(x[5:]))
    for rd in dirs:
        path = os.path.join(raw, rd)
        d["rounds"].append({name: load(path, name) for name in ROUND_DOCS})
    return d


def median(values):
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    n = len(v)
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2


def round_floors(rd):
    f = {}
    ping = rd.get("floor_ping")
    if ping:
        f["rtt"] = {k: us(ping["rtt"].get(k + "_ns")) for k in ("p50", "p90", "p99", "p99.9")}
        f["ping_rate"] = ping["ops_per_s"]
    for name in ("ping4kw", "ping4kr"):
        doc = rd.get("floor_" + name)
        if doc:
            f[name] = us(doc["rtt"].get("p50_ns"))
    if rd.get("floor_pipe4k"):
        f["pipe4k"] = rd["floor_pipe4k"]["ops_per_s"]
    if rd.get("floor_pipe1m"):
        f["pipe1m"] = rd["floor_pipe1m"]["mib_per_s"]
    ip = rd.get("floor_iperf3")
    if ip and ip.get("end"):
        end = ip["end"]
        bps = end.get("sum_received", end.get("sum", {})).get("bits_per_second")
        if bps:
            f["iperf3"] = bps / 8 / 1048576.0
    return f


def floors(d):
    """The floors: the best round (a floor is what the transport can do at best: the lowest
    round-trip percentiles, the highest rates); f["spread"][key] = (min, max) of the rounds."""
    per = [round_floors(rd) for rd in d["rounds"]]
    f = {"spread": {}}
    for key in ("ping_rate", "pipe4k", "pipe1m", "iperf3"):
        vals = [p[key] for p in per if key in p]
        if vals:
            f[key] = max(vals)
            f["spread"][key] = (min(vals), max(vals))
    rtts = [p["rtt"] for p in per if "rtt" in p]
    if rtts:
        f["rtt"] = {k: min(r[k] for r in rtts if r.get(k) is not None) for k in rtts[0]}
        vals = [r["p50"] for r in rtts]
        f["spread"]["rtt"] = (min(vals), max(vals))
    for key in ("ping4kw", "ping4kr"):
        vals = [p[key] for p in per if p.get(key) is not None]
        if vals:
            f[key] = min(vals)
            f["spread"][key] = (min(vals), max(vals))
    return f


def round_shape_figs(rd, shape):
    """Figs of one shape in one round: cmp helpers first (same loop everywhere), then fio."""
    mib = shape in MIB_SHAPES
    figs = []
    src = {"rdax_native": rd.get("rdax_native"), "rdax_nbd": rd.get("rdax_nbd_cmp"),
           "nbdkit_memory": rd.get("nbdkit_memory_cmp"),
           "nbdkit_file": rd.get("nbdkit_file_cmp")}
    for key, label in SYSTEMS:
        tool = "cmp_native" if key == "rdax_native" else "cmp_nbd"
        fg = fig_from_cmp(src[key], shape, label, tool, mib)
        if fg:
            fg.key = key
            figs.append(fg)
    if shape not in ("durable", "write"):
        for key, label in SYSTEMS[1:]:
            fg = fig_from_fio(rd.get("%s_fio_%s" % (key, shape)), label, shape, mib)
            if fg:
                fg.key = key
                figs.append(fg)
    return figs


def shape_figs(d, shape):
    """Figs of one shape, each the median over the rounds (fg.spread: min, max of the
    headline figure -- p50 for latency shapes, the rate for the others -- and fg.rounds)."""
    groups = {}
    order = []
    for rd in d["rounds"]:
        for fg in round_shape_figs(rd, shape):
            k = (fg.key, fg.tool)
            if k not in groups:
                groups[k] = []
                order.append(k)
            groups[k].append(fg)
    figs = []
    for k in order:
        g = groups[k]
        pct = {p: median([fg.p(p) for fg in g]) for p in ("p50", "p90", "p99", "p99.9")}
        m = Fig(g[0].label, g[0].tool, pct, median([fg.rate for fg in g]),
                (median([fg.cpu[0] for fg in g]), median([fg.cpu[1] for fg in g])))
        m.key = g[0].key
        for c in ("client_cpu_ns", "server_cpu_ns", "server_ctxsw"):
            v = median([fg.cost.get(c) for fg in g])
            if v is not None:
                m.cost[c] = v
        head = [fg.p("p50") if SHAPES[shape][2] == "latency" else fg.rate for fg in g]
        head = [h for h in head if h is not None]
        m.spread = (min(head), max(head)) if head else None
        m.rounds = len(g)
        figs.append(m)
    return figs


def peer_of(figs, fg):
    """nbdkit memory measured by the same kind of client (fio for fio, a cmp helper else)."""
    want_fio = fg.tool == "fio"
    for p in figs:
        if p.key == "nbdkit_memory" and (p.tool == "fio") == want_fio:
            return p
    return None


SHAPES = {
    "write": ("4 KiB random write, QD1, not durable (diagnostic)",
              "one write at a time, no flush, no FUA: what one request costs; the "
              "durable shapes above add their flush to it",
              "latency"),
    "wflush": ("4 KiB random write + flush, QD1",
               "write, then flush (NBD WRITE + FLUSH; native: WRITE + FSYNC of the "
               "whole volume), one pair at a time; latency per pair",
               "latency"),
    "durable": ("4 KiB durable write in one request, QD1",
                "NBD WRITE with FUA; native: WRITE with fsync = true; latency per write",
                "latency"),
    "qd32": ("4 KiB random write, QD32", "32 writes in flight on one connection", "IOPS"),
    "seq1m": ("1 MiB sequential write, QD8", "8 writes in flight on one connection", "MiB/s"),
    "read": ("4 KiB random read, QD1", "one read at a time of the prefilled export; latency "
             "per read", "latency"),
    "rqd32": ("4 KiB random read, QD32", "32 reads in flight on one connection", "IOPS"),
    "rseq1m": ("1 MiB sequential read, QD8", "8 reads in flight on one connection", "MiB/s"),
}


def floor_for(shape, fl):
    """(label, value, kind) of a shape's floor; kind 'lat' (us, lower is better) or 'rate'."""
    rtt = fl.get("rtt", {}).get("p50")
    if shape == "wflush":
        return ("two 64 B TCP round trips (p50)", None if rtt is None else 2 * rtt, "lat")
    if shape in ("durable", "write", "read"):
        return ("one 64 B TCP round trip (p50)", rtt, "lat")
    if shape in ("qd32", "rqd32"):
        return ("TCP 4 KiB messages, 32 in flight, 64 B acks", fl.get("pipe4k"), "rate")
    return ("iperf3 -l 1M", fl.get("iperf3"), "rate")


def fmt_spread(fg, kind, unit):
    if not getattr(fg, "spread", None) or fg.rounds < 2:
        return "-"
    lo, hi = fg.spread
    if kind == "latency":
        return "%s - %s" % (fmt_us(lo), fmt_us(hi))
    return "%s - %s" % (fmt_rate(lo, unit).split()[0], fmt_rate(hi, unit))


def fmt_cpu(fg):
    c, s = fg.cpu
    return "%s / %s" % ("%.0f%%" % (c * 100) if c is not None else "-",
                        "%.0f%%" % (s * 100) if s is not None else "-")


def shape_table(lines, d, shape, fl):
    title, what, kind = SHAPES[shape]
    figs = shape_figs(d, shape)
    flabel, fval, fkind = floor_for(shape, fl)
    unit = "MiB/s" if shape in MIB_SHAPES else "IOPS"
    lines.append("### %s" % title)
    lines.append("")
    lines.append("%s. Floor: %s = %s." % (what, flabel, fmt_us(fval) if fkind == "lat"
                                          else fmt_rate(fval, unit)))
    lines.append("")
    if not figs:
        lines.append("Nothing measured.")
        lines.append("")
        return figs
    if kind == "latency":
        lines.append("| system | client | p50 | p99 | %s/s | p50 over rounds | CPU client / "
                     "server | p50 vs nbdkit memory | p50 vs floor |" % (
                         "pairs" if shape == "wflush" else "reads" if shape == "read"
                         else "writes"))
        lines.append("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for fg in figs:
            peer = peer_of(figs, fg)
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                fg.label, fg.tool, fmt_us(fg.p("p50")), fmt_us(fg.p("p99")),
                "{:,.0f}".format(fg.rate) if fg.rate else "n/a", fmt_spread(fg, kind, unit),
                fmt_cpu(fg), fmt_ratio(ratio(fg.p("p50"), peer.p("p50") if peer else None)),
                fmt_ratio(ratio(fg.p("p50"), fval))))
    else:
        extra = " vs TCP 1 MiB x 8 in flight |" if shape in MIB_SHAPES else ""
        lines.append("| system | client | %s | over rounds | latency p50 | latency p99 "
                     "| CPU client / server | vs nbdkit memory | vs floor |%s" % (unit, extra))
        lines.append("|---|---|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if extra else ""))
        for fg in figs:
            peer = peer_of(figs, fg)
            row = "| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                fg.label, fg.tool, fmt_rate(fg.rate, unit), fmt_spread(fg, kind, unit),
                fmt_us(fg.p("p50")), fmt_us(fg.p("p99")), fmt_cpu(fg),
                fmt_ratio(ratio(fg.rate, peer.rate if peer else None)),
                fmt_ratio(ratio(fg.rate, fval)))
            if extra:
                row += " %s |" % fmt_ratio(ratio(fg.rate, fl.get("pipe1m")))
            lines.append(row)
    lines.append("")
    return figs


def cost_table(lines, by_shape):
    """Server and client cost per operation, from /proc: steadier than latency on a busy box."""
    lines.append("## Cost per operation (same runs, from /proc)")
    lines.append("")
    lines.append("CPU time of the whole server process (all threads) and of the client, and the "
                 "server's context switches, divided by the operations of the measured window "
                 "(medians over the rounds). These move much less than latencies when other work "
                 "shares the machine. A write+flush pair counts as one operation.")
    lines.append("")
    lines.append("| shape | system | server CPU / op | vs nbdkit memory | server context "
                 "switches / op | vs nbdkit memory | client CPU / op | vs nbdkit memory's "
                 "client |")
    lines.append("|---|---|---:|---:|---:|---:|---:|---:|")
    for shape in ("write", "durable", "wflush", "qd32", "seq1m") + READ_SHAPES:
        figs = [fg for fg in by_shape.get(shape, []) if fg.tool != "fio"]
        peer = next((fg for fg in figs if fg.key == "nbdkit_memory"), None)
        for fg in figs:
            c = fg.cost
            if not c:
                continue
            pc = peer.cost if peer else {}
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (
                shape, fg.label,
                fmt_us(c["server_cpu_ns"] / 1e3) if "server_cpu_ns" in c else "n/a",
                fmt_ratio(ratio(c.get("server_cpu_ns"), pc.get("server_cpu_ns"))),
                "%.2f" % c["server_ctxsw"] if "server_ctxsw" in c else "n/a",
                fmt_ratio(ratio(c.get("server_ctxsw"), pc.get("server_ctxsw"))),
                fmt_us(c["client_cpu_ns"] / 1e3) if "client_cpu_ns" in c else "n/a",
                fmt_ratio(ratio(c.get("client_cpu_ns"), pc.get("client_cpu_ns")))))
    lines.append("")


MULTI_SYSTEMS = [("rdax_native", "rdax native"), ("rdax_nbd", "rdax NBD"),
                 ("nbdkit_memory", "nbdkit memory")]


def multi_section(lines, raw):
    """Many clients at once: raw/multi/SYSTEM_SHAPE_N_I.json, one per client process."""
    mdir = os.path.join(raw, "multi")
    if not os.path.isdir(mdir):
        return
    runs = {}
    for name in os.listdir(mdir):
        m = re.fullmatch(r"(\w+?)_(qd32|rqd32)_(\d+)_(\d+)\.json", name)
        if not m:
            continue
        doc = load(mdir, name[:-5])
        if doc and "window_start_ns" in doc.get(m.group(2), {}):
            runs.setdefault((m.group(1), m.group(2), int(m.group(3))), []).append(doc[m.group(2)])
    if not runs:
        return
    la = "?"
    try:
        with open(os.path.join(mdir, "loadavg.txt")) as f:
            la = f.read().split()[0]
    except (OSError, IndexError):
        pass
    lines.append("## Many clients: aggregate IOPS")
    lines.append("")
    lines.append("N client processes at once, each with one connection and 32 4 KiB requests in "
                 "flight (random writes, then random reads); rdax gives each connection its own "
                 "64 MiB volume, nbdkit memory serves its one export to all. Aggregate: every "
                 "client's completions in its measured window, over the time from the first "
                 "window's start to the last one's end (CLOCK_MONOTONIC, shared by the "
                 "processes) -- a lower bound where the windows do not overlap fully; "
                 "'overlap' is the share of that time all windows were open. All clients share "
                 "the client CPU, the server has the other: CPU columns say which side is the "
                 "limit (client: the sum of the clients' shares of a CPU; server: the median of "
                 "what each client saw it use). Load average after these runs: %s." % la)
    lines.append("")
    ns = sorted({k[2] for k in runs})
    for shape, title in (("qd32", "writes"), ("rqd32", "reads")):
        lines.append("| %s: connections | %s | rdax native / nbdkit memory | rdax NBD / nbdkit "
                     "memory |" % (title, " | ".join("%s IOPS (CPU client / server)" % label
                                                     for _, label in MULTI_SYSTEMS)))
        lines.append("|---:|" + "---:|" * (len(MULTI_SYSTEMS) + 2))
        for n in ns:
            agg = {}
            cells = []
            for key, _ in MULTI_SYSTEMS:
                docs = runs.get((key, shape, n))
                if not docs or len(docs) != n:
                    cells.append("n/a" if not docs else "%d of %d clients ran" % (len(docs), n))
                    continue
                t0 = min(x["window_start_ns"] for x in docs)
                t1 = max(x["window_end_ns"] for x in docs)
                both = (min(x["window_end_ns"] for x in docs)
                        - max(x["window_start_ns"] for x in docs))
                agg[key] = sum(x["ops"] for x in docs) / ((t1 - t0) / 1e9)
                cc = sum(x.get("client_cpu_util") or 0 for x in docs)
                sc = median([x.get("server_cpu_util") for x in docs])
                cells.append("%s (%.0f%% / %s; overlap %.0f%%)" % (
                    "{:,.0f}".format(agg[key]), 100 * cc,
                    "%.0f%%" % (100 * sc) if sc is not None else "-",
                    100.0 * max(both, 0) / (t1 - t0)))
            lines.append("| %d | %s | %s | %s |" % (
                n, " | ".join(cells),
                fmt_ratio(ratio(agg.get("rdax_native"), agg.get("nbdkit_memory"))),
                fmt_ratio(ratio(agg.get("rdax_nbd"), agg.get("nbdkit_memory")))))
        lines.append("")


def callgrind_section(lines, cg):
    lines.append("## Instructions per operation (callgrind)")
    lines.append("")
    lines.append("Each server under valgrind's callgrind, the client running a fixed number of "
                 "operations of one shape between a zeroing and a dump of the counters (the "
                 "helper's warm-up tenth included; no flush after the shape). Instructions of "
                 "the whole server process, all threads; the kernel's work (system calls, "
                 "context switches) is not counted here -- see the cost table above for that.")
    lines.append("")
    lines.append("| shape | rdax native | vs nbdkit | rdax NBD | vs nbdkit | nbdkit memory |")
    lines.append("|---|---:|---:|---:|---:|---:|")
    for shape in ("write", "durable", "qd32"):
        v = [cg.get("%s_%s" % (k, shape), {}).get("ir_per_op")
             for k in ("rdax_native", "rdax_nbd", "nbdkit_memory")]
        f = ["{:,.0f}".format(x) if x else "n/a" for x in v]
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            shape, f[0], fmt_ratio(ratio(v[0], v[2])), f[1], fmt_ratio(ratio(v[1], v[2])), f[2]))
    lines.append("")
    for key, label in (("rdax_nbd_durable", "rdax NBD, durable (FUA) write"),
                       ("rdax_native_durable", "rdax native, durable write"),
                       ("rdax_native_qd32", "rdax native, QD32 write"),
                       ("nbdkit_memory_durable", "nbdkit memory, FUA write")):
        e = cg.get(key)
        if not e or not e.get("top"):
            continue
        lines.append("<details><summary>%s: where the %s instructions per operation go "
                     "(inclusive, below the event loop)</summary>" % (
                         label, "{:,.0f}".format(e["ir_per_op"])))
        lines.append("")
        lines.append("| function | instructions / op |")
        lines.append("|---|---:|")
        for fn, ir in e["top"]:
            lines.append("| `%s` | %s |" % (fn, "{:,.0f}".format(ir)))
        lines.append("")
        lines.append("</details>")
        lines.append("")


def find(figs, key, tool_fio):
    for fg in figs:
        if fg.key == key and (fg.tool == "fio") == tool_fio:
            return fg
    return None


def targets(d, fl, by_shape, eng):
    """Rows: (target, rdax figure, reference, its figure, ratio, aim, met, floor bound).

    The floor bound is the ratio a server with no cost at all would reach in this run: the
    loopback floor in place of the rdax figure (for the fsync target: the raw flush of the
    page, no tree). Where even it misses the aim, the aim cannot be met on this transport or
    machine, whatever rdax does."""
    rows = []
    rtt = fl.get("rtt", {}).get("p50")

    def add(name, a, b, val, refval, r, aim, ok, bound):
        rows.append((name, a, b, val, refval, r, aim, ok, bound))

    wf = by_shape.get("wflush", [])
    for key, fio in (("rdax_nbd", True), ("rdax_nbd", False), ("rdax_native", False)):
        a = find(wf, key, fio)
        b = find(wf, "nbdkit_memory", fio)
        if a and b:
            r = ratio(a.p("p50"), b.p("p50"))
            add("4 KiB write+fsync p50 <= 0.4x nbdkit memory's write+flush",
                "%s (%s)" % (a.label, a.tool), "nbdkit memory (%s)" % b.tool,
                fmt_us(a.p("p50")), fmt_us(b.p("p50")), r, "<= 0.40x", r is not None and r <= 0.4,
                ratio(2 * rtt if rtt else None, b.p("p50")))
    du = by_shape.get("durable", [])
    for key in ("rdax_nbd", "rdax_native"):
        a = find(du, key, False)
        for ref in ("nbdkit_memory", "nbdkit_file"):
            b = find(du, ref, False)
            if a and b:
                r = ratio(a.p("p50"), b.p("p50"))
                add("durable write in one request p50 <= 0.35x nbdkit's FUA write",
                    "%s (%s)" % (a.label, a.tool), "%s FUA (%s)" % (b.label, b.tool),
                    fmt_us(a.p("p50")), fmt_us(b.p("p50")), r, "<= 0.35x",
                    r is not None and r <= 0.35, ratio(rtt, b.p("p50")))
    for shape, what in (("qd32", "QD32 4 KiB IOPS"), ("rqd32", "QD32 4 KiB read IOPS")):
        for key, fio in (("rdax_nbd", True), ("rdax_nbd", False), ("rdax_native", False)):
            a = find(by_shape.get(shape, []), key, fio)
            b = find(by_shape.get(shape, []), "nbdkit_memory", fio)
            if a and b:
                r = ratio(a.rate, b.rate)
                add("%s >= 1.5x nbdkit memory" % what, "%s (%s)" % (a.label, a.tool),
                    "nbdkit memory (%s)" % b.tool, fmt_rate(a.rate, "IOPS"),
                    fmt_rate(b.rate, "IOPS"), r, ">= 1.50x", r is not None and r >= 1.5, None)
    for shape, what in (("seq1m", "1 MiB QD8"), ("rseq1m", "1 MiB read QD8")):
        for key, fio in (("rdax_nbd", True), ("rdax_nbd", False), ("rdax_native", False)):
            a = find(by_shape.get(shape, []), key, fio)
            if a and fl.get("iperf3"):
                r = ratio(a.rate, fl["iperf3"])
                add("%s >= 0.9x iperf3's rate" % what, "%s (%s)" % (a.label, a.tool),
                    "iperf3 -l 1M", fmt_rate(a.rate, "MiB/s"), fmt_rate(fl["iperf3"], "MiB/s"),
                    r, ">= 0.90x", r is not None and r >= 0.9, None)
    # against the floors themselves (1.15x of a round trip, 0.7x of the pipelined floor),
    # reads at the writes' ratios
    # the floor bound: the same round trips carrying the 4 KiB (ping4kw: a write's
    # 4 KiB there, ping4kr: a read's 4 KiB back), which no server can avoid
    w4, r4 = fl.get("ping4kw"), fl.get("ping4kr")
    for shape, what, mult, carried in (("durable", "durable write in one request", 1, w4),
                                       ("wflush", "write+fsync pair", 2,
                                        None if w4 is None or rtt is None else w4 + rtt),
                                       ("read", "4 KiB read QD1", 1, r4)):
        for key in ("rdax_native", "rdax_nbd"):
            a = find(by_shape.get(shape, []), key, False)
            if a and rtt:
                r = ratio(a.p("p50"), mult * rtt)
                add("%s p50 <= 1.15x %s" % (what, "the 64 B round trip" if mult == 1
                                             else "two 64 B round trips"),
                    "%s (%s)" % (a.label, a.tool), "TCP ping-pong" + (" x 2" if mult > 1 else ""),
                    fmt_us(a.p("p50")), fmt_us(mult * rtt), r, "<= 1.15x",
                    r is not None and r <= 1.15, ratio(carried, mult * rtt) or 1.0)
    for shape, what in (("qd32", "QD32 4 KiB write"), ("rqd32", "QD32 4 KiB read")):
        for key in ("rdax_native", "rdax_nbd"):
            a = find(by_shape.get(shape, []), key, False)
            if a and fl.get("pipe4k"):
                r = ratio(a.rate, fl["pipe4k"])
                add("%s IOPS >= 0.7x the pipelined floor" % what, "%s (%s)" % (a.label, a.tool),
                    "TCP 4 KiB x 32 in flight", fmt_rate(a.rate, "IOPS"),
                    fmt_rate(fl["pipe4k"], "IOPS"), r, ">= 0.70x", r is not None and r >= 0.7,
                    None)
    if eng:
        for vol in eng["volumes"]:
            if vol["volume_bytes"] == 1 << 30:
                p = vol["points"][0]
                r = ratio(p["hammer_ns"], p["tracked_ns"])
                add("tracked fsync of one page in 1 GiB >= 100,000x faster than hammer",
                    "tracked fsync, 1 dirty page", "hammer fsync, same volume",
                    fmt_us(us(p["tracked_ns"])), fmt_us(us(p["hammer_ns"])), r,
                    ">= 100,000x", r is not None and r >= 100000,
                    ratio(p["hammer_ns"], p["raw_flush_ns"]))
    return rows


def engine_tables(lines, eng):
    lines.append("## fsync engine: tracked vs hammer")
    lines.append("")
    lines.append("On the engine directly (no network), one volume of exactly each size in an "
                 "emulated namespace (a tmpfs file, AUTO mode, PMEM_IS_PMEM_FORCE=1: libpmem "
                 "writes back with %s + SFENCE), pinned to CPU %s. Medians; tracked and the "
                 "raw floor over %s repetitions, hammer over the number shown. Peer: hammer "
                 "(every line of the volume). Floor: `pmem_flush` of exactly the dirty pages "
                 "and one `pmem_drain`, no tree."
                 % (eng.get("flush_instruction", "?"), eng.get("cpu", "?"),
                    eng["volumes"][0]["reps"] if eng["volumes"] else "?"))
    lines.append("")
    for vol in eng["volumes"]:
        size = vol["volume_bytes"]
        name = "%d GiB" % (size >> 30) if size >= 1 << 30 else "%d MiB" % (size >> 20)
        lines.append("**%s volume** (pmem_is_pmem = %d, hammer: median of %d)" % (
            name, vol["pmem_is_pmem"], vol["hammer_reps"]))
        lines.append("")
        lines.append("| dirty pages | tracked | hammer | hammer / tracked | raw flush floor "
                     "| tracked / floor |")
        lines.append("|---:|---:|---:|---:|---:|---:|")
        for p in vol["points"]:
            lines.append("| %d | %s | %s | %s | %s | %s |" % (
                p["pages"], fmt_us(us(p["tracked_ns"])), fmt_us(us(p["hammer_ns"])),
                fmt_ratio(ratio(p["hammer_ns"], p["tracked_ns"])),
                fmt_us(us(p["raw_flush_ns"])), fmt_ratio(ratio(p["tracked_ns"],
                                                               p["raw_flush_ns"]))))
        lines.append("")


def write_plots(out, plots_dir, d, by_shape, fl, eng):
    """Data files and gnuplot runs; returns the PNG names made."""
    made = []
    data = os.path.join(out, "plot-data")
    os.makedirs(data, exist_ok=True)

    def gnuplot(script, **vars):
        args = ["gnuplot"]
        for k, v in vars.items():
            args += ["-e", "%s='%s'" % (k, v) if isinstance(v, str) else "%s=%s" % (k, v)]
        args.append(os.path.join(plots_dir, script))
        p = subprocess.run(args, capture_output=True, text=True)
        if p.returncode != 0:
            sys.stderr.write("report.py: gnuplot %s failed: %s\n" % (script, p.stderr))
            return False
        return True

    if eng and eng.get("volumes"):
        files, titles = [], []
        for vol in eng["volumes"]:
            size = vol["volume_bytes"]
            name = "%dG" % (size >> 30) if size >= 1 << 30 else "%dM" % (size >> 20)
            path = os.path.join(data, "fsync_%s.dat" % name)
            with open(path, "w") as f:
                f.write("# pages tracked_us hammer_us raw_flush_us\n")
                for p in vol["points"]:
                    f.write("%d %.4f %.4f %.4f\n" % (p["pages"], p["tracked_ns"] / 1e3,
                                                     p["hammer_ns"] / 1e3,
                                                     p["raw_flush_ns"] / 1e3))
            files.append(path)
            titles.append(name.replace("G", "_GiB").replace("M", "_MiB"))
        png = os.path.join(out, "fsync.png")
        if gnuplot("fsync.gp", files=" ".join(files), titles=" ".join(titles), outfile=png):
            made.append("fsync.png")

    for shape in ("wflush", "durable", "write", "qd32"):
        figs = [fg for fg in by_shape.get(shape, []) if fg.tool != "fio"]
        if not figs:
            continue
        cols = [fg.label + (" (fio)" if fg.tool == "fio" else "") for fg in figs]
        rows = []
        floor_pct = fl.get("rtt", {})
        mult = 2 if shape == "wflush" else 1
        if shape != "qd32" and floor_pct:
            cols.append("TCP floor (%d round trip%s)" % (mult, "s" if mult > 1 else ""))
        for k in ("p50", "p90", "p99", "p99.9"):
            vals = [fg.p(k) for fg in figs]
            if shape != "qd32" and floor_pct:
                vals.append(floor_pct.get(k) * mult if floor_pct.get(k) else None)
            rows.append((k, vals))
        path = os.path.join(data, "latency_%s.dat" % shape)
        with open(path, "w") as f:
            f.write("pct " + " ".join('"%s"' % c for c in cols) + "\n")
            for k, vals in rows:
                f.write(k + " " + " ".join("%.3f" % v if v else "NaN" for v in vals) + "\n")
        png = os.path.join(out, "latency_%s.png" % shape)
        if gnuplot("latency.gp", datafile=path, outfile=png, ncols=len(cols) + 1,
                   title=SHAPES[shape][0]):
            made.append("latency_%s.png" % shape)
    return made


def describe_placement(raw, env):
    lines = []
    for name in ("rdaxd", "nbdkit_memory", "nbdkit_file"):
        p = load(raw, "placement_" + name)
        if not p:
            continue
        cpus = sorted({t["cpu"] for t in p.get("threads", [])})
        n = len(p.get("threads", []))
        lines.append("- %s (pid %d): allowed CPUs %s; the %d thread%s alive after the last "
                     "round last ran on CPU %s" % (
                         name.replace("_", " "), p["pid"], p.get("allowed", "?"), n,
                         "" if n == 1 else "s", ", ".join(str(c) for c in cpus) or "?"))
    return lines


def cmd_report(a):
    raw, out = a.raw, a.out
    d = collect(raw)
    env = d.get("env") or {}
    fl = floors(d)
    eng = d.get("engine")
    lines = []
    lines.append("# rdax comparative benchmark")
    lines.append("")
    lines.append("One run, %s, profile `%s`: %d round%s, %.0f s per measurement (a tenth of it "
                 "more as warm-up), commit %s. Generated by `deploy/bench-compare.sh`; raw JSON "
                 "in `raw/`. Each figure of a system is the median over the rounds (the order of "
                 "the systems rotates per round), each floor the best round. A benchmark, not a test: every figure stands "
                 "beside its same-run peer and floor as a ratio." % (
                     env.get("date", "?"), env.get("profile", "?"), env.get("rounds", 1),
                     "" if env.get("rounds", 1) == 1 else "s", env.get("seconds", 0),
                     env.get("commit", "?")))
    lines.append("")
    lines.append("## Set-up")
    lines.append("")
    lines.append("- Machine: %s, %s CPUs, Linux %s. Loopback TCP (127.0.0.1) for every "
                 "transport." % (env.get("cpu_model", "?"), env.get("ncpu", "?"),
                                 env.get("kernel", "?")))
    lines.append("- Pinning (taskset): every client (fio, cmp_native, cmp_nbd, the floor "
                 "clients, iperf3 -c) on CPU %s; every server (rdaxd, nbdkit, the floor "
                 "servers, iperf3 -s) on CPU %s." % (env.get("client_cpu", "?"),
                                                     env.get("server_cpu", "?")))
    ran = set()
    for rd in d["rounds"]:
        for name in ("rdax_native", "rdax_nbd_cmp", "nbdkit_memory_cmp", "nbdkit_file_cmp",
                     "floor_ping", "floor_pipe4k", "floor_pipe1m"):
            doc = rd.get(name) or {}
            cpu = doc.get("ran_on_cpu", doc.get("client_ran_on_cpu"))
            if cpu is not None:
                ran.add(int(cpu))
    if ran:
        lines.append("- The clients that report it (cmp_*, the floor clients) ended every "
                     "measurement on CPU %s." % ", ".join(str(c) for c in sorted(ran)))
    lines.extend(describe_placement(raw, env))
    nat = next((rd["rdax_native"] for rd in d["rounds"] if rd.get("rdax_native")), {})
    ready = ""
    try:
        with open(os.path.join(raw, "rdaxd_ready.txt")) as f:
            ready = f.read().strip()
    except OSError:
        pass
    lines.append("- rdax: one `rdaxd` (%s), `--threads 1`, namespace = a %s file on %s "
                 "(`%s`), `mode=auto` with `PMEM_IS_PMEM_FORCE=1`, so libpmem treats it as "
                 "PMEM: the server reports persistence method **%s**, i.e. a flush is "
                 "CLWB (this CPU: %s) + SFENCE of the written lines. Volume of %s; "
                 "the same volume serves the native protocol and the NBD export. Ready line: "
                 "`%s`." % (env.get("rdaxd", "?"), env.get("tmp_fstype", "?"), env.get("tmp", "?"),
                            env.get("tmp", "?"), nat.get("persist_method", "?"),
                            (eng or {}).get("flush_instruction", "?"),
                            env.get("size", "?"), ready))
    lines.append("- %s: `memory` plugin (flush and FUA are no-ops: nothing there is "
                 "persistent) and `file` plugin on a tmpfs file (flush = fdatasync on tmpfs), "
                 "default threads, same size, same pinning." % env.get("nbdkit", "?"))
    lines.append("- Clients: %s (nbd engine, libnbd %s), and this project's `cmp_nbd` (libnbd) "
                 "and `cmp_native` (librdax), which run one identical timing loop "
                 "(tests/bench/compare/cmp_shapes.c). fio's nbd engine sends no write flags, "
                 "so the FUA write is measured with `cmp_nbd` only." % (
                     env.get("fio", "?"), env.get("libnbd", "?")))
    la = []
    for which in ("start", "end"):
        try:
            with open(os.path.join(raw, "loadavg_%s.txt" % which)) as f:
                la.append(f.read().split()[0])
        except (OSError, IndexError):
            la.append("?")
    lines.append("- Machine load (1-minute load average) at the start of the block-I/O rounds: "
                 "%s, at their end: %s. Anything else running on these %s CPUs shows up in "
                 "the spread over the rounds and in the tails (p99)." % (
                     la[0], la[1], env.get("ncpu", "?")))
    steal = steal_share(raw)
    if steal is not None:
        lines.append("- CPU time stolen by the hypervisor (/proc/stat `steal`) over the block-I/O "
                     "rounds: %.0f%% of this VM's CPU time. A vCPU that sleeps between requests "
                     "waits for the host to run it again; with a busy host that alone adds "
                     "hundreds of microseconds to a round trip, to every system alike." % (
                         100.0 * steal))
    lines.append("- Every export is written over completely (1 MiB writes) before it is "
                 "measured, so no measurement pays first-touch allocation.")
    for name, why in (("rdax_nbd", skipped(raw, "rdax_nbd")), ("engine_8g",
                                                               skipped(raw, "engine_8g"))):
        if why:
            lines.append("- **Not measured: %s** -- %s." % (name.replace("_", " "), why))
    lines.append("")

    lines.append("## Floors (same run, same pinning)")
    lines.append("")
    lines.append("Each floor is the best of the rounds (lowest round trip, highest rate): what "
                 "the loopback itself can do. The pipelined floors acknowledge every message "
                 "with 64 bytes, the acks of all messages one read completed in one write.")
    lines.append("")
    lines.append("| floor | figure |")
    lines.append("|---|---:|")
    rtt = fl.get("rtt", {})
    lines.append("| TCP 64 B ping-pong round trip p50 / p99 | %s / %s |" % (
        fmt_us(rtt.get("p50")), fmt_us(rtt.get("p99"))))
    if "rtt" in fl.get("spread", {}) and len(d["rounds"]) > 1:
        lo, hi = fl["spread"]["rtt"]
        lines.append("| (round trip p50 over the rounds) | %s - %s |" % (fmt_us(lo), fmt_us(hi)))
    for key, what in (("ping4kw", "4 KiB there, 64 B back (a 4 KiB write's round trip)"),
                      ("ping4kr", "64 B there, 4 KiB back (a 4 KiB read's round trip)")):
        lines.append("| TCP round trip p50, %s | %s |" % (what, fmt_us(fl.get(key))))
    lines.append("| TCP 64 B ping-pongs per second (QD1) | %s |" % (
        "{:,.0f}".format(fl["ping_rate"]) if "ping_rate" in fl else "n/a"))
    lines.append("| TCP 4 KiB messages, 32 in flight, 64 B acks | %s |" % fmt_rate(
        fl.get("pipe4k"), "IOPS"))
    lines.append("| TCP 1 MiB messages, 8 in flight, 64 B acks | %s |" % fmt_rate(
        fl.get("pipe1m"), "MiB/s"))
    lines.append("| iperf3 -l 1M (one stream) | %s |" % fmt_rate(fl.get("iperf3"), "MiB/s"))
    if "iperf3" in fl.get("spread", {}) and len(d["rounds"]) > 1:
        lo, hi = fl["spread"]["iperf3"]
        lines.append("| (iperf3 over the rounds) | %s - %s |" % (
            fmt_rate(lo, "MiB/s").split()[0], fmt_rate(hi, "MiB/s")))
    lines.append("")

    by_shape = {}
    body = []
    body.append("## Block I/O, shape by shape")
    body.append("")
    body.append("Ratios: latency ratios below 1 and rate ratios above 1 favour the row. The peer "
                "of a fio row is nbdkit memory under fio, of a cmp_* row nbdkit memory under "
                "cmp_nbd. fio reports a write's and its flush's latencies apart; its "
                "write+flush percentiles here are the sum of the two (the pair rate is exact). "
                "CPU client / server: CPU time per wall-clock second of the client process and "
                "of the whole server process (all threads), warm-up included; 100% on one side "
                "means that side is the bottleneck (fio rows: the client only).")
    body.append("")
    for shape in ("wflush", "durable", "qd32", "seq1m", "write"):
        by_shape[shape] = shape_table(body, d, shape, fl)
    body.append("## Reads")
    body.append("")
    body.append("The same clients read the prefilled exports: rdax sends a READ reply straight "
                "from the mapping (writev of the header and the mapped bytes). The floors are "
                "the write shapes' own: loopback is symmetric, so a 4 KiB message pipelined "
                "or a 1 MiB stream costs the same in either direction.")
    body.append("")
    for shape in READ_SHAPES:
        by_shape[shape] = shape_table(body, d, shape, fl)

    rows = targets(d, fl, by_shape, eng)
    lines.append("## Targets (ratios measured in this run)")
    lines.append("")
    lines.append("Floor bound: the ratio a server that cost nothing would reach in this run -- "
                 "the loopback floor in place of rdax's figure (two 64 B round trips for "
                 "write+flush, one for a durable write; for the fsync target the raw flush of "
                 "the same page without any tree). Where the bound itself misses the aim, no "
                 "server can meet it here. Rates get no bound: a server that batches replies "
                 "or receives in larger pieces can beat the simple floor programs.")
    lines.append("")
    lines.append("| target | rdax | figure | reference | figure | ratio | aim | | floor bound |")
    lines.append("|---|---|---:|---|---:|---:|---:|---|---:|")
    for name, sysfig, ref, val, refval, r, aim, ok, bound in rows:
        if ok:
            verdict = "met"
        else:
            reachable = bound is not None and (bound <= float(aim.split()[1][:-1])
                                               if aim.startswith("<=")
                                               else bound >= float(aim.split()[1][:-1].replace(
                                                   ",", "")))
            verdict = "**not met**" + ("" if reachable or bound is None
                                       else " (out of reach here)")
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            name, sysfig, val, ref, refval, fmt_ratio(r), aim, verdict, fmt_ratio(bound)))
    if not rows:
        lines.append("| (nothing measured) | | | | | | | | |")
    lines.append("")
    lines.extend(body)
    cost_table(lines, by_shape)
    multi_section(lines, raw)
    cg = load(raw, "callgrind")
    if cg:
        callgrind_section(lines, cg)
    if eng:
        engine_tables(lines, eng)
    made = write_plots(out, a.plots, d, by_shape, fl, eng)
    if made:
        lines.append("## Plots")
        lines.append("")
        for png in made:
            lines.append("![%s](%s)" % (png[:-4], png))
            lines.append("")
    with open(os.path.join(out, "report.md"), "w") as f:
        f.write("\n".join(lines).rstrip() + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    e = sub.add_parser("env")
    for opt in ("profile", "seconds", "rounds", "client-cpu", "server-cpu", "tmp", "size", "repo",
                "rdaxd"):
        e.add_argument("--" + opt, required=True)
    p = sub.add_parser("placement")
    p.add_argument("pid")
    p.add_argument("name")
    c = sub.add_parser("callgrind")
    c.add_argument("--dir", required=True)
    c.add_argument("--ops", required=True)
    n = sub.add_parser("nssize")
    n.add_argument("size")
    r = sub.add_parser("report")
    r.add_argument("--raw", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--plots", required=True)
    a = ap.parse_args()
    {"env": cmd_env, "placement": cmd_placement, "nssize": cmd_nssize,
     "callgrind": cmd_callgrind, "report": cmd_report}[a.cmd](a)


if __name__ == "__main__":
    main()
