/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * transport_rdma.h -- the RDMA side of a librdax connection (rdma://)
 *
 * One RC queue pair to the daemon, made with librdmacm, with its own
 * protection domain, CQ and completion channel. It offers conn.c two things:
 *
 *  - a byte stream for the frames of the protocol (rdma_proto.h): sent as
 *    SEND_WITH_IMM messages within the daemon's credits, received into
 *    rdma_tp's posted receives and handed out by rdma_tp_recv() in order;
 *    grants go back in the immediate values (or alone, when due).
 *  - one-sided data operations on a volume the daemon gave direct access
 *    to: rdma_tp_write() posts an RDMA WRITE_WITH_IMM whose immediate is the
 *    write notice, rdma_tp_read() an RDMA READ. Both go through a registered
 *    bounce ring (RDMA_TP_BOUNCE bytes, parts of at most RDMA_TP_PART_MAX):
 *    measured in the VM, ibv_reg_mr + ibv_dereg_mr of a 4 KiB buffer costs
 *    76-130 us against 2-6 us for copying it, and even at 1 MiB registering
 *    (230-260 us) saves little next to what rxe takes to move the data
 *    (docs/rdma.md). A write is copied when it is posted; a read is copied
 *    out when it completes. A buffer the caller had registered once
 *    (rdma_tp_register, for rdax_buffer_alloc) is used in place instead: a
 *    registration kept for many operations costs nothing per operation,
 *    and the copy is what held 64 KiB writes at 0.84-0.87x ib_write_bw.
 *
 * Order: everything is posted on one send queue in the order conn.c asks
 * for it, so a write notice reaches the daemon before any later frame (an
 * FSYNC) -- which is what makes the fsync cover the write. A write posted
 * while an RDMA READ is in flight is fenced (IBV_SEND_FENCE), so the read
 * never sees data written after it.
 *
 * Thread safety: none; the connection's caller serialises all use.
 */
#ifndef RDAX_CLIENT_TRANSPORT_RDMA_H
#define RDAX_CLIENT_TRANSPORT_RDMA_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

/* Callers' buffers registered at once on one connection (rdax_buffer_alloc). */
#define RDMA_TP_USER_MRS 64U
/* Registered bounce ring for one-sided writes and reads, per connection. */
#define RDMA_TP_BOUNCE (4U << 20)
/*
 * Largest one-sided operation; larger writes and reads are split at volume
 * offsets that are multiples of it, so an aligned 2 MiB write is one notice
 * (one huge dirty-tree entry, as one TCP WRITE of it would be).
 */
#define RDMA_TP_PART_MAX (2U << 20)
/* Our receives for the daemon's messages (the daemon's send window). */
#define RDMA_TP_RECV_CREDITS 32U
/* RDMA READs in flight (also capped by what the daemon and the device allow). */
#define RDMA_TP_MAX_READS 16U

struct rdma_tp;

/* Where a volume is, for one-sided operations (from its VOLUME_OPEN reply). */
struct rdma_tp_vol {
	uint64_t remote_addr;
	uint32_t rkey;
	uint32_t imm_base;  /* its first unit in the connection's notice space */
	uint32_t imm_shift; /* the unit: RDMA_IMM_SHIFT_LINE or _PAGE (rdma_proto.h) */
};

/*
 * rdma_tp_connect -- resolve @host:@port, set up the QP and its buffers,
 * connect. @bounce_bytes: the bounce ring (RDMA_TP_BOUNCE; 0: no one-sided
 * operations, only the stream). @timeout_ms bounds each step (0: 30 s per resolution step and
 * the CM's own limit for the connection). Returns 0, or -errno
 * (-EHOSTUNREACH, -ECONNREFUSED, -ETIMEDOUT, -ENODEV, ...) with @err saying why.
 */
int rdma_tp_connect(const char *host, const char *port, int timeout_ms, uint32_t bounce_bytes,
		    struct rdma_tp **out, char *err, size_t errlen);

/* A pre-shared key that signs the connection request (rdma_auth.h). */
struct rdma_tp_auth {
	const char *user;
	const uint8_t *key;
	size_t key_len;
};

/*
 * rdma_tp_connect_auth -- rdma_tp_connect whose connection request carries
 * the auth block of @auth (NULL: none), for a daemon with --tls-psk. A
 * refusal is -ECONNREFUSED, as for any rejected request.
 */
int rdma_tp_connect_auth(const char *host, const char *port, int timeout_ms, uint32_t bounce_bytes,
			 const struct rdma_tp_auth *auth, struct rdma_tp **out, char *err,
			 size_t errlen);

/*
 * rdma_tp_abort -- fail the connection now: the queue pair goes to the error
 * state, so what was posted and not yet sent is flushed (never sent later),
 * and every later call returns -ECONNABORTED. For an owner that gives up on
 * the peer (a cluster primary's failed replica link). Free it as usual.
 */
void rdma_tp_abort(struct rdma_tp *tp);

/* rdma_tp_delete -- disconnect, destroy and free; accepts NULL; sets *tpp = NULL */
void rdma_tp_delete(struct rdma_tp **tpp);

/* rdma_tp_msg_size -- the message size both sides agreed on */
uint32_t rdma_tp_msg_size(const struct rdma_tp *tp);

/*
 * rdma_tp_send -- take bytes of the stream from @iov[0..n): copies them into
 * messages and posts them while credits, buffers and the send queue allow.
 * Returns the bytes taken (0: none now, wait for rdma_tp_progress), or a
 * negative code once the connection failed.
 */
ssize_t rdma_tp_send(struct rdma_tp *tp, const struct iovec *iov, int n);

/*
 * rdma_tp_recv -- up to @len bytes of the stream into @buf. Returns the
 * count, 0 when nothing has arrived, -ECONNRESET once the daemon
 * disconnected and everything it sent was read, or another negative code.
 */
ssize_t rdma_tp_recv(struct rdma_tp *tp, void *buf, size_t len);

/*
 * rdma_tp_write / rdma_tp_read -- post a one-sided operation of @len bytes
 * (<= RDMA_TP_PART_MAX) at @off of @vol; @ctx comes back in the completion
 * callback of rdma_tp_progress(). The caller checked the range. A read
 * fills @buf when it completes, so @buf must stay valid until then.
 * Returns 0, -EAGAIN (no credit, ring space or queue slot now: progress
 * first), or a negative code once the connection failed.
 */
int rdma_tp_write(struct rdma_tp *tp, const struct rdma_tp_vol *vol, uint64_t off, const void *buf,
		  uint32_t len, void *ctx);
int rdma_tp_read(struct rdma_tp *tp, const struct rdma_tp_vol *vol, uint64_t off, void *buf,
		 uint32_t len, void *ctx);

/*
 * rdma_tp_write_durable -- rdma_tp_write whose notice is durable (D,
 * rdma_proto.h): the daemon makes the units written durable and answers
 * with an FsyncReply in the stream whose request_id is *@reply_id. Only
 * for a volume whose open offered it (VolumeOpenReply.imm_durable). Its
 * completion calls back with ctx NULL: the reply is the answer, and it
 * may come first.
 */
int rdma_tp_write_durable(struct rdma_tp *tp, const struct rdma_tp_vol *vol, uint64_t off,
			  const void *buf, uint32_t len, uint64_t *reply_id);

/*
 * rdma_tp_register -- register the caller's buffer [@addr, @addr + @len):
 * a one-sided write from within it, or a read into it, then goes straight
 * from or into it, without the bounce ring's copy. The buffer must stay
 * mapped until rdma_tp_unregister() or rdma_tp_delete(). Returns 0, -ENOSPC
 * (RDMA_TP_USER_MRS already), or ibv_reg_mr's -errno (-ENOMEM, -EAGAIN: the
 * memlock limit).
 */
int rdma_tp_register(struct rdma_tp *tp, void *addr, size_t len);

/* rdma_tp_unregister -- forget the registration that starts at @addr (none: nothing) */
void rdma_tp_unregister(struct rdma_tp *tp, void *addr);

/* rdma_tp_copied -- bytes of one-sided operations copied through the bounce ring so far */
uint64_t rdma_tp_copied(const struct rdma_tp *tp);

/* rdma_tp_durable_notices -- durable notices posted so far on this connection */
uint64_t rdma_tp_durable_notices(const struct rdma_tp *tp);

/* rdma_tp_direct_posted -- one-sided writes and reads posted whose completions have not come */
uint32_t rdma_tp_direct_posted(const struct rdma_tp *tp);

/*
 * rdma_tp_batch_begin / rdma_tp_batch_end -- the sends, writes and reads
 * posted between the two go to the device in one ibv_post_send at the end
 * (one doorbell for a write and its FSYNC), in the order they were posted.
 * Nothing is sent before _end, so the caller ends a batch before it waits.
 * _end returns 0, or a negative code once the connection failed.
 */
void rdma_tp_batch_begin(struct rdma_tp *tp);
int rdma_tp_batch_end(struct rdma_tp *tp);

/*
 * rdma_tp_progress -- handle what completed: one-sided operations (@done
 * called with their ctx and 0 or a negative code), received messages (kept
 * for rdma_tp_recv), sends, connection events; then send a grant if one is
 * due. Never blocks. Returns how many completions and events it handled
 * (>= 0: 0 means nothing changed), or the connection's error once it failed
 * (after which every call returns it; rdma_tp_error() says why).
 */
int rdma_tp_progress(struct rdma_tp *tp, void (*done)(void *arg, void *ctx, int status), void *arg);

/*
 * rdma_tp_poll -- rdma_tp_progress() for a caller that spins: the
 * completion queue only (handled alike, then a grant if one is due), no
 * system call to look at the completion channel or the connection's events
 * -- the providers poll a CQ in user space, and under emulation the two
 * empty reads of every turn cost more than the poll (docs/rdma.md,
 * "Benchmark"). A spinning caller calls rdma_tp_progress() now and then,
 * and before it sleeps. Returns as rdma_tp_progress().
 */
int rdma_tp_poll(struct rdma_tp *tp, void (*done)(void *arg, void *ctx, int status), void *arg);

/*
 * rdma_tp_arm -- before sleeping: ask for a completion event, then handle
 * what completed before the request (it raises no event), as
 * rdma_tp_progress() does. Returns true if there was any: do not sleep.
 */
bool rdma_tp_arm(struct rdma_tp *tp, void (*done)(void *arg, void *ctx, int status), void *arg);

/* rdma_tp_pollfds -- the descriptors to sleep on (POLLIN): completion channel, rdma_cm events */
void rdma_tp_pollfds(const struct rdma_tp *tp, struct pollfd fds[2]);

/* rdma_tp_has_input -- received bytes wait in rdma_tp_recv */
bool rdma_tp_has_input(const struct rdma_tp *tp);

/* rdma_tp_error -- the reason the connection failed, "" while it works */
const char *rdma_tp_error(const struct rdma_tp *tp);

/*
 * rdma_tp_test_ignore_credits -- tests only: from now on rdma_tp_send()
 * posts messages whether or not the daemon granted room for them, as a
 * misbehaving client would (the daemon must close that connection alone)
 */
void rdma_tp_test_ignore_credits(struct rdma_tp *tp);

/*
 * rdma_tp_test_empty_notice -- tests only: a WRITE_WITH_IMM of no bytes at
 * @vol's start whose immediate is @imm as given, as a misbehaving client
 * could post. 0, -EAGAIN, or the connection's failure.
 */
int rdma_tp_test_empty_notice(struct rdma_tp *tp, const struct rdma_tp_vol *vol, uint32_t imm);

#endif
