/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * test_cluster_gate.c -- which RDMA windows over a cluster volume's copy the gate revokes, and when
 *
 * A gate entry is built by hand around a change record on a sim-mode file
 * (no store, no cluster thread): windows are added as the RDMA transport
 * adds them (daemon/net/rdma_conn.c), with a revoke callback that counts,
 * and the gate is driven as the cluster thread and the replica opens drive
 * it (serve, deposed, raise). The rules (cluster_gate.h, struct gate_window):
 *
 *   - a replica link's window goes when a newer epoch than its link's is
 *     seen, never because the node stops serving;
 *   - a client's window carries the epoch the node served at when it was
 *     bound, and goes when the node stops serving at that epoch (deposed:
 *     serve 0; a takeover at a newer epoch) or a newer epoch is seen;
 *   - a client's window cannot be added where the node does not serve;
 *   - the controls: client-window-keep leaves the clients' windows (and only
 *     theirs), replica-no-fence leaves every window.
 *
 * Also: a refusal names the primary's rdma:// address to a client over
 * RDMA, the tcp:// one otherwise or when the primary advertises no rdma://.
 *
 * Deleting (cluster_gate.h, "Deleting"): a retired entry refuses every
 * check, open and window and revokes every window it had; entries of deleted
 * copies are reused -- for the same name (the same entry), and for other
 * names once CLUSTER_GATE_MAX are taken -- so more create/delete cycles than
 * CLUSTER_GATE_MAX never run out, and a retired copy not yet deleted keeps
 * its name from a new open (-EBUSY). The replication registry's slots are
 * reused the same way (repl_registry.h).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "change_record.h"
#include "cluster_gate.h"
#include "errors.h"
#include "faults.h"
#include "persist.h"
#include "repl_registry.h"
#include "store.h"
#include "tmpdir.h"

#define VOL_SIZE (8ULL << 20)

static char path[64];
static struct persist pm;
static struct gate_vol g;

/* A window whose revocation is counted. */
struct counted {
	struct gate_window gw;
	unsigned revokes;
};

static void count_revoke(struct gate_window *w)
{
	((struct counted *)w)->revokes++;
}

static struct counted link_window(uint64_t epoch)
{
	return (struct counted){.gw = {.epoch = epoch, .revoke = count_revoke}};
}

static struct counted client_window(void)
{
	return (struct counted){.gw = {.client = true, .revoke = count_revoke}};
}

/* setup -- a gate entry at epoch 1, not serving, with its record on a sim-mode file */
static int setup(void **state)
{
	(void)state;
	snprintf(path, sizeof(path), "/tmp/rdax-test-gate-%d", (int)getpid());
	if (persist_create(path, change_record_size(VOL_SIZE), PERSIST_SIM, &pm))
		return -1;
	memset(&g, 0, sizeof(g));
	snprintf(g.name, sizeof(g.name), "gv");
	pthread_mutex_init(&g.lock, NULL);
	if (change_record_format(&g.rec, pm.base, pm.size, &pm, VOL_SIZE, 1))
		return -1;
	atomic_store(&g.epoch, 1);
	memset(&rdax_faults, 0, sizeof(rdax_faults));
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	pthread_mutex_destroy(&g.lock);
	persist_unmap(&pm);
	unlink(path);
	memset(&rdax_faults, 0, sizeof(rdax_faults));
	return 0;
}

/* a deposed primary's client windows go at once; a link's stays (its epoch is still current) */
static void windows__deposed_revokes_clients_not_links(void **state)
{
	(void)state;
	assert_int_equal(cluster_gate_serve(&g, 1), 0);
	struct counted c = client_window(), l = link_window(1);
	assert_int_equal(cluster_gate_window_add(&g, &c.gw), 0);
	assert_int_equal(c.gw.epoch, 1); /* the epoch it is served at */
	assert_int_equal(cluster_gate_window_add(&g, &l.gw), 0);
	assert_int_equal(cluster_gate_serve(&g, 0), 0);
	assert_int_equal(c.revokes, 1);
	assert_int_equal(l.revokes, 0);
	/* the connection's end finds the client's revoked, the link's still its own */
	assert_true(cluster_gate_window_remove(&g, &c.gw));
	assert_false(cluster_gate_window_remove(&g, &l.gw));
}

