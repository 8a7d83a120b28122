# poke.py -- nbdsh: write NT_LEN bytes of value NT_BYTE at NT_OFF (a
# deliberate corruption, for the controls), then FLUSH.
# Environment: NT_URI, NT_OFF, NT_LEN, NT_BYTE.
import os

import nbd

h = nbd.NBD()
h.connect_uri(os.environ["NT_URI"])
n = int(os.environ["NT_LEN"])
h.pwrite(bytes([int(os.environ["NT_BYTE"])]) * n, int(os.environ["NT_OFF"]))
h.flush()
h.shutdown()
