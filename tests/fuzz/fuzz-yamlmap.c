// SPDX-License-Identifier: Apache-2.0
/* Fuzz the flat YAML map parser (the SSM boot payload, cell_config.yaml)
 * and the payload check on top of it: whatever it accepts is whole — every
 * key non-empty and unique, no NUL inside, every payload key a plain file
 * name that cannot leave the boot directory. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "boot-internal.h"
#include "yamlmap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct yamlmap m;
	struct cerr e = {0};

	if (yamlmap_parse((const char *)data, size, &m, &e) == 0) {
		if (m.n > YAMLMAP_MAX_ENTRIES)
			abort();
		for (size_t i = 0; i < m.n; i++) {
			if (!m.v[i].key[0] || !m.v[i].value)
				abort();
			for (size_t j = 0; j < i; j++)
				if (!strcmp(m.v[i].key, m.v[j].key))
					abort();
		}
		yamlmap_free(&m);
	} else if (!e.msg[0]) {
		abort();
	}
	cerr_clear(&e);
	if (payload_parse((const char *)data, size, &m, &e) == 0) {
		for (size_t i = 0; i < m.n; i++)
			if (strchr(m.v[i].key, '/') || m.v[i].key[0] == '.')
				abort();
		if (!yamlmap_get(&m, "server.key"))
			abort();
		yamlmap_free(&m);
	}
	return 0;
}
