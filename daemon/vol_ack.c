/* SPDX-License-Identifier: BSD-3-Clause */
/* vol_ack.c -- the power cut's gate, then the write log, at each acknowledgement (vol_ack.h) */
#include "vol_ack.h"

#include "powercut.h"
#include "write_recorder.h"

bool vol_ack_write(struct volume *v, uint64_t off, uint64_t len)
{
	if (!powercut_ack_take())
		return false;
	write_recorder_write(v, off, len);
	return true;
}

void vol_ack_record_write(struct volume *v, uint64_t off, uint64_t len)
{
	if (!powercut_pending())
		write_recorder_write(v, off, len);
}

uint64_t vol_ack_fsync_mark(struct volume *v)
{
	return write_recorder_mark(v);
}

bool vol_ack_fsync(struct volume *v, uint64_t mark, uint64_t off, uint64_t len, unsigned flags)
{
	if (!powercut_ack_take())
		return false;
	write_recorder_fsync(v, mark, off, len, flags);
	return true;
}

bool vol_ack_discard(struct volume *v, uint64_t off, uint64_t len, unsigned flags)
{
	if (!powercut_ack_take())
		return false;
	write_recorder_discard(v, off, len, flags);
	return true;
}
