// SPDX-License-Identifier: Apache-2.0
/* What only cell-cloudinit's own files and tests share.
 *
 * The pipeline: a datasource (datasource.c) yields meta-data and raw user
 * data; the parser (userdata.c, mime.c, cloudconfig.c over yamltree.c and
 * codec.c) turns the user data into a typed struct ci_config plus a list of
 * problems, without any I/O; the modules (modules.c, files.c, users.c,
 * exec.c) apply the config beneath a root directory, once per instance as
 * recorded by state.c. */
#ifndef CELL_CI_INTERNAL_H
#define CELL_CI_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "buf.h"
#include "gunzip.h"
#include "cloudinit.h"
#include "err.h"
#include "util.h"
#include "yamltree.h"

/* ---- caps on outside input ---- */
/* User data, raw and after gunzip; the controller sends at most 16,000
 * bytes, other clouds allow more (EC2 16 KiB, GCE 256 KiB, Azure 64 KiB). */
#define CI_MAX_USERDATA (1u << 20)
/* All write_files contents of one document once decoded, and one file. */
#define CI_MAX_CONTENT_TOTAL (32u << 20)
#define CI_MAX_CONTENT_FILE (16u << 20)
#define CI_MAX_METADATA (64u << 10)  /* one meta-data value or file */
#define CI_MAX_AZURE_JSON (1u << 20) /* Azure's instance document */
#define CI_MAX_MIME_PARTS 256
#define CI_MAX_MIME_DEPTH 8
#define CI_MAX_KEYS 64 /* public SSH keys taken from meta-data */
#define CI_MAX_PROBLEMS 200
#define CI_MAX_ETC_FILE (8u << 20) /* /etc/passwd and friends */

/* ---- problems: what the parser found, with the line it is on ---- */
enum ci_sev { CI_WARN, CI_ERROR };

struct ci_problem {
	enum ci_sev sev;
	int line;   /* 1-based line in the document or part; 0 = none */
	char *part; /* "part 2 (text/cloud-config)" in multipart, else NULL */
	char *msg;
};

struct ci_problems {
	struct ci_problem *v;
	size_t n, cap;
	size_t dropped; /* problems past CI_MAX_PROBLEMS */
	size_t errors;
};

