/* cell-agent: the supervisor plus the REST API, and the flags that start
 * them. Flags come from the command line and from cell_config.yaml in the
 * boot directory, whose keys starting with "itzoFlag" become flags
 * ("itzoFlag-port: 6421" is --port 6421); the command line wins. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <yaml.h>

#include "agent-internal.h"
#include "api.h"
#include "cleanup.h"
#include "fsutil.h"
#include "log.h"
#include "pullmod.h"
#include "runtime.h"
#include "supervisor.h"
#include "util.h"

#define CONFIG_MAX (1u << 20)
#define CONFIG_FLAGS_MAX 64

struct opts {
	int port;
	const char *boot_dir, *state_dir, *image_cache, *monitor_bin;
	const char **insecure; /* NULL-terminated */
	size_t n_insecure;
	bool plain_http;
	int verbose;
	int64_t pod_memory_reserve; /* -1: no pod-wide cap */
};

enum {
	O_PORT = 256,
	O_BOOT,
	O_STATE,
	O_CACHE,
	O_MONITOR,
	O_INSECURE_REG,
	O_PLAIN,
	O_POD_RESERVE,
	O_VERSION
};

static const struct option longopts[] = {
    {"port", required_argument, NULL, O_PORT},
    {"boot-dir", required_argument, NULL, O_BOOT},
    {"state-dir", required_argument, NULL, O_STATE},
    {"image-cache", required_argument, NULL, O_CACHE},
    {"monitor-bin", required_argument, NULL, O_MONITOR},
    {"insecure-registry", required_argument, NULL, O_INSECURE_REG},
    {"insecure-plain-http", no_argument, NULL, O_PLAIN},
    {"pod-memory-reserve", required_argument, NULL, O_POD_RESERVE},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, O_VERSION},
    {NULL, 0, NULL, 0},
};

static void usage(FILE *f)
{
	fputs(
	    "usage: cell-agent [options]\n"
	    "  --port N                 HTTPS port (6421)\n"
	    "  --boot-dir DIR           ca.crt, server.crt, server.key,\n"
	    "                           cell_config.yaml (/tmp/itzo)\n"
	    "  --state-dir DIR          pod state, units, packages\n"
	    "                           (/var/lib/cell-agent)\n"
	    "  --image-cache DIR        image layers (/var/lib/cell/images)\n"
	    "  --monitor-bin PATH       cell-monitor (next to cell-agent)\n"
	    "  --pod-memory-reserve Q   the pod may use the instance's memory\n"
	    "                           minus Q (default 256Mi; off: no cap)\n"
	    "  --insecure-registry H    plain HTTP to registry H (repeatable)\n"
	    "  --insecure-plain-http    TESTS ONLY: serve the API without TLS\n"
	    "  -v, --verbose            debug logging\n"
	    "  --version, -h --help\n"
	    "cell_config.yaml keys itzoFlag-<flag> set flags (\"itzoFlag-port: "
	    "6421\").\n",
	    f);
}

/* ---- cell_config.yaml ---- */

/* The flag a config key names ("itzoFlag-port" → "port"), or NULL. */
static const char *config_flag(const char *key)
{
	if (strncmp(key, "itzoFlag", 8) != 0)
		return NULL;
	key += 8;
	while (*key == '-' || *key == '_')
		key++;
	return *key ? key : NULL;
}

static const struct option *find_opt(const char *name)
{
	for (const struct option *o = longopts; o->name; o++)
		if (!strcmp(o->name, name))
			return o;
	return NULL;
}

static bool truthy(const char *v)
{
	return !*v || !strcasecmp(v, "true") || !strcmp(v, "1") ||
	       !strcasecmp(v, "yes");
}

/* Turn one key/value into argv words. Flags that would weaken the cell
 * (plain HTTP) or that only the old agent had are refused loudly. */
