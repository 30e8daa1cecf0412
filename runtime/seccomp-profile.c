// SPDX-License-Identifier: Apache-2.0
/* The seccomp profile parser: containers/common's JSON format
 * (pkg/seccomp/types.go) into struct sc_profile. Pure (no system calls,
 * no libseccomp calls: only its header's constants), so it is fuzzed
 * (tests/fuzz/fuzz-seccomp.c). */
#include "seccomp-profile.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <seccomp.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "cleanup.h"
#include "jsonutil.h"
#include "util.h"

#define NAME_MAX_LEN 128

struct pctx {
	const char *buf;
	size_t len;
	struct cerr *e;
};

/* The line where a string value first appears in the text: jansson keeps
 * no positions, and a bad value is nearly always a string. */
static int line_of(const struct pctx *c, const char *s)
{
	char needle[NAME_MAX_LEN + 3];
	size_t n;
	const char *p;
	int line = 1;

	n = (size_t)snprintf(needle, sizeof(needle), "\"%s\"", s);
	if (n >= sizeof(needle))
		return 0;
	p = memmem(c->buf, c->len, needle, n);
	if (!p)
		return 0;
	for (const char *q = c->buf; q < p; q++)
		line += *q == '\n';
	return line;
}

static int bad(const struct pctx *c, const char *at, const char *val,
	       const char *why)
{
	int line = val ? line_of(c, val) : 0;

	if (line)
		return cerr_set(c->e, EINVAL, "line %d: %s: %s", line, at, why);
	return cerr_set(c->e, EINVAL, "%s: %s", at, why);
}

/* A NULL-terminated copy of an array of short strings (NULL when absent). */
static int get_names(const struct pctx *c, const json_t *o, const char *key,
		     const char *at, char ***out)
{
	json_t *a = json_object_get(o, key), *v;
	char where[160];
	size_t i;

	*out = NULL;
	if (!a || json_is_null(a))
		return 0;
	snprintf(where, sizeof(where), "%s.%s", at, key);
	if (!json_is_array(a))
		return bad(c, where, NULL, "not an array");
	if (json_array_size(a) > SC_MAX_NAMES)
		return bad(c, where, NULL, "too many entries");
	*out = xcalloc(json_array_size(a) + 1, sizeof(char *));
	json_array_foreach(a, i, v)
	{
		if (!json_is_string(v) || !json_string_length(v) ||
		    json_string_length(v) > NAME_MAX_LEN)
			return bad(c, where, NULL,
				   "entries must be strings of 1..128 bytes");
		(*out)[i] = xstrdup(json_string_value(v));
	}
	return 0;
}