/* Returns -1, so that parsers can write `return ERR(...)`. */
int ci_problem_add(struct ci_problems *p, enum ci_sev sev, const char *part,
		   int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
void ci_problems_free(struct ci_problems *p);

/* ---- codec.c: base64 (gzip: common/gunzip.h) ---- */
/* Decode standard base64; whitespace is skipped, padding optional. */
int ci_b64_decode(const char *in, size_t len, struct buf *out, struct cerr *e);

/* ---- the typed config ---- */
struct ci_cmd {
	char *shell; /* a string: runs through /bin/sh -c */
	char **argv; /* a list: execve'd; NULL-terminated */
	int line;
};

struct ci_file {
	char *path; /* clean, relative to the root (path_clean) */
	char *data; /* decoded content */
	size_t len;
	char *owner; /* "user[:group]"; NULL = root:root */
	mode_t mode;
	bool append;
	bool defer;
	int line;
};

struct ci_user {
	char *name;
	char *gecos, *homedir, *shell, *primary_group, *passwd;
	char **groups; /* supplementary, NULL-terminated or NULL */
	char **sudo;   /* rules, NULL-terminated or NULL */
	char **keys;   /* ssh_authorized_keys */
	bool system, no_create_home, lock_passwd;
	bool passwd_hashed; /* from hashed_passwd: applies to existing users */
	long long uid;	    /* -1 = allocate */
	int line;
};

struct ci_group {
	char *name;
	char **members; /* NULL-terminated or NULL */
	int line;
};

struct ci_script {
	char *name; /* file name: a sanitised MIME filename or part-NNN */
	char *body;
	size_t len;
};

struct ci_config {
	bool cloud_config; /* at least one #cloud-config part was seen */
	struct ci_file *files, *milpa;
	size_t n_files, cap_files, n_milpa, cap_milpa;
	struct ci_cmd *bootcmd, *runcmd;
	size_t n_bootcmd, cap_bootcmd, n_runcmd, cap_runcmd;
	bool has_bootcmd, has_runcmd;
	char *hostname, *fqdn;
	bool preserve_hostname, prefer_fqdn;
	/* manage_etc_hosts: 0 unset or false, 1 true/"template", 2 "localhost"
	 */
	int manage_etc_hosts;
	size_t bad_yaml; /* cloud-config parts that were not YAML mappings */
	struct ci_user *users;
	size_t n_users, cap_users;
	bool default_user; /* users: lists "default" */
	struct ci_group *groups;
	size_t n_groups, cap_groups;
	char **ssh_keys;
	char *final_message;
	struct ci_script *scripts, *boothooks;
	size_t n_scripts, cap_scripts, n_boothooks, cap_boothooks;
	struct ci_problems problems;
	size_t content_total; /* decoded write_files bytes so far */
};

/* Placeholders from meta-data, substituted in #cloud-config text. */
struct ci_vars {
	const char *private_ipv4;
	const char *public_ipv4;
};

/* ---- userdata.c: the whole user-data blob ---- */
/* Pure: no I/O, no logging. Returns 0, or -1 when the problems hold at
 * least one error; out is filled either way (an error in one part or key
 * never hides the others) and must be freed. */
int ci_userdata_parse(const void *data, size_t len, const struct ci_vars *vars,
		      struct ci_config *out);
void ci_config_free(struct ci_config *c);

/* Internal to the parser files. */
struct ci_parse {
	struct ci_config *cfg;
	const struct ci_vars *vars;
	char *part;	 /* context for problems, or NULL */
	int n_parts;	 /* parts seen so far, for names and caps */
	size_t inflated; /* bytes produced by gunzip so far */
	/* One decoded MIME part to parse by its type (userdata.c's): mime.c
	 * calls back rather than calls up, so it stays below the parsers. */
	void (*part_fn)(struct ci_parse *ps, const char *type,
			const char *filename, const char *p, size_t n,
			int depth);
};
enum ci_kind {
	CI_KIND_CLOUD_CONFIG,
	CI_KIND_SCRIPT,
	CI_KIND_BOOTHOOK,
	CI_KIND_MIME,
	CI_KIND_GZIP,
	CI_KIND_EMPTY,
	CI_KIND_UNSUPPORTED, /* a known format that is not handled */
	CI_KIND_UNKNOWN,
};
enum ci_kind ci_userdata_kind(const char *p, size_t n, const char **what);
void ci_parse_blob(struct ci_parse *ps, const char *p, size_t n,
		   const char *filename, int depth);
void ci_parse_cloud_config(struct ci_parse *ps, const char *p, size_t n);
void ci_parse_script(struct ci_parse *ps, bool boothook, const char *p,
		     size_t n, const char *filename);
void ci_parse_gzip(struct ci_parse *ps, const char *p, size_t n,
		   const char *filename, int depth);
/* ccget.c: the getters under cloudconfig.c and ccusers.c. */
/* A problem at a node of the document being parsed. */
#define ERR(ps, node, ...)                                                     \
	ci_problem_add(&(ps)->cfg->problems, CI_ERROR, (ps)->part,             \
		       (node) ? (node)->line : 0, __VA_ARGS__)
#define WARN(ps, node, ...)                                                    \
	ci_problem_add(&(ps)->cfg->problems, CI_WARN, (ps)->part,              \
		       (node) ? (node)->line : 0, __VA_ARGS__)
/* "a mapping", "a list" or "a scalar", for a problem's text. */
const char *ci_cc_type_name(const struct ynode *n);
/* A scalar as a string (NULL when null); an error for anything else. */
int ci_cc_str(struct ci_parse *ps, const struct ynode *n, const char *what,
	      char **out);
int ci_cc_bool(struct ci_parse *ps, const struct ynode *n, const char *what,
	       bool *out);
/* The boolean at key of mapping m, when there is one (out untouched). */
int ci_cc_opt_bool(struct ci_parse *ps, const struct ynode *m, const char *key,
		   bool *out);
int ci_cc_list(struct ci_parse *ps, const struct ynode *n, const char *what,
	       bool commas, char ***out);
int ci_cc_keys(struct ci_parse *ps, const struct ynode *n, const char *what,
	       char ***out);
void ci_cc_users(struct ci_parse *ps, const struct ynode *n);
void ci_cc_groups(struct ci_parse *ps, const struct ynode *n);
/* system_info.default_user of a cloud.cfg text as a user; -1 when it has
 * none (or is not YAML). */
int ci_cc_default_user(const char *text, size_t len, struct ci_user *out);
void ci_user_free(struct ci_user *u);
bool ci_name_ok(const char *s);	 /* user and group names */
bool ci_field_ok(const char *s); /* no ':' or line break */
bool ci_hostname_ok(const char *s);
/* mime.c */
void ci_mime_parse(struct ci_parse *ps, const char *p, size_t n, int depth);
/* cloudconfig.c: one #cloud-config document into ps->cfg. */
void ci_cloud_config_parse(struct ci_parse *ps, const char *text, size_t len);
/* Permissions as cloud-init reads them: an int (YAML 1.1: 0644 is octal)
 * or a string parsed as octal. Exposed for tests. */
int ci_parse_mode(const struct ynode *n, mode_t *out, bool *decimal_warn);

/* ---- meta-data ---- */
struct ci_meta {
	char *instance_id;
	char *hostname;
	char *local_ipv4;
	char *public_ipv4;
	char **keys; /* public SSH keys, NULL-terminated or NULL */
};
void ci_meta_free(struct ci_meta *m);
/* Append a key (one line, trimmed) unless present or over CI_MAX_KEYS. */
void ci_meta_add_key(struct ci_meta *m, const char *key, size_t len);
/* NoCloud meta-data (YAML or JSON): instance-id, local-hostname/hostname,
 * public-keys (string, list or mapping), local-ipv4, public-ipv4. */
int ci_meta_parse_nocloud(const char *p, size_t n, struct ci_meta *m,
			  struct cerr *e);
/* Azure's /metadata/instance JSON. */
int ci_meta_parse_azure(const char *p, size_t n, struct ci_meta *m,
			struct cerr *e);
/* GCE ssh-keys attribute: "user:key" lines; only keys of `user` (or the
 * "cloudinit" user) that have not expired at `now` are taken. */
void ci_meta_parse_gce_keys(const char *p, size_t n, const char *user,
			    time_t now, struct ci_meta *m);
/* Azure's instance JSON: the first interface's primary and secondary
 * private IPv4 (sec NULL when none). */
int ci_meta_parse_azure_ips(const char *p, size_t n, char **pri, char **sec,
			    struct cerr *e);
/* A one-line meta-data value: trimmed, NULL when empty or not one line. */
char *ci_meta_value(const char *p, size_t n);
/* A safe directory name for an instance id ([A-Za-z0-9._-], others '_'). */
char *ci_instance_dir_name(const char *iid);

/* ---- http.c: libcurl, loaded with dlopen on first use ---- */
struct ci_http_req {
	const char *url;
	const char *method;	 /* NULL = GET */
	const char *post;	 /* a POST body (NUL-terminated), or NULL */
	const char *headers[4];	 /* "Name: value", NULL-terminated */
	const char *want_header; /* a response header to keep, or NULL */
	size_t max_body;
	bool follow;	/* follow redirects (the URL datasource) */
	bool use_proxy; /* metadata services are never reached by proxy */
	/* results */
	long status; /* 0 when no HTTP answer came */
	struct buf body;
	char *header_value; /* value of want_header, or NULL */
	struct cerr err;    /* why status is 0 */
};
void ci_http_req_init(struct ci_http_req *r, const char *url, size_t max);
void ci_http_req_reset(struct ci_http_req *r);
void ci_http_req_free(struct ci_http_req *r);
/* Run all requests at once. A request with no answer or a 5xx/429 answer
 * is retried with back-off (from 100 ms, doubling to 1 s) until the
 * deadline; each try may take at most try_ms. Fails only when libcurl
 * cannot be loaded. */
int ci_http_run(struct ci_http_req *reqs, size_t n, uint64_t deadline_ns,
		long try_ms, struct cerr *e);
/* Probes: run all, retrying failures with back-off, until accept() takes
 * one (its index is returned) or the deadline passes (-1, ETIMEDOUT). */
typedef bool (*ci_http_accept_fn)(const struct ci_http_req *r);
int ci_http_race(struct ci_http_req *reqs, size_t n, ci_http_accept_fn *accept,
		 uint64_t deadline_ns, long try_ms, struct cerr *e);
/* Whether libcurl can be loaded here. */
bool ci_http_available(struct cerr *e);

/* ---- datasource.c ---- */
struct ci_source {
	char *name; /* "ec2", "gce", "azure", "nocloud", "file", "url" */
	struct ci_meta meta;
	struct buf userdata;
};
/* dscloud.c: the metadata services, and the probe behind auto
 * (CI_DS_AUTO with e set when none answered). */
int ci_ds_ec2(const char *base, uint64_t deadline, struct ci_source *out,
	      struct cerr *e);
int ci_ds_gce(const char *base, const char *user, uint64_t deadline,
	      struct ci_source *out, struct cerr *e);
int ci_ds_azure(const char *base, uint64_t deadline, struct ci_source *out,
		struct cerr *e);
/* An IMDSv2 session token; *token NULL with 0 when IMDS only speaks v1. */
int ci_ec2_token(const char *base, uint64_t deadline, char **token,
		 struct cerr *e);
enum ci_ds_kind ci_ds_probe(const struct ci_opts *o, uint64_t deadline,
			    struct cerr *e);
int ci_datasource_fetch(const struct ci_opts *o, struct ci_source *out,
			struct cerr *e);
void ci_source_free(struct ci_source *s);

/* ---- xmltext.c: a bounded XML reader (Azure's documents) ---- */
/* Append to out the text of the first element at path (local names from
 * the root, prefixes ignored). 1 found, 0 not there, -1 malformed. */
int ci_xml_text(const char *xml, size_t len, const char *const *path,
		size_t path_len, struct buf *out, struct cerr *e);

/* ---- azure.c: the provisioning medium and the wire server ---- */
#define CI_MAX_OVF (1u << 20)
struct ci_ovf {
	bool has_userdata;   /* CustomData (or UserData) was present */
	struct buf userdata; /* decoded */
	char *hostname;
};
void ci_ovf_free(struct ci_ovf *o);
/* Pure: ovf-env.xml into its CustomData (base64-decoded) and HostName. */
int ci_ovf_parse(const char *xml, size_t len, struct ci_ovf *o, struct cerr *e);
/* Mount dev (or the first of /dev/sr0, /dev/cdrom) read-only, read and
 * parse ovf-env.xml, unmount. 1 when there is no such device. */
int ci_azure_ovf_read(const char *dev, struct ci_ovf *o, struct cerr *e);
/* medium.c: mount dev read-only (nosuid, nodev, noexec) on a fresh
 * directory /run/cell-<tag>.XXXXXX (or under /tmp), trying each type of the
 * NULL-terminated list; call fn on it, then unmount and remove it.
 * fn's result; -1 with e set when no directory could be made;
 * CI_MEDIUM_NO_MOUNT with errno from the last attempt when no type
 * mounted (the caller says what that means). */
#define CI_MEDIUM_NO_MOUNT (-2)
int ci_with_medium(const char *dev, const char *tag, const char *const *types,
		   int (*fn)(const char *mp, void *arg, struct cerr *e),
		   void *arg, struct cerr *e);
/* Pure: the goal state's Incarnation, ContainerId and InstanceId. */
int ci_goalstate_parse(const char *xml, size_t len, char **incarnation,
		       char **container, char **instance, struct cerr *e);
/* Tell the wire server (host[:port]; NULL = 168.63.129.16) that
 * provisioning is done, as cloud-init does. */
int ci_azure_report_ready(const char *wireserver, uint64_t deadline,
			  struct cerr *e);
/* The Azure datasource: the medium's CustomData first, IMDS for the rest
 * (and the user data when there is no medium). */
int ci_ds_azure_full(const struct ci_opts *o, uint64_t deadline,
		     struct ci_source *out, struct cerr *e);

/* ---- state.c: per-instance markers ---- */
struct ci_state {
	int dirfd;	   /* the state dir */
	int instfd;	   /* instances/<iid> */
	char *iid;	   /* the instance id */
	char *iid_dir;	   /* its directory name */
	bool new_instance; /* differs from the one recorded last time */
};
int ci_state_open(const char *dir, const char *iid, struct ci_state *st,
		  struct cerr *e);
bool ci_state_done(const struct ci_state *st, const char *module);
int ci_state_mark(const struct ci_state *st, const char *module,
		  struct cerr *e);
/* Record the instance as the current one and write boot-finished. */
int ci_state_finish(const struct ci_state *st, const char *summary,
		    struct cerr *e);
void ci_state_close(struct ci_state *st);

/* ---- logging: stderr (log.h) and the log file ---- */
void ci_log_set_file(int fd);
void ci_log(int level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- the modules ---- */
struct ci_ctx {
	const struct ci_opts *o;
	int rootfd;
	bool host_root; /* --root is "/" */
	const struct ci_config *cfg;
	const struct ci_meta *meta;
	const struct ci_state *st;
	const char *datasource;
	const char *state_dir; /* resolved --state-dir */
	int out_fd;	       /* where commands' output goes */
	int null_fd;	       /* /dev/null for their stdin */
	uint64_t start_ns;
};

/* exec.c: run one command (argv, or a shell string when argv is NULL)
 * with the context's conventions; *status is the wait status. */
int ci_exec(const struct ci_ctx *c, const char *what, const char *shell,
	    char *const *argv, int *status, struct cerr *e);
/* Log and judge a wait status: 0 for exit 0, else -1 with e filled. */
int ci_exec_status(const char *what, int status, struct cerr *e);

/* files.c */
struct ci_ids {
	uid_t uid;
	gid_t gid;
};
/* Resolve "user[:group]" against ROOT/etc/passwd and ROOT/etc/group. */
int ci_resolve_owner(int rootfd, const char *owner, struct ci_ids *ids,
		     struct cerr *e);
/* Write data atomically to rel (clean) beneath rootfd: temp file, fchown,
 * fchmod, fsync, rename. Parent dirs are created 0755. */
int ci_write_file(int rootfd, const char *rel, const void *data, size_t len,
		  mode_t mode, const struct ci_ids *ids, struct cerr *e);
/* Append to rel (links followed in the root), creating it 0644; mode and
 * owner of an existing file are left alone (cloud-init's append_file). */
int ci_append_file(int rootfd, const char *rel, const void *data, size_t len,
		   struct cerr *e);
/* Read rel beneath rootfd into out (whose max caps it); ENOENT is passed
 * through in e->code so callers can treat a missing file as empty. */
int ci_read_file(int rootfd, const char *rel, struct buf *out, struct cerr *e);
int ci_write_files(const struct ci_ctx *c, const struct ci_file *v, size_t n,
		   bool deferred, const char *what);

/* users.c */
int ci_users_groups(const struct ci_ctx *c);
/* The name of the image's default user (cloud.cfg), or NULL. */
char *ci_default_user_name(int rootfd);
/* Add keys to ~user/.ssh/authorized_keys (no duplicate lines). */
int ci_authorize_keys(int rootfd, const char *user, char *const *keys,
		      struct cerr *e);

/* modules.c */
struct ci_report {
	int failed;  /* modules that failed */
	int ran;     /* modules that ran */
	int skipped; /* already done for this instance */
};
int ci_apply(struct ci_ctx *c, struct ci_report *r);
/* cloud-init's util.shellify: "#!/bin/sh" and one line per command; a
 * list's arguments each in single quotes. */
char *ci_shellify(const struct ci_cmd *v, size_t n);
/* "# VERB by cell-cloudinit v. X on DATE", as cloud-init's make_header. */
char *ci_header(const char *verb);
char *ci_hosts_canonical(const char *old, size_t len, bool existed,
			 const char *fqdn, const char *shortname);
/* Hostname helpers, exposed for tests. */
int ci_hostname_pick(const struct ci_config *cfg, const struct ci_meta *m,
		     char **shortname, char **fqdn);
char *ci_hosts_update(const char *old, size_t len, const char *fqdn,
		      const char *shortname);
char *ci_final_message(const char *tmpl, const char *iid, const char *ds,
		       double uptime, time_t now);

#endif
