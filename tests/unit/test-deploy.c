// SPDX-License-Identifier: Apache-2.0
/* Deploy packages: the multipart parser, and extraction against a corpus
 * of hostile archives (names that climb, links that escape, writes
 * through links, hardlinks to outside), plus the atomic replacement. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "../lib/tap.h"
#include "deploy.h"
#include "fsutil.h"
#include "util.h"

static char dir[64];
static int pkgfd;

/* ======================================================================
 * multipart
 * ====================================================================== */

struct sink {
	struct buf b;
	int fail_after; /* 0: never */
};

static int to_buf(void *ud, const void *p, size_t n, struct cerr *e)
{
	struct sink *s = ud;

	if (s->fail_after && s->b.len + n > (size_t)s->fail_after)
		return cerr_set(e, EFBIG, "sink full");
	return buf_append(&s->b, p, n, e);
}

/* Parse body fed in pieces of `step` bytes (0: all at once). */
static int parse(const char *body, size_t n, size_t step, struct sink *s,
		 struct cerr *e)
{
	struct mpart *m = mpart_new("XyZ", "package", to_buf, s);
	int r = 0;

	buf_init(&s->b, 0);
	if (!step)
		step = n ? n : 1;
	for (size_t i = 0; i < n && r == 0; i += step)
		r = mpart_feed(m, body + i, n - i < step ? n - i : step, e);
	if (r == 0)
		r = mpart_finish(m, e);
	mpart_free(m);
	buf_append(&s->b, "", 0, e);
	return r;
}

/* parse() of a NUL-terminated body. */
static int parse_str(const char *body, size_t step, struct sink *s,
		     struct cerr *e)
{
	return parse(body, strlen(body), step, s, e);
}

static const char good_body[] =
    "preamble to ignore\r\n"
    "--XyZ\r\n"
    "Content-Disposition: form-data; name=\"other\"\r\n\r\n"
    "not this\r\n"
    "--XyZ  \r\n"
    "Content-Disposition: form-data; name=\"package\"; "
    "filename=\"p.tgz\"\r\n"
    "Content-Type: application/octet-stream\r\n\r\n"
    "DATA\r\n--XyNOT a boundary\r\n--Xy\r\nmore\r\n"
    "--XyZ\r\n"
    "content-disposition: form-data; name=package\r\n\r\n"
    "second copy is ignored\r\n"
    "--XyZ--\r\nepilogue";
static const char good_data[] = "DATA\r\n--XyNOT a boundary\r\n--Xy\r\nmore";

static void test_multipart(void)
{
	struct sink s = {0};
	struct cerr e = {0};
	char b[MPART_BOUNDARY_MAX + 1];
	static const size_t steps[] = {0, 1, 2, 3, 7, 64};

	for (size_t i = 0; i < ARRAY_SIZE(steps); i++) {
		int r =
		    parse(good_body, sizeof(good_body) - 1, steps[i], &s, &e);
		ok(r == 0 && !strcmp(s.b.data, good_data),
		   "multipart in pieces of %zu: the package field, exactly",
		   steps[i]);
		buf_free(&s.b);
	}
	ok(parse_str("--XyZ\r\n\r\nx\r\n--XyZ--", 0, &s, &e) < 0 &&
	       e.code == EINVAL && strstr(e.msg, "package"),
	   "no package field: EINVAL (%s)", e.msg);
	buf_free(&s.b);
	ok(parse_str("--XyZ\r\nContent-Disposition: form-data; name=\"package\""
		     "\r\n\r\ntruncated",
		     0, &s, &e) < 0 &&
	       e.code == EINVAL,
	   "truncated body: EINVAL (%s)", e.msg);
	buf_free(&s.b);
	ok(parse_str("--XyZ\nContent-Disposition: form-data; name=package\n\n"
		     "x\n--XyZ--",
		     0, &s, &e) < 0,
	   "bare LF line ends: refused");
	buf_free(&s.b);
	{
		char *big = xmalloc(MPART_HEADERS_MAX + 64);
		size_t n = 0;

		memcpy(big, "--XyZ\r\nX: ", 10);
		n = 10;
		memset(big + n, 'a', MPART_HEADERS_MAX);
		n += MPART_HEADERS_MAX;
		ok(parse(big, n, 100, &s, &e) < 0 && e.code == EINVAL,
		   "endless part headers: EINVAL (%s)", e.msg);
		buf_free(&s.b);
		memset(big, 'p', MPART_HEADERS_MAX + 64);
		ok(parse(big, MPART_HEADERS_MAX + 64, 0, &s, &e) == 0 ||
		       e.code == EINVAL,
		   "a preamble without a boundary is refused or finishes "
		   "cleanly");
		buf_free(&s.b);
		free(big);
	}
	s.fail_after = 3;
	ok(parse(good_body, sizeof(good_body) - 1, 0, &s, &e) < 0 &&
	       e.code == EFBIG,
	   "the sink's error comes back as it was (%s)", e.msg);
	buf_free(&s.b);
	s.fail_after = 0;

	ok(mpart_boundary("multipart/form-data; boundary=abc", b, sizeof(b),
			  &e) == 0 &&
	       !strcmp(b, "abc"),
	   "boundary: token");
	ok(mpart_boundary("Multipart/Form-Data; charset=x; "
			  "BOUNDARY=\"a b\\\"c\"",
			  b, sizeof(b), &e) == 0 &&
	       !strcmp(b, "a b\"c"),
	   "boundary: quoted, any case, after another parameter");
	ok(mpart_boundary("application/json", b, sizeof(b), &e) < 0,
	   "boundary: not multipart");
	ok(mpart_boundary("multipart/form-data", b, sizeof(b), &e) < 0,
	   "boundary: missing");
	ok(mpart_boundary("multipart/form-data; boundary=", b, sizeof(b), &e) <
	       0,
	   "boundary: empty");
	ok(mpart_boundary("multipart/form-datax; boundary=a", b, sizeof(b),
			  &e) < 0,
	   "boundary: a longer type name");
	ok(mpart_boundary(NULL, b, sizeof(b), &e) < 0, "boundary: no header");
	{
		char ct[400];
		snprintf(ct, sizeof(ct), "multipart/form-data; boundary=%0*d",
			 MPART_BOUNDARY_MAX + 1, 0);
		ok(mpart_boundary(ct, b, sizeof(b), &e) < 0,
		   "boundary: too long");
	}
}

