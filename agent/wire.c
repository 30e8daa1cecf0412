/* The controller ↔ cell JSON (WIRE.md): PodParameters in, PodStatusReply
 * out. This is the only agent file that touches jansson for these; the rest
 * of the agent sees struct pod_spec and struct pod_status.
 *
 * The controller is Go: it sends every field of its structs, known to us or
 * not, with null for empty slices, maps and pointers. So null is "absent"
 * everywhere, unknown keys are ignored, and a wrong type is an error that
 * names its JSON path ("spec.units[1].ports[0].containerPort: not an
 * integer"). docs/agent-wire.md lists what we checked against Kip's source. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent-internal.h"
#include "base64.h"
#include "cleanup.h"
#include "jsonutil.h"
#include "util.h"

#define AT_MAX 512 /* a JSON path in a message; longer ones are cut */
#define UID_MAX_WIRE 4294967294LL /* (uid_t)-1 means "unchanged" */

/* ---- JSON paths and typed getters ---- */

static int badf(struct cerr *e, const char *at, const char *key,
		const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* An EINVAL whose message starts with the path "at.key". */
static int badf(struct cerr *e, const char *at, const char *key,
		const char *fmt, ...)
{
	char what[CERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return cerr_set(e, EINVAL, "%s%s%s: %s", at, key && *at ? "." : "",
			key ? key : "", what);
}

/* "at.key[i]" (or "at.key" when i < 0) into buf. */
static void child(char *buf, const char *at, const char *key, long i)
{
	const char *dot = *at ? "." : "";

	if (i < 0)
		snprintf(buf, AT_MAX, "%s%s%s", at, dot, key);
	else
		snprintf(buf, AT_MAX, "%s%s%s[%ld]", at, dot, key, i);
}

/* Go sends null for empty pointers, slices and maps: the same as absent. */
/* Warnings of the parse under way (wire_parse_pod sets this for its own
 * thread): inputs that are accepted but cannot take effect. The parser
 * stays pure: they end up in pod_spec.warnings for the caller to log. */
static __thread char ***warn_sink;
static __thread size_t *warn_n;

__attribute__((format(printf, 1, 2))) static void warnf(const char *fmt, ...)
{
	va_list ap;
	char *w;

	if (!warn_sink || *warn_n >= WIRE_MAX_WARNINGS)
		return;
	va_start(ap, fmt);
	if (vasprintf(&w, fmt, ap) < 0)
		abort();
	va_end(ap);
	*warn_sink = xrealloc(*warn_sink, (*warn_n + 2) * sizeof(char *));
	(*warn_sink)[(*warn_n)++] = w;
	(*warn_sink)[*warn_n] = NULL;
}

static json_t *field(const json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);
	return json_is_null(v) ? NULL : v;
}

static int check_len(const json_t *v, const char *at, const char *key,
		     struct cerr *e)
{
	size_t n = json_string_length(v);

	if (n > WIRE_MAX_STR)
		return badf(e, at, key, "too long (%zu bytes, max %u)", n,
			    WIRE_MAX_STR);
	return 0;
}

/* A copy of the string at key; *out stays NULL when absent. */
static int get_str(const json_t *o, const char *at, const char *key, char **out,
		   struct cerr *e)
{
	json_t *v = field(o, key);

	if (!v)
		return 0;
	if (!json_is_string(v))
		return badf(e, at, key, "not a string");
	if (check_len(v, at, key, e) < 0)
		return -1;
	*out = xstrdup(json_string_value(v));
	return 0;
}

/* Like get_str, but absent or "" is an error. */
static int get_str_req(const json_t *o, const char *at, const char *key,
		       char **out, struct cerr *e)
{
	if (get_str(o, at, key, out, e) < 0)
		return -1;
	if (!*out || !**out)
		return badf(e, at, key, "required");
	return 0;
}

/* Like get_str, with def when absent or "" (Go's zero value). */
static int get_str_def(const json_t *o, const char *at, const char *key,
		       const char *def, char **out, struct cerr *e)
{
	if (get_str(o, at, key, out, e) < 0)
		return -1;
	if (!*out || !**out) {
		free(*out);
		*out = xstrdup(def);
	}
	return 0;
}

/* An integer in [min, max]; *present says whether it was there (out is left
 * alone when not). */
static int get_int(const json_t *o, const char *at, const char *key,
		   int64_t min, int64_t max, int64_t *out, bool *present,
		   struct cerr *e)
{
	json_t *v = field(o, key);
	json_int_t n;

	if (present)
		*present = v != NULL;
	if (!v)
		return 0;
	if (!json_is_integer(v))
		return badf(e, at, key, "not an integer");
	n = json_integer_value(v);
	if (n < min || n > max)
		return badf(e, at, key, "%lld is out of range [%lld, %lld]",
			    (long long)n, (long long)min, (long long)max);
	*out = n;
	return 0;
}

/* An int32 field where 0 or absent means def (Kubernetes' probe fields). */
static int get_int_def(const json_t *o, const char *at, const char *key,
		       int def, int *out, struct cerr *e)
{
	int64_t v = 0;

	if (get_int(o, at, key, 0, INT32_MAX, &v, NULL, e) < 0)
		return -1;
	*out = v ? (int)v : def;
	return 0;
}

static int get_bool(const json_t *o, const char *at, const char *key, bool *out,
		    struct cerr *e)
{
	json_t *v = field(o, key);

	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return badf(e, at, key, "not a boolean");
	*out = json_is_true(v);
	return 0;
}

/* The object at key: 1 and *out set when present, 0 when absent. */
static int get_obj(const json_t *o, const char *at, const char *key,
		   json_t **out, struct cerr *e)
{
	json_t *v = field(o, key);

	*out = NULL;
	if (v && !json_is_object(v))
		return badf(e, at, key, "not an object");
	*out = v;
	return v ? 1 : 0;
}

/* The array at key with at most max entries: 1 and *out set when present,
 * 0 (and NULL) when absent. */
static int get_arr(const json_t *o, const char *at, const char *key, size_t max,
		   json_t **out, struct cerr *e)
{
	json_t *v = field(o, key);

	*out = NULL;
	if (!v)
		return 0;
	if (!json_is_array(v))
		return badf(e, at, key, "not an array");
	if (json_array_size(v) > max)
		return badf(e, at, key, "too many entries (%zu, max %zu)",
			    json_array_size(v), max);
	*out = v;
	return 1;
}

/* An array of strings as a NULL-terminated vector; NULL when absent. */
static int get_strv(const json_t *o, const char *at, const char *key,
		    char ***out, struct cerr *e)
{
	int r;
	char p[AT_MAX];
	json_t *a, *v;
	size_t i;

	if ((r = get_arr(o, at, key, WIRE_MAX_LIST, &a, e)) <= 0)
		return r;
	*out = xcalloc(json_array_size(a) + 1, sizeof(char *));
	json_array_foreach(a, i, v)
	{
		child(p, at, key, (long)i);
		if (!json_is_string(v))
			return badf(e, p, NULL, "not a string");
		if (check_len(v, p, NULL, e) < 0)
			return -1;
		(*out)[i] = xstrdup(json_string_value(v));
	}
	return 0;
}

/* ---- small validators ---- */

/* RFC 1123 label: what Kubernetes requires of container and volume names,
 * and what makes a name safe as one path component. */
static bool is_dns_label(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		      (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

static bool has_dotdot(const char *p)
{
	for (const char *c = p; *c;) {
		size_t n = strcspn(c, "/");
		if (n == 2 && c[0] == '.' && c[1] == '.')
			return true;
		c += n;
		while (*c == '/')
			c++;
	}
	return false;
}

static int get_label(const json_t *o, const char *at, char **out,
		     struct cerr *e)
{
	if (get_str_req(o, at, "name", out, e) < 0)
		return -1;
	if (!is_dns_label(*out))
		return badf(e, at, "name",
			    "\"%s\" is not a DNS-1123 label (a-z, 0-9, '-', "
			    "at most 63)",
			    *out);
	return 0;
}

/* ---- Kubernetes quantities ---- */

/* A quantity's digits D (integer digits then fraction digits, the '.'
 * skipped) and the scale the suffix applies: value = 0.D × 10^point × 2^bexp,
 * i.e. the decimal point sits after `point` digits of D (point may lie
 * outside D: the missing digits are zeros). */
struct quantity {
	const char *ip, *fp; /* integer and fraction digits */
	int64_t n_ip, n_fp;
	int64_t dexp; /* decimal exponent of the suffix */
	int bexp;     /* binary exponent of the suffix */
};

static int qdigit(const struct quantity *q, int64_t i)
{
	if (i < 0 || i >= q->n_ip + q->n_fp)
		return 0;
	return i < q->n_ip ? q->ip[i] - '0' : q->fp[i - q->n_ip] - '0';
}

/* The suffix as resource.ParseQuantity reads it: binary Ki…Ei, decimal
 * n u m "" k M G T P E, or an exponent e<int>/E<int> ("E" alone is exa). */
static int quantity_suffix(const char *s, struct quantity *q)
{
	static const char *const bin[] = {"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
	static const char *const dec[] = {"n", "u", "m", "",  "k",
					  "M", "G", "T", "P", "E"};
	const char *num;
	char *end;
	long long x;

	for (size_t i = 0; i < ARRAY_SIZE(bin); i++)
		if (!strcmp(s, bin[i])) {
			q->bexp = 10 * (int)(i + 1);
			return 0;
		}
	for (size_t i = 0; i < ARRAY_SIZE(dec); i++)
		if (!strcmp(s, dec[i])) {
			q->dexp = 3 * ((int64_t)i - 3);
			return 0;
		}
	if (s[0] != 'e' && s[0] != 'E')
		return -1;
	num = s + 1 + (s[1] == '+' || s[1] == '-');
	if (*num < '0' || *num > '9')
		return -1;
	errno = 0;
	x = strtoll(s + 1, &end, 10);
	if (*end)
		return -1;
	/* An exponent beyond long long saturates: it only decides between
	 * 0, 1 and "too large" below. */
	q->dexp = x;
	return 0;
}

/* ceil(value) exactly, or ERANGE above INT64_MAX. The integer part has at
 * most 19 significant digits; the fraction is multiplied by 2^bexp digit by
 * digit from the right, so nothing is lost to floating point. */
static int quantity_value(struct quantity *q, int64_t *out, struct cerr *e)
{
	int64_t total = q->n_ip + q->n_fp, first = 0, point;
	unsigned __int128 ip = 0, carry = 0;
	bool rem = false;

	while (first < total && qdigit(q, first) == 0)
		first++;
	if (first == total) {
		*out = 0;
		return 0;
	}
	/* Clamping the exponent keeps the arithmetic in range without
	 * changing which case below applies. */
	if (q->dexp > total + 64)
		q->dexp = total + 64;
	if (q->dexp < -(total + 64))
		q->dexp = -(total + 64);
	point = q->n_ip + q->dexp;
	/* The leading digit stands for 10^(point - 1 - first). */
	if (point - 1 - first > 18)
		return cerr_set(e, ERANGE, "too large");
	if (point - 1 - first < -40) {
		*out = 1; /* below 10^-40 × 2^60 < 1, and not zero */
		return 0;
	}
	for (int64_t i = first; i < point; i++)
		ip = ip * 10 + (unsigned)qdigit(q, i);
	for (int64_t i = total - 1; i >= point; i--) {
		unsigned __int128 x =
		    ((unsigned __int128)qdigit(q, i) << q->bexp) + carry;
		rem |= x % 10 != 0;
		carry = x / 10;
	}
	ip = (ip << q->bexp) + carry + (rem ? 1 : 0);
	if (ip > (unsigned __int128)INT64_MAX)
		return cerr_set(e, ERANGE, "too large");
	*out = (int64_t)ip;
	return 0;
}

static int parse_quantity(const char *s, int64_t dexp, int64_t *out,
			  struct cerr *e)
{
	struct quantity q = {0};
	const char *p = s;
	bool neg = false;

	if (!*s)
		return cerr_set(e, EINVAL, "empty quantity");
	if (*p == '+' || *p == '-')
		neg = *p++ == '-';
	q.ip = p;
	while (*p >= '0' && *p <= '9')
		p++;
	q.n_ip = p - q.ip;
	q.fp = p;
	if (*p == '.') {
		q.fp = ++p;
		while (*p >= '0' && *p <= '9')
			p++;
		q.n_fp = p - q.fp;
	}
	if (quantity_suffix(p, &q) < 0)
		return cerr_set(e, EINVAL, "\"%.64s\" is not a quantity", s);
	q.dexp += dexp;
	if (quantity_value(&q, out, e) < 0)
		return cerr_set(e, ERANGE, "\"%.64s\" is too large", s);
	if (neg && *out)
		return cerr_set(e, EINVAL, "\"%.64s\" is negative", s);
	return 0;
}

int wire_parse_quantity(const char *s, int64_t *out, struct cerr *e)
{
	return parse_quantity(s, 0, out, e);
}

int wire_parse_quantity_milli(const char *s, int64_t *out, struct cerr *e)
{
	return parse_quantity(s, 3, out, e);
}

/* ---- secrets, credentials, annotations ---- */

/* Strict standard base64 (RFC 4648 §4), as Go's encoding/json writes []byte:
 * padded, no whitespace, and unused bits zero so that each byte string has
 * exactly one spelling. The result is NUL-terminated for convenience. */
static int secret_b64(const char *s, size_t n, char **out, size_t *outlen)
{
	struct buf b;

	buf_init(&b, 0);
	if (b64_decode(s, n, B64_PADDED | B64_CANONICAL, &b, NULL) < 0) {
		buf_free(&b);
		return -1;
	}
	*out = buf_steal(&b, outlen);
	return 0;
}

static int parse_secret(const char *name, json_t *items, const char *at,
			struct secret *s, struct cerr *e)
{
	const char *key;
	json_t *v;
	size_t i = 0;

	s->name = xstrdup(name);
	if (!items)
		return 0;
	if (!json_is_object(items))
		return badf(e, at, NULL, "not an object");
	s->n_items = json_object_size(items);
	s->items = xcalloc(s->n_items, sizeof(*s->items));
	s->item_len = xcalloc(s->n_items, sizeof(*s->item_len));
	json_object_foreach(items, key, v)
	{
		char p[AT_MAX];
		const char *b = json_is_null(v) ? "" : json_string_value(v);
		size_t n = json_is_null(v) ? 0 : json_string_length(v);

		snprintf(p, sizeof(p), "%s[\"%s\"]", at, key);
		s->items[i].name = xstrdup(key);
		if (!b)
			return badf(e, p, NULL, "not a string");
		if (strlen(key) > WIRE_MAX_STR)
			return badf(e, p, NULL, "key too long");
		if (n > (WIRE_MAX_SECRET_VALUE + 2) / 3 * 4)
			return badf(e, p, NULL, "longer than %u bytes",
				    WIRE_MAX_SECRET_VALUE);
		if (secret_b64(b, n, &s->items[i].value, &s->item_len[i]) < 0)
			return badf(e, p, NULL, "not valid base64");
		if (s->item_len[i] > WIRE_MAX_SECRET_VALUE)
			return badf(e, p, NULL, "longer than %u bytes",
				    WIRE_MAX_SECRET_VALUE);
		i++;
	}
	return 0;
}

/* secrets: name → key → base64 bytes. Kip's controller sends null here
 * (it never fills PodParameters.Secrets); older controllers filled it. */
static int parse_secrets(const json_t *root, struct pod_spec *out,
			 struct cerr *e)
{
	int r;
	json_t *o, *v;
	const char *name;
	size_t i = 0, items = 0;

	if ((r = get_obj(root, "", "secrets", &o, e)) <= 0)
		return r;
	if (json_object_size(o) > WIRE_MAX_SECRET_ITEMS)
		return badf(e, "secrets", NULL, "too many secrets (max %d)",
			    WIRE_MAX_SECRET_ITEMS);
	out->n_secrets = json_object_size(o);
	out->secrets = xcalloc(out->n_secrets, sizeof(*out->secrets));
	json_object_foreach(o, name, v)
	{
		char p[AT_MAX];

		snprintf(p, sizeof(p), "secrets[\"%s\"]", name);
		if (strlen(name) > WIRE_MAX_STR)
			return badf(e, p, NULL, "name too long");
		items += json_is_object(v) ? json_object_size(v) : 0;
		if (items > WIRE_MAX_SECRET_ITEMS)
			return badf(e, "secrets", NULL,
				    "too many items (max %d)",
				    WIRE_MAX_SECRET_ITEMS);
		if (parse_secret(name, field(o, name), p, &out->secrets[i++],
				 e) < 0)
			return -1;
	}
	return 0;
}

static int parse_credentials(const json_t *root, struct pod_spec *out,
			     struct cerr *e)
{
	int r;
	json_t *o, *v;
	const char *host;

	if ((r = get_obj(root, "", "credentials", &o, e)) <= 0)
		return r;
	if (json_object_size(o) > WIRE_MAX_LIST)
		return badf(e, "credentials", NULL, "too many entries");
	out->credentials =
	    xcalloc(json_object_size(o), sizeof(*out->credentials));
	json_object_foreach(o, host, v)
	{
		struct credential *c;
		char p[AT_MAX];

		snprintf(p, sizeof(p), "credentials[\"%s\"]", host);
		if (json_is_null(v))
			continue; /* nothing to log in with */
		if (!json_is_object(v))
			return badf(e, p, NULL, "not an object");
		if (strlen(host) > WIRE_MAX_STR)
			return badf(e, p, NULL, "host too long");
		c = &out->credentials[out->n_credentials++];
		c->host = xstrdup(host);
		if (get_str(v, p, "server", &c->server, e) < 0 ||
		    get_str(v, p, "username", &c->username, e) < 0 ||
		    get_str(v, p, "password", &c->password, e) < 0)
			return -1;
	}
	return 0;
}

/* Only pod.elotl.co/ keys mean anything to a cell; the controller already
 * filters, and whatever else arrives is ignored unchecked. */
static int parse_annotations(const json_t *root, struct pod_spec *out,
			     struct cerr *e)
{
	static const char prefix[] = "pod.elotl.co/";
	int r;
	json_t *o, *v;
	const char *key;

	if ((r = get_obj(root, "", "Annotations", &o, e)) <= 0)
		return r;
	if (json_object_size(o) > WIRE_MAX_LIST)
		return badf(e, "Annotations", NULL, "too many entries");
	out->annotations =
	    xcalloc(json_object_size(o), sizeof(*out->annotations));
	json_object_foreach(o, key, v)
	{
		struct kv *a = &out->annotations[out->n_annotations];
		char p[AT_MAX];

		if (!str_has_prefix(key, prefix))
			continue;
		snprintf(p, sizeof(p), "Annotations[\"%s\"]", key);
		if (v && !json_is_null(v) && !json_is_string(v))
			return badf(e, p, NULL, "not a string");
		if (strlen(key) > WIRE_MAX_STR ||
		    (json_is_string(v) && check_len(v, p, NULL, e) < 0))
			return badf(e, p, NULL, "too long");
		a->name = xstrdup(key);
		a->value =
		    xstrdup(json_is_string(v) ? json_string_value(v) : "");
		out->n_annotations++;
	}
	return 0;
}

/* ---- volumes ---- */

static const char *const volume_kinds[] = {
    [VOL_EMPTY_DIR] = "emptyDir",   [VOL_PACKAGE_PATH] = "packagePath",
    [VOL_CONFIG_MAP] = "configMap", [VOL_SECRET] = "secret",
    [VOL_HOST_PATH] = "hostPath",   [VOL_PROJECTED] = "projected",
};

/* emptyDir.sizeLimit: Kip sends an int64 of bytes; a Kubernetes quantity
 * string is accepted too. */
static int parse_size_limit(const json_t *o, const char *at, int64_t *out,
			    struct cerr *e)
{
	json_t *v = field(o, "sizeLimit");
	double d;

	if (!v)
		return 0;
	if (json_is_integer(v)) {
		if (json_integer_value(v) < 0)
			return badf(e, at, "sizeLimit", "negative");
		*out = json_integer_value(v);
		return 0;
	}
	if (json_is_real(v)) {
		d = ceil(json_real_value(v));
		if (!(d >= 0 && d < 9223372036854775808.0))
			return badf(e, at, "sizeLimit", "out of range");
		*out = (int64_t)d;
		return 0;
	}
	if (!json_is_string(v))
		return badf(e, at, "sizeLimit", "not a number or quantity");
	if (check_len(v, at, "sizeLimit", e) < 0)
		return -1;
	if (wire_parse_quantity(json_string_value(v), out, e) < 0) {
		e->code =
		    EINVAL; /* a bad value in the body, whatever the kind */
		return cerr_prefix(e, "%s.sizeLimit", at);
	}
	return 0;
}

static int parse_volume_source(const json_t *src, const char *at,
			       struct volume *v, struct cerr *e)
{
	char *medium = NULL;
	int64_t mode = -1;

	switch (v->kind) {
	case VOL_EMPTY_DIR:
		if (get_str(src, at, "medium", &medium, e) < 0)
			return -1;
		v->memory = medium && !strcmp(medium, "Memory");
		if (medium && *medium && !v->memory) {
			badf(e, at, "medium",
			     "\"%s\" is not \"\" or \"Memory\"", medium);
			free(medium);
			return -1;
		}
		free(medium);
		return parse_size_limit(src, at, &v->size_limit, e);
	case VOL_HOST_PATH:
		if (get_str(src, at, "type", &v->host_path_type, e) < 0 ||
		    get_str_req(src, at, "path", &v->path, e) < 0)
			return -1;
		if (v->path[0] != '/' || has_dotdot(v->path))
			return badf(e, at, "path", "not absolute or has '..'");
		return 0;
	case VOL_PACKAGE_PATH:
		/* "" or absent: the whole package. */
		if (get_str(src, at, "path", &v->path, e) < 0)
			return -1;
		if (!v->path)
			v->path = xstrdup("");
		if (has_dotdot(v->path))
			return badf(e, at, "path", "has '..'");
		return 0;
	case VOL_CONFIG_MAP:
	case VOL_SECRET:
		if (get_str(src, at,
			    v->kind == VOL_SECRET ? "secretName" : "name",
			    &v->source_name, e) < 0)
			return -1;
		break;
	case VOL_PROJECTED:
		if (get_arr(src, at, "sources", WIRE_MAX_LIST, &(json_t *){0},
			    e) < 0)
			return -1;
		break;
	case VOL_UNKNOWN:
		return 0;
	}
	if (get_int(src, at, "defaultMode", 0, 07777, &mode, NULL, e) < 0)
		return -1;
	v->default_mode = (int)mode;
	return 0;
}

static int parse_volume(const json_t *o, const char *at, struct volume *v,
			struct cerr *e)
{
	json_t *src = NULL, *s;
	char p[AT_MAX];
	int n = 0;

	v->default_mode = -1;
	if (!json_is_object(o))
		return badf(e, at, NULL, "not an object");
	if (get_label(o, at, &v->name, e) < 0)
		return -1;
	for (size_t k = 0; k < ARRAY_SIZE(volume_kinds); k++) {
		if (get_obj(o, at, volume_kinds[k], &s, e) < 0)
			return -1;
		if (!s)
			continue;
		if (n++)
			return badf(e, at, NULL,
				    "volume \"%s\" has both %s and %s; exactly "
				    "one source is allowed",
				    v->name, volume_kinds[v->kind],
				    volume_kinds[k]);
		v->kind = (enum volume_kind)k;
		src = s;
	}
	if (!src) {
		/* A kind this cell does not know (or none): accepted, and a
		 * unit that mounts it fails to start with the reason. */
		v->kind = VOL_UNKNOWN;
		warnf("%s: volume \"%s\" has no source this cell supports "
		      "(emptyDir, packagePath, configMap, secret, hostPath, "
		      "projected); units that mount it will not start",
		      at, v->name);
		return 0;
	}
	child(p, at, volume_kinds[v->kind], -1);
	return parse_volume_source(src, p, v, e);
}

static int parse_volumes(const json_t *spec, struct pod_spec *out,
			 struct cerr *e)
{
	int r;
	json_t *a, *v;
	size_t i;

	if ((r = get_arr(spec, "spec", "volumes", WIRE_MAX_VOLUMES, &a, e)) <=
	    0)
		return r;
	out->n_volumes = json_array_size(a);
	out->volumes = xcalloc(out->n_volumes, sizeof(*out->volumes));
	json_array_foreach(a, i, v)
	{
		char p[AT_MAX];

		child(p, "spec", "volumes", (long)i);
		if (parse_volume(v, p, &out->volumes[i], e) < 0)
			return -1;
		for (size_t j = 0; j < i; j++)
			if (!strcmp(out->volumes[j].name, out->volumes[i].name))
				return badf(e, p, "name",
					    "\"%s\" is used twice",
					    out->volumes[i].name);
	}
	return 0;
}

/* ---- units ---- */

/* A literal value, or valueFrom.secretKeyRef. Other valueFrom sources
 * (fieldRef, configMapKeyRef) are not on the wire; one that arrives is
 * ignored and the literal value stands. */
static int parse_env(const json_t *o, const char *at, struct env_var *ev,
		     struct cerr *e)
{
	json_t *from, *ref;
	char p[AT_MAX];

	if (!json_is_object(o))
		return badf(e, at, NULL, "not an object");
	if (get_str_req(o, at, "name", &ev->name, e) < 0 ||
	    get_str(o, at, "value", &ev->value, e) < 0 ||
	    get_obj(o, at, "valueFrom", &from, e) < 0)
		return -1;
	if (strchr(ev->name, '='))
		return badf(e, at, "name", "\"%s\" contains '='", ev->name);
	child(p, at, "valueFrom", -1);
	if (from && get_obj(from, p, "secretKeyRef", &ref, e) < 0)
		return -1;
	if (from && ref) {
		child(p, at, "valueFrom.secretKeyRef", -1);
		if (get_str_req(ref, p, "name", &ev->secret_name, e) < 0 ||
		    get_str_req(ref, p, "key", &ev->secret_key, e) < 0)
			return -1;
		free(ev->value);
		ev->value = NULL;
	} else if (!ev->value) {
		ev->value = xstrdup("");
	}
	return 0;
}

static const struct volume *find_volume(const struct pod_spec *pod,
					const char *name)
{
	for (size_t i = 0; i < pod->n_volumes; i++)
		if (!strcmp(pod->volumes[i].name, name))
			return &pod->volumes[i];
	return NULL;
}

static int parse_mount(const json_t *o, const char *at,
		       const struct pod_spec *pod, struct volume_mount *m,
		       struct cerr *e)
{
	if (!json_is_object(o))
		return badf(e, at, NULL, "not an object");
	if (get_str_req(o, at, "name", &m->name, e) < 0 ||
	    get_str_req(o, at, "mountPath", &m->mount_path, e) < 0 ||
	    get_str(o, at, "subPath", &m->sub_path, e) < 0 ||
	    get_bool(o, at, "readOnly", &m->read_only, e) < 0)
		return -1;
	/* Kip drops volumes it cannot convert (a PVC, downwardAPI, …) but
	 * keeps the mounts: accepted, and the unit fails to start saying so. */
	if (!find_volume(pod, m->name))
		warnf("%s: no volume \"%s\" in the pod; the unit will not "
		      "start",
		      at, m->name);
	if (m->mount_path[0] != '/' || has_dotdot(m->mount_path))
		return badf(e, at, "mountPath",
			    "\"%s\" is not absolute or has '..'",
			    m->mount_path);
	if (m->sub_path && !*m->sub_path) {
		free(m->sub_path);
		m->sub_path = NULL;
	}
	if (m->sub_path && (m->sub_path[0] == '/' || has_dotdot(m->sub_path)))
		return badf(e, at, "subPath", "\"%s\" is absolute or has '..'",
			    m->sub_path);
	return 0;
}

static int parse_port(const json_t *o, const char *at, struct port *pt,
		      struct cerr *e)
{
	static const char *const protocols[] = {"TCP", "UDP", "SCTP", "ICMP"};
	int64_t cport = 0, hport = 0;
	bool has_cport = false;

	if (!json_is_object(o))
		return badf(e, at, NULL, "not an object");
	if (get_str(o, at, "name", &pt->name, e) < 0 ||
	    get_int(o, at, "containerPort", 0, 65535, &cport, &has_cport, e) <
		0 ||
	    get_int(o, at, "hostPort", 0, 65535, &hport, NULL, e) < 0 ||
	    get_str_def(o, at, "protocol", "TCP", &pt->protocol, e) < 0 ||
	    get_str(o, at, "hostIP", &pt->host_ip, e) < 0)
		return -1;
	/* Ports only name a probe's port here: a port without a number or
	 * with a protocol we do not know is kept, with a warning. */
	if (!cport)
		warnf("%s: no containerPort", at);
	pt->container_port = (int)cport;
	pt->host_port = (int)hport;
	for (size_t i = 0; i < ARRAY_SIZE(protocols); i++)
		if (!strcmp(pt->protocol, protocols[i]))
			return 0;
	warnf("%s: protocol \"%s\" is not TCP, UDP, SCTP or ICMP", at,
	      pt->protocol);
	return 0;
}

/* A list of objects at key, each parsed by fn into an array of size elem. */
typedef int (*elem_fn)(const json_t *o, const char *at, void *ctx, void *elem,
		       struct cerr *e);

static int parse_list(const json_t *o, const char *at, const char *key,
		      size_t max, size_t elem, void **out, size_t *n,
		      elem_fn fn, void *ctx, struct cerr *e)
{
	int r;
	json_t *a, *v;
	size_t i;

	if ((r = get_arr(o, at, key, max, &a, e)) <= 0)
		return r;
	*n = json_array_size(a);
	*out = xcalloc(*n, elem);
	json_array_foreach(a, i, v)
	{
		char p[AT_MAX];

		child(p, at, key, (long)i);
		if (fn(v, p, ctx, (char *)*out + i * elem, e) < 0)
			return -1;
	}
	return 0;
}

static int env_fn(const json_t *o, const char *at, void *ctx, void *elem,
		  struct cerr *e)
{
	return parse_env(o, at, elem, e);
}

static int mount_fn(const json_t *o, const char *at, void *ctx, void *elem,
		    struct cerr *e)
{
	return parse_mount(o, at, ctx, elem, e);
}

static int port_fn(const json_t *o, const char *at, void *ctx, void *elem,
		   struct cerr *e)
{
	return parse_port(o, at, elem, e);
}

/* {name, value} pairs: sysctls, httpHeaders, dnsConfig.options. With ctx
 * (&kv_value_default) an absent value becomes ""; dnsConfig.options keep
 * NULL, since an option may have no value at all ("rotate"). */
static bool kv_value_default = true;

static int kv_fn(const json_t *o, const char *at, void *ctx, void *elem,
		 struct cerr *e)
{
	struct kv *kv = elem;

	if (!json_is_object(o))
		return badf(e, at, NULL, "not an object");
	if (get_str_req(o, at, "name", &kv->name, e) < 0 ||
	    get_str(o, at, "value", &kv->value, e) < 0)
		return -1;
	if (ctx && !kv->value)
		kv->value = xstrdup("");
	return 0;
}

static int parse_unit_security(const json_t *u, const char *at,
			       struct unit_spec *out, struct cerr *e)
{
	int r;
	json_t *sc, *caps;
	char p[AT_MAX], q[AT_MAX];

	if ((r = get_obj(u, at, "securityContext", &sc, e)) <= 0)
		return r;
	child(p, at, "securityContext", -1);
	if (get_int(sc, p, "runAsUser", 0, UID_MAX_WIRE, &out->run_as_user,
		    &out->has_run_as_user, e) < 0 ||
	    get_int(sc, p, "runAsGroup", 0, UID_MAX_WIRE, &out->run_as_group,
		    &out->has_run_as_group, e) < 0 ||
	    get_obj(sc, p, "capabilities", &caps, e) < 0)
		return -1;
	if (!caps)
		return 0;
	child(q, p, "capabilities", -1);
	/* Itzo's Capabilities.Drop has a broken struct tag, so Go spells it
	 * "Drop"; Kip writes "drop". Either is accepted, "drop" first. */
	if (get_strv(caps, q, "add", &out->caps_add, e) < 0 ||
	    get_strv(caps, q, field(caps, "drop") ? "drop" : "Drop",
		     &out->caps_drop, e) < 0)
		return -1;
	return 0;
}

/* ---- probes ---- */

/* A probe port: a number, or a name that is resolved against the unit's
 * ports as the kubelet does (a named port first, then a numeric string). A
 * name we cannot resolve is kept in port_name and port stays 0. */
static int parse_probe_port(const json_t *h, const char *at,
			    const struct unit_spec *u, struct probe *pr,
			    struct cerr *e)
{
	json_t *v = field(h, "port");
	int64_t n;
	const char *s;

	if (!v || (json_is_string(v) && !*json_string_value(v)) ||
	    (json_is_integer(v) && json_integer_value(v) == 0)) {
		warnf("%s: no port; the probe is ignored", at);
		pr->kind = PROBE_NONE;
		return 0;
	}
	if (json_is_integer(v))
		return get_int(h, at, "port", 1, 65535, &n, NULL, e) < 0
			   ? -1
			   : (pr->port = (int)n, 0);
	if (!json_is_string(v))
		return badf(e, at, "port", "not an integer or a port name");
	if (check_len(v, at, "port", e) < 0)
		return -1;
	s = json_string_value(v);
	/* A named port sent without a number (accepted with a warning) does
	 * not resolve: the name is kept, as for an unknown one. */
	for (size_t i = 0; i < u->n_ports; i++)
		if (u->ports[i].name && !strcmp(u->ports[i].name, s) &&
		    u->ports[i].container_port > 0) {
			pr->port = u->ports[i].container_port;
			return 0;
		}
	if (*s && strspn(s, "0123456789") == strlen(s)) {
		if (parse_int64(s, 1, 65535, &n, NULL) < 0)
			return badf(e, at, "port", "\"%s\" is out of range", s);
		pr->port = (int)n;
		return 0;
	}
	pr->port_name = xstrdup(s);
	return 0;
}

static int parse_http_get(const json_t *h, const char *at,
			  const struct unit_spec *u, struct probe *pr,
			  struct cerr *e)
{
	pr->kind = PROBE_HTTP;
	if (get_str_def(h, at, "path", "/", &pr->path, e) < 0 ||
	    get_str(h, at, "host", &pr->host, e) < 0 ||
	    get_str_def(h, at, "scheme", "HTTP", &pr->scheme, e) < 0 ||
	    parse_probe_port(h, at, u, pr, e) < 0 ||
	    parse_list(h, at, "httpHeaders", WIRE_MAX_LIST, sizeof(struct kv),
		       (void **)&pr->http_headers, &pr->n_http_headers, kv_fn,
		       &kv_value_default, e) < 0)
		return -1;
	if (strcmp(pr->scheme, "HTTP") && strcmp(pr->scheme, "HTTPS"))
		return badf(e, at, "scheme", "\"%s\" is not HTTP or HTTPS",
			    pr->scheme);
	return 0;
}

/* One of exec, httpGet, tcpSocket (exactly one, as Kubernetes requires),
 * then the timing fields with Kubernetes' defaults where 0 or absent. */
static int parse_probe_handler(const json_t *o, const char *at,
			       const struct unit_spec *u, struct probe *pr,
			       struct cerr *e)
{
	static const char *const kinds[] = {"exec", "httpGet", "tcpSocket"};
	json_t *h[3];
	char p[AT_MAX];
	int n = 0, k = 0;

	for (int i = 0; i < 3; i++) {
		if (get_obj(o, at, kinds[i], &h[i], e) < 0)
			return -1;
		if (h[i] && !n++)
			k = i;
	}
	if (n > 1)
		return badf(e, at, NULL,
			    "more than one of exec, httpGet, tcpSocket");
	if (n == 0) {
		/* What Kip sends for a handler it cannot convert (grpc, a
		 * newer kind): the probe cannot run, so it is ignored. */
		warnf("%s: no handler this cell supports (exec, httpGet, "
		      "tcpSocket); the probe is ignored",
		      at);
		return 0;
	}
	child(p, at, kinds[k], -1);
	if (k == 1)
		return parse_http_get(h[k], p, u, pr, e);
	if (k == 2) {
		pr->kind = PROBE_TCP;
		return get_str(h[k], p, "host", &pr->host, e) < 0
			   ? -1
			   : parse_probe_port(h[k], p, u, pr, e);
	}
	pr->kind = PROBE_EXEC;
	if (get_strv(h[k], p, "command", &pr->exec_command, e) < 0)
		return -1;
	if (!pr->exec_command || !pr->exec_command[0]) {
		warnf("%s: no command; the probe is ignored", p);
		pr->kind = PROBE_NONE;
	}
	return 0;
}

static int parse_probe(const json_t *u, const char *at, const char *key,
		       const struct unit_spec *unit, struct probe *pr,
		       struct cerr *e)
{
	int r;
	json_t *o;
	char p[AT_MAX];

	if ((r = get_obj(u, at, key, &o, e)) <= 0)
		return r;
	child(p, at, key, -1);
	if (parse_probe_handler(o, p, unit, pr, e) < 0 ||
	    get_int_def(o, p, "initialDelaySeconds", 0, &pr->initial_delay_s,
			e) < 0 ||
	    get_int_def(o, p, "timeoutSeconds", 1, &pr->timeout_s, e) < 0 ||
	    get_int_def(o, p, "periodSeconds", 10, &pr->period_s, e) < 0 ||
	    get_int_def(o, p, "successThreshold", 1, &pr->success_threshold,
			e) < 0 ||
	    get_int_def(o, p, "failureThreshold", 3, &pr->failure_threshold,
			e) < 0)
		return -1;
	return 0;
}

/* ---- a unit ---- */

/* One limit of a ResourceList: a quantity string (what Go's Quantity
 * marshals to) or a JSON number. */
static int parse_limit(const json_t *lim, const char *at, const char *key,
		       bool milli, int64_t *out, struct cerr *e)
{
	json_t *v = field(lim, key);
	char p[AT_MAX];
	int r;

	if (!v)
		return 0;
	child(p, at, key, -1);
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		if (milli && json_integer_value(v) > INT64_MAX / 1000)
			return badf(e, p, NULL, "out of range");
		*out = json_integer_value(v) * (milli ? 1000 : 1);
		return 0;
	}
	if (!json_is_string(v))
		return badf(e, p, NULL, "not a quantity");
	if (check_len(v, p, NULL, e) < 0)
		return -1;
	r = milli ? wire_parse_quantity_milli(json_string_value(v), out, e)
		  : wire_parse_quantity(json_string_value(v), out, e);
	if (r < 0) {
		e->code = EINVAL;
		return cerr_prefix(e, "%s", p);
	}
	return 0;
}

/* resources.limits.{memory,cpu}. Kip's ResourceRequirements has no JSON
 * tags, so it arrives as {"Limits":…,"Requests":…}; the Kubernetes
 * spelling "limits" is read too. Requests are not limits. */
static int parse_unit_resources(const json_t *u, const char *at,
				struct unit_spec *out, struct cerr *e)
{
	json_t *res, *lim = NULL;
	char p[AT_MAX], q[AT_MAX];

	if (get_obj(u, at, "resources", &res, e) < 0)
		return -1;
	if (!res)
		return 0;
	child(p, at, "resources", -1);
	if (get_obj(res, p, "Limits", &lim, e) < 0)
		return -1;
	if (!lim && get_obj(res, p, "limits", &lim, e) < 0)
		return -1;
	if (!lim)
		return 0;
	child(q, p, field(res, "Limits") ? "Limits" : "limits", -1);
	if (parse_limit(lim, q, "memory", false, &out->memory_limit, e) < 0 ||
	    parse_limit(lim, q, "cpu", true, &out->cpu_millis, e) < 0)
		return -1;
	return 0;
}

struct keyed {
	json_t *v;
	const char *k1, *k2;
	size_t i;
};

static int keyed_cmp(const void *a, const void *b)
{
	const struct keyed *x = a, *y = b;
	int c = strcmp(x->k1, y->k1);

	if (!c)
		c = strcmp(x->k2, y->k2);
	return c ? c : (x->i > y->i) - (x->i < y->i); /* stable */
}

static const char *str_or_empty(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));
	return s ? s : "";
}

/* Sort the array at key by two string members, stably (a name given twice
 * keeps its order: the later one wins). */
static void sort_list(json_t *u, const char *key, const char *k1,
		      const char *k2)
{
	json_t *a = json_object_get(u, key);
	size_t n = json_array_size(a);
	struct keyed *v;

	if (n < 2)
		return;
	v = xcalloc(n, sizeof(*v));
	for (size_t i = 0; i < n; i++) {
		json_t *x = json_array_get(a, i);
		v[i] = (struct keyed){json_incref(x), str_or_empty(x, k1),
				      str_or_empty(x, k2), i};
	}
	qsort(v, n, sizeof(*v), keyed_cmp);
	json_array_clear(a);
	for (size_t i = 0; i < n; i++)
		json_array_append_new(a, v[i].v);
	free(v);
}

/* Every field of the unit's JSON, known or not, in one canonical text:
 * any change of any field restarts the unit (WIRE.md). Key order does not
 * count, nor the order of env and volumeMounts: the controller rebuilds
 * those lists from Go maps (virtual-kubelet's env population) on every
 * sync, and the same spec in another order must restart nothing. */
static char *fingerprint(const json_t *u)
{
	json_t *c = json_deep_copy(u);
	char *s;

	if (!c)
		abort(); /* only on out-of-memory: the house rule */
	sort_list(c, "env", "name", "");
	sort_list(c, "volumeMounts", "mountPath", "name");
	s = json_dumps(c, JSON_SORT_KEYS | JSON_COMPACT);
	json_decref(c);
	if (!s)
		abort();
	return s;
}

static int parse_unit_fields(const json_t *u, const char *at,
			     const struct pod_spec *pod, struct unit_spec *out,
			     struct cerr *e)
{
	if (get_label(u, at, &out->name, e) < 0 ||
	    get_str_req(u, at, "image", &out->image, e) < 0 ||
	    get_strv(u, at, "command", &out->command, e) < 0 ||
	    get_strv(u, at, "args", &out->args, e) < 0 ||
	    get_str(u, at, "workingDir", &out->working_dir, e) < 0 ||
	    get_bool(u, at, "tty", &out->tty, e) < 0 ||
	    get_bool(u, at, "stdin", &out->open_stdin, e) < 0 ||
	    parse_unit_resources(u, at, out, e) < 0 ||
	    parse_list(u, at, "env", WIRE_MAX_ENV, sizeof(struct env_var),
		       (void **)&out->env, &out->n_env, env_fn, NULL, e) < 0 ||
	    parse_list(u, at, "volumeMounts", WIRE_MAX_LIST,
		       sizeof(struct volume_mount), (void **)&out->mounts,
		       &out->n_mounts, mount_fn, (void *)pod, e) < 0 ||
	    parse_list(u, at, "ports", WIRE_MAX_LIST, sizeof(struct port),
		       (void **)&out->ports, &out->n_ports, port_fn, NULL,
		       e) < 0 ||
	    parse_unit_security(u, at, out, e) < 0)
		return -1;
	/* Probes last: a named probe port refers to the ports above. */
	if (parse_probe(u, at, "livenessProbe", out, &out->liveness, e) < 0 ||
	    parse_probe(u, at, "readinessProbe", out, &out->readiness, e) < 0 ||
	    parse_probe(u, at, "startupProbe", out, &out->startup, e) < 0)
		return -1;
	return 0;
}

static int parse_unit(const json_t *u, const char *at, void *ctx, void *elem,
		      struct cerr *e)
{
	struct unit_spec *out = elem;
	char **pol;

	if (!json_is_object(u))
		return badf(e, at, NULL, "not an object");
	if (parse_unit_fields(u, at, ctx, out, e) < 0 ||
	    get_str_def(u, at, "terminationMessagePath", "/dev/termination-log",
			&out->termination_message_path, e) < 0 ||
	    get_str_def(u, at, "terminationMessagePolicy", "File",
			&out->termination_message_policy, e) < 0)
		return -1;
	pol = &out->termination_message_policy;
	if (strcmp(*pol, "File") && strcmp(*pol, "FallbackToLogsOnError"))
		return badf(e, at, "terminationMessagePolicy",
			    "\"%s\" is not File or FallbackToLogsOnError",
			    *pol);
	out->fingerprint = fingerprint(u);
	return 0;
}

/* Unit names are unique over units and initUnits: logs, status and exec
 * address a unit by name alone. */
static int check_unit_names(const struct pod_spec *p, struct cerr *e)
{
	size_t n = p->n_init_units + p->n_units;

	for (size_t i = 0; i < n; i++) {
		const struct unit_spec *a =
		    i < p->n_init_units ? &p->init_units[i]
					: &p->units[i - p->n_init_units];
		for (size_t j = 0; j < i; j++) {
			const struct unit_spec *b =
			    j < p->n_init_units
				? &p->init_units[j]
				: &p->units[j - p->n_init_units];
			if (!strcmp(a->name, b->name))
				return cerr_set(e, EINVAL,
						"spec: unit name \"%s\" is "
						"used twice",
						a->name);
		}
	}
	return 0;
}

/* ---- the pod ---- */

static int parse_pod_security(const json_t *spec, struct pod_spec *out,
			      struct cerr *e)
{
	static const char at[] = "spec.securityContext";
	int r;
	const char *const ns_keys[] = {"network", "pid", "ipc"};
	enum ns_mode *ns[] = {&out->ns_network, &out->ns_pid, &out->ns_ipc};
	json_t *sc, *nso, *groups;

	if ((r = get_obj(spec, "spec", "securityContext", &sc, e)) <= 0)
		return r;
	if (get_obj(sc, at, "namespaceOptions", &nso, e) < 0 ||
	    get_int(sc, at, "runAsUser", 0, UID_MAX_WIRE, &out->run_as_user,
		    &out->has_run_as_user, e) < 0 ||
	    get_int(sc, at, "runAsGroup", 0, UID_MAX_WIRE, &out->run_as_group,
		    &out->has_run_as_group, e) < 0 ||
	    get_arr(sc, at, "supplementalGroups", WIRE_MAX_LIST, &groups, e) <
		0 ||
	    parse_list(sc, at, "sysctls", WIRE_MAX_LIST, sizeof(struct kv),
		       (void **)&out->sysctls, &out->n_sysctls, kv_fn,
		       &kv_value_default, e) < 0)
		return -1;
	for (size_t i = 0; nso && i < ARRAY_SIZE(ns_keys); i++) {
		int64_t m = 0;
		if (get_int(nso, "spec.securityContext.namespaceOptions",
			    ns_keys[i], NS_POD, NS_NODE, &m, NULL, e) < 0)
			return -1;
		*ns[i] = (enum ns_mode)m;
	}
	out->n_supplemental_groups = groups ? json_array_size(groups) : 0;
	out->supplemental_groups =
	    groups ? xcalloc(out->n_supplemental_groups, sizeof(int64_t))
		   : NULL;
	for (size_t i = 0; i < out->n_supplemental_groups; i++) {
		json_t *g = json_array_get(groups, i);
		char p[AT_MAX];

		child(p, at, "supplementalGroups", (long)i);
		if (!json_is_integer(g))
			return badf(e, p, NULL, "not an integer");
		if (json_integer_value(g) < 0 ||
		    json_integer_value(g) > UID_MAX_WIRE)
			return badf(e, p, NULL, "out of range");
		out->supplemental_groups[i] = json_integer_value(g);
	}
	return 0;
}

static int alias_fn(const json_t *o, const char *at, void *ctx, void *elem,
		    struct cerr *e)
{
	struct host_alias *h = elem;

	if (!json_is_object(o))
		return badf(e, at, NULL, "not an object");
	if (get_str_req(o, at, "ip", &h->ip, e) < 0 ||
	    get_strv(o, at, "hostnames", &h->hostnames, e) < 0)
		return -1;
	return 0;
}

static int parse_dns(const json_t *spec, struct pod_spec *out, struct cerr *e)
{
	static const char at[] = "spec.dnsConfig";
	json_t *dc;

	if (get_str(spec, "spec", "dnsPolicy", &out->dns_policy, e) < 0 ||
	    get_obj(spec, "spec", "dnsConfig", &dc, e) < 0 ||
	    parse_list(spec, "spec", "hostAliases", WIRE_MAX_LIST,
		       sizeof(struct host_alias), (void **)&out->host_aliases,
		       &out->n_host_aliases, alias_fn, NULL, e) < 0)
		return -1;
	if (!dc)
		return 0;
	if (get_strv(dc, at, "nameservers", &out->dns_nameservers, e) < 0 ||
	    get_strv(dc, at, "searches", &out->dns_searches, e) < 0 ||
	    parse_list(dc, at, "options", WIRE_MAX_LIST, sizeof(struct kv),
		       (void **)&out->dns_options, &out->n_dns_options, kv_fn,
		       NULL, e) < 0)
		return -1;
	return 0;
}

static int parse_restart_policy(const json_t *spec, struct pod_spec *out,
				struct cerr *e)
{
	static const char *const names[] = {
	    [RESTART_ALWAYS] = "Always",
	    [RESTART_ON_FAILURE] = "OnFailure",
	    [RESTART_NEVER] = "Never",
	};
	cleanup_free char *s = NULL;

	if (get_str_def(spec, "spec", "restartPolicy", "Always", &s, e) < 0)
		return -1;
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (!strcmp(s, names[i])) {
			out->restart_policy = (enum restart_policy)i;
			return 0;
		}
	return badf(e, "spec", "restartPolicy",
		    "\"%s\" is not Always, OnFailure or Never", s);
}

/* spec.resources.memory sizes the instance; the agent also makes it the
 * memory limit of each unit, so a runaway unit is OOM-killed and reported
 * rather than taking the cell down. The other resource fields are for the
 * controller. */
static int parse_resources(const json_t *spec, struct pod_spec *out,
			   struct cerr *e)
{
	json_t *res;
	char *mem = NULL;
	int ret = 0;

	if (get_obj(spec, "spec", "resources", &res, e) < 0)
		return -1;
	if (!res)
		return 0;
	if (get_str(res, "spec.resources", "memory", &mem, e) < 0)
		return -1;
	if (mem && *mem &&
	    wire_parse_quantity(mem, &out->memory_limit, e) < 0) {
		e->code = EINVAL;
		ret = cerr_prefix(e, "spec.resources.memory");
	}
	free(mem);
	return ret;
}

static int parse_spec(const json_t *root, struct pod_spec *out, struct cerr *e)
{
	json_t *spec;
	bool has_grace;

	if (get_obj(root, "", "spec", &spec, e) < 0)
		return -1;
	if (!spec)
		return badf(e, "spec", NULL, "required");
	if (get_str(spec, "spec", "phase", &out->phase, e) < 0 ||
	    parse_restart_policy(spec, out, e) < 0 ||
	    get_str(spec, "spec", "hostname", &out->hostname, e) < 0 ||
	    get_str(spec, "spec", "subdomain", &out->subdomain, e) < 0 ||
	    get_int(spec, "spec", "terminationGracePeriodSeconds", 0, INT32_MAX,
		    &out->termination_grace_s, &has_grace, e) < 0 ||
	    parse_pod_security(spec, out, e) < 0 ||
	    parse_dns(spec, out, e) < 0 || parse_resources(spec, out, e) < 0)
		return -1;
	/* Volumes before units: a mount must name one of them. */
	if (parse_volumes(spec, out, e) < 0 ||
	    parse_list(spec, "spec", "initUnits", WIRE_MAX_UNITS,
		       sizeof(struct unit_spec), (void **)&out->init_units,
		       &out->n_init_units, parse_unit, out, e) < 0 ||
	    parse_list(spec, "spec", "units", WIRE_MAX_UNITS,
		       sizeof(struct unit_spec), (void **)&out->units,
		       &out->n_units, parse_unit, out, e) < 0)
		return -1;
	return check_unit_names(out, e);
}

int wire_parse_pod(const char *buf, size_t len, struct pod_spec *out,
		   struct cerr *e)
{
	cleanup_json json_t *root = NULL;
	int rc;

	memset(out, 0, sizeof(*out));
	if (len > UPDATEPOD_MAX)
		return cerr_set(e, EFBIG, "PodParameters: %zu bytes, max %u",
				len, UPDATEPOD_MAX);
	root = json_parse_object(buf, len, e);
	if (!root)
		return -1;
	out->termination_grace_s = 30;
	warn_sink = &out->warnings;
	warn_n = &out->n_warnings;
	rc = parse_secrets(root, out, e) < 0 ||
		     parse_credentials(root, out, e) < 0 ||
		     parse_annotations(root, out, e) < 0 ||
		     get_str(root, "", "PodName", &out->pod_name, e) < 0 ||
		     get_str(root, "", "NodeName", &out->node_name, e) < 0 ||
		     get_str(root, "", "PodIP", &out->pod_ip, e) < 0 ||
		     get_str(root, "", "PodHostname", &out->pod_hostname, e) <
			 0 ||
		     parse_spec(root, out, e) < 0
		 ? -1
		 : 0;
	warn_sink = NULL;
	warn_n = NULL;
	if (rc < 0)
		pod_spec_free(out);
	return rc;
}

/* ---- freeing ---- */

static void kvs_free(struct kv *kv, size_t n)
{
	for (size_t i = 0; kv && i < n; i++) {
		free(kv[i].name);
		free(kv[i].value);
	}
	free(kv);
}

static void probe_free(struct probe *p)
{
	strv_free(p->exec_command);
	free(p->path);
	free(p->host);
	free(p->scheme);
	kvs_free(p->http_headers, p->n_http_headers);
	free(p->port_name);
}

static void unit_free(struct unit_spec *u)
{
	free(u->name);
	free(u->image);
	strv_free(u->command);
	strv_free(u->args);
	for (size_t i = 0; u->env && i < u->n_env; i++) {
		free(u->env[i].name);
		free(u->env[i].value);
		free(u->env[i].secret_name);
		free(u->env[i].secret_key);
	}
	free(u->env);
	for (size_t i = 0; u->mounts && i < u->n_mounts; i++) {
		free(u->mounts[i].name);
		free(u->mounts[i].mount_path);
		free(u->mounts[i].sub_path);
	}
	free(u->mounts);
	for (size_t i = 0; u->ports && i < u->n_ports; i++) {
		free(u->ports[i].name);
		free(u->ports[i].protocol);
		free(u->ports[i].host_ip);
	}
	free(u->ports);
	free(u->working_dir);
	strv_free(u->caps_add);
	strv_free(u->caps_drop);
	probe_free(&u->liveness);
	probe_free(&u->readiness);
	probe_free(&u->startup);
	free(u->termination_message_path);
	free(u->termination_message_policy);
	free(u->fingerprint);
}

static void units_free(struct unit_spec *u, size_t n)
{
	for (size_t i = 0; u && i < n; i++)
		unit_free(&u[i]);
	free(u);
}

static void pod_lists_free(struct pod_spec *p)
{
	for (size_t i = 0; p->volumes && i < p->n_volumes; i++) {
		free(p->volumes[i].name);
		free(p->volumes[i].path);
		free(p->volumes[i].host_path_type);
		free(p->volumes[i].source_name);
	}
	free(p->volumes);
	for (size_t i = 0; p->secrets && i < p->n_secrets; i++) {
		free(p->secrets[i].name);
		kvs_free(p->secrets[i].items, p->secrets[i].n_items);
		free(p->secrets[i].item_len);
	}
	free(p->secrets);
	for (size_t i = 0; p->credentials && i < p->n_credentials; i++) {
		free(p->credentials[i].host);
		free(p->credentials[i].username);
		free(p->credentials[i].password);
		free(p->credentials[i].server);
	}
	free(p->credentials);
	for (size_t i = 0; p->host_aliases && i < p->n_host_aliases; i++) {
		free(p->host_aliases[i].ip);
		strv_free(p->host_aliases[i].hostnames);
	}
	free(p->host_aliases);
}

void pod_spec_free(struct pod_spec *p)
{
	if (!p)
		return;
	free(p->pod_name);
	free(p->node_name);
	free(p->pod_ip);
	free(p->pod_hostname);
	free(p->phase);
	units_free(p->units, p->n_units);
	units_free(p->init_units, p->n_init_units);
	pod_lists_free(p);
	free(p->supplemental_groups);
	kvs_free(p->sysctls, p->n_sysctls);
	kvs_free(p->annotations, p->n_annotations);
	free(p->hostname);
	free(p->subdomain);
	free(p->dns_policy);
	strv_free(p->dns_nameservers);
	strv_free(p->dns_searches);
	kvs_free(p->dns_options, p->n_dns_options);
	strv_free(p->warnings);
	memset(p, 0, sizeof(*p));
}

/* ---- PodStatusReply ---- */

/* Length of the valid UTF-8 sequence at s (jansson's rules: no overlongs,
 * no surrogates, nothing above U+10FFFF), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

/* Status strings come from outside (a unit's termination message is
 * whatever it wrote): invalid UTF-8 becomes U+FFFD, as Go's encoder would
 * do, instead of making jansson refuse the string. */
static char *utf8_lossy(const char *in)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t n = strlen(in), o = 0;
	char *out = xmalloc(n * 3 + 1);

	for (size_t i = 0; i < n;) {
		size_t l = utf8_len(s + i, n - i);
		if (l) {
			memcpy(out + o, s + i, l);
			o += l;
			i += l;
		} else {
			memcpy(out + o, "\xef\xbf\xbd", 3);
			o += 3;
			i++;
		}
	}
	out[o] = '\0';
	return out;
}

