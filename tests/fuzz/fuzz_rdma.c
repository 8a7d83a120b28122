/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fuzz_rdma.c -- what an RDMA client controls before and around its messages
 *
 * Input: the first byte chooses the part (even: private data and credits,
 * odd: write notices), the rest drives it.
 *
 * Private data and credits: the bytes up to the first 0xff 0xff pair (or
 * all) are a connect request's private data, decoded with
 * rdma_cm_data_decode exactly as rdma_listen.c does (a heap copy of exactly
 * that length). If accepted, the daemon's credit rules (rdma_credits_*,
 * common/rdma_proto.h) run with the client's window against the client's
 * messages: each further byte is an event -- the client sends a message
 * carrying a grant, the daemon handles messages, the daemon sends (data or a
 * grant-only message as the rules allow). Checked: an accepted header is
 * within the protocol's ranges and encodes back; the daemon never counts
 * more sendable messages than the client's window, never owes back more
 * than it received, and refuses a client sending beyond its window or
 * granting more than was used.
 *
 * Write notices: a table of volumes placed in the connection's notice space
 * by rdma_notice_place, in line or page units as VOLUME_OPEN over RDMA gives
 * them, and removed as VOLUME_CLOSE does; notices (immediate value, byte
 * count) resolved by rdma_notice_resolve, as every WRITE_WITH_IMM completion
 * is. Checked against a model (a brute-force search of the table, each
 * entry in its own unit): a notice is accepted exactly when one volume holds
 * every unit it names, and then it marks whole units of that volume only,
 * inside it; a write a client encodes (rdma_imm_encode with the volume's
 * unit) resolves to exactly the units it touched, and to the same ones
 * with the durable bit D set; placed ranges never overlap and stay inside
 * the 2^30-unit space.
 */
#include "fuzz.h"

#include <errno.h>

#include "log.h"
#include "rdma_notice.h"
#include "rdma_proto.h"

#define MAX_VOLS 64

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	fuzz_log_init();
	return 0;
}

/* credits -- private data, then the credit exchange */
static void credits(struct fuzz_in *in)
{
	size_t len = 0;
	while (len + 1 < in->left && !(in->p[len] == 0xff && in->p[len + 1] == 0xff))
		len++;
	if (len + 1 >= in->left)
		len = in->left;
	uint8_t *pd = malloc(len ? len : 1);
	FUZZ_CHECK(pd);
	memcpy(pd, fuzz_take(in, len), len);
	fuzz_take(in, 2);
	struct rdma_cm_data cd;
	int ret = rdma_cm_data_decode(len ? pd : NULL, (uint32_t)len, &cd);
	if (ret) {
		FUZZ_CHECK(ret == -EPROTO || ret == -EPROTONOSUPPORT);
		free(pd);
		return;
	}
	FUZZ_CHECK(len >= RDMA_CM_DATA_SIZE);
	FUZZ_CHECK(cd.magic == RDMA_CM_MAGIC && cd.version == RDMA_CM_VERSION);
	FUZZ_CHECK(cd.credits >= RDMA_CREDITS_MIN && cd.credits <= RDMA_CREDITS_MAX);
	FUZZ_CHECK(cd.msg_size >= RDMA_MSG_MIN);
	uint8_t again[RDMA_CM_DATA_SIZE];
	rdma_cm_data_encode(&cd, again);
	FUZZ_CHECK(memcmp(again, pd, 12) == 0);
	free(pd);

	/* the daemon's side: the client's window, ours as rdma_conn.c posts it */
	struct rdma_credits c;
	const uint32_t recv_window = 64;
	rdma_credits_init(&c, cd.credits, recv_window);
	uint32_t client_sent = 0; /* the client's messages the daemon received */
	while (in->left) {
		uint8_t ev = fuzz_u8(in);
		switch (ev & 3) {
		case 0: { /* a message of the client, granting back (ev >> 2) */
			uint32_t grant = ev >> 2;
			struct rdma_credits before = c;
			ret = rdma_credits_received(&c, grant);
			if (ret) {
				FUZZ_CHECK(before.recv_unreturned >= recv_window ||
					   grant > before.send_window - before.send_avail);
				return; /* the daemon closes */
			}
			client_sent++;
			break;
		}
		case 1: /* the daemon handles what it received and owes */
			if (c.recv_unreturned > c.recv_owed)
				rdma_credits_handled(&c, 1 + (ev >> 2) %
								 (c.recv_unreturned - c.recv_owed));
			break;
		case 2: /* the daemon sends data if it may */
			if (rdma_credits_can_send(&c))
				rdma_credits_send(&c, true);
			break;
		case 3: /* a grant-only message if one is due */
			if (rdma_credits_grant_due(&c))
				FUZZ_CHECK(rdma_credits_send(&c, true) > 0);
			break;
		}
		FUZZ_CHECK(c.send_avail <= c.send_window);
		FUZZ_CHECK(c.recv_owed <= c.recv_unreturned);
		FUZZ_CHECK(c.recv_unreturned <= recv_window);
	}
	(void)client_sent;
}

/* A volume of the notice table: the range first (rdma_notice.h), then what the model knows. */
struct vol {
	struct rdma_notice_range nr;
	unsigned id;
};

/*
 * model_find -- the volume holding every unit of the notice (@imm, @byte_len
 * > 0), each entry's units counted in its own unit, by brute force
 */
