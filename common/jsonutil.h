// SPDX-License-Identifier: Apache-2.0
/* jansson helpers. Only the parse-at-the-edge files use these: everything
 * else sees typed structs. */
#ifndef CELL_JSONUTIL_H
#define CELL_JSONUTIL_H

#include <jansson.h>
#include <stdbool.h>

#include "cleanup.h"
#include "err.h"

static inline void cell_json_decrefp(json_t **j)
{
	if (*j)
		json_decref(*j);
}
#define cleanup_json _cleanup_(cell_json_decrefp)

/* Parse a buffer that must hold one JSON object. */
json_t *json_parse_object(const char *buf, size_t len, struct cerr *e);
/* The member at key when obj is an object and the member is not null, or
 * NULL: Go's absent, nil and omitted all read the same. */
json_t *jget(const json_t *obj, const char *key);
/* The string at key, or NULL when absent, null or not a string. */
const char *jstr(const json_t *obj, const char *key);
/* The same, or "" where jstr gives NULL. */
const char *js(const json_t *obj, const char *key);
/* A copy of the string at key, or NULL. */
char *jstrdup(const json_t *obj, const char *key);
/* An array of strings at key as a NULL-terminated vector; *out is NULL when
 * the key is absent or null. EINVAL when it holds anything else. */
int jstrv(const json_t *obj, const char *key, char ***out, struct cerr *e);
/* An integer at key; def when absent. EINVAL when not an integer. */
int jint(const json_t *obj, const char *key, long long def, long long *out,
	 struct cerr *e);

#endif
