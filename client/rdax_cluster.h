/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rdax_cluster.h -- the rdax commands that talk to a cluster's etcd
 *
 * With --cluster etcd://HOST:PORT[,...] (or $RDAX_CLUSTER) rdax reads and
 * writes the cluster's records itself (cluster_meta.h), as patronictl reads
 * Patroni's store: "node list", "volume create NAME SIZE --replicas N
 * [--min-replicas M]" (placement.h picks the nodes; the command waits until
 * the volume is ready), "volume info NAME [--json]". For every other command
 * naming a volume, rdax looks up the volume's primary and talks to its tcp://
 * address unless --server was given.
 *
 * Thread safety: one thread (the command's).
 */
#ifndef RDAX_CLUSTER_CLI_H
#define RDAX_CLUSTER_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct rdax_cluster_ctx {
	const char *etcd; /* etcd://...; NULL: no cluster */
	const char *name; /* the cluster's name (default "default") */
	int timeout_ms;	  /* 0: the default wait for "volume create" (10 s) */
};

/*
 * rdax_cluster_run -- run @argv (the command's words and arguments) if it is
 * a cluster command: returns true and sets *rc to the exit status (0, 1, 2).
 * Returns false for any other command.
 */
bool rdax_cluster_run(const struct rdax_cluster_ctx *ctx, int argc, char **argv, int *rc);

/*
 * rdax_cluster_primary_url -- the tcp:// URL of volume @volume's primary into
 * @buf. Returns 0, or -ENOENT (no such volume, or its primary has no key:
 * down), -EINVAL, or an etcd code; @err says why.
 */
int rdax_cluster_primary_url(const struct rdax_cluster_ctx *ctx, const char *volume, char *buf,
			     size_t len, char *err, size_t errlen);

/* rdax_cluster_usage -- the cluster lines of rdax --help */
void rdax_cluster_usage(FILE *f);

#endif
