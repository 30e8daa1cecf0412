// SPDX-License-Identifier: Apache-2.0
/* Kubernetes manifests (YAML or JSON) into one jansson value
 * (common/yamljson: YAML read the way sigs.k8s.io/yaml reads it). This is
 * the only controller file that sees YAML. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cellctl.h"
#include "ctl-internal.h"
#include "cleanup.h"
#include "fsutil.h"
#include "jsonutil.h"
#include "yamljson.h"

#define MANIFEST_MAX (4u << 20)

json_t *kdoc_parse(const char *text, size_t len, struct cerr *e)
{
	if (len > MANIFEST_MAX) {
		cerr_set(e, EFBIG, "manifest over %u bytes", MANIFEST_MAX);
		return NULL;
	}
	return yaml_json_parse(text, len, e);
}

json_t *kdoc_load(const char *path, struct cerr *e)
{
	struct buf b;
	json_t *j = NULL;

	buf_init(&b, MANIFEST_MAX);
	if (fs_read_file(path, &b, e) == 0)
		j = kdoc_parse(b.data ? b.data : "", b.len, e);
	buf_free(&b);
	if (!j)
		cerr_prefix(e, "%s", path);
	return j;
}

const json_t *k8s_find_object(const json_t *objects, const char *kind,
			      const char *name)
{
	json_t *o;
	size_t i;

	json_array_foreach(objects, i, o)
	{
		if (!strcmp(js(o, "kind"), kind) &&
		    !strcmp(js(jget(o, "metadata"), "name"), name))
			return o;
	}
	return NULL;
}
