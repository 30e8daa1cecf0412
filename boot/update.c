// SPDX-License-Identifier: Apache-2.0
/* Self-update: when the boot files ask for another agent version than the
 * running one (itzo_version/itzo_url as Kip writes them, or our own names
 * cell_agent_version/cell_agent_url), fetch <url>/cell-agent-<version> and
 * its .sha256, check it, and rename it over the agent binary. On an arm64
 * machine (uname -m: aarch64) the file is cell-agent-<version>-arm64: the
 * x86-64 name is the one Kip's itzo_url servers always had, and one
 * directory serves both (`make release` writes both names). The agent
 * then re-execs itself; its pods keep running (their monitors are not its
 * children in spirit) and it re-adopts them from the state directory.
 *
 * A marker (<state>/agent-update: "<version> <sha256>") remembers which
 * version the binary on disk was installed for, so that a binary whose
 * built-in version string differs from the requested name ("v1.2.3",
 * "nightly") is not fetched again on every start. */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "boot-internal.h"
#include "cleanup.h"
#include "digest.h"
#include "fsutil.h"
#include "log.h"
#include "util.h"

/* The first line of dir/a, else dir/b, trimmed; NULL when neither. */
static char *read_value(const char *dir, const char *a, const char *b)
{
	const char *names[] = {a, b};

	for (int i = 0; i < 2; i++) {
		cleanup_free char *p = xasprintf("%s/%s", dir, names[i]);
		struct buf v;
		struct cerr e = {0};
		size_t n;

		buf_init(&v, 4096);
		if (fs_read_file(p, &v, &e) < 0) {
			buf_free(&v);
			continue;
		}
		n = strcspn(v.data, "\r\n");
		while (n && (v.data[n - 1] == ' ' || v.data[n - 1] == '\t'))
			n--;
		v.data[n] = '\0';
		return buf_steal(&v, NULL);
	}
	return NULL;
}

static const char *bare(const char *v)
{
	return v[0] == 'v' && v[1] >= '0' && v[1] <= '9' ? v + 1 : v;
}

static bool version_ok(const char *v)
{
	size_t n = strlen(v);

	return n && n <= 64 &&
	       strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			 "0123456789.+_-") == n &&
	       v[0] != '.';
}

static int file_digest(const char *path, char out[DIGEST_STR_MAX],
		       struct cerr *e)
{
	cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct hasher h;
	char b[65536];
	ssize_t k;

	if (fd < 0)
		return cerr_sys(e, "open %s", path);
	if (hasher_init(&h, "sha256", e) < 0)
		return -1;
	while ((k = read(fd, b, sizeof(b))) > 0)
		hasher_update(&h, b, (size_t)k);
	if (k < 0) {
		hasher_free(&h);
		return cerr_sys(e, "read %s", path);
	}
	hasher_final(&h, out);
	return 0;
}

/* Already running (or installed) what is asked for? */
static bool have_version(const struct boot_opts *o, const char *want)
{
	cleanup_free char *marker = xasprintf("%s/agent-update", o->state_dir);
	char have[DIGEST_STR_MAX], line[256], ver[80], dg[DIGEST_STR_MAX];
	struct cerr e = {0};
	FILE *f;
	bool same = false;

	if (!strcmp(bare(want), bare(o->agent_version)))
		return true;
	f = fopen(marker, "re");
	if (!f)
		return false;
	if (fgets(line, sizeof(line), f) &&
	    sscanf(line, "%79s %135s", ver, dg) == 2 && !strcmp(ver, want) &&
	    file_digest(o->agent_path, have, &e) == 0 && !strcmp(have, dg))
		same = true;
	fclose(f);
	return same;
}

/* "<64 hex>" or sha256sum's "<64 hex>  name". */
static int fetch_sum(const struct boot_opts *o, const char *url,
		     char want[DIGEST_STR_MAX], struct cerr *e)
{
	struct boot_http r = {
	    .url = url, .ca_bundle = o->ca_bundle, .timeout_ms = 30000};
	size_t n;

	buf_init(&r.reply, 4096);
	if (boot_http(&r, e) < 0) {
		buf_free(&r.reply);
		return cerr_prefix(e, "GET %s", url);
	}
	n = strspn(r.reply.data, "0123456789abcdefABCDEF");
	if (r.status != 200 || n != 64) {
		buf_free(&r.reply);
		return r.status != 200
			   ? cerr_set(e, EPROTO, "GET %s: HTTP %ld", url,
				      r.status)
			   : cerr_set(e, EPROTO, "%s: not a SHA-256 checksum",
				      url);
	}
	snprintf(want, DIGEST_STR_MAX, "sha256:%.64s", r.reply.data);
	for (char *p = want; *p; p++)
		*p = (char)(*p >= 'A' && *p <= 'F' ? *p + 32 : *p);
	buf_free(&r.reply);
	return 0;
}