/* ======================================================================
 * packages
 * ====================================================================== */

enum kind { F, D, L, H, DEV };

struct ent {
	enum kind k;
	const char *name;
	const char *arg; /* data, or link target */
	int mode;
};

/* A tar.gz of ents in a temporary file, rewound. */
static int make_pkg(const struct ent *ents, size_t n, bool gzip)
{
	char path[] = "/tmp/test-deploy-pkg-XXXXXX";
	int fd = mkstemp(path);
	struct archive *a = archive_write_new();

	unlink(path);
	if (gzip)
		archive_write_add_filter_gzip(a);
	archive_write_set_format_pax_restricted(a);
	archive_write_open_fd(a, fd);
	for (size_t i = 0; i < n; i++) {
		struct archive_entry *e = archive_entry_new();
		const struct ent *x = &ents[i];

		archive_entry_set_pathname(e, x->name);
		archive_entry_set_perm(e, x->mode ? (mode_t)x->mode : 0644);
		archive_entry_set_uid(e, 1234);
		archive_entry_set_gid(e, 5678);
		switch (x->k) {
		case F:
			archive_entry_set_filetype(e, AE_IFREG);
			archive_entry_set_size(e, (la_int64_t)strlen(x->arg));
			break;
		case D:
			archive_entry_set_filetype(e, AE_IFDIR);
			break;
		case L:
			archive_entry_set_filetype(e, AE_IFLNK);
			archive_entry_set_symlink(e, x->arg);
			break;
		case H:
			archive_entry_set_filetype(e, AE_IFREG);
			archive_entry_set_hardlink(e, x->arg);
			break;
		case DEV:
			archive_entry_set_filetype(e, AE_IFCHR);
			archive_entry_set_rdev(e, makedev(1, 3));
			break;
		}
		archive_write_header(a, e);
		if (x->k == F)
			archive_write_data(a, x->arg, strlen(x->arg));
		archive_entry_free(e);
	}
	archive_write_close(a);
	archive_write_free(a);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

static int deploy_ents(const char *name, const struct ent *ents, size_t n,
		       struct cerr *e)
{
	int fd = make_pkg(ents, n, true), r;

	cerr_clear(e);
	r = deploy_package(pkgfd, name, fd, e);
	close(fd);
	return r;
}

static bool exists(const char *rel)
{
	struct stat st;
	char p[512];

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	return lstat(p, &st) == 0;
}

static char *slurp(const char *rel)
{
	char p[512];
	struct buf b;
	struct cerr e = {0};

	snprintf(p, sizeof(p), "%s/%s", dir, rel);
	buf_init(&b, 1 << 20);
	if (fs_read_file(p, &b, &e) < 0) {
		buf_free(&b);
		return xstrdup("(missing)");
	}
	buf_append(&b, "", 0, &e);
	return b.data;
}

/* "packages/<name>/rest" as it is in the version in force,
 * "packages/<name>/..data/rest": the top-level names are the layout's
 * links (agent/pod/pkgswap.c). */
static void in_data(const char *rel, char *p, size_t sz)
{
	const char *slash = strchr(rel + strlen("packages/"), '/');

	snprintf(p, sz, "%s/%.*s/..data%s", dir, (int)(slash - rel), rel,
		 slash);
}

static const char *link_of(const char *rel)
{
	static char t[256];
	char p[512];
	ssize_t n;

	in_data(rel, p, sizeof(p));
	n = readlink(p, t, sizeof(t) - 1);
	t[n > 0 ? n : 0] = '\0';
	return n > 0 ? t : "(none)";
}

static mode_t mode_of(const char *rel)
{
	struct stat st;
	char p[512];

	in_data(rel, p, sizeof(p));
	return lstat(p, &st) == 0 ? st.st_mode : 0;
}

/* No ".<name>.tmp-*" left in packages/. */
static bool no_leftovers(void)
{
	char p[512];
	bool clean = true;
	DIR *d;
	struct dirent *de;

	snprintf(p, sizeof(p), "%s/packages", dir);
	d = opendir(p);
	while (d && (de = readdir(d)))
		if (strstr(de->d_name, ".tmp-"))
			clean = false;
	if (d)
		closedir(d);
	return clean;
}

static void test_good(void)
{
	static const struct ent pkg[] = {
	    {D, "ROOTFS", NULL, 0755},
	    {D, "./ROOTFS/etc", NULL, 0750},
	    {F, "./ROOTFS/etc/hosts", "127.0.0.1 localhost\n", 0640},
	    {F, "ROOTFS/deep/er/file", "implicit parents\n", 0600},
	    {F, "ROOTFS/suid", "no set-id bits\n", 04755},
	    {L, "ROOTFS/deep/er/to-hosts", "ROOTFS/etc/hosts", 0},
	    {L, "ROOTFS/rel", "etc/hosts", 0},
	    {L, "ROOTFS/deep/up", "../etc/hosts", 0},
	    {H, "ROOTFS/hard", "ROOTFS/etc/hosts", 0},
	    {F, "README", "outside ROOTFS\n", 0},
	    {F, "ROOTFSX/a", "not ROOTFS\n", 0},
	    {F, "other/ROOTFS/a", "not ROOTFS\n", 0},
	    {DEV, "ROOTFS/null", NULL, 0666},
	    {D, "ROOTFS/ro", NULL, 0555},
	    {F, "ROOTFS/ro/inside", "written before the mode\n", 0644},
	};
	struct cerr e = {0};
	struct stat st;
	char *s;

	ok(deploy_ents("vol", pkg, ARRAY_SIZE(pkg), &e) == 0,
	   "a good package deploys (%s)", e.msg);
	s = slurp("packages/vol/etc/hosts");
	is_str(s, "127.0.0.1 localhost\n", "./ROOTFS/etc/hosts landed");
	free(s);
	ok((mode_of("packages/vol/etc/hosts") & 07777) == 0640,
	   "the file has the header's mode");
	ok((mode_of("packages/vol/etc") & 07777) == 0750,
	   "the directory has the header's mode");
	ok((mode_of("packages/vol/ro") & 07777) == 0555 &&
	       exists("packages/vol/ro/inside"),
	   "a 0555 directory still got its entries");
	s = slurp("packages/vol/deep/er/file");
	is_str(s, "implicit parents\n", "missing parents are created");
	free(s);
	ok((mode_of("packages/vol/suid") & 07777) == 0755,
	   "set-id bits are dropped");
	is_str(link_of("packages/vol/deep/er/to-hosts"), "../../etc/hosts",
	       "a ROOTFS/ link becomes relative to its own depth");
	s = slurp("packages/vol/deep/er/to-hosts");
	is_str(s, "127.0.0.1 localhost\n", "and it resolves inside");
	free(s);
	is_str(link_of("packages/vol/rel"), "etc/hosts",
	       "a relative link inside is kept");
	is_str(link_of("packages/vol/deep/up"), "../etc/hosts",
	       "a link may climb as deep as it is");
	ok(stat("/dev/null", &st) == 0 && exists("packages/vol/hard") &&
	       mode_of("packages/vol/hard") != 0,
	   "a hardlink inside works");
	ok(!exists("packages/vol/README") && !exists("packages/README") &&
	       !exists("packages/vol/a") && !exists("packages/vol/ROOTFSX"),
	   "entries outside ROOTFS/ are skipped");
	ok(!exists("packages/vol/null"), "device nodes are skipped");
	if (geteuid() == 0) {
		char p[512];
		snprintf(p, sizeof(p), "%s/packages/vol/etc/hosts", dir);
		ok(stat(p, &st) == 0 && st.st_uid == 1234 && st.st_gid == 5678,
		   "as root: the header's owner");
	} else {
		ok(1, "not root: owner left to the agent's user");
	}
	ok(no_leftovers(), "no temporary directory left behind");
}

/* Each of these must be refused as a whole, with nothing written outside
 * packages/<name>/ and the previous package left as it was. */
static const struct ent evil_dotdot[] = {
    {F, "ROOTFS/ok", "fine\n", 0},
    {F, "ROOTFS/../../escaped-dotdot", "gotcha\n", 0},
};
static const struct ent evil_dotdot2[] = {
    {F, "ROOTFS/a/../../../escaped-dotdot2", "gotcha\n", 0},
};
static const struct ent evil_outside_dotdot[] = {
    {F, "../escaped-outside", "gotcha\n", 0},
};
static const struct ent evil_abs_link[] = {
    {L, "ROOTFS/evil", "/tmp", 0},
    {F, "ROOTFS/evil/escaped-abs", "gotcha\n", 0},
};
static const struct ent evil_rel_link[] = {
    {L, "ROOTFS/evil", "../../..", 0},
    {F, "ROOTFS/evil/escaped-rel", "gotcha\n", 0},
};
static const struct ent evil_link_deep[] = {
    {D, "ROOTFS/a", NULL, 0755},
    {L, "ROOTFS/a/l", "../../x", 0},
};
static const struct ent evil_link_mid[] = {
    {D, "ROOTFS/a", NULL, 0755},
    {L, "ROOTFS/a/l", "b/../../../x", 0},
};
static const struct ent evil_hard_outside[] = {
    {H, "ROOTFS/h", "etc/passwd", 0},
};
static const struct ent evil_hard_dotdot[] = {
    {H, "ROOTFS/h", "ROOTFS/../../../../etc/passwd", 0},
};
static const struct ent evil_hard_abs[] = {
    {H, "ROOTFS/h", "/etc/passwd", 0},
};
static const struct ent evil_hard_symlink[] = {
    {L, "ROOTFS/a/b/l", "../../x", 0},
    {H, "ROOTFS/h", "ROOTFS/a/b/l", 0},
};
static const struct ent evil_hard_dir[] = {
    {D, "ROOTFS/d", NULL, 0755},
    {H, "ROOTFS/h", "ROOTFS/d", 0},
};
/* A link that is fine where it is, then a write through a symlinked
 * directory that would put the next link where it escapes. */
static const struct ent evil_via_dirlink[] = {
    {D, "ROOTFS/a/b", NULL, 0755},
    {L, "ROOTFS/s", ".", 0},
    {L, "ROOTFS/s/s/l", "../x", 0},
};

static void test_hostile(void)
{
	static const struct {
		const char *what;
		const struct ent *ents;
		size_t n;
		const char *outside;
	} cases[] = {
	    {"ROOTFS/../x", evil_dotdot, ARRAY_SIZE(evil_dotdot),
	     "escaped-dotdot"},
	    {"ROOTFS/a/../../../x", evil_dotdot2, ARRAY_SIZE(evil_dotdot2),
	     "escaped-dotdot2"},
	    {"../x outside ROOTFS", evil_outside_dotdot,
	     ARRAY_SIZE(evil_outside_dotdot), "packages/escaped-outside"},
	    {"an absolute symlink, then a write through it", evil_abs_link,
	     ARRAY_SIZE(evil_abs_link), "/tmp/escaped-abs"},
	    {"a climbing symlink, then a write through it", evil_rel_link,
	     ARRAY_SIZE(evil_rel_link), "escaped-rel"},
	    {"a link climbing above the package", evil_link_deep,
	     ARRAY_SIZE(evil_link_deep), NULL},
	    {"a link climbing after going down", evil_link_mid,
	     ARRAY_SIZE(evil_link_mid), NULL},
	    {"a hardlink to a name outside ROOTFS/", evil_hard_outside,
	     ARRAY_SIZE(evil_hard_outside), NULL},
	    {"a hardlink through ..", evil_hard_dotdot,
	     ARRAY_SIZE(evil_hard_dotdot), NULL},
	    {"a hardlink to an absolute path", evil_hard_abs,
	     ARRAY_SIZE(evil_hard_abs), NULL},
	    {"a hardlink to a symlink", evil_hard_symlink,
	     ARRAY_SIZE(evil_hard_symlink), NULL},
	    {"a hardlink to a directory", evil_hard_dir,
	     ARRAY_SIZE(evil_hard_dir), NULL},
	    {"a link placed through a directory symlink", evil_via_dirlink,
	     ARRAY_SIZE(evil_via_dirlink), NULL},
	};
	static const struct ent v1[] = {{F, "ROOTFS/keep", "old\n", 0}};
	struct cerr e = {0};

	ok(deploy_ents("target", v1, 1, &e) == 0, "the package to keep");
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *s;
		bool out;

		ok(deploy_ents("target", cases[i].ents, cases[i].n, &e) < 0 &&
		       e.code == EINVAL,
		   "refused: %s (%s)", cases[i].what, e.msg);
		if (!cases[i].outside)
			out = false;
		else if (cases[i].outside[0] == '/')
			out = access(cases[i].outside, F_OK) == 0;
		else
			out = exists(cases[i].outside);
		ok(!out, "  nothing was written outside");
		s = slurp("packages/target/keep");
		ok(!strcmp(s, "old\n") && !exists("packages/target/ok"),
		   "  the old package is intact");
		free(s);
	}
	ok(no_leftovers(), "no temporary directory left by refused packages");
}

