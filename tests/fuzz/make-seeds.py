#!/usr/bin/env python3
# make-seeds.py -- write the seed inputs of every harness into corpus/<harness>/
#
# The seeds are small, well-formed sessions the fuzzers mutate from: a
# native connection that creates, opens, writes, reads, fsyncs, discards,
# stats, closes and deletes a volume; NBD option exchanges and transmission
# requests; RDMA private data, credit exchanges and notices; config files;
# addresses and sizes. Rerun after a protocol change; inputs that a
# campaign found (regression inputs) are kept beside them under their own
# names and are not touched here.
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")


def put(harness, name, data):
    d = os.path.join(OUT, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


# ---- protobuf, just enough ----
def varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def f_int(num, v):
    return varint(num << 3) + varint(v)


def f_bytes(num, b):
    return varint(num << 3 | 2) + varint(len(b)) + b


# ---- native frames (common/frame.h) ----
MAGIC = 0x58414452
T = dict(hello=1, create=2, delete=3, list=4, info=5, open=6, close=7, write=8,
         read=9, fsync=10, discard=11, stat=12, nslist=13, clear=16)
HANDLE = 0x10001  # the first handle of a connection: slot 0, generation 1


def frame(kind, rid, body=b"", payload=b"", payload_len=None):
    plen = len(payload) if payload_len is None else payload_len
    return struct.pack("<IHHQIIQ", MAGIC, 1, T[kind], rid, len(body), plen, 0) + body + payload


def hello(token=None):
    b = f_int(1, 1)
    if token is not None:
        b += f_bytes(2, token)
    return frame("hello", 1, b + f_bytes(3, b"fuzz"))


def parity(s, odd):
    """pad to the length whose parity picks the token mode (odd: a token is needed)"""
    return s + b"\0" if (len(s) % 2 == 1) != odd else s


def native():
    vol = b"v1"
    s = hello()
    s += frame("create", 2, f_bytes(1, vol) + f_int(2, 1 << 20))
    s += frame("list", 3)
    s += frame("info", 4, f_bytes(1, vol))
    s += frame("open", 5, f_bytes(1, vol))
    s += frame("write", 6, f_int(1, HANDLE) + f_int(2, 4096), b"A" * 4096)
    s += frame("write", 7, f_int(1, HANDLE) + f_int(2, 100) + f_int(3, 1), b"B" * 300)
    s += frame("read", 8, f_int(1, HANDLE) + f_int(2, 4000) + f_int(3, 200))
    s += frame("fsync", 9, f_int(1, HANDLE) + f_int(2, 0) + f_int(3, 8192))
    s += frame("discard", 10, f_int(1, HANDLE) + f_int(2, 0) + f_int(3, 4096))
    s += frame("stat", 11, f_int(1, HANDLE))
    s += frame("fsync", 12, f_int(1, HANDLE) + f_int(4, 1))
    s += frame("close", 13, f_int(1, HANDLE))
    s += frame("delete", 14, f_bytes(1, vol))
    put("fuzz_native_requests", "session", parity(s, False))
    put("fuzz_native_requests", "token",
        parity(hello(b"fuzz-token-0123456789") + frame("list", 2), True))
    put("fuzz_native_requests", "wrong-token", parity(hello(b"fuzz-token-x") + frame("list", 2), True))
    # refused requests: before HELLO, outside the volume, a refused write's payload
    r = hello() + frame("create", 2, f_bytes(1, b"v2") + f_int(2, 8192))
    r += frame("open", 3, f_bytes(1, b"v2"))
    r += frame("write", 4, f_int(1, HANDLE) + f_int(2, 8000), b"C" * 400)
    r += frame("read", 5, f_int(1, HANDLE + 1) + f_int(2, 0) + f_int(3, 10))
    r += frame("discard", 6, f_int(1, HANDLE) + f_int(2, 1 << 62) + f_int(3, 1 << 62))
    r += frame("write", 7, f_int(1, HANDLE) + f_int(2, 0), b"D" * 10, payload_len=100)
    put("fuzz_native_requests", "refusals", parity(r, False))
    put("fuzz_native_requests", "no-hello", parity(frame("list", 1), False))
    # unsafe-shutdown clears: a volume's, a namespace's by id and by path, two targets
    c = hello() + frame("create", 2, f_bytes(1, vol) + f_int(2, 1 << 20))
    c += frame("clear", 3, f_bytes(1, vol))
    c += frame("clear", 4, f_int(2, 0))
    c += frame("clear", 5, f_bytes(3, b"/no/such/ns"))
    c += frame("clear", 6, f_bytes(1, vol) + f_int(2, 0))
    c += frame("nslist", 7)
    put("fuzz_native_requests", "unsafe-clear", parity(c, False))

    put("fuzz_frame_header", "hello", frame("hello", 7, f_int(1, 1))[:32])
    put("fuzz_frame_header", "write", frame("write", 8, b"\0" * 6, payload_len=4096)[:32] + b"\1")
    put("fuzz_frame_header", "reply", struct.pack("<IHHQIIQ", MAGIC, 1, 0x8001, 9, 0, 0, 0))
    put("fuzz_frame_header", "big", struct.pack("<IHHQIIQ", MAGIC, 1, 8, 10, 70000, 1 << 26, 0) + b"\3")


# ---- NBD (daemon/nbd/nbd_proto.h) ----
OPTS = 0x49484156454F5054


def opt(num, data=b""):
    return struct.pack(">QII", OPTS, num, len(data)) + data


def go_data(name, reqs=()):
    return struct.pack(">I", len(name)) + name + struct.pack(">H", len(reqs)) + b"".join(
        struct.pack(">H", r) for r in reqs)


def nbd():
    flags = struct.pack(">I", 3)
    put("fuzz_nbd_options", "go", flags + opt(8) + opt(6, go_data(b"vol1", (1, 2, 3))) +
        opt(7, go_data(b"vol1", (3,))))
    put("fuzz_nbd_options", "list-abort", flags + opt(3) + opt(3, b"x") + opt(2))
    put("fuzz_nbd_options", "export-name", flags + opt(1, b"vol-1.a_b"))
    put("fuzz_nbd_options", "unknown-skip", flags + opt(99, b"z" * 20) + opt(7, go_data(b"v\0x")))
    put("fuzz_nbd_options", "long-info", flags + opt(6, b"q" * 9000))

    def req(t, off, length, flags=0, handle=1):
        return struct.pack(">IHHQQI", 0x25609513, flags, t, handle, off, length)

    ex = struct.pack("<QI", 1 << 20, 1 << 16) + b"\1"
    put("fuzz_nbd_requests", "io", ex + req(1, 0, 16, 1) + b"W" * 16 + req(0, 8, 32, 4) +
        req(3, 0, 0) + req(4, 4096, 4096) + req(6, 0, 512, 2) + req(2, 0, 0))
    put("fuzz_nbd_requests", "edges", ex + req(0, (1 << 20) - 1, 2) + req(1, 1 << 20, 1) + b"x" +
        req(0, (1 << 64) - 1, 2) + req(7, 0, 1) + req(0, 0, 1, 16))


# ---- RDMA (common/rdma_proto.h) ----
def rdma():
    pd = struct.pack("<IHHII", 0x52584452, 1, 64, 4096, 0)
    put("fuzz_rdma", "credits", b"\0" + pd + b"\xff\xff" + bytes([0, 1, 2, 3, 4 << 2, 1, 2, 3]))
    put("fuzz_rdma", "bad-version", b"\0" + struct.pack("<IHHII", 0x52584452, 2, 64, 4096, 0))
    n = b"\1" + b"\0" + struct.pack("<I", 256) + b"\0" + struct.pack("<I", 16)
    n += b"\x80" + struct.pack("<II", 3, 8192) + b"\x80" + struct.pack("<II", 256 | (1 << 31), 4096)
    n += b"\x80" + struct.pack("<II", 250, 30000) + b"\x40\0"
    put("fuzz_rdma", "notices", n)


# ---- config file, addresses, sizes ----
def config():
    put("fuzz_config_file", "full", b"""# rdaxd.conf
namespace = /var/lib/rdax/ns0,size=8G,mode=auto
namespace = /dev/shm/ns1,size=64M,mode=sim
listen = tcp://127.0.0.1:7470
listen = nbd://[::1]:10809
listen = nbd+unix:///run/rdax/nbd.sock?mode=0660
threads = 4
log-level = info
max-payload = 8M
flush_mode = tracked
rdma-busy-poll = 50
""")
    put("fuzz_config_file", "cluster", b"cluster = etcd://127.0.0.1:2379\nnode = n1\nzone = r1\n"
        b"advertise = tcp://192.0.2.1:7470\ncluster-name = c1\n")
    put("fuzz_config_file", "errors", b"threads = 0\nunknown = 1\n")
    u = [b"tcp://127.0.0.1:7470", b"rdma://[fe80::1%eth0]:7471", b"nbd://host-name_1",
         b"nbd+unix:///run/rdax/nbd.sock?mode=0600", b"tcp://:0"]
    for i, s in enumerate(u):
        put("fuzz_url_size", "url%d" % i, bytes([i % 4]) + s)
    # rdaxs:// to connect to (accepted) and to listen on (refused)
    put("fuzz_url_size", "rdaxs0", b"\0rdaxs://[::1]:7470")
    put("fuzz_url_size", "rdaxs1", b"\1rdaxs://127.0.0.1:7470")
    put("fuzz_url_size", "ns", b"\3/tmp/ns0,size=1G,mode=sim")
    for i, s in enumerate([b"4M", b"1536K", b"16E", b"4MB", b"18446744073709551615", b"0x10"]):
        put("fuzz_url_size", "size%d" % i, b"\4" + s)


native()
nbd()
rdma()
config()
print("seeds written to", OUT, file=sys.stderr)
