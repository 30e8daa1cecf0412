// SPDX-License-Identifier: Apache-2.0
/* cell-monitor: the per-unit helper of cell-agent (docs/agent-runtime.md).
 *
 *   run    be a unit's monitor (spawned by runtime_start)
 *   exec   run a command inside a running unit (spawned by runtime_exec)
 *   start, stop, state, cleanup, logs
 *          the agent's client calls, for operators and tests
 *
 * Only option parsing and error printing live here; the rest is in
 * libagent (monitor.c, container.c, cgroup.c, crilog.c). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "log.h"
#include "runtime.h"
#include "util.h"

static const char usage[] =
    "usage: cell-monitor [-v] COMMAND ...\n"
    "  run [--sync-fd N] UNIT_DIR\n"
    "  exec [--sync-fd N] [--env K=V]... [--cwd DIR] UNIT_DIR -- CMD [ARG]...\n"
    "  start UNIT_DIR            start a unit; prints the monitor's pid\n"
    "  stop [--grace N] UNIT_DIR\n"
    "  state UNIT_DIR            prints the unit's state as JSON\n"
    "  cleanup UNIT_DIR          remove what a dead monitor left behind\n"
    "  pod-init ROOT             start a pod's shared PID namespace holder\n"
    "                            (chrooted into ROOT); prints its pid\n"
    "  logs [--tail N] [--bytes N] [--since TIME] [--timestamps|--cri]\n"
    "       [--rotated] LOG_FILE\n";

struct args {
	int sync_fd, grace;
	const char *cwd;
	char **env;
	size_t n_env;
	struct crilog_tail_opts tail;
	const char *dir;
	char **cmd;
};

enum {
	O_SYNC_FD = CLI_ID0,
	O_ENV,
	O_GRACE,
	O_TAIL,
	O_BYTES,
	O_SINCE,
	O_TIMESTAMPS,
	O_CRI
};

static const struct cli_opt opts[] = {
    {"sync-fd", CLI_ID_ARG, O_SYNC_FD},
    {"env", CLI_ID_ARG, O_ENV},
    CLI_S("cwd", struct args, cwd),
    {"grace", CLI_ID_ARG, O_GRACE},
    {"tail", CLI_ID_ARG, O_TAIL},
    {"bytes", CLI_ID_ARG, O_BYTES},
    {"since", CLI_ID_ARG, O_SINCE},
    {"timestamps", CLI_ID, O_TIMESTAMPS},
    {"cri", CLI_ID, O_CRI},
    CLI_B("rotated", struct args, tail.with_rotated),
    {"help", CLI_ID, 'h'},
};

static int number(const char *s, int64_t min, int64_t max, int64_t *out)
{
	struct cerr e = {0};

	if (parse_int64(s, min, max, out, &e) < 0) {
		fprintf(stderr, "cell-monitor: %s\n", e.msg);
		return -1;
	}
	return 0;
}

static int parse_opt(int c, struct args *a)
{
	int64_t v;

	switch (c) {
	case O_SYNC_FD:
		if (number(optarg, 3, INT_MAX, &v) < 0)
			return -1;
		a->sync_fd = (int)v;
		return 0;
	case O_ENV:
		a->env = xrealloc(a->env, (a->n_env + 2) * sizeof(char *));
		a->env[a->n_env++] = optarg;
		a->env[a->n_env] = NULL;
		return 0;
	case O_GRACE:
		if (number(optarg, 0, INT_MAX, &v) < 0)
			return -1;
		a->grace = (int)v;
		return 0;
	case O_TAIL:
		return number(optarg, 0, INT64_MAX, &a->tail.lines);
	case O_BYTES:
		return number(optarg, 0, INT64_MAX, &a->tail.bytes);
	case O_SINCE:
		if (crilog_parse_time(optarg, strlen(optarg),
				      &a->tail.since_ns) == 0)
			return 0;
		fprintf(stderr, "cell-monitor: --since: not RFC 3339\n");
		return -1;
	case O_TIMESTAMPS:
		a->tail.format = CRILOG_TIMESTAMPS;
		return 0;
	case O_CRI:
		a->tail.format = CRILOG_CRI;
		return 0;
	default:
		fputs(usage, stderr);
		return -1;
	}
}

static int parse_args(int argc, char **argv, struct args *a)
{
	const struct cli_parser cli = {"+h", opts, ARRAY_SIZE(opts), a};
	int c;

	*a = (struct args){
	    .sync_fd = -1, .grace = -1, .tail = {.lines = -1, .bytes = -1}};
	optind = 2;
	/* "+": stop at UNIT_DIR, so that exec's command keeps its options. */
	while ((c = cli_next(&cli, argc, argv)) != -1)
		if (parse_opt(c, a) < 0)
			return -1;
	if (optind >= argc) {
		fputs(usage, stderr);
		return -1;
	}
	a->dir = argv[optind++];
	if (optind < argc && !strcmp(argv[optind], "--"))
		optind++;
	a->cmd = argv + optind;
	return 0;
}

