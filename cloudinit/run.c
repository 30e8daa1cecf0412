// SPDX-License-Identifier: Apache-2.0
/* The whole run: defaults, the log file, datasource, parse, state,
 * modules, and the exit code; and --validate. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ci-internal.h"
#include "cleanup.h"
#include "fsutil.h"
#include "log.h"
#include "util.h"

#define METADATA_IP "http://169.254.169.254"

/* "FILE:LINE: [error: ]part N (type): message" */
static void problem_line(const struct ci_problem *p, const char *file, bool sev,
			 char *out, size_t cap)
{
	char at[32] = "";

	if (p->line > 0)
		snprintf(at, sizeof(at), ":%d", p->line);
	snprintf(out, cap, "%s%s: %s%s%s%s", file, at,
		 !sev		      ? ""
		 : p->sev == CI_ERROR ? "error: "
				      : "warning: ",
		 p->part ? p->part : "", p->part ? ": " : "", p->msg);
}

static void log_problems(const struct ci_problems *pr)
{
	char line[1536];

	for (size_t i = 0; i < pr->n; i++) {
		problem_line(&pr->v[i], "user-data", false, line, sizeof(line));
		ci_log(pr->v[i].sev == CI_ERROR ? LOG_ERROR : LOG_WARN, "%s",
		       line);
	}
	if (pr->dropped)
		ci_log(LOG_WARN, "user-data: %zu more problems not shown",
		       pr->dropped);
}

/* Defaults beneath the root, so that --root DIR alone keeps every trace
 * of a run inside DIR. */
static char *under_root(const char *root, const char *path)
{
	size_t n = strlen(root);

	while (n > 1 && root[n - 1] == '/')
		n--;
	if (n == 1 && root[0] == '/')
		return xstrdup(path);
	return xasprintf("%.*s%s", (int)n, root, path);
}

static int open_log(const char *path)
{
	cleanup_free char *dir = xstrdup(path);
	char *slash = strrchr(dir, '/');
	struct cerr e = {0};
	int fd;

	if (slash && slash != dir) {
		*slash = '\0';
		fs_mkdir_p(dir, 0755, &e);
	}
	/* 0600: commands' output may well hold secrets. */
	fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY,
		  0600);
	if (fd < 0)
		ci_log(LOG_WARN, "log file %s: %s; logging to stderr only",
		       path, strerror(errno));
	return fd;
}

struct run {
	struct ci_opts o;
	char *state_dir, *log_file;
	int rootfd, logfd, nullfd;
	struct ci_source src;
	struct ci_config cfg;
	struct ci_state st;
};

static void run_free(struct run *r)
{
	ci_state_close(&r->st);
	ci_config_free(&r->cfg);
	ci_source_free(&r->src);
	if (r->rootfd >= 0)
		close(r->rootfd);
	if (r->nullfd >= 0)
		close(r->nullfd);
	ci_log_set_file(-1);
	if (r->logfd >= 0)
		close(r->logfd);
	free(r->state_dir);
	free(r->log_file);
}

