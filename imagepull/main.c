// SPDX-License-Identifier: Apache-2.0
/* cell-pull: pull an OCI/Docker image from a registry into a flattened
 * rootfs or an overlay mount over a content-addressed layer cache. */
#include <errno.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "abspath.h"
#include "buf.h"
#include "cli.h"
#include "fsutil.h"
#include "jsonutil.h"
#include "log.h"
#include "pull.h"
#include "util.h"

#define MAX_INSECURE 32
#define MAX_IMAGES 256

enum progress_mode { PROG_AUTO, PROG_TTY, PROG_JSON, PROG_NONE };

struct cli {
	struct pull_opts o;
	const char *insecure[MAX_INSECURE + 1];
	int n_insecure;
	const char *save_config;
	const char *unmount;
	const char *images[MAX_IMAGES]; /* --populate takes several */
	int n_images;
	bool gc;
	int creds_fd; /* -1, or where {"username","password"} comes from */
	char *creds_user, *creds_pass;
	enum progress_mode progress;
	int verbose;
	const char *lazy; /* "auto" (default) or "off" */
	char self[4096];  /* this program, for lazy layers' servers */
};

static const char usage_text[] =
    "Usage: cell-pull --image REF (--extract-to DIR | --mount DIR) [options]\n"
    "       cell-pull --unmount DIR\n"
    "       cell-pull --gc [--workdir DIR]\n"
    "       cell-pull --populate DIR --image REF [--image REF...]\n"
    "\n"
    "Pull an OCI or Docker image from a registry into a flattened rootfs\n"
    "(--extract-to) or an overlayfs mount over cached layers (--mount).\n"
    "\n"
    "  --image REF              image reference, Docker's rules (busybox,\n"
    "                           host:port/repo:tag, repo@sha256:...)\n"
    "  --extract-to DIR         flattened rootfs in DIR (new or empty)\n"
    "  --mount DIR              overlay mount of the cached layers on DIR\n"
    "  --upper-dir DIR          where the overlay's upper and work dirs go\n"
    "                           (default: under the workdir)\n"
    "  --save-config FILE       write the image's config JSON to FILE\n"
    "  --workdir DIR            cache root (default /var/lib/cell/images)\n"
    "  --shared-cache DIR       read-only second tier (a populated share):\n"
    "                           its layers are used in place\n"
    "  --populate DIR           write the images into DIR as a shared cache\n"
    "  --username U, --password P   registry credentials\n"
    "  --auth-file FILE         credentials from a docker config.json\n"
    "  --credentials-fd N       credentials as JSON "
    "{\"username\",\"password\"}\n"
    "                           read from descriptor N (never argv or env)\n"
    "  --parallel N             layers fetched at once (default 4)\n"
    "  --validate-cache         re-hash cached blobs before using them\n"
    "  --insecure-registry H    use plain HTTP for host H[:port]; repeatable\n"
    "  --platform OS/ARCH[/VARIANT]  platform to pick from an index\n"
    "                           (default: this machine)\n"
    "  --progress MODE          auto, tty, json (lines on stdout) or none\n"
    "  --registry-url URL       talk to URL instead of the reference's host\n"
    "  --ca-file PEM            extra CA certificates for registry TLS\n"
    "  --retries N              retries per request (default 8)\n"
    "  --keep-free-mib N        free space in MiB a pull never eats into,\n"
    "                           on the disk it unpacks or downloads to\n"
    "                           (default 5% of that disk, at most 256); an\n"
    "                           image that needs it fails with \"does not\n"
    "                           fit\" and what it wrote is removed\n"
    "  --unmount DIR            unmount an overlay made with --mount\n"
    "  --lazy MODE              auto (default): with --mount, eStargz layers\n"
    "                           are served lazily through FUSE, each by a\n"
    "                           cell-pull of its own; off: pulled whole\n"
    "                           (also CELL_PULL_LAZY=off)\n"
    "  --lazy-layer DIGEST      with --mount: serve that eStargz layer of the\n"
    "                           image read-only through FUSE on DIR, read on\n"
    "                           demand, until unmounted or SIGTERM\n"
    "  --gc                     remove crash leftovers and unused "
    "blobs/layers\n"
    "  -v, --verbose            more logging (repeat for debug)\n"
    "  -h, --help               this text\n"
    "  --version                print the version\n"
    "\n"
    "Tosi's spellings are accepted too: -image -extractto -mount -saveconfig\n"
    "-username -password -workdir -parallel-downloads -validate-cache -url.\n"
    "Exit status: 0 success, 1 pull failed, 2 usage error.\n";