static json_t *jstring(const char *s)
{
	json_t *j = json_string(s ? s : "");

	if (!j) {
		cleanup_free char *fixed = utf8_lossy(s);
		j = json_string(fixed);
	}
	if (!j)
		abort(); /* out of memory */
	return j;
}

static bool utf8_valid(const char *in)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t n = strlen(in);

	for (size_t i = 0, l; i < n; i += l)
		if (!(l = utf8_len(s + i, n - i)))
			return false;
	return true;
}

/* json_object_set_new that cannot fail quietly. The key is made valid UTF-8
 * first: jansson refuses other keys and consumes the value when it does. */
static void jset(json_t *o, const char *key, json_t *v)
{
	cleanup_free char *fixed = utf8_valid(key) ? NULL : utf8_lossy(key);

	if (!v || json_object_set_new(o, fixed ? fixed : key, v) < 0)
		abort(); /* out of memory */
}

/* RFC 3339 UTC with second precision, the way Go's time.RFC3339 prints it;
 * a zero time is null (Go's Time would otherwise say 0001-01-01). */
static json_t *jtime(int64_t ns)
{
	struct tm tm;
	char buf[64];
	time_t secs;

	if (ns == 0)
		return json_null();
	secs = (time_t)(ns / 1000000000 - (ns % 1000000000 < 0));
	if (!gmtime_r(&secs, &tm) ||
	    !strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm))
		return json_null();
	return json_string(buf);
}