static int setup(struct run *r, const struct ci_opts *in)
{
	struct ci_opts *o = &r->o;

	*o = *in;
	o->root = o->root ? o->root : "/";
	o->ec2_url = o->ec2_url ? o->ec2_url : METADATA_IP;
	o->gce_url = o->gce_url ? o->gce_url : METADATA_IP;
	o->azure_url = o->azure_url ? o->azure_url : METADATA_IP;
	o->default_user = o->default_user ? o->default_user : "root";
	o->timeout = o->timeout > 0 ? o->timeout : 30;
	r->state_dir = o->state_dir
			   ? xstrdup(o->state_dir)
			   : under_root(o->root, "/var/lib/cell-cloudinit");
	r->log_file = o->log_file
			  ? xstrdup(o->log_file)
			  : under_root(o->root, "/var/log/cell-cloudinit.log");
	o->state_dir = r->state_dir;
	o->log_file = r->log_file;
	r->logfd = *r->log_file ? open_log(r->log_file) : -1;
	ci_log_set_file(r->logfd);
	r->rootfd = open(o->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	r->nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (r->rootfd < 0 || r->nullfd < 0) {
		ci_log(LOG_ERROR, "open %s: %s",
		       r->rootfd < 0 ? o->root : "/dev/null", strerror(errno));
		return -1;
	}
	return 0;
}

static int fetch_and_parse(struct run *r)
{
	struct cerr e = {0};
	struct ci_vars vars;

	if (ci_datasource_fetch(&r->o, &r->src, &e) < 0) {
		ci_log(LOG_ERROR, "datasource: %s", e.msg);
		/* An oversized document is the document's fault. */
		return e.code == EFBIG ? CI_EXIT_DOCUMENT : CI_EXIT_FAILED;
	}
	ci_log(LOG_INFO, "datasource %s: instance %s, %zu bytes of user data",
	       r->src.name, r->src.meta.instance_id, r->src.userdata.len);
	vars.private_ipv4 = r->src.meta.local_ipv4;
	vars.public_ipv4 = r->src.meta.public_ipv4;
	ci_userdata_parse(r->src.userdata.data, r->src.userdata.len, &vars,
			  &r->cfg);
	log_problems(&r->cfg.problems);
	return CI_EXIT_OK;
}

int ci_run(const struct ci_opts *in)
{
	struct run r = {.rootfd = -1, .logfd = -1, .nullfd = -1};
	struct ci_ctx c = {.start_ns = now_ns()};
	struct ci_report rep;
	struct cerr e = {0};
	char summary[128];
	int rc;

	if (setup(&r, in) < 0) {
		run_free(&r);
		return CI_EXIT_DOCUMENT;
	}
	ci_log(LOG_INFO, "cell-cloudinit %s: root %s, state %s", CELL_VERSION,
	       r.o.root, r.state_dir);
	rc = fetch_and_parse(&r);
	if (rc != CI_EXIT_OK) {
		run_free(&r);
		return rc;
	}
	if (ci_state_open(r.state_dir, r.src.meta.instance_id, &r.st, &e) < 0) {
		ci_log(LOG_ERROR, "%s", e.msg);
		run_free(&r);
		return CI_EXIT_FAILED;
	}
	ci_log(LOG_INFO, "instance %s: %s", r.st.iid,
	       r.st.new_instance ? "new (everything runs)"
				 : "seen before (only per-boot modules run)");
	c = (struct ci_ctx){.o = &r.o,
			    .rootfd = r.rootfd,
			    .host_root = !strcmp(r.o.root, "/"),
			    .cfg = &r.cfg,
			    .meta = &r.src.meta,
			    .st = &r.st,
			    .datasource = r.src.name,
			    .state_dir = r.state_dir,
			    .out_fd = r.logfd >= 0 ? r.logfd : 2,
			    .null_fd = r.nullfd,
			    .start_ns = c.start_ns};
	ci_apply(&c, &rep);
	/* --canonical-yaml: a part that is not YAML counts as a warning. */
	rc = r.cfg.problems.errors > (r.o.canonical_yaml ? r.cfg.bad_yaml : 0)
		 ? CI_EXIT_DOCUMENT
	     : rep.failed ? CI_EXIT_FAILED
			  : CI_EXIT_OK;
	snprintf(summary, sizeof(summary),
		 "modules ran %d, failed %d, skipped %d; user-data errors %zu",
		 rep.ran, rep.failed, rep.skipped, r.cfg.problems.errors);
	if (ci_state_finish(&r.st, summary, &e) < 0)
		ci_log(LOG_ERROR, "%s", e.msg);
	ci_log(rc ? LOG_ERROR : LOG_INFO, "done in %.1f ms: %s (exit %d)",
	       (double)(now_ns() - c.start_ns) / 1e6, summary, rc);
	run_free(&r);
	return rc;
}

int ci_validate(const char *path, FILE *out)
{
	struct buf b;
	struct cerr e = {0};
	struct ci_config cfg;
	char line[1536];
	size_t warnings = 0;
	int rc;

	buf_init(&b, CI_MAX_USERDATA);
	if (fs_read_file(path, &b, &e) < 0) {
		fprintf(out, "%s: error: %s\n", path, e.msg);
		buf_free(&b);
		return CI_EXIT_DOCUMENT;
	}
	ci_userdata_parse(b.data, b.len, NULL, &cfg);
	for (size_t i = 0; i < cfg.problems.n; i++) {
		problem_line(&cfg.problems.v[i], path, true, line,
			     sizeof(line));
		fprintf(out, "%s\n", line);
		warnings += cfg.problems.v[i].sev == CI_WARN;
	}
	fprintf(out,
		"%s: %zu error(s), %zu warning(s)%s; %zu write_files, %zu "
		"milpa_files, %zu bootcmd, %zu runcmd, %zu users, %zu groups, "
		"%zu scripts, %zu boothooks\n",
		path, cfg.problems.errors, warnings,
		cfg.problems.dropped ? " (some not shown)" : "", cfg.n_files,
		cfg.n_milpa, cfg.n_bootcmd, cfg.n_runcmd, cfg.n_users,
		cfg.n_groups, cfg.n_scripts, cfg.n_boothooks);
	rc = cfg.problems.errors ? CI_EXIT_DOCUMENT : CI_EXIT_OK;
	ci_config_free(&cfg);
	buf_free(&b);
	return rc;
}
