// SPDX-License-Identifier: Apache-2.0
/* jansson helpers, the one family of JSON getters. Only the
 * parse-at-the-edge files use these: everything else sees typed structs.
 * Two kinds: lenient (jstr, js: a wrong type reads as absent, for Kip's
 * objects that cellctl converts) and checked (jget_*: a wrong type is an
 * EINVAL that names its JSON path, for what a program must trust). */
#ifndef CELL_JSONUTIL_H
#define CELL_JSONUTIL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

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

/* ---- checked getters ----
 * Go sends null for empty pointers, slices and maps: null and absent read
 * the same, and an absent field leaves *out alone. at is the JSON path of
 * o ("" at the top), so that an error reads
 * "spec.units[1].ports[0].containerPort: not an integer". */
#define JSON_PATH_MAX 512 /* a path in a message; longer ones are cut */

/* An EINVAL whose message starts with the path "at.key" (key may be
 * NULL). Returns -1. */
int jbad(struct cerr *e, const char *at, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* "at.key[i]" (or "at.key" when i < 0) into buf[JSON_PATH_MAX]. */
void jpath(char *buf, const char *at, const char *key, long i);
/* A copy of the string at key, at most max bytes. */
int jget_str(const json_t *o, const char *at, const char *key, size_t max,
	     char **out, struct cerr *e);
/* The same, and absent or "" is an error ("required"). */
int jget_str_req(const json_t *o, const char *at, const char *key, size_t max,
		 char **out, struct cerr *e);
/* An integer in [min, max]; *present (when not NULL) says whether it was
 * there. */
int jget_int(const json_t *o, const char *at, const char *key, int64_t min,
	     int64_t max, int64_t *out, bool *present, struct cerr *e);
int jget_bool(const json_t *o, const char *at, const char *key, bool *out,
	      struct cerr *e);
/* The object at key: 1 and *out set when present, 0 and NULL when not. */
int jget_obj(const json_t *o, const char *at, const char *key, json_t **out,
	     struct cerr *e);
/* The array at key with at most max entries, as jget_obj. */
int jget_arr(const json_t *o, const char *at, const char *key, size_t max,
	     json_t **out, struct cerr *e);
/* The array at key (at most max entries) as a vector of *n elements of
 * elem bytes (and one more, zeroed, as a vector's end), each filled by fn
 * from its value at "at.key[i]"
 * (ctx passed on); *out and *n stay as they are when the key is absent.
 * *n is set before the first element, so that a failure leaves a vector
 * the caller frees whole. 1 present, 0 absent, -1. */
typedef int jelem_fn(const json_t *v, const char *at, void *ctx, void *elem,
		     struct cerr *e);
int jget_list(const json_t *o, const char *at, const char *key, size_t max,
	      size_t elem, void **out, size_t *n, jelem_fn *fn, void *ctx,
	      struct cerr *e);
/* An array of at most max strings of at most max_len bytes as a
 * NULL-terminated vector. */
int jget_strv(const json_t *o, const char *at, const char *key, size_t max,
	      size_t max_len, char ***out, struct cerr *e);

#endif
