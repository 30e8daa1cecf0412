// SPDX-License-Identifier: Apache-2.0
/* Where the user data comes from. Local sources first (a NoCloud seed
 * directory, a cidata-labelled filesystem, a file), then the network (a
 * URL, or the cloud metadata services in dscloud.c). `auto` tries the
 * local NoCloud places, then probes EC2, GCE and Azure at once. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ci-internal.h"
#include "cleanup.h"
#include "fsutil.h"
#include "log.h"
#include "util.h"

void ci_source_free(struct ci_source *s)
{
	free(s->name);
	ci_meta_free(&s->meta);
	buf_free(&s->userdata);
	memset(s, 0, sizeof(*s));
}

/* Read dir/name; a missing file is not an error (*found tells). */
static int read_opt(const char *dir, const char *name, size_t max,
		    struct buf *out, bool *found, struct cerr *e)
{
	cleanup_free char *p = xasprintf("%s/%s", dir, name);

	buf_init(out, max);
	*found = false;
	if (fs_read_file(p, out, e) < 0) {
		buf_free(out);
		if (e->code == ENOENT) {
			cerr_clear(e);
			return 0;
		}
		return -1;
	}
	*found = true;
	return 0;
}

/* A NoCloud seed: user-data and meta-data (either may be missing, not
 * both); ENOENT when the directory holds neither. */
static int nocloud_dir(const char *dir, struct ci_source *out, struct cerr *e)
{
	struct buf md;
	bool have_ud, have_md;

	if (read_opt(dir, "user-data", CI_MAX_USERDATA, &out->userdata,
		     &have_ud, e) < 0 ||
	    read_opt(dir, "meta-data", CI_MAX_METADATA, &md, &have_md, e) < 0)
		return cerr_prefix(e, "NoCloud seed %s", dir);
	if (!have_ud && !have_md)
		return cerr_set(e, ENOENT, "%s: no user-data or meta-data",
				dir);
	if (have_md &&
	    ci_meta_parse_nocloud(md.data, md.len, &out->meta, e) < 0) {
		buf_free(&md);
		return cerr_prefix(e, "%s/meta-data", dir);
	}
	buf_free(&md);
	if (!out->meta.instance_id)
		out->meta.instance_id =
		    xstrdup("iid-dsnocloud"); /* cloud-init's */
	out->name = xasprintf("nocloud (%s)", dir);
	return 0;
}