/* Symlinks inside are fine to write through; their depth counts, not the
 * name's. */
static void test_links_inside(void)
{
	static const struct ent pkg[] = {
	    {D, "ROOTFS/a/b/c", NULL, 0755},
	    {L, "ROOTFS/d", "a/b/c", 0},
	    {F, "ROOTFS/d/through", "via a link\n", 0},
	    {L, "ROOTFS/d/up3", "../../../top", 0},
	    {F, "ROOTFS/top", "top\n", 0},
	    {L, "ROOTFS/d/up4", "../../../../x", 0},
	};
	struct cerr e = {0};
	char *s;

	ok(deploy_ents("links", pkg, 5, &e) == 0,
	   "writes through an inside symlink (%s)", e.msg);
	s = slurp("packages/links/a/b/c/through");
	is_str(s, "via a link\n", "the file landed where the link points");
	free(s);
	s = slurp("packages/links/d/up3");
	is_str(s, "top\n", "a link three deep may climb three levels");
	free(s);
	ok(deploy_ents("links", pkg, 6, &e) < 0 && e.code == EINVAL,
	   "but not four (%s)", e.msg);
}

static void test_replace(void)
{
	static const struct ent v1[] = {{F, "ROOTFS/a", "one\n", 0},
					{F, "ROOTFS/shared", "v1\n", 0}};
	static const struct ent v2[] = {{F, "ROOTFS/b", "two\n", 0},
					{F, "ROOTFS/shared", "v2\n", 0}};
	struct cerr e = {0};
	char *s;
	int old;
	char p[512], got[8] = "";

	ok(deploy_ents("rep", v1, 2, &e) == 0, "v1 deployed");
	snprintf(p, sizeof(p), "%s/packages/rep/shared", dir);
	old = open(p, O_RDONLY);
	ok(deploy_ents("rep", v2, 2, &e) == 0, "v2 replaces it");
	ok(!exists("packages/rep/a") && exists("packages/rep/b"),
	   "nothing of v1 is left, all of v2 is there");
	s = slurp("packages/rep/shared");
	is_str(s, "v2\n", "the shared name has v2's content");
	free(s);
	ok(pread(old, got, 3, 0) == 3 && !strncmp(got, "v1\n", 3),
	   "a reader of v1 still reads v1");
	close(old);
	{
		int fd = open("/dev/null", O_RDONLY);
		ok(deploy_package(pkgfd, "rep", fd, &e) < 0 && e.code == EINVAL,
		   "an empty upload is refused (%s)", e.msg);
		close(fd);
	}
	{
		int fd = make_pkg(v1, 2, false);
		ok(deploy_package(pkgfd, "rep", fd, &e) == 0,
		   "an uncompressed tar is accepted too");
		close(fd);
	}
	ok(deploy_ents("../x", v1, 2, &e) < 0 && e.code == EINVAL,
	   "a bad name is refused");
	ok(no_leftovers(), "no temporary directories");
}