static json_t *state_json(const struct unit_state *st)
{
	json_t *o = json_object(), *in = json_object();

	switch (st->kind) {
	case STATE_WAITING:
		jset(in, "reason", jstring(st->reason));
		jset(in, "startFailure", json_boolean(st->start_failure));
		jset(o, "waiting", in);
		return o;
	case STATE_RUNNING:
		jset(in, "startedAt", jtime(st->started_at_ns));
		jset(o, "running", in);
		return o;
	case STATE_TERMINATED:
		jset(in, "exitCode", json_integer(st->exit_code));
		jset(in, "finishedAt", jtime(st->finished_at_ns));
		jset(in, "reason", jstring(st->reason));
		jset(in, "message", jstring(st->message));
		jset(in, "startedAt", jtime(st->started_at_ns));
		jset(o, "terminated", in);
		return o;
	case STATE_NONE:
	default:
		json_decref(in);
		return o;
	}
}

static json_t *unit_status_json(const struct unit_status *u)
{
	json_t *o = json_object();
	/* Kip decodes restartCount into an int32. */
	int rc = u->restart_count < 0 ? 0 : u->restart_count;

	jset(o, "name", jstring(u->name));
	jset(o, "image", jstring(u->image));
	jset(o, "ready", json_boolean(u->ready));
	jset(o, "started",
	     u->started < 0 ? json_null() : json_boolean(u->started));
	jset(o, "restartCount", json_integer(rc));
	jset(o, "state", state_json(&u->state));
	jset(o, "lastState", state_json(&u->last_state));
	return o;
}

