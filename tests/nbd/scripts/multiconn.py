# multiconn.py -- nbdsh: write on one connection, FLUSH on another (the
# power-cut test). The data file's NT_CHUNK-byte chunks go at i * NT_STRIDE
# through connection 1; then connection 2 sends FLUSH (unless NT_FLUSH=0).
# Prints FLUSHED once the FLUSH is acknowledged; the caller then cuts power.
# NT_FUA=1: every write carries the FUA flag instead (and no FLUSH follows):
# each write is durable when it is acknowledged.
# Environment: NT_URI, NT_DATA, NT_CHUNK, NT_STRIDE, NT_FLUSH, NT_FUA.
import os

import nbd

uri = os.environ["NT_URI"]
chunk = int(os.environ["NT_CHUNK"])
stride = int(os.environ["NT_STRIDE"])
with open(os.environ["NT_DATA"], "rb") as f:
    data = f.read()

h1 = nbd.NBD()
h1.connect_uri(uri)
h2 = nbd.NBD()
h2.connect_uri(uri)
assert h1.can_multi_conn() and h2.can_multi_conn()
fua = os.environ.get("NT_FUA", "0") == "1"
for i in range(len(data) // chunk):
    h1.pwrite(data[i * chunk:(i + 1) * chunk], i * stride,
              nbd.CMD_FLAG_FUA if fua else 0)
if fua:
    print("FUA WRITES", flush=True)
elif os.environ.get("NT_FLUSH", "1") == "1":
    h2.flush()
    print("FLUSHED", flush=True)
else:
    print("NOT FLUSHED", flush=True)