/* a newer epoch seen (the new primary's link) revokes both kinds of an older epoch */
static void windows__raise_revokes_older_clients_and_links(void **state)
{
	(void)state;
	assert_int_equal(cluster_gate_serve(&g, 1), 0);
	struct counted c = client_window(), l = link_window(1);
	assert_int_equal(cluster_gate_window_add(&g, &c.gw), 0);
	assert_int_equal(cluster_gate_window_add(&g, &l.gw), 0);
	assert_int_equal(cluster_gate_raise_epoch(&g, 2), 0);
	assert_int_equal(c.revokes, 1);
	assert_int_equal(l.revokes, 1);
	/* at most once: a later deposition does not revoke them again */
	assert_int_equal(cluster_gate_serve(&g, 0), 0);
	assert_int_equal(c.revokes, 1);
	assert_int_equal(l.revokes, 1);
	assert_true(cluster_gate_window_remove(&g, &c.gw));
	assert_true(cluster_gate_window_remove(&g, &l.gw));
}

/* serving again at a newer epoch (a takeover): the windows of the old one go */
static void windows__takeover_at_newer_epoch_revokes_old_clients(void **state)
{
	(void)state;
	assert_int_equal(cluster_gate_serve(&g, 1), 0);
	struct counted old = client_window();
	assert_int_equal(cluster_gate_window_add(&g, &old.gw), 0);
	assert_int_equal(cluster_gate_serve(&g, 3), 0);
	assert_int_equal(old.revokes, 1);
	struct counted now = client_window();
	assert_int_equal(cluster_gate_window_add(&g, &now.gw), 0);
	assert_int_equal(now.gw.epoch, 3);
	/* serving at the same epoch again changes nothing */
	assert_int_equal(cluster_gate_serve(&g, 3), 0);
	assert_int_equal(now.revokes, 0);
	assert_false(cluster_gate_window_remove(&g, &now.gw));
	assert_true(cluster_gate_window_remove(&g, &old.gw));
}

/* where the node does not serve, a client's window is refused (the open's check raced) */
static void windows__client_refused_where_not_serving(void **state)
{
	(void)state;
	struct counted c = client_window();
	assert_int_equal(cluster_gate_window_add(&g, &c.gw), -RDAX_E_NOT_PRIMARY);
	assert_int_equal(cluster_gate_serve(&g, 1), 0);
	assert_int_equal(cluster_gate_serve(&g, 0), 0);
	assert_int_equal(cluster_gate_window_add(&g, &c.gw), -RDAX_E_NOT_PRIMARY);
	assert_int_equal(c.revokes, 0); /* never added: the caller revokes it itself */
	/* a link's window of the current epoch is fine on a replica */
	struct counted l = link_window(1);
	assert_int_equal(cluster_gate_window_add(&g, &l.gw), 0);
	assert_false(cluster_gate_window_remove(&g, &l.gw));
}

/* the control client-window-keep: a deposed primary keeps its clients' windows, not links' */
static void windows__control_client_window_keep(void **state)
{
	(void)state;
	rdax_faults.client_window_keep = true;
	assert_int_equal(cluster_gate_serve(&g, 1), 0);
	struct counted c = client_window(), l = link_window(1);
	assert_int_equal(cluster_gate_window_add(&g, &c.gw), 0);
	assert_int_equal(cluster_gate_window_add(&g, &l.gw), 0);
	assert_int_equal(cluster_gate_serve(&g, 0), 0);
	assert_int_equal(cluster_gate_raise_epoch(&g, 2), 0);
	assert_int_equal(c.revokes, 0); /* the hole the control opens */
	assert_int_equal(l.revokes, 1); /* the links' fence is not its business */
	assert_false(cluster_gate_window_remove(&g, &c.gw));
	assert_true(cluster_gate_window_remove(&g, &l.gw));
}

