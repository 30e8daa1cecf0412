// SPDX-License-Identifier: Apache-2.0
/* Command-line options, one table per program: each option's long name
 * and what it does. A string option's argument goes straight into the
 * program's options struct, and so does a flag; everything else (numbers,
 * lists, names to check, --help) comes back to the program's own switch
 * by its id, as getopt_long would return it. So an option is named once,
 * not in an enum, a struct option table and a switch case. */
#ifndef CELL_CLI_H
#define CELL_CLI_H

#include <getopt.h> /* optarg, optind */
#include <stdbool.h>
#include <stddef.h>

enum cli_kind {
	CLI_STR,    /* const char * at `at` in the base struct: the argument */
	CLI_TRUE,   /* bool at `at`: set */
	CLI_ID,	    /* returned as the id `at`, no argument */
	CLI_ID_ARG, /* returned as the id `at`, its argument in optarg */
};

struct cli_opt {
	const char *name;
	enum cli_kind kind;
	size_t at; /* a field's offset (CLI_STR, CLI_TRUE) or an id */
};

#define CLI_S(name, type, field)                                               \
	{                                                                      \
		name, CLI_STR, offsetof(type, field)                           \
	}
#define CLI_B(name, type, field)                                               \
	{                                                                      \
		name, CLI_TRUE, offsetof(type, field)                          \
	}
/* Ids of long options without a short letter start here. */
#define CLI_ID0 256

struct cli_parser {
	const char *shortopts; /* as getopt_long's ("+vh") */
	const struct cli_opt *opts;
	size_t n_opts;
	void *base; /* the struct CLI_STR and CLI_TRUE fields are in */
};

/* The next option for the program's switch, as getopt_long returns it
 * ('?' for a bad one, -1 at the end); table options it stored itself are
 * never returned. Starts at optind. */
int cli_next(const struct cli_parser *c, int argc, char **argv);

/* "<prog>: <message>" and "Try '<prog> --help'." on stderr; returns
 * code, the program's exit status for a usage error. */
int cli_usage_error(const char *prog, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
