/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * crash_cmd.h -- the `rdax crash-states` command
 *
 *   rdax crash-states LOG VOLUME --out DIR [--max N] [--seed S]
 *                     [--granularity line|write] [--base FILE] [--check CMD]
 *                     [--load] [--force]
 *
 * Reads the write log LOG of volume VOLUME (write_log.h), builds its crash
 * states (crash_states.h) and writes each to DIR as a raw image of the
 * volume's size (sparse: only what the log touched, or the base, is
 * written) with a JSON manifest:
 *
 *   DIR/state-000000.img   DIR/state-000000.json   ...   DIR/summary.json
 *
 * --check CMD runs `/bin/sh -c CMD sh IMAGE` for each state as soon as it
 * is written (so the image is "$1" in CMD), with the environment
 * RDAX_STATE_IMAGE, RDAX_STATE_MANIFEST, RDAX_STATE_INDEX and, with --load,
 * RDAX_STATE_VOLUME (and RDAX_SERVER / RDAX_TOKEN_FILE of this command); exit
 * status 0 passes. The first state that fails stops the run: its manifest
 * is printed on standard output and the command exits 1.
 * --load also creates each state as a new volume "VOLUME.crash-NNNNNN" on the
 * server (written, fsynced); with --check a passing state's volume is
 * deleted again and the failing one kept.
 *
 * Nothing is touched before the log, the volume and the options have all
 * been checked; DIR must be empty or new unless --force, which replaces the
 * state-* and summary.json files in it and leaves any others.
 *
 * docs/persistence-testing.md describes the model, the files and the use.
 */
#ifndef RDAX_CRASH_CMD_H
#define RDAX_CRASH_CMD_H

struct rdax_conn;

/* For `rdax help crash-states`: the arguments, and what the command does. */
#define CRASH_CMD_USAGE                                                                            \
	"LOG VOLUME --out DIR [--max N] [--seed S] [--granularity line|write]\n"                   \
	"                    [--base FILE] [--check CMD] [--load] [--force]"
extern const char crash_cmd_help[];

/* What the command takes from the rdax command's global options. */
struct crash_cmd_env {
	const char *server;	/* passed to a --check command as RDAX_SERVER */
	const char *token_file; /* likewise RDAX_TOKEN_FILE; may be NULL */
	/*
	 * connect -- a connection to the server, made on first use (--load);
	 * returns 0 with *connp set, or the command's exit status after
	 * reporting why. The caller of crash_cmd_run closes it afterwards.
	 */
	int (*connect)(void *arg, struct rdax_conn **connp);
	void *arg;
};

/*
 * crash_cmd_run -- the command; @argv[0] is "crash-states" (the name
 * getopt skips), options anywhere among the arguments; --help prints the
 * usage and crash_cmd_help.
 * Returns the exit status: 0 (every state written, and passed the check
 * if any), 1 (a failure, or a state failed the check), 2 (usage).
 */
int crash_cmd_run(int argc, char **argv, const struct crash_cmd_env *env);

#endif
