# options.py -- nbdsh: the handshake as libnbd drives it (LIST, INFO, GO,
# ABORT, structured replies on and off, the old EXPORT_NAME path).
# Environment: NT_BASE (nbd://HOST:PORT), NT_VOL, NT_VOL_SIZE.
import os

import nbd

base = os.environ["NT_BASE"]
vol = os.environ["NT_VOL"]
size = int(os.environ["NT_VOL_SIZE"])
MAX_BLOCK = 32 << 20

# LIST in option mode: every volume, with a description
h = nbd.NBD()
h.set_opt_mode(True)
h.connect_uri(base + "/")
exports = []
h.opt_list(lambda name, desc: exports.append((name, desc)))
assert vol in [n for n, _ in exports], exports
assert all(d.startswith("rdax volume") for _, d in exports), exports

# INFO: size, flags, block size constraints, name and description; still negotiating
h.set_export_name(vol)
h.set_request_block_size(True)
h.set_full_info(True)
h.opt_info()
assert h.get_size() == size, h.get_size()
assert h.get_block_size(nbd.SIZE_MINIMUM) == 1
assert h.get_block_size(nbd.SIZE_PREFERRED) == 4096
assert h.get_block_size(nbd.SIZE_MAXIMUM) == MAX_BLOCK
assert h.get_canonical_export_name() == vol
assert h.get_export_description().startswith("rdax volume")
assert h.can_flush() and h.can_fua() and h.can_trim() and h.can_zero()
assert h.can_multi_conn()
assert not h.is_read_only() and not h.can_fast_zero() and not h.can_cache()

# an unknown export is an error, and negotiation goes on
h.set_export_name("nosuch")
try:
    h.opt_info()
    raise AssertionError("INFO of an unknown export succeeded")
except nbd.Error:
    pass

# GO enters transmission with structured replies (DF offered with them)
h.set_export_name(vol)
h.opt_go()
assert h.get_structured_replies_negotiated()
assert h.can_df()
assert h.get_size() == size
h.pwrite(b"options", 0)
assert h.pread(7, 0) == b"options"
h.shutdown()

# ABORT during negotiation
h = nbd.NBD()
h.set_opt_mode(True)
h.connect_uri(base + "/" + vol)
h.opt_abort()
assert h.aio_is_closed()

# structured replies declined: simple replies, no DF
h = nbd.NBD()
h.set_request_structured_replies(False)
h.connect_uri(base + "/" + vol)
assert not h.get_structured_replies_negotiated()
assert not h.can_df()
assert h.pread(7, 0) == b"options"
h.shutdown()

# a client without fixed newstyle: NBD_OPT_EXPORT_NAME, the 124 zero bytes, simple replies
for flags in (0, nbd.HANDSHAKE_FLAG_FIXED_NEWSTYLE):
    h = nbd.NBD()
    h.set_handshake_flags(flags)
    h.connect_uri(base + "/" + vol)
    assert h.get_size() == size
    assert h.pread(7, 0) == b"options"
    h.shutdown()

print("options: ok")
