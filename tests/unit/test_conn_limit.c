/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_conn_limit.c -- connection slots: the total, the count per address,
 * the refusing slots, and the address table against a model under random
 * takes and gives (backward-shift deletion must keep every count findable)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include <cmocka.h>

#include "conn_limit.h"

/* v4 -- 10.0.x.y as a sockaddr (any address works: nothing is sent) */
static struct sockaddr_in v4(unsigned n)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(1000 + n % 50000)};
	a.sin_addr.s_addr = htonl(0x0a000000U | n);
	return a;
}

static void conn_limit_take__per_peer_and_total(void **state)
{
	struct conn_limit *cl;
	assert_int_equal(conn_limit_new(5, 2, &cl), 0);
	struct conn_slot s[8];
	char why[200];
	struct sockaddr_in a = v4(1), b = v4(2), c = v4(3);
	assert_int_equal(conn_limit_take(cl, (struct sockaddr *)&a, &s[0], why, sizeof(why)), 0);
	assert_int_equal(conn_limit_take(cl, (struct sockaddr *)&a, &s[1], why, sizeof(why)), 0);
	/* a third from a: refused, with a refusing slot and the reason */
	assert_int_equal(conn_limit_take(cl, (struct sockaddr *)&a, &s[2], why, sizeof(why)),
			 -EUSERS);
	assert_true(s[2].refusing);
	assert_non_null(strstr(why, "per address"));
	conn_limit_give(&s[2]);
	assert_int_equal(conn_limit_take(cl, (struct sockaddr *)&b, &s[3], why, sizeof(why)), 0);
	assert_int_equal(conn_limit_take(cl, (struct sockaddr *)&b, &s[4], why, sizeof(why)), 0);
	assert_int_equal(conn_limit_take(cl, (struct sockaddr *)&c, &s[5], why, sizeof(why)), 0);
	assert_int_equal(conn_limit_count(cl), 5);
	/* the total is reached: even a new address is refused */
	assert_int_equal(conn_limit_take(cl, (struct sockaddr *)&c, &s[6], why, sizeof(why)),
			 -EUSERS);
	assert_non_null(strstr(why, "--max-connections"));
	conn_limit_give(&s[6]);
	/* a unix socket (no address) counts in the total only */
	struct sockaddr_un u = {.sun_family = AF_UNIX};
	conn_limit_give(&s[0]);
	assert_int_equal(conn_limit_take(cl, (struct sockaddr *)&u, &s[0], why, sizeof(why)), 0);
	assert_int_equal(s[0].key_len, 0);
	/* an IPv4-mapped IPv6 address counts as its IPv4 one: a holds s[1], one more fits */
	struct sockaddr_in6 m = {.sin6_family = AF_INET6};
	m.sin6_addr.s6_addr[10] = m.sin6_addr.s6_addr[11] = 0xff;
	memcpy(&m.sin6_addr.s6_addr[12], &a.sin_addr, 4);
	conn_limit_give(&s[5]); /* total 4: unix, a, b, b */
	assert_int_equal(conn_limit_take(cl, (struct sockaddr *)&m, &s[5], why, sizeof(why)), 0);
	conn_limit_give(&s[3]); /* room in the total, but not for a */
	assert_int_equal(conn_limit_take(cl, (struct sockaddr *)&m, &s[6], why, sizeof(why)),
			 -EUSERS);
	assert_non_null(strstr(why, "per address"));
	conn_limit_give(&s[6]);
	for (unsigned i = 0; i < 6; i++)
		conn_limit_give(&s[i]); /* s[2], s[3] hold nothing: fine */
	assert_int_equal(conn_limit_count(cl), 0);
	conn_limit_delete(&cl);
	assert_null(cl);
}

