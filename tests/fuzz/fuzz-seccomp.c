// SPDX-License-Identifier: Apache-2.0
/* Fuzz the seccomp profile parser (runtime/seccomp-profile.c). Beyond "no
 * crash, no leak": what parses holds what sc_compile relies on (names,
 * at most six arguments with indexes 0..5, known architectures), and the
 * includes/excludes rules run on every rule. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "seccomp-profile.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct sc_profile *p)
{
	static char cap_a[] = "CAP_SYS_ADMIN", cap_b[] = "net_raw";
	char *const caps[] = {cap_a, cap_b, NULL};
	static const int kernel[2] = {6, 1};

	if (p->n_rules > SC_MAX_RULES || !p->arches)
		abort();
	for (size_t i = 0; i < p->n_rules; i++) {
		const struct sc_rule *r = &p->rules[i];

		if (!r->names || !r->names[0] || r->n_args > SC_MAX_ARGS)
			abort();
		for (size_t k = 0; k < r->n_args; k++)
			if (r->args[k].index > 5)
				abort();
		(void)sc_rule_applies(r, caps, "amd64", kernel);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sc_profile p;
	struct cerr e = {0};
	char *s = xmalloc(size + 1);

	memcpy(s, data, size);
	s[size] = '\0';
	if (sc_profile_parse(s, size, &p, &e) == 0) {
		check(&p);
		sc_profile_free(&p);
	}
	free(s);
	return 0;
}