/* a refusal names the primary's address for the client's transport */
static void refusal__names_the_address_of_the_clients_transport(void **state)
{
	(void)state;
	char url[CLUSTER_URL_MAX + 1];
	uint64_t epoch = 0;
	cluster_gate_set_primary(&g, "n2", "tcp://192.0.2.12:7470", "rdma://192.0.2.12:7471", 1);
	assert_int_equal(cluster_gate_client_over(&g, true, url, sizeof(url), &epoch),
			 -RDAX_E_NOT_PRIMARY);
	assert_string_equal(url, "rdma://192.0.2.12:7471");
	assert_int_equal(epoch, 1);
	assert_int_equal(cluster_gate_client_over(&g, false, url, sizeof(url), &epoch),
			 -RDAX_E_NOT_PRIMARY);
	assert_string_equal(url, "tcp://192.0.2.12:7470");
	assert_int_equal(cluster_gate_client(&g, url, sizeof(url), &epoch), -RDAX_E_NOT_PRIMARY);
	assert_string_equal(url, "tcp://192.0.2.12:7470");
	/* a primary without an rdma:// address: its tcp:// one, whatever the transport */
	cluster_gate_set_primary(&g, "n3", "tcp://192.0.2.13:7470", NULL, 2);
	assert_int_equal(cluster_gate_client_over(&g, true, url, sizeof(url), &epoch),
			 -RDAX_E_NOT_PRIMARY);
	assert_string_equal(url, "tcp://192.0.2.13:7470");
	/* where this node serves, nothing is refused */
	assert_int_equal(cluster_gate_serve(&g, 1), 0);
	assert_int_equal(cluster_gate_client_over(&g, true, url, sizeof(url), &epoch), 0);
}

/* a retired entry refuses every handle, open and window, and every window it had is revoked */
static void retire__refuses_everything_and_revokes_every_window(void **state)
{
	(void)state;
	assert_int_equal(cluster_gate_serve(&g, 1), 0);
	struct counted link = link_window(1), client = client_window();
	assert_int_equal(cluster_gate_window_add(&g, &link.gw), 0);
	assert_int_equal(cluster_gate_window_add(&g, &client.gw), 0);
	assert_int_equal(cluster_gate_check(&g, 0), 0);
	cluster_gate_retire(&g);
	assert_true(cluster_gate_retired(&g));
	assert_int_equal(link.revokes, 1);
	assert_int_equal(client.revokes, 1);
	assert_null(g.windows);
	assert_int_equal(cluster_gate_check(&g, 0), -ENOENT);
	assert_int_equal(cluster_gate_check(&g, 1), -ENOENT);
	char url[128] = "x", msg[256];
	uint64_t epoch, seen;
	assert_int_equal(cluster_gate_client(&g, url, sizeof(url), &epoch), -ENOENT);
	assert_string_equal(url, "");
	assert_int_equal(cluster_gate_replica_open(&g, 2, "n2", msg, sizeof(msg), &seen), -ENOENT);
	assert_non_null(strstr(msg, "being deleted"));
	struct counted late = client_window();
	assert_int_not_equal(cluster_gate_window_add(&g, &late.gw), 0);
	/* retiring again changes nothing (the cluster thread looks again every tick) */
	cluster_gate_retire(&g);
	assert_int_equal(link.revokes, 1);
}

/* delete_copy -- what the cluster thread does for a deleted volume's local part */
static void delete_copy(struct store *st, struct gate_vol *e, const char *name)
{
	char rname[NS_VOLUME_NAME_MAX + 1];
	cluster_gate_retire(e);
	cluster_gate_release(st, e);
	assert_null(e->v);
	assert_int_equal(store_volume_delete(st, name), 0);
	assert_int_equal(cluster_record_name(name, rname, sizeof(rname)), 0);
	assert_int_equal(store_volume_delete(st, rname), 0);
	cluster_gate_bury(e);
}

