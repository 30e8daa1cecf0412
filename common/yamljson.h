// SPDX-License-Identifier: Apache-2.0
/* YAML documents as jansson values, the way sigs.k8s.io/yaml reads them
 * (Kubernetes manifests, CDI specs): the text goes through common/yamltree
 * (the one reader of YAML documents, with its node and depth caps); YAML
 * 1.1 plain scalars become null, booleans, integers or floats, quoted or
 * tagged scalars stay strings, a mapping's keys must be text. */
#ifndef CELL_YAMLJSON_H
#define CELL_YAMLJSON_H

#include <jansson.h>
#include <stddef.h>

#include "err.h"

/* One YAML document (an empty one is null). EINVAL "YAML line N: …". */
json_t *yaml_to_json(const char *text, size_t len, struct cerr *e);
/* JSON when the text starts (after white space) with '{' or '[' (EINVAL
 * "JSON line N: …", duplicate keys refused), else YAML as above. */
json_t *yaml_json_parse(const char *text, size_t len, struct cerr *e);

#endif
