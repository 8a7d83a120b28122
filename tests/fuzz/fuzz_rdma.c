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
 * by rdma_notice_place, as VOLUME_OPEN over RDMA does, and removed as
 * VOLUME_CLOSE does; notices (immediate value, byte count) resolved by
 * rdma_notice_resolve, as every WRITE_WITH_IMM completion is. Checked
 * against a model (a brute-force search of the table): a notice is
 * accepted exactly when one volume holds every page it names, and then it
 * marks bytes of that volume only, inside it; placed ranges never overlap
 * and stay inside the 2^31-page space.
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

/* model_find -- the volume holding every page of [page, page + npages), by brute force */
static int model_find(const struct vol *t, unsigned n, uint64_t page, uint64_t npages)
{
	for (unsigned i = 0; i < n; i++)
		if (page >= t[i].nr.base && page + npages <= t[i].nr.base + t[i].nr.npages)
			return (int)i;
	return -1;
}

/* notices -- volumes placed and removed, notices resolved, against the model */
static void notices(struct fuzz_in *in)
{
	struct vol t[MAX_VOLS];
	unsigned n = 0, next_id = 0;
	while (in->left) {
		uint8_t op = fuzz_u8(in);
		if (op < 64) { /* VOLUME_OPEN: a volume of up to 2^31 pages */
			uint64_t npages = (fuzz_u32(in) & (RDMA_IMM_SPACE_PAGES - 1)) + 1;
			uint64_t base;
			unsigned pos;
			if (n == MAX_VOLS)
				continue;
			if (rdma_notice_place(t, sizeof(*t), n, npages, &base, &pos))
				continue;
			FUZZ_CHECK(pos <= n);
			FUZZ_CHECK(base + npages <= RDMA_IMM_SPACE_PAGES);
			FUZZ_CHECK(pos == 0 || t[pos - 1].nr.base + t[pos - 1].nr.npages <= base);
			FUZZ_CHECK(pos == n || base + npages <= t[pos].nr.base);
			memmove(&t[pos + 1], &t[pos], (n - pos) * sizeof(*t));
			t[pos] = (struct vol){.nr = {base, npages}, .id = next_id++};
			n++;
		} else if (op < 96) { /* VOLUME_CLOSE */
			if (n == 0)
				continue;
			unsigned i = fuzz_u8(in) % n;
			memmove(&t[i], &t[i + 1], (n - i - 1) * sizeof(*t));
			n--;
		} else { /* a WRITE_WITH_IMM completion */
			uint32_t imm = fuzz_u32(in), byte_len = fuzz_u32(in);
			struct rdma_notice_hit hit;
			int ret = rdma_notice_resolve(t, sizeof(*t), n, imm, byte_len, &hit);
			uint64_t page, npages;
			rdma_imm_decode(imm, byte_len, &page, &npages);
			if (npages == 0) {
				FUZZ_CHECK(ret == 0 && hit.len == 0);
				continue;
			}
			int want = model_find(t, n, page, npages);
			if (want < 0) {
				FUZZ_CHECK(ret == -EPROTO);
				continue;
			}
			FUZZ_CHECK(ret == 0 && hit.index == (unsigned)want);
			const struct rdma_notice_range *r = &t[hit.index].nr;
			FUZZ_CHECK(hit.len == npages << RDAX_PAGE_SHIFT);
			FUZZ_CHECK(hit.off == (page - r->base) << RDAX_PAGE_SHIFT);
			FUZZ_CHECK(hit.off + hit.len <= r->npages << RDAX_PAGE_SHIFT);
			/* every byte the write could have touched is marked */
			FUZZ_CHECK(hit.len >= byte_len);
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