static void add_config_flag(const char *key, const char *val, char **argv,
			    int *argc)
{
	const char *name = config_flag(key);
	const struct option *o = name ? find_opt(name) : NULL;

	if (!name)
		return;
	if (!o || o->val == O_PLAIN || o->val == 'h' || o->val == O_VERSION ||
	    o->val == O_BOOT) {
		log_warn("cell_config.yaml: ignoring %s (not a flag this agent "
			 "takes from the boot configuration)",
			 key);
		return;
	}
	if (*argc + 2 >= CONFIG_FLAGS_MAX) {
		log_warn("cell_config.yaml: too many flags, ignoring %s", key);
		return;
	}
	if (o->has_arg == no_argument) {
		if (truthy(val))
			argv[(*argc)++] = xasprintf("--%s", name);
		return;
	}
	argv[(*argc)++] = xasprintf("--%s", name);
	argv[(*argc)++] = xstrdup(val);
}

struct cfg_parse {
	char *key; /* a key waiting for its value */
	bool in_map, done;
};

/* One libyaml event of a flat map of strings. */
static int config_event(struct cfg_parse *cp, const yaml_event_t *ev,
			char **argv, int *argc, struct cerr *e)
{
	switch (ev->type) {
	case YAML_MAPPING_START_EVENT:
		if (cp->in_map)
			return cerr_set(e, EINVAL, "nested map");
		cp->in_map = true;
		return 0;
	case YAML_SCALAR_EVENT:
		if (!cp->in_map)
			return cerr_set(e, EINVAL, "not a map");
		if (!cp->key) {
			cp->key = xstrdup((const char *)ev->data.scalar.value);
			return 0;
		}
		add_config_flag(cp->key, (const char *)ev->data.scalar.value,
				argv, argc);
		free(cp->key);
		cp->key = NULL;
		return 0;
	case YAML_SEQUENCE_START_EVENT:
	case YAML_ALIAS_EVENT:
		return cerr_set(e, EINVAL, "values must be strings");
	case YAML_STREAM_END_EVENT:
		cp->done = true;
		return 0;
	default:
		return 0;
	}
}

/* Read a flat string map; append the flags it holds to argv. A file that
 * is not such a map is reported and ignored: the agent must still come up
 * for the controller to reach it. */
static int read_config(const char *path, char **argv, int *argc, struct cerr *e)
{
	struct cfg_parse cp = {0};
	struct buf b;
	yaml_parser_t p;
	int r = 0;

	buf_init(&b, CONFIG_MAX);
	if (fs_read_file(path, &b, e) < 0) {
		buf_free(&b);
		if (e->code != ENOENT)
			return -1;
		cerr_clear(e);
		return 0;
	}
	if (!yaml_parser_initialize(&p)) {
		buf_free(&b);
		return cerr_set(e, ENOMEM, "yaml_parser_initialize");
	}
	yaml_parser_set_input_string(&p, (const unsigned char *)b.data, b.len);
	while (!cp.done && r == 0) {
		yaml_event_t ev;

		if (!yaml_parser_parse(&p, &ev)) {
			r = cerr_set(e, EINVAL, "line %zu: %s",
				     p.problem_mark.line + 1,
				     p.problem ? p.problem : "malformed YAML");
			break;
		}
		r = config_event(&cp, &ev, argv, argc, e);
		yaml_event_delete(&ev);
	}
	free(cp.key);
	yaml_parser_delete(&p);
	buf_free(&b);
	return r;
}

/* ---- flags ---- */

static int parse_port(const char *s, int *port)
{
	int64_t v;
	struct cerr e = {0};

	if (parse_int64(s, 1, 65535, &v, &e) < 0) {
		fprintf(stderr, "cell-agent: --port: %s\n", e.msg);
		return -1;
	}
	*port = (int)v;
	return 0;
}