/* Run argv and keep the first line of its stdout (blkid). */
static char *first_line_of(const char *const argv[])
{
	int fds[2], status;
	char out[4096];
	size_t n = 0;
	ssize_t k;
	pid_t pid;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return NULL;
	pid = fork();
	if (pid == 0) {
		dup2(fds[1], 1);
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	close(fds[1]);
	while (pid > 0 && n < sizeof(out) - 1 &&
	       (k = read(fds[0], out + n, sizeof(out) - 1 - n)) != 0) {
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			break;
		n += (size_t)k;
	}
	close(fds[0]);
	if (pid < 0 || waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0)
		return NULL;
	out[n] = '\0';
	out[strcspn(out, "\n")] = '\0';
	return out[0] ? xstrdup(out) : NULL;
}

/* The cidata device: the option, udev's by-label links, else blkid (only
 * when udev has made no links at all, e.g. before it runs). */
static char *cidata_device(const struct ci_opts *o)
{
	static const char *const links[] = {"/dev/disk/by-label/cidata",
					    "/dev/disk/by-label/CIDATA"};
	/* -c /dev/null: probe the devices, not blkid's cache, which can
	 * name a device that is gone or relabelled. */
	const char *blkid[] = {"/sbin/blkid",  "-c", "/dev/null", "-t",
			       "LABEL=cidata", "-o", "device",	  NULL};
	char real[PATH_MAX], *dev;

	if (o->cidata_device)
		return xstrdup(o->cidata_device);
	for (size_t i = 0; i < ARRAY_SIZE(links); i++)
		if (realpath(links[i], real))
			return xstrdup(real);
	if (fs_exists("/dev/disk/by-label") || access(blkid[0], X_OK) < 0)
		return NULL;
	dev = first_line_of(blkid);
	if (!dev) {
		blkid[4] = "LABEL=CIDATA";
		dev = first_line_of(blkid);
	}
	return dev;
}

/* Mount the device read-only on a temporary directory, read the seed,
 * unmount. The filesystem type is found by trying the usual ones. */
static int nocloud_mounted(const char *mp, void *out, struct cerr *e)
{
	return nocloud_dir(mp, out, e);
}

static int nocloud_device(const char *dev, struct ci_source *out,
			  struct cerr *e)
{
	static const char *const types[] = {"iso9660", "vfat", "ext4",	"ext2",
					    "udf",     "xfs",  "btrfs", NULL};
	int r = ci_with_medium(dev, "cloudinit-cidata", types, nocloud_mounted,
			       out, e);

	if (r == CI_MEDIUM_NO_MOUNT)
		return cerr_sys(e, "mount %s (iso9660, vfat, ext4, …)", dev);
	if (r == 0) {
		free(out->name);
		out->name = xasprintf("nocloud (%s)", dev);
	}
	return r;
}

static int ds_file(const struct ci_opts *o, struct ci_source *out,
		   struct cerr *e)
{
	struct buf md;

	buf_init(&out->userdata, CI_MAX_USERDATA);
	if (fs_read_file(o->file, &out->userdata, e) < 0)
		return -1;
	if (o->meta_data) {
		buf_init(&md, CI_MAX_METADATA);
		if (fs_read_file(o->meta_data, &md, e) < 0 ||
		    ci_meta_parse_nocloud(md.data, md.len, &out->meta, e) < 0) {
			buf_free(&md);
			return cerr_prefix(e, "%s", o->meta_data);
		}
		buf_free(&md);
	}
	out->name = xasprintf("file (%s)", o->file);
	return 0;
}

static int ds_url(const struct ci_opts *o, uint64_t deadline,
		  struct ci_source *out, struct cerr *e)
{
	struct ci_http_req r;

	ci_http_req_init(&r, o->url, CI_MAX_USERDATA);
	r.follow = true;
	r.use_proxy = true; /* an ordinary URL may well need the proxy */
	if (ci_http_run(&r, 1, deadline, 10000, e) < 0) {
		ci_http_req_free(&r);
		return -1;
	}
	if (r.status != 200) {
		if (r.status)
			cerr_set(e, EPROTO, "%s: HTTP %ld", o->url, r.status);
		else
			*e = r.err;
		ci_http_req_free(&r);
		return -1;
	}
	out->userdata = r.body;
	buf_init(&r.body, 0);
	ci_http_req_free(&r);
	out->name = xasprintf("url (%s)", o->url);
	if (o->meta_data) {
		struct ci_opts fo = *o;
		struct ci_source tmp = {0};
		fo.file = o->meta_data; /* only for its meta-data */
		if (ds_file(&fo, &tmp, e) < 0)
			return -1;
		out->meta = tmp.meta;
		memset(&tmp.meta, 0, sizeof(tmp.meta));
		ci_source_free(&tmp);
	}
	return 0;
}

/* Explicit NoCloud: the seed dir if given, else the default seed dirs
 * beneath the root, else a cidata filesystem. 1 when none exists. */
static int ds_nocloud(const struct ci_opts *o, struct ci_source *out,
		      struct cerr *e)
{
	static const char *const seeds[] = {"var/lib/cloud/seed/nocloud",
					    "var/lib/cloud/seed/nocloud-net"};
	cleanup_free char *dev = NULL;

	if (o->seed_dir)
		return nocloud_dir(o->seed_dir, out, e);
	for (size_t i = 0; i < ARRAY_SIZE(seeds); i++) {
		cleanup_free char *d = xasprintf(
		    "%s%s%s", o->root, str_has_suffix(o->root, "/") ? "" : "/",
		    seeds[i]);
		int r = nocloud_dir(d, out, e);
		if (r == 0 || e->code != ENOENT)
			return r;
		cerr_clear(e);
	}
	dev = cidata_device(o);
	if (dev)
		return nocloud_device(dev, out, e);
	return 1;
}

/* A cloud's metadata service, named (--datasource) or probed (auto). */
static int ds_cloud(const struct ci_opts *o, enum ci_ds_kind which,
		    uint64_t deadline, struct ci_source *out, struct cerr *e)
{
	if (which == CI_DS_EC2)
		return ci_ds_ec2(o->ec2_url, deadline, out, e);
	if (which == CI_DS_GCE)
		return ci_ds_gce(o->gce_url, o->default_user, deadline, out, e);
	return ci_ds_azure_full(o, deadline, out, e);
}

static int ds_auto(const struct ci_opts *o, uint64_t deadline,
		   struct ci_source *out, struct cerr *e)
{
	enum ci_ds_kind which;
	int r = ds_nocloud(o, out, e);

	/* A seed that cannot be read must not keep a cloud instance from
	 * its metadata service: say so and go on probing. */
	if (r < 0 && !o->seed_dir) {
		ci_log(LOG_WARN, "NoCloud: %s; probing the clouds", e->msg);
		ci_source_free(out);
		cerr_clear(e);
		r = 1;
	}
	if (r <= 0)
		return r;
	which = ci_ds_probe(o, deadline, e);
	if (which == CI_DS_EC2 || which == CI_DS_GCE || which == CI_DS_AZURE)
		return ds_cloud(o, which, deadline, out, e);
	if (e->code == ENOSYS)
		return -1;
	return cerr_set(e, ENOENT,
			"no datasource: no NoCloud seed, no cidata "
			"filesystem, and no metadata service (EC2 %s, "
			"GCE %s, Azure %s) answered in %.0f s",
			o->ec2_url, o->gce_url, o->azure_url, o->timeout);
}

static int dispatch(const struct ci_opts *o, uint64_t deadline,
		    struct ci_source *out, struct cerr *e)
{
	int r;

	switch (o->datasource) {
	case CI_DS_EC2:
	case CI_DS_GCE:
	case CI_DS_AZURE:
		return ds_cloud(o, o->datasource, deadline, out, e);
	case CI_DS_FILE:
		return ds_file(o, out, e);
	case CI_DS_URL:
		return ds_url(o, deadline, out, e);
	case CI_DS_NOCLOUD:
		r = ds_nocloud(o, out, e);
		if (r > 0)
			return cerr_set(e, ENOENT,
					"no NoCloud seed directory "
					"and no cidata filesystem");
		return r;
	case CI_DS_AUTO:
	default:
		return ds_auto(o, deadline, out, e);
	}
}

int ci_datasource_fetch(const struct ci_opts *o, struct ci_source *out,
			struct cerr *e)
{
	uint64_t deadline = now_ns() + (uint64_t)(o->timeout * 1e9);

	memset(out, 0, sizeof(*out));
	if (dispatch(o, deadline, out, e) < 0) {
		ci_source_free(out);
		return -1;
	}
	if (o->instance_id) {
		free(out->meta.instance_id);
		out->meta.instance_id = xstrdup(o->instance_id);
	}
	/* cloud-init's DataSourceNone uses this id for sources without
	 * meta-data (a file or a URL). */
	if (!out->meta.instance_id)
		out->meta.instance_id = xstrdup("iid-datasource-none");
	return 0;
}
