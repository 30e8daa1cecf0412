// SPDX-License-Identifier: Apache-2.0
#include "podrun.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <unistd.h>

#include "buf.h"
#include "cleanup.h"
#include "fsutil.h"
#include "path.h"
#include "util.h"

#define ETC_FILE_MAX (4u << 20)

static const char *const default_caps[] = {
    "CAP_CHOWN",   "CAP_DAC_OVERRIDE", "CAP_FSETID",	       "CAP_FOWNER",
    "CAP_MKNOD",   "CAP_NET_RAW",      "CAP_SETGID",	       "CAP_SETUID",
    "CAP_SETFCAP", "CAP_SETPCAP",      "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT",
    "CAP_KILL",	   "CAP_AUDIT_WRITE",
};

/* ---- a growable string vector ---- */

struct strv {
	char **v;
	size_t n, cap;
};

static void strv_push(struct strv *s, char *owned)
{
	if (s->n + 2 > s->cap) {
		s->cap = s->cap ? 2 * s->cap : 16;
		s->v = xrealloc(s->v, s->cap * sizeof(char *));
	}
	s->v[s->n++] = owned;
	s->v[s->n] = NULL;
}

static char **strv_done(struct strv *s)
{
	if (!s->v)
		s->v = xcalloc(1, sizeof(char *));
	return s->v;
}

/* ---- the environment ---- */

/* Index of NAME in env ("NAME=..."), or -1. */
static ssize_t env_find(const struct strv *env, const char *name, size_t len)
{
	for (size_t i = 0; i < env->n; i++)
		if (!strncmp(env->v[i], name, len) && env->v[i][len] == '=')
			return (ssize_t)i;
	return -1;
}

/* Set "entry" (NAME=value, owned) in env: a later definition replaces an
 * earlier one in place, so no name is left twice in the process's
 * environment. With keep, an existing definition stays (a default). */
static void env_put(struct strv *env, char *entry, bool keep)
{
	const char *eq = strchr(entry, '=');
	ssize_t i = env_find(env, entry, eq ? (size_t)(eq - entry) : 0);

	if (!eq || (i >= 0 && keep)) {
		free(entry);
	} else if (i >= 0) {
		free(env->v[i]);
		env->v[i] = entry;
	} else {
		strv_push(env, entry);
	}
}

static int secret_value(const struct env_var *ev, const struct pod_spec *pod,
			char **out, struct cerr *e)
{
	for (size_t j = 0; j < pod->n_secrets; j++) {
		const struct secret *s = &pod->secrets[j];

		if (strcmp(s->name, ev->secret_name))
			continue;
		for (size_t k = 0; k < s->n_items; k++)
			if (!strcmp(s->items[k].name, ev->secret_key)) {
				*out =
				    xstrndup(s->items[k].value, s->item_len[k]);
				return 0;
			}
	}
	return cerr_set(e, ENOENT, "env %s: secret %s has no key %s", ev->name,
			ev->secret_name, ev->secret_key);
}

char **podrun_env(const struct unit_spec *u, const struct pod_spec *pod,
		  const struct image_config *img,
		  const struct podrun_env_defaults *d, struct cerr *e)
{
	struct strv out = {0};

	for (size_t i = 0; img && img->env && img->env[i]; i++)
		env_put(&out, xstrdup(img->env[i]), false);
	if (d && d->hostname)
		env_put(&out, xasprintf("HOSTNAME=%s", d->hostname), false);
	/* Values are used as sent: $(VAR) references in them were expanded
	 * by virtual-kubelet before Kip saw the pod (and Itzo never expanded
	 * them); expanding again would undo a $$(X) the user escaped. */
	for (size_t i = 0; i < u->n_env; i++) {
		const struct env_var *ev = &u->env[i];
		cleanup_free char *val = NULL;

		if (ev->secret_name && secret_value(ev, pod, &val, e) < 0) {
			strv_free(strv_done(&out));
			return NULL;
		}
		env_put(&out,
			xasprintf("%s=%s", ev->name,
				  val	      ? val
				  : ev->value ? ev->value
					      : ""),
			false);
	}
	env_put(&out,
		xstrdup("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/"
			"bin:/sbin:/bin"),
		true);
	if (d && d->home)
		env_put(&out, xasprintf("HOME=%s", d->home), true);
	if (d && d->tty)
		env_put(&out, xstrdup("TERM=xterm"), true);
	return strv_done(&out);
}