/* more create/delete cycles than CLUSTER_GATE_MAX, same name and new names, never run out */
static void cycles__entries_reused_past_the_max(void **state)
{
	(void)state;
	char dir[256], nspath[300], err[256];
	struct store *st;
	tmpdir_make(dir, sizeof(dir), "test-gate-cycles");
	tmpdir_file(nspath, sizeof(nspath), dir, "ns0");
	assert_int_equal(store_new(&st), 0);
	assert_int_equal(
	    store_namespace_add(st, nspath, 64ULL << 20, PERSIST_SIM, err, sizeof(err)), 0);
	struct gate_vol *e, *first = NULL;
	/* the same name: the same entry each time */
	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(
		    store_volume_create(st, "same", 1 << 20, NULL, NULL, err, sizeof(err)), 0);
		assert_int_equal(cluster_gate_open(st, "same", 1, err, sizeof(err), &e), 0);
		assert_false(cluster_gate_retired(e));
		if (!first)
			first = e;
		assert_ptr_equal(e, first);
		assert_ptr_equal(cluster_gate_find("same"), e);
		if (i == 0) {
			/* retired, its copy not deleted yet: the name is not given out again */
			cluster_gate_retire(e);
			struct gate_vol *again;
			assert_int_equal(cluster_gate_open(st, "same", 1, err, sizeof(err), &again),
					 -EBUSY);
			cluster_gate_release(st, e);
			assert_int_equal(store_volume_delete(st, "same"), 0);
			assert_int_equal(store_volume_delete(st, "same.rrec"), 0);
			cluster_gate_bury(e);
			continue;
		}
		delete_copy(st, e, "same");
	}
	/* new names, far more than the entries there are: each is created, served, deleted */
	for (unsigned i = 0; i < 3 * CLUSTER_GATE_MAX; i++) {
		char name[32];
		snprintf(name, sizeof(name), "c%u", i);
		assert_int_equal(
		    store_volume_create(st, name, 1 << 20, NULL, NULL, err, sizeof(err)), 0);
		int ret = cluster_gate_open(st, name, 1, err, sizeof(err), &e);
		if (ret)
			fail_msg("cycle %u: cluster_gate_open: %s (%s)", i, rdax_strerror(ret),
				 err);
		assert_ptr_equal(cluster_gate_find(name), e);
		assert_int_equal(cluster_gate_check(e, 0), -RDAX_E_NOT_PRIMARY); /* live again */
		delete_copy(st, e, name);
		assert_null(cluster_gate_find(name));
		/* a dead entry is found by no name; renamed, by its new one only */
		if (i > 0) {
			char prev[32];
			snprintf(prev, sizeof(prev), "c%u", i - 1);
			struct gate_vol *old = cluster_gate_find(prev);
			assert_null(old);
		}
	}
	cluster_gate_close_all(st);
	store_delete(&st);
	tmpdir_remove(dir);
}

/* the registry's slots of deleted volumes are used again; removed ones are found by nobody */
static void registry__slots_reused_after_remove(void **state)
{
	(void)state;
	static struct volume vols[2];
	int rvs[2];
	snprintf(vols[0].name, sizeof(vols[0].name), "a");
	snprintf(vols[1].name, sizeof(vols[1].name), "b");
	for (unsigned i = 0; i < 3 * REPL_REGISTRY_MAX; i++) {
		struct volume *v = &vols[i % 2];
		struct repl_volume *rv = (struct repl_volume *)&rvs[i % 2];
		assert_int_equal(repl_registry_put(v, rv), 0);
		assert_ptr_equal(repl_registry_get(v), rv);
		repl_registry_remove(v);
		assert_null(repl_registry_get(v));
	}
	repl_registry_clear(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(windows__deposed_revokes_clients_not_links, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(windows__raise_revokes_older_clients_and_links, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(windows__takeover_at_newer_epoch_revokes_old_clients,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(windows__client_refused_where_not_serving, setup,
					    teardown),
	    cmocka_unit_test_setup_teardown(windows__control_client_window_keep, setup, teardown),
	    cmocka_unit_test_setup_teardown(refusal__names_the_address_of_the_clients_transport,
					    setup, teardown),
	    cmocka_unit_test_setup_teardown(retire__refuses_everything_and_revokes_every_window,
					    setup, teardown),
	    cmocka_unit_test(cycles__entries_reused_past_the_max),
	    cmocka_unit_test(registry__slots_reused_after_remove),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
