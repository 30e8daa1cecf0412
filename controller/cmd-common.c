// SPDX-License-Identifier: Apache-2.0
/* What every verb shares: the global options (--cell, --pki, -o), the
 * error-to-exit-code rule (1: the cell or a file said no, with the reason;
 * 2: usage), and opening the cell. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-internal.h"
#include "util.h"

int ctl_global_opt(struct ctl_global *g, int c, const char *arg)
{
	switch (c) {
	case G_CELL:
		g->cell = arg;
		g->cells =
		    xrealloc(g->cells, (g->n_cells + 1) * sizeof(char *));
		g->cells[g->n_cells++] = arg;
		return 1;
	case G_PKI:
		g->pki = arg;
		return 1;
	case G_OUTPUT:
	case 'o':
		g->output = arg;
		return 1;
	case G_HELP:
	case 'h':
		return -1;
	}
	return 0;
}

int ctl_fail(const char *verb, const struct cerr *e)
{
	fprintf(stderr, "cellctl %s: %s\n", verb, e->msg);
	return e->code == EINVAL && strstr(e->msg, "usage") ? EXIT_USAGE
							    : EXIT_REMOTE;
}

int ctl_usage(const char *usage)
{
	fprintf(stderr, "%s", usage);
	return EXIT_USAGE;
}

int ctl_open_cell(const struct ctl_global *g, const char *addr,
		  struct ctl_cell *c, struct cerr *e)
{
	const char *pki = g->pki ? g->pki : getenv("CELLCTL_PKI");
	const char *a = addr	  ? addr
			: g->cell ? g->cell
				  : getenv("CELLCTL_CELL");

	if (!a || !*a)
		return cerr_set(e, EINVAL,
				"usage: no cell (--cell ADDR or "
				"CELLCTL_CELL)");
	if (!pki || !*pki)
		return cerr_set(e, EINVAL,
				"usage: no PKI directory (--pki DIR "
				"or CELLCTL_PKI)");
	return cell_init(c, a, pki, e);
}

int ctl_getopt(int argc, char **argv, const char *sopts,
	       const struct option *lo, struct ctl_global *g)
{
	for (;;) {
		int c = getopt_long(argc, argv, sopts, lo, NULL);
		int r;

		if (c == -1 || c == '?')
			return c;
		r = ctl_global_opt(g, c, optarg);
		if (r < 0)
			return G_HELP;
		if (r == 0)
			return c;
	}
}