char **podrun_argv(const struct unit_spec *u, const struct image_config *img,
		   struct cerr *e)
{
	struct strv out = {0};
	/* An empty list means "not given", as in Kubernetes: the controller
	 * may send null or [] for a container without command/args. */
	bool has_cmd = u->command && u->command[0];
	bool has_args = u->args && u->args[0];
	char *const *first = has_cmd ? u->command : img->entrypoint;
	char *const *rest = has_args ? u->args : has_cmd ? NULL : img->cmd;

	/* The controller has already expanded $(VAR) in command and args
	 * (Kip's pkg/util/expand.go); expanding again would undo a $$(X)
	 * that the user escaped. */
	for (size_t i = 0; first && first[i]; i++)
		strv_push(&out, xstrdup(first[i]));
	for (size_t i = 0; rest && rest[i]; i++)
		strv_push(&out, xstrdup(rest[i]));
	if (out.n == 0) {
		strv_free(strv_done(&out));
		cerr_set(e, EINVAL,
			 "unit %s: no command (neither the unit nor the image "
			 "gives one)",
			 u->name);
		return NULL;
	}
	return strv_done(&out);
}

/* ---- users and groups from the image's /etc files ---- */

/* The image's /etc/passwd or /etc/group, as chroot would find it. Missing:
 * 0 with out empty (numeric ids only). Anything but a regular file is an
 * error: a FIFO there would block the agent, a device node would be opened
 * as host root. */
static int read_etc(int rootfd, const char *rel, struct buf *out,
		    struct cerr *e)
{
	cleanup_close int fd = -1;

	buf_init(out, ETC_FILE_MAX);
	fd = path_open_at(rootfd, rel, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0,
			  PATH_IN_ROOT, e);
	if (fd < 0 && (e->code == ENOENT || e->code == ENOTDIR)) {
		cerr_clear(e);
		return 0;
	}
	if (fd < 0 || fs_read_regular(fd, out, e) < 0)
		return cerr_prefix(e, "the image's /%s", rel);
	return 0;
}

/* Field i (0-based) of a colon-separated line, copied into out. */
static bool field(const char *line, int i, char *out, size_t outsz)
{
	const char *p = line, *end;
	size_t n;

	while (i-- > 0) {
		p = strchr(p, ':');
		if (!p)
			return false;
		p++;
	}
	end = p + strcspn(p, ":\n");
	n = (size_t)(end - p);
	if (n >= outsz)
		return false;
	memcpy(out, p, n);
	out[n] = '\0';
	return true;
}

static bool is_number(const char *s)
{
	return *s && strspn(s, "0123456789") == strlen(s);
}

/* Find the line whose field `key` (0 = name, 2 = id) equals want. */
static const char *find_line(const char *text, int key, const char *want)
{
	char f[256];

	for (const char *l = text; l && *l;
	     l = strchr(l, '\n'), l = l ? l + 1 : NULL)
		if (*l != '#' && field(l, key, f, sizeof(f)) &&
		    !strcmp(f, want))
			return l;
	return NULL;
}

static int64_t id_of(const char *s)
{
	int64_t v = -1;
	parse_int64(s, 0, UINT32_MAX - 1, &v, NULL);
	return v;
}

/* user part: a name or a number; sets uid, primary gid and home. */
static int resolve_user(const char *user, const struct buf *passwd,
			struct podrun_user *out, struct cerr *e)
{
	const char *line =
	    passwd->data
		? find_line(passwd->data, is_number(user) ? 2 : 0, user)
		: NULL;
	char f[256];

	if (!line && !is_number(user))
		return cerr_set(e, ENOENT,
				"user '%s' is not in the image's "
				"/etc/passwd",
				user);
	out->uid = (uid_t)(line && field(line, 2, f, sizeof(f)) ? id_of(f)
								: id_of(user));
	out->gid = line && field(line, 3, f, sizeof(f)) ? (gid_t)id_of(f) : 0;
	/* HOME as Docker and the kubelet set it: the passwd entry's, else
	 * "/root" for root and "/" for anyone else. */
	if (line && field(line, 5, f, sizeof(f)) && *f)
		out->home = xstrdup(f);
	else
		out->home = xstrdup(out->uid == 0 && !line ? "/root" : "/");
	return 0;
}

static int resolve_group(const char *grp, const struct buf *group, gid_t *gid,
			 struct cerr *e)
{
	const char *line;
	char f[256];

	if (is_number(grp)) {
		*gid = (gid_t)id_of(grp);
		return 0;
	}
	line = group->data ? find_line(group->data, 0, grp) : NULL;
	if (!line || !field(line, 2, f, sizeof(f)))
		return cerr_set(e, ENOENT,
				"group '%s' is not in the image's "
				"/etc/group",
				grp);
	*gid = (gid_t)id_of(f);
	return 0;
}

