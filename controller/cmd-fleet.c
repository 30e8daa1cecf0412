/* select (Kip's instance choice for a resource request) and watch (many
 * cells, one line each). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "ctl-internal.h"
#include "util.h"

int cmd_select(int argc, char **argv, struct ctl_global *g)
{
	static const char usage[] =
	    "usage: cellctl select [--cpu N] [--memory Q] [--gpu \"N "
	    "[KIND]\"]\n"
	    "                      [--instance-type GLOB] [--dedicated-cpu]\n"
	    "                      [--sustained-cpu true|false]\n"
	    "                      [--prices FILE] [--region R] [--default T]\n"
	    "  the instance type Kip would start for this request; prints the\n"
	    "  type and, when Kip decides it, sustainedCPU\n";
	enum {
		S_CPU = 1,
		S_MEM,
		S_GPU,
		S_TYPE,
		S_DED,
		S_SUS,
		S_PRICES,
		S_REGION,
		S_DEF
	};
	static const struct option lo[] = {
	    GLOBAL_OPTS,
	    {"cpu", required_argument, NULL, S_CPU},
	    {"memory", required_argument, NULL, S_MEM},
	    {"gpu", required_argument, NULL, S_GPU},
	    {"instance-type", required_argument, NULL, S_TYPE},
	    {"dedicated-cpu", no_argument, NULL, S_DED},
	    {"sustained-cpu", required_argument, NULL, S_SUS},
	    {"prices", required_argument, NULL, S_PRICES},
	    {"region", required_argument, NULL, S_REGION},
	    {"default", required_argument, NULL, S_DEF},
	    {NULL, 0, NULL, 0}};
	struct select_req q = {.sustained_cpu = -1, .default_type = "t3.nano"};
	const char *prices = getenv("CELLCTL_PRICES"), *region = "us-east-1";
	cleanup_free char *def = NULL;
	struct inst_table t = {0};
	struct cerr e = {0};
	const char *out;
	int c, sus;

	optind = 1;
	while ((c = ctl_getopt(argc, argv, "ho:", lo, g)) != -1) {
		switch (c) {
		case G_HELP:
			fputs(usage, stdout);
			return 0;
		case S_CPU:
			q.cpu = optarg;
			break;
		case S_MEM:
			q.memory = optarg;
			break;
		case S_GPU:
			q.gpu = optarg;
			break;
		case S_TYPE:
			q.instance_type = optarg;
			break;
		case S_DED:
			q.dedicated_cpu = true;
			break;
		case S_SUS:
			if (strcmp(optarg, "true") && strcmp(optarg, "false"))
				return ctl_usage(usage);
			q.sustained_cpu = !strcmp(optarg, "true");
			break;
		case S_PRICES:
			prices = optarg;
			break;
		case S_REGION:
			region = optarg;
			break;
		case S_DEF:
			q.default_type = optarg;
			break;
		default:
			return ctl_usage(usage);
		}
	}
	if (optind != argc)
		return ctl_usage(usage);
	if (!prices || !*prices) {
		char exe[4096];
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n > 0) {
			exe[n] = 0;
			char *slash = strrchr(exe, '/');
			if (slash)
				*slash = 0;
			def = xasprintf("%s/../share/cell/aws-us-east-1.json",
					exe);
			prices = def;
		}
	}
	if (!prices || inst_table_load(prices, region, &t, &e) < 0 ||
	    inst_select(&t, &q, &out, &sus, &e) < 0) {
		inst_table_free(&t);
		return ctl_fail("select", &e);
	}
	if (g->output && !strcmp(g->output, "json"))
		printf("{\"instanceType\": \"%s\", \"sustainedCPU\": %s}\n",
		       out,
		       sus < 0 ? "null"
		       : sus   ? "true"
			       : "false");
	else if (sus >= 0)
		printf("%s sustainedCPU=%s\n", out, sus ? "true" : "false");
	else
		printf("%s\n", out);
	inst_table_free(&t);
	return 0;
}

/* ---- watch ---- */

static void watch_line(struct ctl_cell *c, char *line, size_t n)
{
	struct cerr e = {0};
	json_t *st = cell_status(c, &e), *ru;
	char reason[256];
	int ready, total, restarts;
	const char *ph;

	if (!st) {
		snprintf(line, n, "%-22s %-10s %s", c->host, "Unreachable",
			 e.msg);
		return;
	}
	ph = pod_phase(st, "Always", reason, sizeof(reason));
	pod_counts(st, &ready, &total, &restarts);
	ru = json_object_get(st, "resourceUsage");
	snprintf(line, n, "%-22s %-10s %2d/%-4d %-8d %-8.1f %-10.1f %s",
		 c->host, ph, ready, total, restarts,
		 json_number_value(json_object_get(ru, "cpu")),
		 json_number_value(json_object_get(ru, "memory")) / 1048576.0,
		 reason);
	json_decref(st);
}

int cmd_watch(int argc, char **argv, struct ctl_global *g)
{
	static const char usage[] =
	    "usage: cellctl watch --cell A --cell B … [--interval S] "
	    "[--count N]\n"
	    "  one line per cell: phase, units ready, restarts, CPU, memory\n"
	    "  (MiB); redrawn in place on a terminal, plain lines when piped\n";
	enum { W_INT = 1, W_COUNT };
	static const struct option lo[] = {
	    GLOBAL_OPTS,
	    {"interval", required_argument, NULL, W_INT},
	    {"count", required_argument, NULL, W_COUNT},
	    {NULL, 0, NULL, 0}};
	int64_t interval = 2, count = 0;
	struct ctl_cell *cells;
	struct cerr e = {0};
	bool tty = isatty(STDOUT_FILENO);
	size_t n;
	int c;

	optind = 1;
	while ((c = ctl_getopt(argc, argv, "ho:", lo, g)) != -1) {
		if (c == G_HELP)
			return fputs(usage, stdout), 0;
		if (c == W_INT &&
		    parse_int64(optarg, 1, 3600, &interval, &e) == 0)
			continue;
		if (c == W_COUNT &&
		    parse_int64(optarg, 0, INT32_MAX, &count, &e) == 0)
			continue;
		return ctl_usage(usage);
	}
	for (int i = optind; i < argc; i++) /* cells as arguments too */
		ctl_global_opt(g, G_CELL, argv[i]);
	if (!g->n_cells)
		return ctl_usage(usage);
	n = g->n_cells;
	cells = xcalloc(n, sizeof(*cells));
	for (size_t i = 0; i < n; i++)
		if (ctl_open_cell(g, g->cells[i], &cells[i], &e) < 0) {
			for (size_t j = 0; j < i; j++)
				cell_free(&cells[j]);
			free(cells);
			return ctl_fail("watch", &e);
		}
	for (int64_t round = 0; !count || round < count; round++) {
		if (round)
			sleep((unsigned)interval);
		if (tty)
			fputs("\033[H\033[J", stdout);
		printf("%-22s %-10s %-7s %-8s %-8s %-10s %s\n", "CELL", "PHASE",
		       "READY", "RESTARTS", "CPU", "MEM(MiB)", "REASON");
		for (size_t i = 0; i < n; i++) {
			char line[1024];
			watch_line(&cells[i], line, sizeof(line));
			puts(line);
		}
		fflush(stdout);
	}
	for (size_t i = 0; i < n; i++)
		cell_free(&cells[i]);
	free(cells);
	return 0;
}
