// SPDX-License-Identifier: Apache-2.0
/* select (Kip's instance choice for a resource request) and watch (many
 * cells, one line each). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cleanup.h"
#include "ctl-internal.h"
#include "fsutil.h"
#include "util.h"

int cmd_select(int argc, char **argv, struct ctl_global *g)
{
	static const char usage[] =
	    "usage: cellctl select [--cpu N] [--memory Q] [--gpu \"N "
	    "[KIND]\"]\n"
	    "                      [--instance-type GLOB] [--dedicated-cpu]\n"
	    "                      [--sustained-cpu true|false]\n"
	    "                      [--prices FILE] [--region R] [--default T]\n"
	    "                      [--arch amd64|arm64|amd64,arm64]\n"
	    "  the instance type Kip would start for this request; prints the\n"
	    "  type and, when Kip decides it, sustainedCPU; --arch: the\n"
	    "  architectures the pod's images have (default amd64)\n";
	enum {
		S_CPU = 1,
		S_MEM,
		S_GPU,
		S_TYPE,
		S_DED,
		S_SUS,
		S_PRICES,
		S_REGION,
		S_DEF,
		S_ARCH
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
	    {"arch", required_argument, NULL, S_ARCH},
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
		case S_ARCH:
			if (arch_bits_parse(optarg, &q.archs, &e) < 0)
				return ctl_fail("select", &e);
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

/* ---- userdata, ssm-payload ---- */

static int boot_opts(int argc, char **argv, struct ctl_global *g,
		     const char *usage, struct boot_files *b, const char **out)
{
	enum { B_CI = 1, B_CC, B_VER, B_URL, B_BOOT, B_OUT };
	static const struct option lo[] = {
	    GLOBAL_OPTS,
	    {"cloud-init", required_argument, NULL, B_CI},
	    {"cell-config", required_argument, NULL, B_CC},
	    {"agent-version", required_argument, NULL, B_VER},
	    {"agent-url", required_argument, NULL, B_URL},
	    {"boot-dir", required_argument, NULL, B_BOOT},
	    {"out", required_argument, NULL, B_OUT},
	    {NULL, 0, NULL, 0}};
	int c;

	optind = 1;
	while ((c = ctl_getopt(argc, argv, "ho:", lo, g)) != -1) {
		switch (c) {
		case G_HELP:
			fputs(usage, stdout);
			return 0;
		case B_CI:
			b->cloud_init = optarg;
			break;
		case B_CC:
			b->cell_config = optarg;
			break;
		case B_VER:
			b->agent_version = optarg;
			break;
		case B_URL:
			b->agent_url = optarg;
			break;
		case B_BOOT:
			b->boot_dir = optarg;
			break;
		case B_OUT:
			*out = optarg;
			break;
		default:
			return ctl_usage(usage);
		}
	}
	b->pki_dir = g->pki ? g->pki : getenv("CELLCTL_PKI");
	if (optind != argc || !b->pki_dir)
		return ctl_usage(usage);
	return -1;
}

int cmd_userdata(int argc, char **argv, struct ctl_global *g)
{
	static const char usage[] =
	    "usage: cellctl userdata --pki DIR [--cloud-init FILE] "
	    "[--cell-config FILE]\n"
	    "                        [--agent-version V] [--agent-url U] "
	    "[--boot-dir D] [--out FILE]\n"
	    "  #cloud-config user data: your document (FILE) plus the boot\n"
	    "  files (DIR's ca.crt, server.crt, server.key; version, URL,\n"
	    "  cell_config.yaml) as write_files under D (/tmp/itzo), owner\n"
	    "  root, 0400; at most 16000 bytes\n";
	struct boot_files b = {0};
	const char *out = NULL;
	struct cerr e = {0};
	struct buf ud = {0};
	int r = boot_opts(argc, argv, g, usage, &b, &out);

	if (r >= 0)
		return r;
	r = userdata_build(&b, &ud, &e);
	if (r == 0 && out)
		r = fs_write_atomic(out, ud.data, ud.len, 0600, &e);
	else if (r == 0)
		fwrite(ud.data, 1, ud.len, stdout);
	buf_free(&ud);
	return r < 0 ? ctl_fail("userdata", &e) : 0;
}

int cmd_ssm_payload(int argc, char **argv, struct ctl_global *g)
{
	static const char usage[] =
	    "usage: cellctl ssm-payload --pki DIR [--cell-config FILE] "
	    "[--agent-version V]\n"
	    "                           [--agent-url U] [--out DIR]\n"
	    "  the SSM parameter /kip/cells/<instance-id>/config: a YAML map\n"
	    "  of the boot files; over 4096 bytes it is cut into config_0,\n"
	    "  config_1, … (Kip's spelling). Prints {name: value} as JSON, or\n"
	    "  writes one file per parameter into DIR\n";
	struct boot_files b = {0};
	const char *out = NULL, *k;
	struct cerr e = {0};
	json_t *p, *v;
	int r = boot_opts(argc, argv, g, usage, &b, &out);

	if (r >= 0)
		return r;
	p = ssm_payload_build(&b, &e);
	if (!p)
		return ctl_fail("ssm-payload", &e);
	if (!out) {
		print_json(stdout, p);
		json_decref(p);
		return 0;
	}
	r = fs_mkdir_p(out, 0700, &e);
	json_object_foreach(p, k, v)
	{
		cleanup_free char *path = xasprintf("%s/%s", out, k);
		if (r == 0)
			r = fs_write_atomic(path, json_string_value(v),
					    json_string_length(v), 0600, &e);
	}
	json_decref(p);
	return r < 0 ? ctl_fail("ssm-payload", &e) : 0;
}

/* cellctl platforms IMAGE: what cellctl's instance choice sees. */
int cmd_platforms(int argc, char **argv, struct ctl_global *g)
{
	static const char usage[] =
	    "usage: cellctl platforms IMAGE [--insecure-registry H:P,…]\n"
	    "  the platforms IMAGE's registry lists for it (its index, or\n"
	    "  the single image's config), and the architectures a cell can\n"
	    "  run it on\n";
	enum { P_INSECURE = 1 };
	static const struct option lo[] = {
	    GLOBAL_OPTS,
	    {"insecure-registry", required_argument, NULL, P_INSECURE},
	    {NULL, 0, NULL, 0}};
	const char *insecure = NULL;
	struct regplat p;
	struct cerr e = {0};
	int c;

	optind = 1;
	while ((c = ctl_getopt(argc, argv, "ho:", lo, g)) != -1) {
		switch (c) {
		case G_HELP:
			fputs(usage, stdout);
			return 0;
		case P_INSECURE:
			insecure = optarg;
			break;
		default:
			return ctl_usage(usage);
		}
	}
	if (argc - optind != 1)
		return ctl_usage(usage);
	if (regplat_query(argv[optind], insecure, 30000, &p, &e) < 0)
		return ctl_fail("platforms", &e);
	printf("%s\narchitectures: %s\n", *p.list ? p.list : "(none)",
	       arch_bits_name(p.archs));
	regplat_free(&p);
	return 0;
}