static const char *get_string(const json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

static const struct {
	const char *name;
	int num;
} errnos[] = {
    {"EPERM", EPERM},
    {"ENOENT", ENOENT},
    {"EIO", EIO},
    {"E2BIG", E2BIG},
    {"EBADF", EBADF},
    {"EAGAIN", EAGAIN},
    {"ENOMEM", ENOMEM},
    {"EACCES", EACCES},
    {"EFAULT", EFAULT},
    {"EBUSY", EBUSY},
    {"EEXIST", EEXIST},
    {"ENODEV", ENODEV},
    {"EINVAL", EINVAL},
    {"ENOSPC", ENOSPC},
    {"ENOSYS", ENOSYS},
    {"ENOTSUP", ENOTSUP},
    {"EOPNOTSUPP", EOPNOTSUPP},
    {"EAFNOSUPPORT", EAFNOSUPPORT},
    {"EPROTONOSUPPORT", EPROTONOSUPPORT},
};

/* errnoRet (a number) or errno (a name); def when neither is there. */
static int get_errno(const struct pctx *c, const json_t *o, const char *nkey,
		     const char *skey, const char *at, int def, int *out)
{
	json_t *n = json_object_get(o, nkey);
	const char *s = get_string(o, skey);

	*out = def;
	if (n && !json_is_null(n)) {
		if (!json_is_integer(n) || json_integer_value(n) < 0 ||
		    json_integer_value(n) > 4095)
			return bad(c, at, NULL, "errnoRet not in 0..4095");
		*out = (int)json_integer_value(n);
		return 0;
	}
	if (!s || !*s)
		return 0;
	for (size_t i = 0; i < ARRAY_SIZE(errnos); i++)
		if (!strcmp(errnos[i].name, s)) {
			*out = errnos[i].num;
			return 0;
		}
	return bad(c, at, s, "unknown errno name");
}

static int parse_action(const struct pctx *c, const char *s, int err,
			const char *at, sc_action *out)
{
	if (!s)
		return bad(c, at, NULL, "action missing");
	if (!strcmp(s, "SCMP_ACT_ALLOW"))
		*out = SCMP_ACT_ALLOW;
	else if (!strcmp(s, "SCMP_ACT_ERRNO"))
		*out = SCMP_ACT_ERRNO((uint32_t)err);
	else if (!strcmp(s, "SCMP_ACT_KILL") ||
		 !strcmp(s, "SCMP_ACT_KILL_THREAD"))
		*out = SCMP_ACT_KILL_THREAD;
	else if (!strcmp(s, "SCMP_ACT_KILL_PROCESS"))
		*out = SCMP_ACT_KILL_PROCESS;
	else if (!strcmp(s, "SCMP_ACT_TRAP"))
		*out = SCMP_ACT_TRAP;
	else if (!strcmp(s, "SCMP_ACT_TRACE"))
		*out = SCMP_ACT_TRACE((uint32_t)err);
	else if (!strcmp(s, "SCMP_ACT_LOG"))
		*out = SCMP_ACT_LOG;
	else if (!strcmp(s, "SCMP_ACT_NOTIFY"))
		return bad(c, at, s, "SCMP_ACT_NOTIFY is not supported");
	else
		return bad(c, at, s, "unknown action");
	return 0;
}

static const struct {
	const char *name;
	int op;
} ops[] = {
    {"SCMP_CMP_NE", SCMP_CMP_NE},
    {"SCMP_CMP_LT", SCMP_CMP_LT},
    {"SCMP_CMP_LE", SCMP_CMP_LE},
    {"SCMP_CMP_EQ", SCMP_CMP_EQ},
    {"SCMP_CMP_GE", SCMP_CMP_GE},
    {"SCMP_CMP_GT", SCMP_CMP_GT},
    {"SCMP_CMP_MASKED_EQ", SCMP_CMP_MASKED_EQ},
};

static int get_u64(const json_t *o, const char *key, uint64_t *out)
{
	json_t *v = json_object_get(o, key);

	*out = 0;
	if (!v || json_is_null(v))
		return 0;
	/* jansson's integers are signed 64-bit: values above INT64_MAX
	 * (masks with the top bit) come back negative, which is the same
	 * bit pattern. */
	if (!json_is_integer(v))
		return -1;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

static int parse_args(const struct pctx *c, const json_t *sc, const char *at,
		      struct sc_rule *r)
{
	json_t *a = json_object_get(sc, "args"), *v;
	char where[160];
	size_t i;

	if (!a || json_is_null(a))
		return 0;
	if (!json_is_array(a) || json_array_size(a) > SC_MAX_ARGS)
		return bad(c, at, NULL, "args: not an array of up to 6");
	json_array_foreach(a, i, v)
	{
		struct sc_arg *g = &r->args[i];
		json_t *idx = json_object_get(v, "index");
		const char *op = get_string(v, "op");
		size_t k;

		snprintf(where, sizeof(where), "%s.args[%zu]", at, i);
		if (!json_is_object(v) || !json_is_integer(idx) ||
		    json_integer_value(idx) < 0 || json_integer_value(idx) > 5)
			return bad(c, where, NULL, "index not in 0..5");
		g->index = (unsigned)json_integer_value(idx);
		if (get_u64(v, "value", &g->value) < 0 ||
		    get_u64(v, "valueTwo", &g->value_two) < 0)
			return bad(c, where, NULL, "value not an integer");
		for (k = 0; op && k < ARRAY_SIZE(ops); k++)
			if (!strcmp(op, ops[k].name))
				break;
		if (!op || k == ARRAY_SIZE(ops))
			return bad(c, where, op, "unknown op");
		g->op = ops[k].op;
		r->n_args++;
	}
	return 0;
}

static int parse_filter(const struct pctx *c, const json_t *sc, const char *key,
			const char *at, struct sc_filter *f)
{
	json_t *o = json_object_get(sc, key);
	const char *mk;
	char where[160];

	if (!o || json_is_null(o))
		return 0;
	snprintf(where, sizeof(where), "%s.%s", at, key);
	if (!json_is_object(o))
		return bad(c, where, NULL, "not an object");
	if (get_names(c, o, "caps", where, &f->caps) < 0 ||
	    get_names(c, o, "arches", where, &f->arches) < 0)
		return -1;
	mk = get_string(o, "minKernel");
	if (mk && *mk) {
		unsigned maj, min;
		char extra;

		if (sscanf(mk, "%u.%u%c", &maj, &min, &extra) != 2 ||
		    maj > 1000 || min > 1000)
			return bad(c, where, mk, "minKernel: want \"X.Y\"");
		f->min_kernel[0] = (int)maj;
		f->min_kernel[1] = (int)min;
	}
	return 0;
}

static int parse_rule(const struct pctx *c, const json_t *sc, size_t i,
		      struct sc_rule *r)
{
	char at[64];
	const char *name = get_string(sc, "name");
	int err;

	snprintf(at, sizeof(at), "syscalls[%zu]", i);
	if (!json_is_object(sc))
		return bad(c, at, NULL, "not an object");
	if (get_names(c, sc, "names", at, &r->names) < 0)
		return -1;
	if (name && r->names)
		return bad(c, at, name, "both name and names");
	if (name) {
		if (!*name || strlen(name) > NAME_MAX_LEN)
			return bad(c, at, NULL, "name: 1..128 bytes");
		r->names = xcalloc(2, sizeof(char *));
		r->names[0] = xstrdup(name);
	}
	if (!r->names)
		return bad(c, at, NULL, "no name or names");
	/* runc's default for an errno action without a number: EPERM. */
	if (get_errno(c, sc, "errnoRet", "errno", at, EPERM, &err) < 0 ||
	    parse_action(c, get_string(sc, "action"), err, at, &r->action) <
		0 ||
	    parse_args(c, sc, at, r) < 0 ||
	    parse_filter(c, sc, "includes", at, &r->includes) < 0 ||
	    parse_filter(c, sc, "excludes", at, &r->excludes) < 0)
		return -1;
	return 0;
}

static const char *const known_arches[] = {
    "x86",	   "x86_64", "x32",	  "arm",     "aarch64",
    "mips",	   "mips64", "mips64n32", "mipsel",  "mipsel64",
    "mipsel64n32", "ppc",    "ppc64",	  "ppc64le", "s390",
    "s390x",	   "parisc", "parisc64",  "riscv64",
};

/* "SCMP_ARCH_X86_64" → "x86_64" (libseccomp's name), NULL if unknown. */
static char *arch_name(const char *s)
{
	char low[32];
	size_t i;

	if (strncmp(s, "SCMP_ARCH_", 10) || strlen(s + 10) >= sizeof(low))
		return NULL;
	for (i = 0; s[10 + i]; i++)
		low[i] = (char)tolower((unsigned char)s[10 + i]);
	low[i] = '\0';
	for (size_t k = 0; k < ARRAY_SIZE(known_arches); k++)
		if (!strcmp(known_arches[k], low))
			return xstrdup(low);
	return NULL;
}

#if defined(__x86_64__)
#define NATIVE_SCMP "SCMP_ARCH_X86_64"
#elif defined(__aarch64__)
#define NATIVE_SCMP "SCMP_ARCH_AARCH64"
#else
#define NATIVE_SCMP "SCMP_ARCH_NATIVE"
#endif

static int push_arch(const struct pctx *c, const char *at, const json_t *v,
		     char **out, size_t *n)
{
	const char *s = json_string_value(v);

	if (!s)
		return bad(c, at, NULL, "not a string");
	if (*n >= 64)
		return bad(c, at, NULL, "too many architectures");
	out[*n] = arch_name(s);
	if (!out[*n])
		return bad(c, at, s, "unknown architecture");
	(*n)++;
	return 0;
}

/* "architectures", or archMap's entry for this machine (containers/common:
 * one or the other, never both). */
static int parse_arches(const struct pctx *c, const json_t *root,
			struct sc_profile *p)
{
	json_t *list = json_object_get(root, "architectures");
	json_t *map = json_object_get(root, "archMap"), *v, *m;
	size_t i, j, n = 0;

	p->arches = xcalloc(65, sizeof(char *));
	if (json_array_size(list) && json_array_size(map))
		return bad(c, "architectures", NULL,
			   "both architectures and archMap");
	if (list && !json_is_null(list) && !json_is_array(list))
		return bad(c, "architectures", NULL, "not an array");
	json_array_foreach(list, i,
			   v) if (push_arch(c, "architectures", v, p->arches,
					    &n) < 0) return -1;
	if (map && !json_is_null(map) && !json_is_array(map))
		return bad(c, "archMap", NULL, "not an array");
	json_array_foreach(map, i, m)
	{
		const char *a = get_string(m, "architecture");
		json_t *subs = json_object_get(m, "subArchitectures");

		if (!a)
			return bad(c, "archMap", NULL, "architecture missing");
		if (strcmp(a, NATIVE_SCMP))
			continue;
		if (push_arch(c, "archMap", json_object_get(m, "architecture"),
			      p->arches, &n) < 0)
			return -1;
		if (subs && !json_is_null(subs) && !json_is_array(subs))
			return bad(c, "archMap", NULL,
				   "subArchitectures: not an array");
		json_array_foreach(subs, j,
				   v) if (push_arch(c, "archMap", v, p->arches,
						    &n) < 0) return -1;
	}
	return 0;
}

static int parse_root(const struct pctx *c, const json_t *root,
		      struct sc_profile *p)
{
	json_t *calls = json_object_get(root, "syscalls"), *v;
	json_t *lp = json_object_get(root, "listenerPath");
	int err;
	size_t i;

	if (lp && !json_is_null(lp) && json_string_length(lp))
		return bad(c, "listenerPath", NULL, "not supported");
	if (get_errno(c, root, "defaultErrnoRet", "defaultErrno",
		      "defaultErrnoRet", EPERM, &err) < 0 ||
	    parse_action(c, get_string(root, "defaultAction"), err,
			 "defaultAction", &p->default_action) < 0 ||
	    parse_arches(c, root, p) < 0)
		return -1;
	if (calls && !json_is_null(calls) && !json_is_array(calls))
		return bad(c, "syscalls", NULL, "not an array");
	if (json_array_size(calls) > SC_MAX_RULES)
		return bad(c, "syscalls", NULL, "more than 4096 rules");
	p->rules = xcalloc(json_array_size(calls) + 1, sizeof(*p->rules));
	json_array_foreach(calls, i, v)
	{
		p->n_rules++;
		if (parse_rule(c, v, i, &p->rules[i]) < 0)
			return -1;
	}
	return 0;
}

int sc_profile_parse(const char *buf, size_t len, struct sc_profile *out,
		     struct cerr *e)
{
	struct pctx c = {.buf = buf, .len = len, .e = e};
	cleanup_json json_t *root = NULL;
	json_error_t je;

	memset(out, 0, sizeof(*out));
	if (len > SC_PROFILE_MAX)
		return cerr_set(e, EFBIG, "larger than %u bytes",
				SC_PROFILE_MAX);
	root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
	if (!root)
		return cerr_set(e, EINVAL, "line %d column %d: %s", je.line,
				je.column, je.text);
	if (!json_is_object(root))
		return cerr_set(e, EINVAL, "line 1: not a JSON object");
	if (parse_root(&c, root, out) < 0) {
		sc_profile_free(out);
		return -1;
	}
	return 0;
}

static void filter_free(struct sc_filter *f)
{
	strv_free(f->caps);
	strv_free(f->arches);
}

void sc_profile_free(struct sc_profile *p)
{
	if (!p)
		return;
	strv_free(p->arches);
	for (size_t i = 0; i < p->n_rules; i++) {
		strv_free(p->rules[i].names);
		filter_free(&p->rules[i].includes);
		filter_free(&p->rules[i].excludes);
	}
	free(p->rules);
	memset(p, 0, sizeof(*p));
}

/* ---- containers/common's includes/excludes ---- */

/* "CAP_SYS_ADMIN", "cap_sys_admin" and "SYS_ADMIN" are one name. */
static bool cap_eq(const char *a, const char *b)
{
	if (!strncasecmp(a, "CAP_", 4))
		a += 4;
	if (!strncasecmp(b, "CAP_", 4))
		b += 4;
	return !strcasecmp(a, b);
}

static bool has_cap(char *const *caps, const char *c)
{
	for (size_t i = 0; caps && caps[i]; i++)
		if (cap_eq(caps[i], c))
			return true;
	return false;
}

static bool in_list(char *const *l, const char *s)
{
	for (size_t i = 0; l && l[i]; i++)
		if (!strcmp(l[i], s))
			return true;
	return false;
}

bool sc_rule_applies(const struct sc_rule *r, char *const *caps,
		     const char *go_arch, const int kernel[2])
{
	const struct sc_filter *in = &r->includes, *ex = &r->excludes;

	if (ex->arches && ex->arches[0] && in_list(ex->arches, go_arch))
		return false;
	for (size_t i = 0; ex->caps && ex->caps[i]; i++)
		if (has_cap(caps, ex->caps[i]))
			return false;
	if (in->arches && in->arches[0] && !in_list(in->arches, go_arch))
		return false;
	for (size_t i = 0; in->caps && in->caps[i]; i++)
		if (!has_cap(caps, in->caps[i]))
			return false;
	if (in->min_kernel[0] &&
	    (kernel[0] < in->min_kernel[0] ||
	     (kernel[0] == in->min_kernel[0] && kernel[1] < in->min_kernel[1])))
		return false;
	return true;
}