static void add_group(struct podrun_user *out, gid_t g)
{
	for (size_t i = 0; i < out->n_groups; i++)
		if (out->groups[i] == g)
			return;
	out->groups =
	    xrealloc(out->groups, (out->n_groups + 1) * sizeof(gid_t));
	out->groups[out->n_groups++] = g;
}

/* Supplementary groups: those of /etc/group that list the user by name. */
static void member_groups(const char *name, const struct buf *group,
			  struct podrun_user *out)
{
	char members[4096], f[256];

	for (const char *l = group->data; l && *l;
	     l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		if (!field(l, 3, members, sizeof(members)) ||
		    !field(l, 2, f, sizeof(f)))
			continue;
		for (char *save = NULL, *m = strtok_r(members, ",", &save); m;
		     m = strtok_r(NULL, ",", &save))
			if (!strcmp(m, name))
				add_group(out, (gid_t)id_of(f));
	}
}

int podrun_user(const struct unit_spec *u, const struct pod_spec *pod,
		const struct image_config *img, int rootfd,
		struct podrun_user *out, struct cerr *e)
{
	struct buf passwd, group;
	cleanup_free char *spec = xstrdup(img && img->user ? img->user : "0");
	char *colon = strchr(spec, ':');
	char name[256] = "";
	int ret = -1;

	memset(out, 0, sizeof(*out));
	buf_init(&group, ETC_FILE_MAX);
	if (read_etc(rootfd, "etc/passwd", &passwd, e) < 0 ||
	    read_etc(rootfd, "etc/group", &group, e) < 0)
		goto out;
	if (colon)
		*colon = '\0';
	if (!*spec)
		spec[0] = '0', spec[1] = '\0';
	if (resolve_user(spec, &passwd, out, e) < 0)
		goto out;
	if (colon && resolve_group(colon + 1, &group, &out->gid, e) < 0)
		goto out;
	if (u->has_run_as_user || pod->has_run_as_user) {
		char num[32];
		int64_t uid =
		    u->has_run_as_user ? u->run_as_user : pod->run_as_user;
		snprintf(num, sizeof(num), "%lld", (long long)uid);
		free(out->home);
		if (resolve_user(num, &passwd, out, e) < 0)
			goto out;
	}
	if (u->has_run_as_group || pod->has_run_as_group)
		out->gid = (gid_t)(u->has_run_as_group ? u->run_as_group
						       : pod->run_as_group);
	/* The primary group first, as containerd and CRI-O list it (the
	 * kubelet's `id` shows groups=3000,4000), then /etc/group's, then
	 * supplementalGroups and fsGroup. */
	add_group(out, out->gid);
	if (passwd.data && group.data) {
		char idbuf[32];
		const char *l;

		snprintf(idbuf, sizeof(idbuf), "%u", (unsigned)out->uid);
		l = find_line(passwd.data, 2, idbuf);
		if (l && field(l, 0, name, sizeof(name)))
			member_groups(name, &group, out);
	}
	for (size_t i = 0; i < pod->n_supplemental_groups; i++)
		add_group(out, (gid_t)pod->supplemental_groups[i]);
	if (pod->has_fs_group)
		add_group(out, (gid_t)pod->fs_group);
	ret = 0;
out:
	if (ret < 0)
		podrun_user_free(out);
	buf_free(&passwd);
	buf_free(&group);
	return ret;
}

void podrun_user_free(struct podrun_user *u)
{
	free(u->groups);
	free(u->home);
	u->groups = NULL;
	u->home = NULL;
	u->n_groups = 0;
}

/* ---- capabilities ---- */

/* "net_admin", "NET_ADMIN" or "CAP_NET_ADMIN" → its number; -1 unknown. */
static int cap_number(const char *name)
{
	char low[64];
	cap_value_t v;
	size_t n = 0;

	if (!strncasecmp(name, "CAP_", 4))
		name += 4;
	n = (size_t)snprintf(low, sizeof(low), "cap_%s", name);
	if (n >= sizeof(low))
		return -1;
	for (size_t i = 0; i < n; i++)
		low[i] = (char)tolower((unsigned char)low[i]);
	return cap_from_name(low, &v) == 0 ? (int)v : -1;
}