static int model_find(const struct vol *t, unsigned n, uint32_t imm, uint32_t byte_len)
{
	for (unsigned i = 0; i < n; i++) {
		uint64_t unit, nunits;
		rdma_imm_decode(imm, byte_len, t[i].nr.shift, &unit, &nunits);
		if (unit >= t[i].nr.base && unit + nunits <= t[i].nr.base + t[i].nr.nunits)
			return (int)i;
	}
	return -1;
}

/* check_hit -- what a resolved notice of @byte_len bytes marks lies in its volume, in units */
static void check_hit(const struct vol *t, const struct rdma_notice_hit *hit, uint32_t imm,
		      uint32_t byte_len)
{
	const struct rdma_notice_range *r = &t[hit->index].nr;
	uint64_t unit, nunits;
	rdma_imm_decode(imm, byte_len, r->shift, &unit, &nunits);
	FUZZ_CHECK(hit->len == nunits << r->shift);
	FUZZ_CHECK(hit->off == (unit - r->base) << r->shift);
	FUZZ_CHECK(hit->off + hit->len <= r->nunits << r->shift);
	/* every byte the write could have touched is marked */
	FUZZ_CHECK(hit->len >= byte_len);
}

/* notices -- volumes placed and removed, notices resolved, against the model */
static void notices(struct fuzz_in *in)
{
	struct vol t[MAX_VOLS];
	unsigned n = 0, next_id = 0;
	while (in->left) {
		uint8_t op = fuzz_u8(in);
		if (op < 64) { /* VOLUME_OPEN: a volume of up to 2^30 units, pages or lines */
			uint32_t shift = op < 32 ? RDMA_IMM_SHIFT_PAGE : RDMA_IMM_SHIFT_LINE;
			uint64_t nunits = (fuzz_u32(in) & (RDMA_IMM_SPACE_UNITS - 1)) + 1;
			uint64_t base;
			unsigned pos;
			if (n == MAX_VOLS)
				continue;
			if (rdma_notice_place(t, sizeof(*t), n, nunits, &base, &pos))
				continue;
			FUZZ_CHECK(pos <= n);
			FUZZ_CHECK(base + nunits <= RDMA_IMM_SPACE_UNITS);
			FUZZ_CHECK(pos == 0 || t[pos - 1].nr.base + t[pos - 1].nr.nunits <= base);
			FUZZ_CHECK(pos == n || base + nunits <= t[pos].nr.base);
			memmove(&t[pos + 1], &t[pos], (n - pos) * sizeof(*t));
			t[pos] = (struct vol){.nr = {base, nunits, shift}, .id = next_id++};
			n++;
		} else if (op < 96) { /* VOLUME_CLOSE */
			if (n == 0)
				continue;
			unsigned i = fuzz_u8(in) % n;
			memmove(&t[i], &t[i + 1], (n - i - 1) * sizeof(*t));
			n--;
		} else if (op < 128) { /* a client's write inside volume i: its units exactly */
			uint64_t x = (uint64_t)fuzz_u32(in) << 32;
			x |= fuzz_u32(in);
			uint32_t len = fuzz_u32(in) % (2U << 20) + 1;
			if (n == 0)
				continue;
			const struct rdma_notice_range *r = &t[fuzz_u8(in) % n].nr;
			uint64_t size = r->nunits << r->shift;
			if (len > size)
				len = (uint32_t)size;
			uint64_t off = x % (size - len + 1);
			uint32_t imm = rdma_imm_encode((uint32_t)r->base, r->shift, off, len);
			struct rdma_notice_hit hit;
			FUZZ_CHECK(rdma_notice_resolve(t, sizeof(*t), n, imm, len, &hit) == 0);
			FUZZ_CHECK(&t[hit.index].nr == r);
			uint64_t unit = 1ULL << r->shift;
			FUZZ_CHECK(hit.off == off / unit * unit);
			FUZZ_CHECK(hit.off + hit.len == (off + len + unit - 1) / unit * unit);
			check_hit(t, &hit, imm, len);
			/* D asks for durability and changes nothing of what is marked */
			struct rdma_notice_hit durable;
			FUZZ_CHECK(!rdma_imm_durable(imm));
			FUZZ_CHECK(rdma_notice_resolve(t, sizeof(*t), n, imm | RDMA_IMM_DURABLE, len,
						       &durable) == 0);
			FUZZ_CHECK(durable.index == hit.index && durable.off == hit.off &&
				   durable.len == hit.len);
		} else { /* a WRITE_WITH_IMM completion, anything a client can send */
			uint32_t imm = fuzz_u32(in), byte_len = fuzz_u32(in);
			struct rdma_notice_hit hit;
			int ret = rdma_notice_resolve(t, sizeof(*t), n, imm, byte_len, &hit);
			if (byte_len == 0) {
				FUZZ_CHECK(ret == 0 && hit.len == 0);
				continue;
			}
			int want = model_find(t, n, imm, byte_len);
			if (want < 0) {
				FUZZ_CHECK(ret == -EPROTO);
				continue;
			}
			FUZZ_CHECK(ret == 0 && hit.index == (unsigned)want);
			check_hit(t, &hit, imm, byte_len);
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_in in = {data, size};
	if (size == 0)
		return 0;
	if (fuzz_u8(&in) & 1)
		notices(&in);
	else
		credits(&in);
	return 0;
}
