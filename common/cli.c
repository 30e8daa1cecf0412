// SPDX-License-Identifier: Apache-2.0
#include "cli.h"

#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "cleanup.h"
#include "util.h"

/* getopt_long's table for c: the id of a table option is its index plus
 * a base above every program id, so that it comes back to cli_next. */
#define TABLE_ID 0x10000

static struct option *long_options(const struct cli_parser *c)
{
	struct option *lo = xcalloc(c->n_opts + 1, sizeof(*lo));

	for (size_t i = 0; i < c->n_opts; i++) {
		const struct cli_opt *o = &c->opts[i];
		bool stored = o->kind == CLI_STR || o->kind == CLI_TRUE;

		lo[i].name = o->name;
		lo[i].has_arg = o->kind == CLI_STR || o->kind == CLI_ID_ARG
				    ? required_argument
				    : no_argument;
		lo[i].val = stored ? TABLE_ID + (int)i : (int)o->at;
	}
	return lo;
}

int cli_next(const struct cli_parser *c, int argc, char **argv)
{
	cleanup_free struct option *lo = long_options(c);
	int r;

	while ((r = getopt_long(argc, argv, c->shortopts, lo, NULL)) >=
	       TABLE_ID) {
		const struct cli_opt *o = &c->opts[r - TABLE_ID];
		char *field = (char *)c->base + o->at;

		if (o->kind == CLI_STR)
			*(const char **)(void *)field = optarg;
		else
			*(bool *)(void *)field = true;
	}
	return r;
}

int cli_usage_error(const char *prog, int code, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s --help'.\n", prog);
	return code;
}
