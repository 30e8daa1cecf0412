// SPDX-License-Identifier: Apache-2.0
/* Fuzz cellctl's reading of a registry's answer (controller/regplat.c: an
 * index, an image manifest or a config, all from the registry). Beyond "no
 * crash, no leak": an answer names a config digest to ask next or a list
 * of platforms, never both, and the architecture bits are those of the
 * list's linux entries only. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cellctl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct regplat p;
	struct cerr e = {0};

	if (size > 1 << 20)
		return 0;
	if (regplat_parse((const char *)data, size, &p, &e) < 0) {
		if (p.list || p.config || p.archs)
			abort();
		return 0;
	}
	if (!!p.config == !!p.list)
		abort();
	if (p.archs && (!p.list || !strstr(p.list, "linux/")))
		abort();
	if (p.archs & ~(unsigned)(ARCH_AMD64 | ARCH_ARM64))
		abort();
	regplat_free(&p);
	return 0;
}
