// SPDX-License-Identifier: Apache-2.0
/* cellctl metrics: the agent's Prometheus text (GET /rest/v1/metrics), as
 * is. */
#include <getopt.h>
#include <stdio.h>

#include "ctl-internal.h"

#define METRICS_MAX (16u << 20)

static const struct option only_globals[] = {GLOBAL_OPTS, {NULL, 0, NULL, 0}};

int cmd_metrics(int argc, char **argv, struct ctl_global *g)
{
	static const char usage[] = "usage: cellctl metrics --cell ADDR\n"
				    "  the agent's metrics (Prometheus text)\n";
	struct ctl_cell cell;
	struct cerr e = {0};
	struct buf b;
	int c, r;

	optind = 1;
	while ((c = ctl_getopt(argc, argv, "+ho:", only_globals, g)) != -1) {
		if (c == G_HELP) {
			fputs(usage, stdout);
			return 0;
		}
		return ctl_usage(usage);
	}
	if (ctl_open_cell(g, NULL, &cell, &e) < 0)
		return ctl_fail("metrics", &e);
	buf_init(&b, METRICS_MAX);
	r = cell_get_ok(&cell, "metrics", 0, &b, &e);
	cell_free(&cell);
	if (r == 0 && b.len)
		fwrite(b.data, 1, b.len, stdout);
	buf_free(&b);
	return r < 0 ? ctl_fail("metrics", &e) : 0;
}