static int install(const struct boot_opts *o, const char *tmp,
		   const char *want_ver, const char *dg, struct cerr *e)
{
	cleanup_free char *marker = xasprintf("%s/agent-update", o->state_dir);
	cleanup_free char *line = xasprintf("%s %s\n", want_ver, dg);

	if (chmod(tmp, 0755) < 0)
		return cerr_sys(e, "chmod %s", tmp);
	if (fs_mkdir_p(o->state_dir, 0700, e) < 0 ||
	    fs_write_atomic(marker, line, strlen(line), 0600, e) < 0)
		return -1;
	if (rename(tmp, o->agent_path) < 0)
		return cerr_sys(e, "rename %s to %s", tmp, o->agent_path);
	return 0;
}

/* The release file's suffix for this machine (uname -m; the test seam
 * CELL_BOOT_MACHINE stands in for it); NULL for a machine no release is
 * built for. */
static const char *machine_suffix(const char **machine)
{
	const char *m = getenv("CELL_BOOT_MACHINE");
	static struct utsname u;

	if (!m || !*m)
		m = uname(&u) == 0 ? u.machine : "";
	*machine = m;
	if (!strcmp(m, "x86_64"))
		return "";
	if (!strcmp(m, "aarch64") || !strcmp(m, "arm64"))
		return "-arm64";
	return NULL;
}

static int download(const struct boot_opts *o, const char *url, const char *ver,
		    const char *suffix, struct cerr *e)
{
	cleanup_free char *bin_url =
	    xasprintf("%s/cell-agent-%s%s", url, ver, suffix);
	cleanup_free char *sum_url = xasprintf("%s.sha256", bin_url);
	cleanup_free char *dir = xstrdup(o->agent_path);
	cleanup_free char *tmp = NULL;
	char want[DIGEST_STR_MAX], got[DIGEST_STR_MAX];
	int fd, r;

	if (fetch_sum(o, sum_url, want, e) < 0)
		return -1;
	tmp =
	    xasprintf("%s/.cell-agent-%s.%d", dirname(dir), ver, (int)getpid());
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0700);
	if (fd < 0)
		return cerr_sys(e, "create %s", tmp);
	r = boot_http_download(bin_url, o->ca_bundle, fd, BOOT_MAX_AGENT, got,
			       e);
	if (r == 0 && fsync(fd) < 0)
		r = cerr_sys(e, "fsync %s", tmp);
	close(fd);
	if (r == 0 && strcmp(got, want) != 0) {
		log_error("self-update REFUSED: %s has %s, but %s says %s; "
			  "keeping the running agent %s",
			  bin_url, got, sum_url, want, o->agent_version);
		r = 1;
	}
	if (r == 0 && install(o, tmp, ver, got, e) < 0)
		r = -1;
	if (r != 0)
		unlink(tmp);
	return r;
}

int update_agent(const struct boot_opts *o, struct cerr *e)
{
	cleanup_free char *ver =
	    read_value(o->boot_dir, "cell_agent_version", "itzo_version");
	cleanup_free char *url =
	    read_value(o->boot_dir, "cell_agent_url", "itzo_url");
	const char *suffix, *machine;
	int r;

	if (!ver || !*ver || !strcmp(ver, "latest") || !o->agent_path)
		return 0;
	if (!version_ok(ver)) {
		log_warn(
		    "itzo_version \"%.64s\" is not a version name; keeping "
		    "the running agent",
		    ver);
		return 0;
	}
	if (have_version(o, ver))
		return 0;
	if (!url || !*url) {
		log_warn(
		    "itzo_version asks for %s (running %s) but there is no "
		    "itzo_url; keeping the running agent",
		    ver, o->agent_version);
		return 0;
	}
	suffix = machine_suffix(&machine);
	if (!suffix) {
		log_warn("itzo_version asks for %s, but no release is built "
			 "for this machine (%.64s); keeping the running agent",
			 ver, machine);
		return 0;
	}
	while (url[0] && url[strlen(url) - 1] == '/')
		url[strlen(url) - 1] = '\0';
	log_info("self-update: running %s, asked for %s from %s",
		 o->agent_version, ver, url);
	r = download(o, url, ver, suffix, e);
	if (r < 0)
		return cerr_prefix(e, "self-update to %s", ver);
	if (r == 1)
		return 0;
	log_info("self-update: cell-agent %s installed at %s", ver,
		 o->agent_path);
	return 1;
}