/* 0 go on, 1 exit 0 (help, version), -1 exit 2. */
static int parse_args(int argc, char **argv, struct opts *o)
{
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "vh", longopts, NULL)) != -1) {
		switch (c) {
		case O_PORT:
			if (parse_port(optarg, &o->port) < 0)
				return -1;
			break;
		case O_BOOT:
			o->boot_dir = optarg;
			break;
		case O_STATE:
			o->state_dir = optarg;
			break;
		case O_CACHE:
			o->image_cache = optarg;
			break;
		case O_MONITOR:
			o->monitor_bin = optarg;
			break;
		case O_INSECURE_REG:
			o->insecure = xrealloc(
			    o->insecure, (o->n_insecure + 2) * sizeof(char *));
			o->insecure[o->n_insecure++] = optarg;
			o->insecure[o->n_insecure] = NULL;
			break;
		case O_PLAIN:
			o->plain_http = true;
			break;
		case O_POD_RESERVE: {
			struct cerr qe = {0};

			if (!strcmp(optarg, "off")) {
				o->pod_memory_reserve = -1;
				break;
			}
			if (wire_parse_quantity(optarg, &o->pod_memory_reserve,
						&qe) < 0) {
				fprintf(stderr,
					"cell-agent: --pod-memory-reserve: "
					"%s\n",
					qe.msg);
				return -1;
			}
			break;
		}
		case 'v':
			o->verbose++;
			break;
		case 'h':
			usage(stdout);
			return 1;
		case O_VERSION:
			printf("cell-agent %s\n", CELL_VERSION);
			return 1;
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "cell-agent: unexpected argument '%s'\n",
			argv[optind]);
		return -1;
	}
	return 0;
}

/* The boot directory, from the command line only (the config file lives
 * there). */
static const char *cli_boot_dir(int argc, char **argv)
{
	const char *d = "/tmp/itzo";

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--boot-dir") && i + 1 < argc)
			d = argv[++i];
		else if (!strncmp(argv[i], "--boot-dir=", 11))
			d = argv[i] + 11;
		else if (!strcmp(argv[i], "--"))
			break;
	}
	return d;
}

/* The command line after the config file's flags, so that it wins. */
static char **merged_argv(int argc, char **argv, int *n_out)
{
	static char *cfg[CONFIG_FLAGS_MAX];
	char **all;
	int n = 0;
	struct cerr e = {0};
	cleanup_free char *path =
	    xasprintf("%s/cell_config.yaml", cli_boot_dir(argc, argv));

	if (read_config(path, cfg, &n, &e) < 0)
		log_warn("%s: %s (ignored)", path, e.msg);
	all = xcalloc((size_t)(argc + n + 1), sizeof(char *));
	all[0] = argv[0];
	for (int i = 0; i < n; i++)
		all[1 + i] = cfg[i];
	for (int i = 1; i < argc; i++)
		all[n + i] = argv[i];
	*n_out = argc + n;
	return all;
}

static char *default_monitor(void)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n < 0)
		return xstrdup("cell-monitor");
	self[n] = '\0';
	return xasprintf("%s/cell-monitor", dirname(self));
}

/* ---- the backend: the supervisor behind the API ---- */

struct agent {
	struct supervisor *sup;
	const char *monitor_bin;
};

static int be_update(void *ctx, const char *body, size_t len, struct cerr *e)
{
	return sup_update_pod(((struct agent *)ctx)->sup, body, len, e);
}

static char *be_status(void *ctx)
{
	return sup_status_json(((struct agent *)ctx)->sup);
}

static char *be_log_path(void *ctx, const char *unit, bool previous,
			 struct cerr *e)
{
	return sup_log_path(((struct agent *)ctx)->sup, unit, previous, e);
}

/* exec through `cell-monitor exec` in the unit's current run directory,
 * which is where its log lives (<run>/log). A TTY is the pty the API made
 * as the command's stdio (the monitor's exec has no controlling-terminal
 * mode yet). SkipNSEnter is ignored: a command always runs in its unit. */
