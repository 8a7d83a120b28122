/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * etcd_fixture.h -- a real etcd (Debian's etcd-server) for a test
 *
 * ef_start() runs one or more etcd members as children of the test, each
 * with its data directory under the test's scratch directory and its own
 * client and peer ports on @host (default 127.0.0.1, free ports picked at
 * start), and waits, bounded, until every member logs that it serves
 * clients. Members can then be stopped (SIGTERM), killed, paused
 * (SIGSTOP), resumed and restarted on the same ports and data, so a test
 * can take etcd away and bring it back. ef_stop() ends them all; every
 * member also gets PR_SET_PDEATHSIG, so a test that crashes leaves none
 * behind.
 *
 * Timing: members run with a 50 ms heartbeat and a 500 ms election
 * timeout (etcd's defaults are 100/1000) so that a lost leader is
 * replaced quickly; the smallest lease TTL etcd then grants is 1 s.
 *
 * Thread safety: one thread, the main one (PR_SET_PDEATHSIG fires when the
 * forking thread exits).
 */
#ifndef RDAX_TEST_ETCD_FIXTURE_H
#define RDAX_TEST_ETCD_FIXTURE_H

#include <stdbool.h>
#include <sys/types.h>

#define EF_MAX_MEMBERS	    3
#define EF_READY_TIMEOUT_MS 30000
#define EF_STOP_TIMEOUT_MS  15000

struct ef_member {
	pid_t pid; /* 0 when not running */
	bool paused;
	int client_port, peer_port;
	char name[16];
	char data_dir[320];
	char log_path[320];
	char client_url[96]; /* http://HOST:PORT */
};

struct ef_cluster {
	unsigned n;
	char host[64];
	char dir[256];
	char spec[512]; /* etcd://HOST:P1,HOST:P2,... -- what rdaxd --cluster takes */
	char initial_cluster[512];
	struct ef_member m[EF_MAX_MEMBERS];
};

/*
 * ef_start -- @members (1..EF_MAX_MEMBERS) etcd members on @host (NULL:
 * 127.0.0.1) with data under @dir. Returns 0 when all serve clients;
 * -ETIMEDOUT, -ECHILD (one exited: its log is printed), -errno. On failure
 * whatever was started is stopped.
 */
int ef_start(struct ef_cluster *e, const char *dir, unsigned members, const char *host);

/* ef_stop -- stop every member (SIGCONT first if paused, SIGTERM, bounded wait, then SIGKILL) */
void ef_stop(struct ef_cluster *e);

/* ef_member_stop -- SIGTERM member @i and wait for it; 0, -ETIMEDOUT (then killed) */
int ef_member_stop(struct ef_cluster *e, unsigned i);

/* ef_member_kill -- SIGKILL member @i and reap it */
int ef_member_kill(struct ef_cluster *e, unsigned i);

/* ef_member_pause -- SIGSTOP: the member's sockets stay open, it answers nothing */
int ef_member_pause(struct ef_cluster *e, unsigned i);

/* ef_member_resume -- SIGCONT after ef_member_pause */
int ef_member_resume(struct ef_cluster *e, unsigned i);

/* ef_member_restart -- start a stopped member again, same ports and data; waits until it serves */
int ef_member_restart(struct ef_cluster *e, unsigned i);

/* ef_dump_logs -- the last bytes of every member's log on stderr */
void ef_dump_logs(const struct ef_cluster *e);

#endif
