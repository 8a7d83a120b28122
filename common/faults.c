/* SPDX-License-Identifier: BSD-3-Clause */
/* faults.c -- test-control switches, settable from RDAX_FAULTS */
#include "faults.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

struct rdax_faults rdax_faults;

static const struct {
	const char *name;
	bool *flag;
} fault_names[] = {
	{ "skip-writeback", &rdax_faults.skip_writeback },
	{ "no-fsync-serialise", &rdax_faults.no_fsync_serialise },
	{ "clear-after-writeback", &rdax_faults.clear_after_writeback },
	{ "no-towrite-inherit", &rdax_faults.no_towrite_inherit },
	{ "sim-no-flush-lock", &rdax_faults.sim_no_flush_lock },
	{ "linger-off", &rdax_faults.linger_off },
	{ "drain-cuts-payload", &rdax_faults.drain_cuts_payload },
	{ "meta-no-lanes", &rdax_faults.meta_no_lanes },
	{ "etcd-txn-no-compare", &rdax_faults.etcd_txn_no_compare },
	{ "meta-one-copy", &rdax_faults.meta_one_copy },
	{ "meta-copies-together", &rdax_faults.meta_copies_together },
	{ "lines-first-only", &rdax_faults.lines_first_only },
	{ "rdma-notice-pages", &rdax_faults.rdma_notice_pages },
	{ "rdma-durable-unmarked", &rdax_faults.rdma_durable_unmarked },
	{ "crash-states-no-fsync", &rdax_faults.crash_states_no_fsync },
	{ "change-record-no-persist", &rdax_faults.change_record_no_persist },
	{ "repl-ack-early", &rdax_faults.repl_ack_early },
	{ "replica-no-fence", &rdax_faults.replica_no_fence },
	{ "rlink-fused-no-flush", &rdax_faults.rlink_fused_no_flush },
	{ "resync-digest-equal", &rdax_faults.resync_digest_equal },
	{ "failover-any-replica", &rdax_faults.failover_any_replica },
	{ "lease-ignore", &rdax_faults.lease_ignore },
	{ "client-window-keep", &rdax_faults.client_window_keep },
	{ "reconcile-slow", &rdax_faults.reconcile_slow },
	{ "reconcile-inline", &rdax_faults.reconcile_inline },
	{ "no-reserve", &rdax_faults.no_reserve },
	{ "zero-punches", &rdax_faults.zero_punches },
	{ "no-media-guard", &rdax_faults.no_media_guard },
	{ "format-no-lock", &rdax_faults.format_no_lock },
	{ "drain-one-by-one", &rdax_faults.drain_one_by_one },
	{ "fake-media", &rdax_faults.fake_media },
	{ "usc-no-compare", &rdax_faults.usc_no_compare },
	{ "no-badblock-check", &rdax_faults.no_badblock_check },
	{ "unsafe-clear-no-commit", &rdax_faults.unsafe_clear_no_commit },
	{ "tls-plain-ok", &rdax_faults.tls_plain_ok },
	{ "tls-no-verify", &rdax_faults.tls_no_verify },
	{ "tls-send-strand", &rdax_faults.tls_send_strand },
	{ "tls-keep-buffers", &rdax_faults.tls_keep_buffers },
	{ "acl-ignore", &rdax_faults.acl_ignore },
	{ "rdma-auth-no-replay-check", &rdax_faults.rdma_auth_no_replay_check },
	{ "leak-per-request", &rdax_faults.leak_per_request },
	{ "client-no-verifier", &rdax_faults.client_no_verifier },
	{ "powercut-keep-mapping", &rdax_faults.powercut_keep_mapping },
	{ "nbd-forward-flush-early", &rdax_faults.nbd_forward_flush_early },
	{ "delete-keep-copy", &rdax_faults.delete_keep_copy },
};

int faults_from_env(void)
{
	const char *env = getenv("RDAX_FAULTS");
	if (!env || !*env)
		return 0;
	char *copy = strdup(env);
	if (!copy)
		return -ENOMEM;
	int ret = 0;
	char *save = NULL;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		bool found = false;
		for (size_t i = 0; i < sizeof(fault_names) / sizeof(fault_names[0]); i++) {
			if (strcmp(tok, fault_names[i].name) == 0) {
				*fault_names[i].flag = true;
				found = true;
			}
		}
		if (!found) {
			LOG_ERROR("RDAX_FAULTS: unknown fault '%s'", tok);
			ret = -EINVAL;
		} else {
			LOG_WARN("fault injection on: %s (durability is broken on purpose)", tok);
		}
	}
	free(copy);
	return ret;
}

/* The counted fault points: which one fails, and how many were reached. */
static unsigned long fault_at;	  /* RDAX_FAULT_AT; 0: none */
static unsigned long fault_count; /* points reached */
static int fault_init;		  /* 0 not read, 1 reading, 2 read */
static bool fault_report;

/* __sanitizer_print_stack_trace -- the sanitizers' stack dump, where one is linked */
void __sanitizer_print_stack_trace(void) __attribute__((weak));

/* fault_report_at_exit -- "fault points reached: M" for the sweep */
static void fault_report_at_exit(void)
{
	char line[64];
	int n = snprintf(line, sizeof(line), "fault points reached: %lu\n",
			 __atomic_load_n(&fault_count, __ATOMIC_RELAXED));
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}

/*
 * fault_env -- read RDAX_FAULT_AT and RDAX_FAULT_REPORT once. getenv,
 * strtoul and atexit allocate nothing, so this may run inside an
 * allocation's fault point; a thread racing the first reader counts its
 * point without failing it.
 */
static bool fault_env(void)
{
	int state = __atomic_load_n(&fault_init, __ATOMIC_ACQUIRE);
	if (state == 2)
		return true;
	int expect = 0;
	if (!__atomic_compare_exchange_n(&fault_init, &expect, 1, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE))
		return expect == 2;
	const char *at = getenv("RDAX_FAULT_AT");
	const char *report = getenv("RDAX_FAULT_REPORT");
	fault_at = at ? strtoul(at, NULL, 10) : 0;
	fault_report = report && *report && strcmp(report, "0") != 0;
	if (fault_report)
		atexit(fault_report_at_exit);
	__atomic_store_n(&fault_init, 2, __ATOMIC_RELEASE);
	return true;
}

bool faults_point(const char *what)
{
	bool ready = fault_env();
	unsigned long n = __atomic_add_fetch(&fault_count, 1, __ATOMIC_RELAXED);
	if (!ready || fault_at == 0 || n != fault_at)
		return false;
	char line[160];
	int len = snprintf(line, sizeof(line), "fault injected: point %lu, %s fails\n", n, what);
	if (write(STDERR_FILENO, line, (size_t)len) < 0)
		return true;
	if (__sanitizer_print_stack_trace)
		__sanitizer_print_stack_trace();
	return true;
}

unsigned long faults_points_reached(void)
{
	return __atomic_load_n(&fault_count, __ATOMIC_RELAXED);
}

void faults_leak(size_t n)
{
	/* volatile: the compiler may not drop an allocation nobody reads */
	volatile char *p = malloc(n);
	for (size_t i = 0; p && i < n; i += 64)
		p[i] = 1;
}