/* A unit has packages/<name>/ bind-mounted: it holds that directory, so a
 * redeploy must change what is inside it, never replace it. A directory
 * fd stands for the mount here; tests/integration (test_agent_pod.py)
 * does it with a real unit. */
static void test_swap_in_place(void)
{
	static const struct ent v1[] = {{F, "ROOTFS/a", "one\n", 0},
					{F, "ROOTFS/d/f", "v1\n", 0}};
	static const struct ent v2[] = {{F, "ROOTFS/b", "two\n", 0},
					{F, "ROOTFS/d/f", "v2\n", 0},
					{F, "ROOTFS/..data", "mine\n", 0}};
	struct cerr e = {0};
	char p[512], got[8] = "";
	int held, f;
	size_t versions = 0;
	DIR *d;
	struct dirent *de;

	ok(deploy_ents("live", v1, 2, &e) == 0, "v1 deployed");
	snprintf(p, sizeof(p), "%s/packages/live", dir);
	held = open(p, O_RDONLY | O_DIRECTORY);
	ok(deploy_ents("live", v2, 3, &e) == 0, "v2 deployed (%s)", e.msg);
	f = openat(held, "d/f", O_RDONLY);
	ok(f >= 0 && read(f, got, 3) == 3 && !strncmp(got, "v2\n", 3),
	   "the held directory reads v2");
	if (f >= 0)
		close(f);
	ok(faccessat(held, "a", F_OK, AT_SYMLINK_NOFOLLOW) < 0 &&
	       faccessat(held, "b", F_OK, 0) == 0,
	   "a name gone is gone, a new name is there");
	{
		char *s = slurp("packages/live/..data/..data");
		is_str(s, "mine\n",
		       "a package's own ..data stays in its "
		       "version, the layout's link is not it");
		free(s);
	}
	d = fdopendir(dup(held));
	while (d && (de = readdir(d)))
		if (de->d_name[0] == '.' && de->d_name[1] == '.' &&
		    de->d_name[2] && strcmp(de->d_name, "..data"))
			versions++;
	if (d)
		closedir(d);
	ok(versions == 1, "one version left (%zu)", versions);
	close(held);
	/* A directory of the old layout (a real tree) is converted. */
	snprintf(p, sizeof(p), "%s/packages/old/d", dir);
	fs_mkdir_p(p, 0755, &e);
	snprintf(p, sizeof(p), "%s/packages/old/a", dir);
	close(open(p, O_WRONLY | O_CREAT, 0644));
	ok(deploy_ents("old", v2, 3, &e) == 0 && !exists("packages/old/a") &&
	       exists("packages/old/b"),
	   "an old-layout directory is converted (%s)", e.msg);
	{
		char *s = slurp("packages/old/d/f");
		is_str(s, "v2\n", "and reads the new version");
		free(s);
	}
}

