// SPDX-License-Identifier: Apache-2.0
/* A cloud-config document's typed getters (scalars, booleans, lists of
 * strings, key lists) and the name checks of /etc/passwd fields: below
 * cloudconfig.c and ccusers.c, which both read nodes through them. Each
 * getter leaves a problem naming the node's line when the type is wrong. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "ci-internal.h"
#include "util.h"

const char *ci_cc_type_name(const struct ynode *n)
{
	return n->type == Y_MAP	  ? "a mapping"
	       : n->type == Y_SEQ ? "a list"
				  : "a scalar";
}

/* A scalar as a string (NULL when null); an error for anything else. */
int ci_cc_str(struct ci_parse *ps, const struct ynode *n, const char *what,
	      char **out)
{
	*out = NULL;
	if (ynode_is_null(n))
		return 0;
	if (n->type != Y_SCALAR)
		return ERR(ps, n, "%s must be a string, not %s", what,
			   ci_cc_type_name(n));
	if (strlen(n->value) != n->len)
		return ERR(ps, n, "%s contains a NUL byte", what);
	*out = xstrdup(n->value);
	return 0;
}

int ci_cc_bool(struct ci_parse *ps, const struct ynode *n, const char *what,
	       bool *out)
{
	if (ynode_is_null(n))
		return 0;
	if (ynode_bool(n, out) < 0)
		return ERR(ps, n, "%s must be true or false, not '%.40s'", what,
			   n->type == Y_SCALAR ? n->value : ci_cc_type_name(n));
	return 0;
}

/* No ':' or line break: these strings land in /etc/passwd fields. */
bool ci_field_ok(const char *s)
{
	return !strpbrk(s, ":\n\r");
}

bool ci_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 32 || s[0] == '-' || strspn(s, "0123456789") == n)
		return false;
	if (s[n - 1] == '$') /* Samba machine accounts */
		n--;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("._-", s[i]))
			return false;
	return true;
}

/* A list of strings from a list or a comma-separated string. */
int ci_cc_list(struct ci_parse *ps, const struct ynode *n, const char *what,
	       bool commas, char ***out)
{
	size_t k = 0;
	char **v;

	*out = NULL;
	if (ynode_is_null(n))
		return 0;
	if (n->type == Y_SCALAR && commas) {
		char *save = NULL, *copy = xstrdup(n->value);
		v = xcalloc(n->len / 2 + 2, sizeof(*v));
		for (char *t = strtok_r(copy, ",", &save); t;
		     t = strtok_r(NULL, ",", &save)) {
			size_t len = strlen(t);
			const char *s = t;
			while (isspace((unsigned char)*s))
				s++, len--;
			while (len && isspace((unsigned char)s[len - 1]))
				len--;
			if (len)
				v[k++] = xstrndup(s, len);
		}
		free(copy);
		*out = v;
		return 0;
	}
	if (n->type == Y_SCALAR) {
		v = xcalloc(2, sizeof(*v));
		if (ci_cc_str(ps, n, what, &v[0]) < 0) {
			free(v);
			return -1;
		}
		*out = v;
		return 0;
	}
	if (n->type != Y_SEQ)
		return ERR(ps, n, "%s must be a list, not %s", what,
			   ci_cc_type_name(n));
	v = xcalloc(n->n + 1, sizeof(*v));
	for (size_t i = 0; i < n->n; i++) {
		char *s;
		if (ci_cc_str(ps, n->kids[i], what, &s) < 0) {
			strv_free(v);
			return -1;
		}
		if (s)
			v[k++] = s;
	}
	*out = v;
	return 0;
}

int ci_cc_keys(struct ci_parse *ps, const struct ynode *n, const char *what,
	       char ***out)
{
	if (ci_cc_list(ps, n, what, false, out) < 0)
		return -1;
	for (char **k = *out; k && *k; k++)
		if (strpbrk(*k, "\n\r")) {
			ERR(ps, n, "%s: a key must be one line", what);
			strv_free(*out);
			*out = NULL;
			return -1;
		}
	return 0;
}

int ci_cc_opt_bool(struct ci_parse *ps, const struct ynode *m, const char *key,
		   bool *out)
{
	const struct ynode *n = ynode_get(m, key);

	return n ? ci_cc_bool(ps, n, key, out) : 0;
}