static int set_caps(bool *on, char *const *names, bool value, struct cerr *e)
{
	int last = (int)cap_max_bits() - 1;

	for (size_t i = 0; names && names[i]; i++) {
		int c;

		if (!strcasecmp(names[i], "ALL")) {
			for (int j = 0; j <= last; j++)
				on[j] = value;
			continue;
		}
		c = cap_number(names[i]);
		if (c < 0 || c > last)
			return cerr_set(e, EINVAL, "unknown capability '%s'",
					names[i]);
		on[c] = value;
	}
	return 0;
}

char **podrun_caps(const struct unit_spec *u, struct cerr *e)
{
	bool on[64] = {false};
	int last = (int)cap_max_bits() - 1;
	struct strv out = {0};

	if (last > 63)
		last = 63;
	for (size_t i = 0; i < ARRAY_SIZE(default_caps); i++) {
		int c = cap_number(default_caps[i]);
		if (c >= 0 && c <= last)
			on[c] = true;
	}
	if (set_caps(on, u->caps_drop, false, e) < 0 ||
	    set_caps(on, u->caps_add, true, e) < 0)
		return NULL;
	for (int c = 0; c <= last; c++) {
		char *n;
		if (!on[c])
			continue;
		n = cap_to_name((cap_value_t)c);
		strv_push(&out, xasprintf("%s", n));
		cap_free(n);
		for (char *p = out.v[out.n - 1]; *p; p++)
			*p = (char)toupper((unsigned char)*p);
	}
	return strv_done(&out);
}

/* ---- the image's StopSignal ---- */

static const struct {
	const char *name;
	int sig;
} signal_names[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},	      {"QUIT", SIGQUIT},
    {"ILL", SIGILL},   {"TRAP", SIGTRAP},     {"ABRT", SIGABRT},
    {"IOT", SIGIOT},   {"BUS", SIGBUS},	      {"FPE", SIGFPE},
    {"KILL", SIGKILL}, {"USR1", SIGUSR1},     {"SEGV", SIGSEGV},
    {"USR2", SIGUSR2}, {"PIPE", SIGPIPE},     {"ALRM", SIGALRM},
    {"TERM", SIGTERM}, {"STKFLT", SIGSTKFLT}, {"CHLD", SIGCHLD},
    {"CONT", SIGCONT}, {"STOP", SIGSTOP},     {"TSTP", SIGTSTP},
    {"TTIN", SIGTTIN}, {"TTOU", SIGTTOU},     {"URG", SIGURG},
    {"XCPU", SIGXCPU}, {"XFSZ", SIGXFSZ},     {"VTALRM", SIGVTALRM},
    {"PROF", SIGPROF}, {"WINCH", SIGWINCH},   {"IO", SIGIO},
    {"POLL", SIGPOLL}, {"PWR", SIGPWR},	      {"SYS", SIGSYS},
};

int podrun_stop_signal(const char *spec, int *sig, struct cerr *e)
{
	const char *n = spec;
	int64_t v = -1;

	*sig = SIGTERM;
	if (!spec || !*spec)
		return 0;
	/* As Docker's signal.ParseSignal: a number, or a name with or
	 * without "SIG", any case, RTMIN+n and RTMAX-n included. */
	if (parse_int64(spec, 1, SIGRTMAX, &v, NULL) == 0) {
		*sig = (int)v;
		return 0;
	}
	if (!strncasecmp(n, "SIG", 3))
		n += 3;
	for (size_t i = 0; i < ARRAY_SIZE(signal_names); i++)
		if (!strcasecmp(n, signal_names[i].name)) {
			*sig = signal_names[i].sig;
			return 0;
		}
	if (!strncasecmp(n, "RTMIN", 5) || !strncasecmp(n, "RTMAX", 5)) {
		bool min = !strncasecmp(n, "RTMIN", 5);
		const char *off = n + 5;

		if (!*off)
			v = 0;
		else if (*off == (min ? '+' : '-'))
			parse_int64(off + 1, 0, SIGRTMAX - SIGRTMIN, &v, NULL);
		if (v >= 0) {
			*sig = min ? SIGRTMIN + (int)v : SIGRTMAX - (int)v;
			return 0;
		}
	}
	return cerr_set(e, EINVAL,
			"the image's StopSignal '%.32s' is not a "
			"signal",
			spec);
}

/* ---- restarts ---- */

bool podrun_should_restart(enum restart_policy p, int exit_code)
{
	switch (p) {
	case RESTART_ALWAYS:
		return true;
	case RESTART_ON_FAILURE:
		return exit_code != 0;
	case RESTART_NEVER:
	default:
		return false;
	}
}

unsigned podrun_backoff_s(int n)
{
	unsigned s = 10;

	while (--n > 0 && s < 300)
		s *= 2;
	return s < 300 ? s : 300;
}
