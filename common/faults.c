/* SPDX-License-Identifier: BSD-3-Clause */
/* faults.c -- test-control switches, settable from RDAX_FAULTS */
#include "faults.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

struct rdax_faults rdax_faults;

static const struct {
	const char *name;
	bool *flag;
} fault_names[] = {
    {"skip-writeback", &rdax_faults.skip_writeback},
    {"no-fsync-serialise", &rdax_faults.no_fsync_serialise},
    {"clear-after-writeback", &rdax_faults.clear_after_writeback},
    {"no-towrite-inherit", &rdax_faults.no_towrite_inherit},
    {"sim-no-flush-lock", &rdax_faults.sim_no_flush_lock},
    {"linger-off", &rdax_faults.linger_off},
    {"drain-cuts-payload", &rdax_faults.drain_cuts_payload},
    {"meta-no-lanes", &rdax_faults.meta_no_lanes},
    {"etcd-txn-no-compare", &rdax_faults.etcd_txn_no_compare},
    {"meta-one-copy", &rdax_faults.meta_one_copy},
    {"meta-copies-together", &rdax_faults.meta_copies_together},
    {"lines-first-only", &rdax_faults.lines_first_only},
    {"crash-states-no-fsync", &rdax_faults.crash_states_no_fsync},
    {"change-record-no-persist", &rdax_faults.change_record_no_persist},
    {"repl-ack-early", &rdax_faults.repl_ack_early},
    {"no-reserve", &rdax_faults.no_reserve},
    {"zero-punches", &rdax_faults.zero_punches},
    {"no-media-guard", &rdax_faults.no_media_guard},
    {"format-no-lock", &rdax_faults.format_no_lock},
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