enum {
	OPT_IMAGE = CLI_ID0,
	OPT_PARALLEL,
	OPT_PROGRESS,
	OPT_INSECURE,
	OPT_RETRIES,
	OPT_VERSION,
	OPT_CREDS_FD,
	OPT_KEEP_FREE,
	OPT_POPULATE,
};

#define S(name, field) CLI_S(name, struct cli, field)
static const struct cli_opt opts[] = {
    {"image", CLI_ID_ARG, OPT_IMAGE},
    S("extract-to", o.extract_to),
    S("mount", o.mount_at),
    S("upper-dir", o.upper_dir),
    S("save-config", save_config),
    S("workdir", o.workdir),
    S("username", o.username),
    S("password", o.password),
    S("auth-file", o.auth_file),
    {"parallel", CLI_ID_ARG, OPT_PARALLEL},
    CLI_B("validate-cache", struct cli, o.validate_cache),
    {"insecure-registry", CLI_ID_ARG, OPT_INSECURE},
    S("platform", o.platform),
    {"progress", CLI_ID_ARG, OPT_PROGRESS},
    S("registry-url", o.registry_url),
    S("ca-file", o.ca_file),
    {"retries", CLI_ID_ARG, OPT_RETRIES},
    S("unmount", unmount),
    CLI_B("gc", struct cli, gc),
    {"verbose", CLI_ID, 'v'},
    {"help", CLI_ID, 'h'},
    {"version", CLI_ID, OPT_VERSION},
    {"credentials-fd", CLI_ID_ARG, OPT_CREDS_FD},
    {"keep-free-mib", CLI_ID_ARG, OPT_KEEP_FREE},
    S("shared-cache", o.shared_cache),
    S("lazy-layer", o.lazy_layer),
    S("lazy", lazy),
    {"populate", CLI_ID_ARG, OPT_POPULATE},
};
#undef S

/* Tosi's single-dash flags, rewritten before getopt sees them. */
static const char *const tosi[][2] = {
    {"-image", "--image"},
    {"-extractto", "--extract-to"},
    {"-mount", "--mount"},
    {"-saveconfig", "--save-config"},
    {"-username", "--username"},
    {"-password", "--password"},
    {"-workdir", "--workdir"},
    {"-parallel-downloads", "--parallel"},
    {"-validate-cache", "--validate-cache"},
    {"-url", "--registry-url"},
};

static void translate_tosi(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--"))
			return;
		for (size_t j = 0; j < ARRAY_SIZE(tosi); j++) {
			size_t n = strlen(tosi[j][0]);
			if (!strncmp(argv[i], tosi[j][0], n) &&
			    (argv[i][n] == '\0' || argv[i][n] == '=')) {
				argv[i] =
				    xasprintf("%s%s", tosi[j][1], argv[i] + n);
				break;
			}
		}
	}
}

#define usage_error(...) cli_usage_error("cell-pull", 2, __VA_ARGS__)

static int int_arg(const char *name, const char *s, int min, int max, int *out)
{
	struct cerr e = {0};
	int64_t v;

	if (parse_int64(s, min, max, &v, &e) < 0) {
		fprintf(stderr, "cell-pull: --%s: %s\n", name, e.msg);
		return -1;
	}
	*out = (int)v;
	return 0;
}

static int parse_progress(const char *s, enum progress_mode *m)
{
	static const char *const names[] = {"auto", "tty", "json", "none"};

	for (int i = 0; i < 4; i++)
		if (!strcmp(s, names[i])) {
			*m = (enum progress_mode)i;
			return 0;
		}
	return -1;
}

