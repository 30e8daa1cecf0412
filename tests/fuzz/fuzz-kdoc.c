// SPDX-License-Identifier: Apache-2.0
/* Fuzz cellctl's manifest path: bytes as a YAML or JSON document
 * (kdoc_parse), then, when it is a map, the API server's defaults and
 * Kip's conversion into PodParameters and deploy packages, with the input
 * itself also offered as the ConfigMaps/Secrets list. Whatever converts
 * must serialize and build its packages. */
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>

#include "ctl-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct cerr e = {0};
	json_t *doc = kdoc_parse((const char *)data, size, &e);
	struct convert_opts o = {.node_name = "n",
				 .pod_ip = "10.0.0.1",
				 .cluster_domain = "cluster.local",
				 .cluster_dns = "10.96.0.10",
				 .host_resolv =
				     "nameserver 1.1.1.1\nsearch a b\n",
				 .default_instance_type = "t3.nano"};
	struct converted c;

	if (!doc)
		return 0;
	json_t *objects = json_pack("[O]", doc);
	if (json_is_object(doc) && pod_defaults(doc, &e) == 0 &&
	    pod_convert(doc, objects, &o, &c, &e) == 0) {
		char *s = json_dumps(c.params, JSON_COMPACT);
		if (!s)
			abort();
		free(s);
		for (size_t i = 0; i < c.n_pkgs; i++) {
			struct buf b;
			if (pkg_build(&c.pkgs[i], &b, &e) == 0)
				buf_free(&b);
		}
		converted_free(&c);
	}
	json_decref(objects);
	json_decref(doc);
	return 0;
}
