// SPDX-License-Identifier: Apache-2.0
#include "jsonutil.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "util.h"

json_t *json_parse_object(const char *buf, size_t len, struct cerr *e)
{
	json_error_t je;
	json_t *j = json_loadb(buf, len, 0, &je);

	if (!j) {
		cerr_set(e, EINVAL, "malformed JSON at line %d column %d: %s",
			 je.line, je.column, je.text);
		return NULL;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		cerr_set(e, EINVAL, "JSON document is not an object");
		return NULL;
	}
	return j;
}

json_t *jget(const json_t *obj, const char *key)
{
	json_t *v = json_is_object(obj) ? json_object_get(obj, key) : NULL;
	return json_is_null(v) ? NULL : v;
}

const char *js(const json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));
	return s ? s : "";
}

const char *jstr(const json_t *obj, const char *key)
{
	json_t *v = json_object_get(obj, key);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

char *jstrdup(const json_t *obj, const char *key)
{
	const char *s = jstr(obj, key);
	return s ? xstrdup(s) : NULL;
}

int jstrv(const json_t *obj, const char *key, char ***out, struct cerr *e)
{
	json_t *a = json_object_get(obj, key), *v;
	size_t i;
	char **vec;

	*out = NULL;
	if (!a || json_is_null(a))
		return 0;
	if (!json_is_array(a))
		return cerr_set(e, EINVAL, "'%s' is not an array", key);
	vec = xcalloc(json_array_size(a) + 1, sizeof(char *));
	json_array_foreach(a, i, v)
	{
		if (!json_is_string(v)) {
			strv_free(vec);
			return cerr_set(e, EINVAL, "'%s' holds a non-string",
					key);
		}
		vec[i] = xstrdup(json_string_value(v));
	}
	*out = vec;
	return 0;
}

int jint(const json_t *obj, const char *key, long long def, long long *out,
	 struct cerr *e)
{
	json_t *v = json_object_get(obj, key);

	if (!v || json_is_null(v)) {
		*out = def;
		return 0;
	}
	if (!json_is_integer(v))
		return cerr_set(e, EINVAL, "'%s' is not an integer", key);
	*out = json_integer_value(v);
	return 0;
}

int jbad(struct cerr *e, const char *at, const char *key, const char *fmt, ...)
{
	char what[CERR_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return cerr_set(e, EINVAL, "%s%s%s: %s", at, key && *at ? "." : "",
			key ? key : "", what);
}

void jpath(char *buf, const char *at, const char *key, long i)
{
	const char *dot = *at ? "." : "";

	if (i < 0)
		snprintf(buf, JSON_PATH_MAX, "%s%s%s", at, dot, key);
	else
		snprintf(buf, JSON_PATH_MAX, "%s%s%s[%ld]", at, dot, key, i);
}

/* A string value v at "at.key" of at most max bytes, copied. */
static int str_value(const json_t *v, const char *at, const char *key,
		     size_t max, char **out, struct cerr *e)
{
	size_t n;

	if (!json_is_string(v))
		return jbad(e, at, key, "not a string");
	n = json_string_length(v);
	if (n > max)
		return jbad(e, at, key, "too long (%zu bytes, max %zu)", n,
			    max);
	if (strlen(json_string_value(v)) != n) /* YAML's "\0" */
		return jbad(e, at, key, "holds a NUL byte");
	*out = xstrdup(json_string_value(v));
	return 0;
}

int jget_str(const json_t *o, const char *at, const char *key, size_t max,
	     char **out, struct cerr *e)
{
	json_t *v = jget(o, key);

	return v ? str_value(v, at, key, max, out, e) : 0;
}

int jget_str_req(const json_t *o, const char *at, const char *key, size_t max,
		 char **out, struct cerr *e)
{
	if (jget_str(o, at, key, max, out, e) < 0)
		return -1;
	if (!*out || !**out)
		return jbad(e, at, key, "required");
	return 0;
}

int jget_int(const json_t *o, const char *at, const char *key, int64_t min,
	     int64_t max, int64_t *out, bool *present, struct cerr *e)
{
	json_t *v = jget(o, key);
	json_int_t n;

	if (present)
		*present = v != NULL;
	if (!v)
		return 0;
	if (!json_is_integer(v))
		return jbad(e, at, key, "not an integer");
	n = json_integer_value(v);
	if (n < min || n > max)
		return jbad(e, at, key, "%lld is out of range [%lld, %lld]",
			    (long long)n, (long long)min, (long long)max);
	*out = n;
	return 0;
}

int jget_bool(const json_t *o, const char *at, const char *key, bool *out,
	      struct cerr *e)
{
	json_t *v = jget(o, key);

	if (!v)
		return 0;
	if (!json_is_boolean(v))
		return jbad(e, at, key, "not a boolean");
	*out = json_is_true(v);
	return 0;
}

int jget_obj(const json_t *o, const char *at, const char *key, json_t **out,
	     struct cerr *e)
{
	json_t *v = jget(o, key);

	*out = NULL;
	if (v && !json_is_object(v))
		return jbad(e, at, key, "not an object");
	*out = v;
	return v ? 1 : 0;
}

int jget_arr(const json_t *o, const char *at, const char *key, size_t max,
	     json_t **out, struct cerr *e)
{
	json_t *v = jget(o, key);

	*out = NULL;
	if (!v)
		return 0;
	if (!json_is_array(v))
		return jbad(e, at, key, "not an array");
	if (json_array_size(v) > max)
		return jbad(e, at, key, "too many entries (%zu, max %zu)",
			    json_array_size(v), max);
	*out = v;
	return 1;
}

int jget_list(const json_t *o, const char *at, const char *key, size_t max,
	      size_t elem, void **out, size_t *n, jelem_fn *fn, void *ctx,
	      struct cerr *e)
{
	char p[JSON_PATH_MAX];
	json_t *a, *v;
	size_t i;
	int r;

	if ((r = jget_arr(o, at, key, max, &a, e)) <= 0)
		return r;
	*n = json_array_size(a);
	/* One more, zeroed: a vector of pointers ends in NULL. */
	*out = xcalloc(*n + 1, elem);
	json_array_foreach(a, i, v)
	{
		jpath(p, at, key, (long)i);
		if (fn(v, p, ctx, (char *)*out + i * elem, e) < 0)
			return -1;
	}
	return 1;
}

/* One string of a list, at most *(size_t *)ctx bytes. */
static int str_elem(const json_t *v, const char *at, void *ctx, void *elem,
		    struct cerr *e)
{
	return str_value(v, at, NULL, *(const size_t *)ctx, elem, e);
}

int jget_strv(const json_t *o, const char *at, const char *key, size_t max,
	      size_t max_len, char ***out, struct cerr *e)
{
	size_t n;

	return jget_list(o, at, key, max, sizeof(char *), (void **)out, &n,
			 str_elem, &max_len, e) < 0
		   ? -1
		   : 0;
}