/* Returns -1 to go on, else an exit status. */
static int parse_opt(struct cli *c, int opt, const char *arg)
{
	switch (opt) {
	case OPT_IMAGE:
		if (c->n_images == MAX_IMAGES)
			return usage_error("too many --image (%s)", arg);
		c->images[c->n_images++] = arg;
		c->o.image = c->images[0];
		return -1;
	case OPT_POPULATE:
		c->o.workdir = arg;
		c->o.populate = true;
		return -1;
	case 'v':
		c->verbose++;
		return -1;
	case OPT_PARALLEL:
		return int_arg("parallel", arg, 1, 32, &c->o.parallel) < 0 ? 2
									   : -1;
	case OPT_CREDS_FD:
		return int_arg("credentials-fd", arg, 0, 1 << 20,
			       &c->creds_fd) < 0
			   ? 2
			   : -1;
	case OPT_RETRIES:
		return int_arg("retries", arg, 0, 100, &c->o.retries) < 0 ? 2
									  : -1;
	case OPT_KEEP_FREE: {
		int mib;

		if (int_arg("keep-free-mib", arg, 1, 1 << 30, &mib) < 0)
			return 2;
		c->o.keep_free = (uint64_t)mib << 20;
		return -1;
	}
	case OPT_INSECURE:
		if (c->n_insecure == MAX_INSECURE)
			return usage_error("too many --insecure-registry (%s)",
					   arg);
		c->insecure[c->n_insecure++] = arg;
		return -1;
	case OPT_PROGRESS:
		if (parse_progress(arg, &c->progress) < 0)
			return usage_error("--progress takes auto, tty, json "
					   "or none, not '%s'",
					   arg);
		return -1;
	case 'h':
		fputs(usage_text, stdout);
		return 0;
	case OPT_VERSION:
		printf("cell-pull %s\n", CELL_VERSION);
		return 0;
	default:
		fprintf(stderr, "Try 'cell-pull --help'.\n");
		return 2;
	}
}

/* Path flags absolute from the start: the overlay mount changes
 * directory, and a relative --mount or --upper-dir would then name
 * something else. */
static int abs_flags(struct cli *c)
{
	static const char *const names[] = {
	    "extract-to", "mount",   "upper-dir", "save-config",
	    "workdir",	  "unmount", "auth-file", "ca-file"};
	const char **const paths[] = {
	    &c->o.extract_to, &c->o.mount_at, &c->o.upper_dir, &c->save_config,
	    &c->o.workdir,    &c->unmount,    &c->o.auth_file, &c->o.ca_file};

	return abs_path_flags("cell-pull", names, paths, ARRAY_SIZE(names));
}

/* Lazy layers are served by this program: on unless turned off by the
 * flag or CELL_PULL_LAZY (off, 0). */
static int set_lazy(struct cli *c)
{
	const char *env = getenv("CELL_PULL_LAZY");
	ssize_t n;

	if (!c->lazy)
		c->lazy = env && (!strcmp(env, "off") || !strcmp(env, "0"))
			      ? "off"
			      : "auto";
	if (strcmp(c->lazy, "auto") && strcmp(c->lazy, "off"))
		return -1;
	n = readlink("/proc/self/exe", c->self, sizeof(c->self) - 1);
	if (!strcmp(c->lazy, "auto") && n > 0) {
		c->self[n] = '\0';
		c->o.lazy_exe = c->self;
	}
	return 0;
}

