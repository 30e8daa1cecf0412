// SPDX-License-Identifier: Apache-2.0
/* The library entry points cell-boot uses: fetch user data with the same
 * datasources as cell-cloudinit, write its boot files with the same parser
 * and writer, and read a few EC2 meta-data paths with the same IMDSv2
 * client. Nothing here runs modules or keeps per-instance state. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ci-internal.h"
#include "cleanup.h"
#include "fsutil.h"
#include "log.h"
#include "path.h"
#include "util.h"

#define METADATA_IP "http://169.254.169.254"
#define EC2_TRY_MS 2000

void ci_userdata_free(struct ci_userdata *u)
{
	free(u->source);
	free(u->instance_id);
	buf_free(&u->data);
	memset(u, 0, sizeof(*u));
}

int ci_fetch_userdata(const struct ci_opts *in, struct ci_userdata *out,
		      struct cerr *e)
{
	struct ci_opts o = *in;
	struct ci_source src;

	memset(out, 0, sizeof(*out));
	o.root = o.root ? o.root : "/";
	o.ec2_url = o.ec2_url ? o.ec2_url : METADATA_IP;
	o.gce_url = o.gce_url ? o.gce_url : METADATA_IP;
	o.azure_url = o.azure_url ? o.azure_url : METADATA_IP;
	o.default_user = o.default_user ? o.default_user : "root";
	o.timeout = o.timeout > 0 ? o.timeout : 30;
	if (ci_datasource_fetch(&o, &src, e) < 0)
		return -1;
	out->source = steal_ptr(&src.name);
	out->instance_id = steal_ptr(&src.meta.instance_id);
	out->data = src.userdata;
	buf_init(&src.userdata, 0);
	ci_source_free(&src);
	return 0;
}

/* The part of a clean path below a clean prefix, or NULL. */
static const char *below(const char *path, const char *prefix)
{
	size_t n = strlen(prefix);

	if (strncmp(path, prefix, n) != 0 || path[n] != '/' || !path[n + 1])
		return NULL;
	return path + n + 1;
}

static int write_list(int dfd, const struct ci_file *v, size_t n,
		      const char *prefix, int *written, struct cerr *e)
{
	for (size_t i = 0; i < n; i++) {
		const char *rel = below(v[i].path, prefix);

		if (!rel) {
			log_debug("user data: /%s is not a boot file; "
				  "cell-cloudinit writes it",
				  v[i].path);
			continue;
		}
		if (ci_write_file(dfd, rel, v[i].data, v[i].len, v[i].mode,
				  NULL, e) < 0)
			return cerr_prefix(e, "write_files /%s", v[i].path);
		(*written)++;
	}
	return 0;
}

int ci_write_prefixed_files(const void *ud, size_t len, const char *prefix,
			    const char *dir, struct cerr *e)
{
	struct ci_config cfg;
	char clean[PATH_MAX_INPUT];
	cleanup_close int dfd = -1;
	int written = 0, r = 0;

	if (path_clean(prefix, clean, sizeof(clean), e) < 0)
		return cerr_prefix(e, "boot prefix %s", prefix);
	ci_userdata_parse(ud, len, NULL, &cfg);
	if (cfg.problems.errors) {
		const struct ci_problem *p = NULL;
		for (size_t i = 0; i < cfg.problems.n && !p; i++)
			if (cfg.problems.v[i].sev == CI_ERROR)
				p = &cfg.problems.v[i];
		cerr_set(
		    e, EINVAL, "user data has %zu error(s); first: line %d: %s",
		    cfg.problems.errors, p ? p->line : 0, p ? p->msg : "?");
		ci_config_free(&cfg);
		return -1;
	}
	if (fs_mkdir_p(dir, 0700, e) < 0 ||
	    (dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
		if (!e->code)
			cerr_sys(e, "open %s", dir);
		ci_config_free(&cfg);
		return -1;
	}
	if (write_list(dfd, cfg.files, cfg.n_files, clean, &written, e) < 0 ||
	    write_list(dfd, cfg.milpa, cfg.n_milpa, clean, &written, e) < 0)
		r = -1;
	ci_config_free(&cfg);
	return r < 0 ? -1 : written;
}

static void url_free(char **urls, struct ci_http_req *rq, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		ci_http_req_free(&rq[i]);
		free(urls[i]);
	}
}

static int ec2_round(const char *base, const char *const *paths, size_t n,
		     uint64_t deadline, char **out, struct cerr *e)
{
	cleanup_free char *token = NULL, *hdr = NULL;
	struct ci_http_req rq[16];
	char *urls[16];
	int r = 0;

	if (ci_ec2_token(base, deadline, &token, e) < 0)
		return -1;
	hdr = token ? xasprintf("X-aws-ec2-metadata-token: %s", token) : NULL;
	for (size_t i = 0; i < n; i++) {
		urls[i] = xasprintf("%s/%s", base, paths[i]);
		ci_http_req_init(&rq[i], urls[i], CI_MAX_METADATA);
		rq[i].headers[0] = hdr;
	}
	if (ci_http_run(rq, n, deadline, EC2_TRY_MS, e) < 0)
		r = -1;
	for (size_t i = 0; i < n && r == 0; i++) {
		if (rq[i].status == 401)
			r = 1; /* the token went stale: one more round */
		else if (rq[i].status == 200)
			out[i] = buf_steal(&rq[i].body, NULL);
		else if (rq[i].status != 404)
			r = cerr_set(e, EPROTO, "IMDS %s: %s", paths[i],
				     rq[i].status ? "unexpected HTTP status"
						  : rq[i].err.msg);
	}
	url_free(urls, rq, n);
	return r;
}

int ci_ec2_get(const char *base, const char *const *paths, size_t n,
	       double timeout, char **out, struct cerr *e)
{
	uint64_t deadline = now_ns() + (uint64_t)(timeout * 1e9);
	int r = 1;

	if (n > 16)
		return cerr_set(e, EINVAL, "ci_ec2_get: too many paths");
	base = base ? base : METADATA_IP;
	for (int round = 0; r == 1 && round < 2; round++) {
		for (size_t i = 0; i < n; i++) {
			free(out[i]);
			out[i] = NULL;
		}
		r = ec2_round(base, paths, n, deadline, out, e);
	}
	if (r == 1)
		r = cerr_set(e, EACCES,
			     "IMDS refused two fresh session tokens");
	if (r < 0)
		for (size_t i = 0; i < n; i++) {
			free(out[i]);
			out[i] = NULL;
		}
	return r;
}