static void test_names_cleanup(void)
{
	static const char *const good[] = {"resolvconf", "etchosts",
					   "kubeconfig", "my-vol_1.x"};
	static const char *const bad[] = {"",	 ".",	"..",	 ".hidden",
					  "a/b", "x y", "tab\t", "é"};
	struct cerr e = {0};
	char p[512];

	for (size_t i = 0; i < ARRAY_SIZE(good); i++)
		ok(deploy_name_ok(good[i]), "name ok: %s", good[i]);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		ok(!deploy_name_ok(bad[i]), "name refused: '%s'", bad[i]);
	snprintf(p, sizeof(p), "%s/packages/.vol.tmp-abcdef/x", dir);
	fs_mkdir_p(p, 0755, &e);
	ok(deploy_cleanup(pkgfd, &e) == 0 && no_leftovers() &&
	       exists("packages/vol"),
	   "deploy_cleanup removes leftovers and nothing else");
}

int main(void)
{
	char p[128];
	struct cerr e = {0};

	snprintf(dir, sizeof(dir), "/tmp/test-deploy-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	snprintf(p, sizeof(p), "%s/packages", dir);
	mkdir(p, 0755);
	pkgfd = open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	test_multipart();
	test_good();
	test_hostile();
	test_links_inside();
	test_replace();
	test_swap_in_place();
	test_names_cleanup();
	close(pkgfd);
	fs_rm_rf(dir, &e);
	return tap_done();
}