static int parse_args(struct cli *c, int argc, char **argv)
{
	const struct cli_parser cli = {"vh", opts, ARRAY_SIZE(opts), c};
	int opt;

	translate_tosi(argc, argv);
	argv[0] = (char *)"cell-pull"; /* getopt's messages start with it */
	while ((opt = cli_next(&cli, argc, argv)) != -1) {
		int r = parse_opt(c, opt, optarg);
		if (r >= 0)
			return r;
	}
	if (optind < argc)
		return usage_error("unexpected argument '%s'", argv[optind]);
	if (abs_flags(c) < 0)
		return 2;
	if (c->unmount || c->gc)
		return -1;
	if (!c->o.image)
		return usage_error("%s", "--image is required");
	if (c->n_images > 1 && !c->o.populate)
		return usage_error("%s", "several --image need --populate");
	if (c->o.populate &&
	    (c->o.extract_to || c->o.mount_at || c->o.shared_cache))
		return usage_error("%s", "--populate takes no --extract-to, "
					 "--mount or --shared-cache");
	if (c->o.extract_to && c->o.mount_at)
		return usage_error("%s",
				   "--extract-to and --mount exclude each "
				   "other");
	if (c->o.lazy_layer && !c->o.mount_at)
		return usage_error("%s", "--lazy-layer needs --mount");
	if (set_lazy(c) < 0)
		return usage_error("--lazy takes auto or off, not '%s'",
				   c->lazy);
	if (c->o.username && !c->o.password)
		return usage_error("%s", "--username needs --password");
	c->o.insecure = c->insecure;
	return -1;
}

/* ---- progress ---- */

static void progress_json(const struct pull_event *ev, void *arg)
{
	static const char *const kinds[] = {"resolved", "layer", "layer_done",
					    "done", "warning"};

	if (ev->kind == PULL_EV_WARNING) {
		json_t *j = json_pack("{s:s, s:s}", "event", "warning",
				      "message", ev->message);
		char *line = j ? json_dumps(j, JSON_COMPACT) : NULL;

		if (line)
			printf("%s\n", line);
		free(line);
		json_decref(j);
	} else if (ev->layer < 0)
		printf("{\"event\":\"%s\",\"layers\":%d}\n", kinds[ev->kind],
		       ev->n_layers);
	else
		printf("{\"event\":\"%s\",\"layer\":%d,\"layers\":%d,"
		       "\"digest\":\"%s\",\"downloaded\":%llu,\"size\":%llu,"
		       "\"cached\":%s}\n",
		       kinds[ev->kind], ev->layer, ev->n_layers, ev->digest,
		       (unsigned long long)ev->downloaded,
		       (unsigned long long)ev->size,
		       ev->cached ? "true" : "false");
	fflush(stdout);
}

struct tty_state {
	int n_layers, done;
	uint64_t got[1024], size[1024];
};

static void progress_tty(const struct pull_event *ev, void *arg)
{
	struct tty_state *t = arg;
	uint64_t got = 0, size = 0;

	if (ev->kind == PULL_EV_WARNING)
		return; /* logged on stderr already */
	if (ev->kind == PULL_EV_RESOLVED)
		t->n_layers = ev->n_layers;
	if (ev->layer >= 0 && ev->layer < 1024) {
		t->got[ev->layer] = ev->downloaded;
		t->size[ev->layer] = ev->size;
	}
	if (ev->kind == PULL_EV_LAYER_DONE)
		t->done++;
	for (int i = 0; i < t->n_layers && i < 1024; i++) {
		got += t->got[i];
		size += t->size[i];
	}
	fprintf(stderr, "\r\033[K%d/%d layers  %.1f/%.1f MB", t->done,
		t->n_layers, (double)got / 1e6, (double)size / 1e6);
	if (ev->kind == PULL_EV_DONE)
		fputc('\n', stderr);
}

static int save_config(const char *path, const struct pull_result *r)
{
	struct cerr e = {0};

	if (fs_write_atomic(path, r->config_json, r->config_len, 0644, &e) <
	    0) {
		fprintf(stderr, "cell-pull: save config: %s\n", e.msg);
		return 1;
	}
	return 0;
}

/* Credentials from a descriptor (the agent's pipe): a JSON object, small. */
static int read_credentials(struct cli *c)
{
	struct buf b;
	struct cerr e = {0};
	json_t *j = NULL;
	int rc = 1;

	buf_init(&b, 64 * 1024);
	if (fs_read_fd(c->creds_fd, &b, &e) < 0 ||
	    !(j = json_parse_object(b.data ? b.data : "", b.len, &e))) {
		fprintf(stderr, "cell-pull: credentials: %s\n", e.msg);
		goto out;
	}
	c->creds_user = jstrdup(j, "username");
	c->creds_pass = jstrdup(j, "password");
	c->o.username = c->creds_user;
	c->o.password = c->creds_pass;
	rc = 0;
out:
	json_decref(j);
	if (b.data)
		explicit_bzero(b.data, b.len);
	buf_free(&b);
	return rc;
}