static int be_exec(void *ctx, const struct api_exec_req *req,
		   const int stdio[3], struct cerr *e)
{
	struct agent *a = ctx;
	cleanup_free char *log = sup_log_path(a->sup, req->unit_name, false, e);
	struct exec_opts o = {
	    .argv = req->command,
	    .stdin_fd = stdio[0],
	    .stdout_fd = stdio[1],
	    .stderr_fd = stdio[2],
	};
	pid_t pid;
	int fd;

	if (!log)
		return -1;
	pid = runtime_exec(a->monitor_bin, dirname(log), &o, e);
	if (pid < 0)
		return -1;
	fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0)
		return cerr_sys(e, "pidfd_open %d", (int)pid);
	return fd;
}

/* ---- main ---- */

static int run(const struct opts *o, const sigset_t *sigs)
{
	struct agent ag = {.monitor_bin = o->monitor_bin};
	cleanup_free char *pkgs = xasprintf("%s/packages", o->state_dir);
	struct sup_opts so = {
	    .state_dir = o->state_dir,
	    .image_cache = o->image_cache,
	    .monitor_bin = o->monitor_bin,
	    .insecure_registries = o->insecure,
	    .packages_dir = pkgs,
	    .pod_memory_reserve = o->pod_memory_reserve,
	};
	struct api_backend b = {
	    .ctx = &ag,
	    .update_pod = be_update,
	    .status_json = be_status,
	    .log_path = be_log_path,
	    .exec_start = be_exec,
	};
	struct api_opts ao = {
	    .port = o->port,
	    .boot_dir = o->boot_dir,
	    .packages_dir = pkgs,
	    .version = CELL_VERSION,
	    .insecure_plain_http = o->plain_http,
	};
	struct api *api = NULL;
	struct cerr e = {0};
	int sig;

	if (fs_mkdir_p(o->state_dir, 0700, &e) < 0 ||
	    sup_start(&so, &ag.sup, &e) < 0) {
		log_error("%s", e.msg);
		return 1;
	}
	if (api_start(&ao, &b, &api, &e) < 0) {
		log_error("%s", e.msg);
		sup_stop(ag.sup);
		return 1;
	}
	pullmod_note_threads(); /* the API's workers are the agent's own */
	log_info("cell-agent %s: serving %s on port %d", CELL_VERSION,
		 o->plain_http ? "PLAIN HTTP" : "mutual TLS", api_port(api));
	do
		sig = sigwaitinfo(sigs, NULL);
	while (sig < 0 && errno == EINTR);
	log_info("signal %d: stopping", sig);
	api_stop(api);
	sup_stop(ag.sup);
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o = {
	    .port = 6421,
	    .boot_dir = "/tmp/itzo",
	    .state_dir = "/var/lib/cell-agent",
	    .image_cache = "/var/lib/cell/images",
	    .pod_memory_reserve = 256ll << 20,
	};
	cleanup_free char *monitor = NULL;
	sigset_t sigs;
	char **all;
	int n, r;

	log_init("cell-agent", LOG_INFO);
	all = merged_argv(argc, argv, &n);
	r = parse_args(n, all, &o);
	if (r != 0) {
		free(o.insecure);
		free(all);
		return r > 0 ? 0 : 2;
	}
	if (o.verbose)
		log_init("cell-agent", LOG_DEBUG);
	if (!o.monitor_bin)
		o.monitor_bin = monitor = default_monitor();
	if (o.plain_http)
		for (int i = 0; i < 3; i++)
			log_warn(
			    "--insecure-plain-http: THE API HAS NO TLS AND NO "
			    "CLIENT AUTHENTICATION. FOR TESTS ONLY; NEVER "
			    "ON A REAL CELL.");
	/* Signals are taken synchronously by the main thread; every thread
	 * started after this inherits the mask. */
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGINT);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	signal(SIGPIPE, SIG_IGN);
	r = run(&o, &sigs);
	free(o.insecure);
	free(all); /* the strings it points to outlive it */
	return r;
}