static json_t *statuses_json(const struct unit_status *u, size_t n)
{
	json_t *a = json_array();

	for (size_t i = 0; u && i < n; i++)
		if (json_array_append_new(a, unit_status_json(&u[i])) < 0)
			abort();
	return a;
}

/* A resourceUsage value: Kip decodes a map[string]float64, so anything but
 * a finite number would make it drop the whole reply. Integral values are
 * written as integers, others as reals; text that is no number is NULL. */
static json_t *usage_number(const char *s)
{
	char *end;
	long long i;
	double d;

	if (!s || !*s || strspn(s, "0123456789+-.eE") != strlen(s))
		return NULL;
	errno = 0;
	i = strtoll(s, &end, 10);
	if (!*end && !errno)
		return json_integer(i);
	errno = 0;
	d = strtod(s, &end);
	if (*end || !isfinite(d))
		return NULL;
	if (d == floor(d) && fabs(d) < 9223372036854775808.0)
		return json_integer((json_int_t)d);
	return json_real(d);
}

static json_t *usage_json(const struct pod_status *s)
{
	json_t *o = json_object();

	for (size_t i = 0; s->usage && i < s->n_usage; i++) {
		json_t *v =
		    s->usage[i].name ? usage_number(s->usage[i].value) : NULL;
		if (v)
			jset(o, s->usage[i].name, v);
	}
	return o;
}

char *wire_status_json(const struct pod_status *s)
{
	cleanup_json json_t *root = json_object();
	json_t *usage;
	char *txt;

	jset(root, "unitStatus", statuses_json(s->units, s->n_units));
	jset(root, "initUnitStatus",
	     statuses_json(s->init_units, s->n_init_units));
	usage = s->n_usage ? usage_json(s) : NULL;
	if (usage && json_object_size(usage))
		jset(root, "resourceUsage", usage);
	else if (usage)
		json_decref(usage);
	jset(root, "podIP", jstring(s->pod_ip));
	txt = json_dumps(root, JSON_COMPACT);
	if (!txt)
		abort(); /* out of memory */
	return txt;
}
