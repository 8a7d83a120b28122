/* SPDX-License-Identifier: BSD-3-Clause */
/* cluster_fixture.c -- a test cluster: the hub network, etcd and N rdaxd nodes */
#include "cluster_fixture.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char *nx_cluster_extra_arg;
bool nx_cluster_nbd;
bool nx_cluster_metrics;

uint64_t nx_seed(int argc, char **argv)
{
	uint64_t seed = 1;
	const char *env = getenv("RDAX_CLUSTER_SEED");
	if (env && *env)
		seed = strtoull(env, NULL, 0);
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
			seed = strtoull(argv[++i], NULL, 0);
	return seed;
}

int nx_cluster_start(struct nx_cluster *cl, const char *tag, unsigned n, uint64_t seed, bool join,
		     const char *const *zones)
{
	memset(cl, 0, sizeof(*cl));
	cl->n = n;
	if (n > NX_MAX_NODES || hx_tmpdir_make(tag, cl->dir, sizeof(cl->dir)) < 0)
		return -1;
	if (nx_net_up(&cl->net, cl->dir, n) != 0)
		return -1;
	printf("cluster: seed %" PRIu64 ", %s%s%s\n", seed,
	       cl->net.isolated ? "nodes in network namespaces" : "LOOPBACK FALLBACK",
	       cl->net.why[0] ? ": " : "", cl->net.why);
	if (ef_start(&cl->etcd, cl->dir, 1, nx_host_addr(&cl->net)) != 0)
		return -1;
	for (unsigned i = 0; i < n; i++) {
		char dir[320], spec[600], name[32], zone[96], metrics[96], nbd[96];
		snprintf(dir, sizeof(dir), "%s/node%u", cl->dir, i + 1);
		snprintf(spec, sizeof(spec), "--cluster=%s", cl->etcd.spec);
		snprintf(name, sizeof(name), "--node=n%u", i + 1);
		snprintf(zone, sizeof(zone), "--zone=%s", zones ? zones[i] : "");
		snprintf(metrics, sizeof(metrics), "--metrics=http://%s:%u",
			 nx_node_addr(&cl->net, i), NX_METRICS_PORT + i);
		snprintf(nbd, sizeof(nbd), "--listen=nbd://%s:%u", nx_node_addr(&cl->net, i),
			 NX_NBD_PORT);
		const char *args[6] = {spec, name};
		unsigned k = 2;
		if (zones)
			args[k++] = zone;
		else if (nx_cluster_metrics)
			args[k++] = metrics;
		if (nx_cluster_nbd && cl->net.isolated)
			args[k++] = nbd;
		if (nx_cluster_extra_arg)
			args[k++] = nx_cluster_extra_arg;
		args[k] = NULL;
		if (mkdir(dir, 0700) < 0 ||
		    nx_node_start_args(&cl->node[i], &cl->net, i, dir, join ? args : NULL) != 0)
			return -1;
		if (join && nx_cluster_nbd && cl->net.isolated)
			snprintf(cl->node[i].nbd, sizeof(cl->node[i].nbd), "nbd://%s:%u",
				 nx_node_addr(&cl->net, i), NX_NBD_PORT);
		if (join && nx_cluster_metrics && !zones)
			snprintf(cl->node[i].metrics, sizeof(cl->node[i].metrics),
				 "http://%s:%u/metrics", nx_node_addr(&cl->net, i),
				 NX_METRICS_PORT + i);
		printf("cluster: node %u at %s%s%s\n", i + 1, cl->node[i].url,
		       zones ? ", zone " : "", zones ? zones[i] : "");
	}
	return 0;
}

int nx_cluster_restart_all(struct nx_cluster *cl, const char *faults)
{
	for (unsigned i = 0; i < cl->n; i++) {
		cl->node[i].d.opts.faults = faults;
		if (nx_node_state(&cl->node[i]) != '?' && nx_node_kill(&cl->node[i]))
			return -1;
		if (nx_node_restart(&cl->node[i]))
			return -1;
	}
	return 0;
}

int nx_node_of_url(const struct nx_cluster *cl, const char *url)
{
	for (unsigned i = 0; i < cl->n; i++)
		if (strcmp(cl->node[i].url, url) == 0)
			return (int)i;
	return -1;
}

int nx_cluster_stop(struct nx_cluster *cl)
{
	int bad = 0;
	for (unsigned i = 0; i < cl->n; i++)
		if (cl->node[i].d.pid > 0 && nx_node_stop(&cl->node[i]) != 0)
			bad = -1;
	ef_stop(&cl->etcd);
	nx_net_down(&cl->net);
	hx_tmpdir_remove(cl->dir);
	return bad;
}