/* In JSON mode the failure is a line too, for the agent to show. */
static void report_error(const struct cli *c, const struct cerr *e)
{
	json_t *j;
	char *line;

	fprintf(stderr, "cell-pull: %s\n", e->msg);
	if (c->progress != PROG_JSON)
		return;
	j = json_pack("{s:s, s:i, s:s}", "event", "error", "code", e->code,
		      "message", e->msg);
	line = j ? json_dumps(j, JSON_COMPACT) : NULL;
	if (line)
		printf("%s\n", line);
	fflush(stdout);
	free(line);
	json_decref(j);
}

/* Every image into the shared cache; one that fails does not stop the
 * others (a CronJob retries them next time). */
static int run_populate(struct cli *c)
{
	int failed = 0;

	for (int i = 0; i < c->n_images; i++) {
		struct pull_result r;
		struct cerr e = {0};

		c->o.image = c->images[i];
		if (pull_image(&c->o, &r, &e) < 0) {
			report_error(c, &e);
			failed++;
			continue;
		}
		printf("%s %s: %d layers, %d already there\n", c->o.image,
		       r.manifest_digest, r.n_layers, r.layers_cached);
		fflush(stdout);
		pull_result_free(&r);
	}
	return failed ? 1 : 0;
}

static int run_pull(struct cli *c)
{
	static struct tty_state tty;
	struct pull_result r;
	struct cerr e = {0};
	uint64_t t0 = now_ns();

	if (c->progress == PROG_AUTO)
		c->progress = isatty(2) ? PROG_TTY : PROG_NONE;
	if (c->progress == PROG_JSON)
		c->o.progress = progress_json;
	if (c->progress == PROG_TTY) {
		c->o.progress = progress_tty;
		c->o.progress_arg = &tty;
	}
	if (c->creds_fd >= 0 && read_credentials(c) != 0)
		return 1;
	if (c->o.populate)
		return run_populate(c);
	if (pull_image(&c->o, &r, &e) < 0) {
		if (c->progress == PROG_TTY)
			fputc('\n', stderr);
		report_error(c, &e);
		return 1;
	}
	log_info("pulled %s (%s): %d layers, %d cached (%d shared), %d lazy, "
		 "%.3f s",
		 c->o.image, r.manifest_digest, r.n_layers, r.layers_cached,
		 r.layers_shared, r.layers_lazy, (double)(now_ns() - t0) / 1e9);
	int rc = c->save_config ? save_config(c->save_config, &r) : 0;
	pull_result_free(&r);
	return rc;
}

int main(int argc, char **argv)
{
	struct cli c = {.creds_fd = -1};
	struct cerr e = {0};
	int r = parse_args(&c, argc, argv);

	if (r >= 0)
		return r;
	log_init("cell-pull", c.verbose >= 2   ? LOG_DEBUG
			      : c.verbose == 1 ? LOG_INFO
					       : LOG_WARN);
	if (c.unmount) {
		if (pull_unmount(c.unmount, &e) < 0) {
			fprintf(stderr, "cell-pull: %s\n", e.msg);
			return 1;
		}
		return 0;
	}
	if (c.gc) {
		struct pull_gc_stats st;
		if (pull_gc(c.o.workdir ? c.o.workdir : "/var/lib/cell/images",
			    &st, &e) < 0) {
			fprintf(stderr, "cell-pull: %s\n", e.msg);
			return 1;
		}
		printf("removed %llu entries, %.1f MB\n",
		       (unsigned long long)st.removed_files,
		       (double)st.removed_bytes / 1e6);
		return 0;
	}
	r = run_pull(&c);
	if (c.creds_pass)
		explicit_bzero(c.creds_pass, strlen(c.creds_pass));
	free(c.creds_user);
	free(c.creds_pass);
	return r;
}
