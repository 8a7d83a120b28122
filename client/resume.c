/* SPDX-License-Identifier: BSD-3-Clause */
/* resume.c -- a lost connection comes back: reconnect, reopen the volumes, resend */
#include "resume.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "conn.h"
#include "log.h"

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* sleep_ms -- sleep @ms milliseconds (signals resume the sleep) */
static void sleep_ms(int64_t ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* jitter -- @ms +- 25 %, so clients that lost one server do not come back in step */
static int64_t jitter(int64_t ms)
{
	uint32_t r = 0;
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		r = (uint32_t)now_ms();
	return ms * 3 / 4 + (int64_t)(r % (uint32_t)(ms / 2 + 1));
}

/* final -- a refusal no reconnect cures: the token, the protocol version */
static bool final(int code)
{
	return code == -RDAX_E_ACCESS || code == -RDAX_E_VERSION || code == -ENOMEM ||
	       code == -EINVAL;
}

/*
 * volume_gone -- @v could not be opened on the new connection for a reason
 * no other node would change (deleted, another size): it and its
 * operations fail with @code from now on
 */
static void volume_gone(struct rdax_conn *c, struct conn_op *head, struct rdax_volume *v, int code,
			const char *msg)
{
	v->gone = code;
	LOG_WARN("resume: volume \"%s\": %s", v->name, msg);
	for (struct conn_op *op = head; op; op = op->next)
		if (op->vol == v && !op->status) {
			char *m = strdup(msg);
			op->status = code;
			op->errmsg = m;
		}
	(void)c;
}

/*
 * attempt -- one connection to @url: connect, HELLO, open every volume
 * again. 0; -RDAX_E_NOT_PRIMARY (a volume's primary is elsewhere:
 * c->primary_url names it, "" if unknown); or the failure (@why says it).
 */
static int attempt(struct rdax_conn *c, const struct conn_url *url, struct conn_op *head, char *why,
		   size_t whylen)
{
	const struct url *u = &url->u;
	bool numeric = strchr(u->host, ':') != NULL;
	char err[CONN_ERR_MAX] = "";
	conn_transport_close(c);
	tls_client_delete(&c->tls_creds);
	c->broken = 0;
	free(c->closing_msg);
	c->closing_msg = NULL;
	c->primary_url[0] = '\0';
	int ret =
	    u->scheme == URL_RDMA
		? conn_connect_rdma(c, c->opts, u->host, u->port_str, numeric, err, sizeof(err))
		: conn_connect(c, u->host, u->port_str, numeric, err, sizeof(err));
	if (!ret && u->scheme == URL_RDAXS)
		ret = conn_start_tls(c, c->opts, u->host, err, sizeof(err));
	if (ret) {
		snprintf(why, whylen, "%s", err);
		return ret;
	}
	ret = conn_hello(c, c->opts);
	if (ret) {
		snprintf(why, whylen, "%s", c->last_error);
		return ret;
	}
	snprintf(c->url_now, sizeof(c->url_now), "%s", url->text);
	for (struct rdax_volume *v = c->volumes; v; v = v->next) {
		if (v->gone)
			continue;
		ret = conn_volume_reopen(c, v);
		if (ret == -RDAX_E_NOT_PRIMARY || ret == -RDAX_E_NO_QUORUM) {
			snprintf(why, whylen, "%s", c->last_error);
			return -RDAX_E_NOT_PRIMARY;
		}
		if (ret == -ENOENT || ret == -ESTALE || ret == -RDAX_E_ACCESS) {
			volume_gone(c, head, v, ret, c->last_error);
			continue;
		}
		if (ret) {
			snprintf(why, whylen, "%s", c->last_error);
			return ret;
		}
	}
	return 0;
}

/* struct resend -- where held_stale's callback queues the resends of one volume */
struct resend {
	struct rdax_conn *c;
	struct rdax_volume *v;
	struct conn_op *head, *tail; /* the resends, in volume order */
	unsigned n;
	uint64_t bytes;
};

/* resend_one -- an internal write of a held record's copy */
static void resend_one(void *arg, const struct held_rec *rec)
{
	struct resend *r = arg;
	struct conn_op *op = conn_op_new(OP_WRITE);
	if (!op)
		return; /* the record stays stale: the fsync over it asks again */
	op->internal = true;
	op->vol = r->v;
	op->offset = rec->off;
	op->length = rec->len;
	op->wbuf = rec->data;
	op->hbuf = held_buf_get(rec->buf);
	op->seq = rec->seq;
	op->prev = r->tail;
	if (r->tail)
		r->tail->next = op;
	else
		r->head = op;
	r->tail = op;
	r->n++;
	r->bytes += rec->len;
}

/*
 * queue_resends -- every held write whose verifier is not the server's now
 * goes again, ahead of the operations (they were acknowledged before them)
 */
static void queue_resends(struct rdax_conn *c)
{
	for (struct rdax_volume *v = c->volumes; v; v = v->next) {
		if (v->gone)
			continue;
		struct resend r = {.c = c, .v = v};
		held_stale(&v->held, v->verifier, resend_one, &r);
		if (!r.head)
			continue;
		LOG_DEBUG("resume: volume \"%s\": %u acknowledged writes (%" PRIu64
			  " bytes) sent again: the server's verifier is %016" PRIx64 " now",
			  v->name, r.n, r.bytes, v->verifier);
		r.tail->next = c->ops_head;
		if (c->ops_head)
			c->ops_head->prev = r.tail;
		else
			c->ops_tail = r.tail;
		c->ops_head = r.head;
	}
}

/* candidate -- the address of the @i'th try of a round: the list, from the one in use */
static const struct conn_url *candidate(const struct rdax_conn *c, unsigned i)
{
	return &c->urls[(c->cur + i) % c->nurls];
}

/*
 * resume_round -- one try of the followed primary (and the primaries it names, up to
 * RESUME_MAX_HOPS) and of every address of the list; 0 once one worked
 */
static int resume_round(struct rdax_conn *c, struct conn_op *head, int64_t deadline, char *why,
			size_t whylen)
{
	int ret = -ECONNREFUSED;
	unsigned hops = 0;
	for (unsigned i = 0; i < c->nurls || c->follow_url[0];) {
		if (now_ms() >= deadline)
			return ret;
		struct conn_url follow;
		const struct conn_url *url;
		bool followed = false;
		if (c->follow_url[0] && hops < RESUME_MAX_HOPS) {
			char err[CONN_ERR_MAX];
			if (url_parse(c->follow_url, &follow.u, err, sizeof(err)) ||
			    (follow.u.scheme != URL_TCP && follow.u.scheme != URL_RDAXS &&
			     follow.u.scheme != URL_RDMA)) {
				LOG_WARN("resume: not following \"%s\": %s", c->follow_url, err);
				c->follow_url[0] = '\0';
				continue;
			}
			snprintf(follow.text, sizeof(follow.text), "%s", c->follow_url);
			c->follow_url[0] = '\0';
			url = &follow;
			followed = true;
			hops++;
		} else {
			c->follow_url[0] = '\0';
			if (i >= c->nurls)
				break;
			url = candidate(c, i++);
		}
		int64_t left = deadline - now_ms();
		int user = c->opts ? c->opts->timeout_ms : 0;
		int limit = left < RESUME_ATTEMPT_MAX_MS ? (int)(left > 1 ? left : 1)
							 : RESUME_ATTEMPT_MAX_MS;
		c->timeout_ms = user > 0 && user < limit ? user : limit;
		ret = attempt(c, url, head, why, whylen);
		c->timeout_ms = user;
		LOG_DEBUG("resume: %s: %s", url->text, ret ? why : "connected");
		if (ret == 0) {
			if (!followed)
				c->cur = (unsigned)(url - c->urls);
			return 0;
		}
		if (final(ret))
			return ret;
		if (ret == -RDAX_E_NOT_PRIMARY && c->primary_url[0] &&
		    strcmp(c->primary_url, url->text) != 0)
			snprintf(c->follow_url, sizeof(c->follow_url), "%s", c->primary_url);
	}
	return ret;
}

/*
 * resume -- conn_resume, sleeping between rounds (@wait), or one round that
 * gives the connection back still lost (-EINPROGRESS, *@retry_ms the
 * backoff to wait before the next) so that its owner waits without sleeping
 */
static int resume(struct rdax_conn *c, bool wait, int *retry_ms)
{
	char lost[CONN_ERR_MAX], why[CONN_ERR_MAX];
	snprintf(lost, sizeof(lost), "%s", c->lost_msg);
	snprintf(why, sizeof(why), "%s", c->resume_why[0] ? c->resume_why : "no address tried");
	int64_t deadline = c->lost_at + c->resume_ms;
	int64_t delay = c->resume_delay ? c->resume_delay : RESUME_BACKOFF_MIN_MS;
	int lost_code = c->lost;

	/* the operations wait aside while HELLO and the opens run on the new stream */
	struct conn_op *head = c->ops_head, *tail = c->ops_tail;
	c->ops_head = c->ops_tail = c->issue_cursor = NULL;
	c->lost = 0;
	c->resuming = true;
	int ret;
	for (;;) {
		ret = resume_round(c, head, deadline, why, sizeof(why));
		if (ret == 0 || final(ret))
			break;
		int64_t left = deadline - now_ms();
		if (left <= 0)
			break;
		int64_t pause = jitter(delay);
		pause = pause < left ? pause : left;
		delay = delay * 2 < RESUME_BACKOFF_MAX_MS ? delay * 2 : RESUME_BACKOFF_MAX_MS;
		if (!wait) {
			/* still lost, no stream: the owner calls again after the pause */
			conn_transport_close(c);
			tls_client_delete(&c->tls_creds);
			c->broken = 0;
			c->resuming = false;
			c->ops_head = head;
			c->ops_tail = tail;
			c->issue_cursor = head;
			c->lost = lost_code;
			c->resume_delay = delay;
			snprintf(c->resume_why, sizeof(c->resume_why), "%s", why);
			*retry_ms = (int)pause;
			return -EINPROGRESS;
		}
		sleep_ms(pause);
	}
	c->resuming = false;
	c->resume_delay = 0;
	c->resume_why[0] = '\0';
	/* the attempts' own operations (HELLO, opens) are finished: only ours come back */
	c->ops_head = head;
	c->ops_tail = tail;
	if (ret == 0) {
		c->lost_at = 0;
		c->resumes++;
		LOG_DEBUG("resumed on %s (%s) after: %s", c->url_now, c->peer, lost);
		queue_resends(c);
		c->issue_cursor = c->ops_head;
		/* operations of volumes that are gone end now, with their error */
		for (struct conn_op *op = c->ops_head, *next; op; op = next) {
			next = op->next;
			if (op->status && op->parts_left == 0) {
				op->all_issued = true;
				conn_op_end(c, op);
			}
		}
		return 0;
	}
	char msg[CONN_ERR_MAX];
	int code = final(ret) ? ret : -ETIMEDOUT;
	if (final(ret))
		snprintf(msg, sizeof(msg), "lost the connection (%.200s) and %.200s", lost, why);
	else
		snprintf(msg, sizeof(msg),
			 "lost the connection (%.200s) and could not resume it within %d ms "
			 "(last try: %.200s)",
			 lost, c->resume_ms, why);
	c->broken = 0;
	c->lost_at = 0;
	return conn_give_up(c, code, msg);
}

int conn_resume(struct rdax_conn *c)
{
	return resume(c, true, NULL);
}

int conn_resume_round(struct rdax_conn *c, int *retry_ms)
{
	return resume(c, false, retry_ms);
}