static void conn_limit_take__refusing_slots_run_out(void **state)
{
	struct conn_limit *cl;
	assert_int_equal(conn_limit_new(1, 1, &cl), 0);
	struct conn_slot held, r[CONN_LIMIT_REFUSING + 1];
	char why[200];
	struct sockaddr_in a = v4(7);
	assert_int_equal(conn_limit_take(cl, (struct sockaddr *)&a, &held, why, sizeof(why)), 0);
	for (unsigned i = 0; i < CONN_LIMIT_REFUSING; i++) {
		assert_int_equal(
		    conn_limit_take(cl, (struct sockaddr *)&a, &r[i], why, sizeof(why)), -EUSERS);
		assert_non_null(r[i].cl);
	}
	/* none left: refused without a slot (closed at once) */
	assert_int_equal(
	    conn_limit_take(cl, (struct sockaddr *)&a, &r[CONN_LIMIT_REFUSING], why, sizeof(why)),
	    -EUSERS);
	assert_null(r[CONN_LIMIT_REFUSING].cl);
	conn_limit_give(&r[0]);
	assert_int_equal(conn_limit_take(cl, (struct sockaddr *)&a, &r[0], why, sizeof(why)),
			 -EUSERS);
	assert_non_null(r[0].cl);
	for (unsigned i = 0; i < CONN_LIMIT_REFUSING; i++)
		conn_limit_give(&r[i]);
	conn_limit_give(&held);
	assert_int_equal(conn_limit_count(cl), 0);
	conn_limit_delete(&cl);
}

/*
 * Random takes and gives over 300 addresses, at most 150 held at once in a
 * table of 512 (runs of collisions): the per-address counts always match a
 * model, and the total is often full. A deletion that
 * loses an entry would let an address take more than max_per_peer, or
 * refuse one that holds less.
 */
static void conn_limit__matches_a_model(void **state)
{
	enum { ADDRS = 300, MAX_TOTAL = 150, PER = 5, OPS = 200000 };
	struct conn_limit *cl;
	assert_int_equal(conn_limit_new(MAX_TOTAL, PER, &cl), 0);
	static struct conn_slot held[ADDRS][PER];
	static unsigned count[ADDRS];
	unsigned total = 0;
	uint64_t rng = 0x9e3779b97f4a7c15ULL;
	char why[200];
	for (unsigned op = 0; op < OPS; op++) {
		rng ^= rng << 13;
		rng ^= rng >> 7;
		rng ^= rng << 17;
		unsigned a = (unsigned)(rng % ADDRS);
		bool take = (rng >> 32) % 2 == 0;
		if (take) {
			struct sockaddr_in sa = v4(a * 7919);
			struct conn_slot s;
			int ret = conn_limit_take(cl, (struct sockaddr *)&sa, &s, why, sizeof(why));
			bool want = count[a] < PER && total < MAX_TOTAL;
			if (want != (ret == 0))
				fail_msg("op %u: address %u holds %u, total %u: take gave %d", op,
					 a, count[a], total, ret);
			if (ret == 0) {
				held[a][count[a]++] = s;
				total++;
			} else {
				conn_limit_give(&s);
			}
		} else if (count[a] > 0) {
			conn_limit_give(&held[a][--count[a]]);
			total--;
		}
	}
	assert_int_equal(conn_limit_count(cl), total);
	for (unsigned a = 0; a < ADDRS; a++)
		while (count[a])
			conn_limit_give(&held[a][--count[a]]);
	assert_int_equal(conn_limit_count(cl), 0);
	for (unsigned i = 0; i <= cl->mask; i++)
		assert_int_equal(cl->table[i].key_len, 0); /* every entry went with its last slot */
	conn_limit_delete(&cl);
}

static void conn_limit_new__bad_arguments(void **state)
{
	struct conn_limit *cl = NULL;
	assert_int_equal(conn_limit_new(0, 1, &cl), -EINVAL);
	assert_int_equal(conn_limit_new(4, 0, &cl), -EINVAL);
	assert_int_equal(conn_limit_new(4, 5, &cl), -EINVAL);
	assert_null(cl);
	conn_limit_give(NULL);
	conn_limit_delete(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(conn_limit_take__per_peer_and_total),
	    cmocka_unit_test(conn_limit_take__refusing_slots_run_out),
	    cmocka_unit_test(conn_limit__matches_a_model),
	    cmocka_unit_test(conn_limit_new__bad_arguments),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