static int fail(const struct cerr *e)
{
	fprintf(stderr, "cell-monitor: %s\n", e->msg);
	return 1;
}

static int cmd_state(const char *dir)
{
	struct unit_runtime_state st;
	struct cerr e = {0};
	char *s;

	if (runtime_read_state(dir, &st, &e) < 0)
		return fail(&e);
	s = runtime_status_json(&st, runtime_monitor_alive(&st));
	puts(s);
	free(s);
	runtime_state_free(&st);
	return 0;
}

static int cmd_logs(const struct args *a)
{
	struct buf out;
	struct cerr e = {0};

	buf_init(&out, 0);
	if (crilog_tail(a->dir, &a->tail, &out, &e) < 0) {
		buf_free(&out);
		return fail(&e);
	}
	fwrite(out.data ? out.data : "", 1, out.len, stdout);
	buf_free(&out);
	return 0;
}

static int cmd_client(const char *cmd, const struct args *a)
{
	struct cerr e = {0};
	char self[PATH_MAX];
	ssize_t n;
	pid_t pid;

	if (!strcmp(cmd, "start")) {
		n = readlink("/proc/self/exe", self, sizeof(self) - 1);
		if (n < 0)
			return fail(
			    &(struct cerr){errno, "readlink /proc/self/exe"});
		self[n] = '\0';
		pid = runtime_start(self, a->dir, &e);
		if (pid < 0)
			return fail(&e);
		printf("%d\n", (int)pid);
		return 0;
	}
	if (!strcmp(cmd, "stop"))
		return runtime_stop(a->dir, a->grace, &e) < 0 ? fail(&e) : 0;
	if (!strcmp(cmd, "cleanup"))
		return runtime_cleanup(a->dir, &e) < 0 ? fail(&e) : 0;
	if (!strcmp(cmd, "state"))
		return cmd_state(a->dir);
	return cmd_logs(a);
}

int main(int argc, char **argv)
{
	static const char *const cmds[] = {"run",   "exec",    "start", "stop",
					   "state", "cleanup", "logs"};
	struct args a;
	int rc;

	log_init("cell-monitor",
		 getenv("CELL_MONITOR_DEBUG") ? LOG_DEBUG : LOG_INFO);
	if (argc >= 2 && !strcmp(argv[1], "--version")) {
		puts("cell-monitor " CELL_VERSION);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "pod-init")) {
		struct cerr e = {0};
		return runtime_pod_init(argv[2], &e) < 0 ? fail(&e) : 0;
	}
	rc = argc < 2;
	for (size_t i = 0; !rc && i < ARRAY_SIZE(cmds); i++)
		if (!strcmp(argv[1], cmds[i]))
			break;
		else if (i + 1 == ARRAY_SIZE(cmds))
			rc = 1;
	if (rc || parse_args(argc, argv, &a) < 0) {
		if (rc)
			fputs(usage, stderr);
		return 2;
	}
	if (!strcmp(argv[1], "run"))
		rc = monitor_run(a.dir, a.sync_fd);
	else if (!strcmp(argv[1], "exec") && a.cmd[0]) {
		rc = monitor_exec(a.dir, a.sync_fd, a.cmd, a.env, a.cwd);
		/* This process joined the unit's mount namespace, whose /proc
		 * belongs to another PID namespace: exit handlers that read
		 * /proc/self (LeakSanitizer's, in sanitizer builds) would spin
		 * forever. Nothing is left to flush: leave at once. */
		fflush(NULL);
		_exit(rc);
	} else if (!strcmp(argv[1], "exec"))
		rc = (fputs(usage, stderr), 2);
	else
		rc = cmd_client(argv[1], &a);
	free(a.env);
	return rc;
}
