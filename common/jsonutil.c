// SPDX-License-Identifier: Apache-2.0
#include "jsonutil.h"

#include <errno.h>

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
