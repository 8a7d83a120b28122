# io.py -- nbdsh: READ, WRITE, FLUSH, FUA, TRIM, WRITE_ZEROES (with and
# without NO_HOLE), many requests in flight, and the errors the protocol
# prescribes (libnbd's own checks switched off so the server decides).
# Environment: NT_URI, NT_VOL_SIZE, NT_STRUCTURED (1 or 0).
import errno
import os

import nbd

uri = os.environ["NT_URI"]
size = int(os.environ["NT_VOL_SIZE"])
structured = os.environ.get("NT_STRUCTURED", "1") == "1"
MiB = 1 << 20

h = nbd.NBD()
h.set_request_structured_replies(structured)
h.connect_uri(uri)
assert h.get_structured_replies_negotiated() == structured

# aligned, unaligned, large and at the very end
for off, n in [(0, 4096), (3 * 4096 + 17, 1000), (MiB, MiB), (size - 512, 512), (5, 1)]:
    buf = os.urandom(n)
    h.pwrite(buf, off)
    assert h.pread(n, off) == buf, (off, n)

# FUA, FLUSH, DF
buf = os.urandom(8192)
h.pwrite(buf, 65536, nbd.CMD_FLAG_FUA)
h.flush()
assert h.pread(8192, 65536) == buf
if structured:
    # DF: the whole read in one data chunk
    chunks = []
    got = h.pread_structured(8192, 65536,
                             lambda sub, off, status, err: chunks.append((off, status, len(sub))),
                             nbd.CMD_FLAG_DF)
    assert bytes(got) == buf
    assert chunks == [(65536, nbd.READ_DATA, 8192)], chunks

# WRITE_ZEROES: zeros with or without NO_HOLE, unaligned edges kept
base = 2 * MiB
h.pwrite(b"\xff" * 65536, base)
h.zero(4096, base + 100)
h.zero(8192, base + 16384, nbd.CMD_FLAG_NO_HOLE | nbd.CMD_FLAG_FUA)
want = bytearray(b"\xff" * 65536)
want[100:100 + 4096] = bytes(4096)
want[16384:16384 + 8192] = bytes(8192)
assert h.pread(65536, base) == bytes(want)

# TRIM: this server zeros what is trimmed
base = 3 * MiB
h.pwrite(b"\xee" * 65536, base)
h.trim(65536, base)
h.trim(4096, base + 1, nbd.CMD_FLAG_FUA)
assert h.pread(65536, base) == bytes(65536)

# many requests in flight, completed in whatever order the server answers
base = 4 * MiB
data = [os.urandom(4096) for _ in range(64)]
wbufs = [nbd.Buffer.from_bytearray(bytearray(d)) for d in data]
cookies = [h.aio_pwrite(wbufs[i], base + i * 4096, flags=nbd.CMD_FLAG_FUA if i % 4 == 0 else 0)
           for i in range(64)]
cookies.append(h.aio_flush())
while h.aio_in_flight() > 0:
    h.poll(-1)
for c in cookies:
    assert h.aio_command_completed(c)
rbufs = [nbd.Buffer(4096) for _ in range(64)]
cookies = [h.aio_pread(rbufs[i], base + i * 4096) for i in range(64)]
while h.aio_in_flight() > 0:
    h.poll(-1)
for i, c in enumerate(cookies):
    assert h.aio_command_completed(c)
    assert bytes(rbufs[i].to_bytearray()) == data[i], i

# errors: the server's answers, not libnbd's
h.set_strict_mode(0)


def expect(err, fn, *args):
    try:
        fn(*args)
    except nbd.Error as e:
        # libnbd names the errno ("EINVAL")
        assert e.errno in (err, errno.errorcode[err]), (fn.__name__, args[1:], e.errno,
                                                        e.string)
        return
    raise AssertionError("%s%r succeeded" % (fn.__name__, args[1:]))


expect(errno.EINVAL, h.pread, 4096, size - 100)
expect(errno.EINVAL, h.pread, (32 * MiB) + 4096, 0)
expect(errno.ENOSPC, h.pwrite, b"x" * 4096, size - 100)
expect(errno.ENOSPC, h.zero, 4096, size)
expect(errno.EINVAL, h.trim, 4096, size)
expect(errno.EINVAL, h.pwrite, b"x" * 4096, 0, nbd.CMD_FLAG_NO_HOLE)
expect(errno.EINVAL, h.zero, 4096, 0, nbd.CMD_FLAG_FAST_ZERO)
if not structured:
    expect(errno.EINVAL, h.pread_structured, 4096, 0, lambda *a: 0, nbd.CMD_FLAG_DF)
# refused WRITEs whose payload is still being sent when the server decides:
# the error must come after the payload, or libnbd finds no request to
# match it to ("no matching cookie") and drops the connection
expect(errno.EINVAL, h.pwrite, b"x" * (32 * MiB + 1), 0)
expect(errno.ENOSPC, h.pwrite, b"x" * (8 * MiB), size - 4 * MiB)
expect(errno.EINVAL, h.pwrite, b"x" * (8 * MiB), 0, nbd.CMD_FLAG_NO_HOLE)

# and the connection still works
buf = os.urandom(4096)
h.pwrite(buf, 0)
assert h.pread(4096, 0) == buf
h.shutdown()
print("io: ok")
