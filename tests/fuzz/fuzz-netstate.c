// SPDX-License-Identifier: Apache-2.0
/* Fuzz cell-net's state file parser and its rule plan: whatever parses
 * must plan (or refuse) without crashing, and print back to a text that
 * parses again. Also the --port and --private-cidr parsers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "net-internal.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct net_state st, again;
	struct net_plan p;
	struct net_port port;
	struct cerr e = {0};
	char *s = xstrndup((const char *)data, size > 256 ? 256 : size);
	uint32_t a;
	int plen;

	net_parse_port(s, &port, &e);
	net_parse_cidr(s, &a, &plen, &e);
	free(s);
	if (net_state_parse((const char *)data, size, &st, &e) < 0)
		return 0;
	if (!st.host_network && net_plan_rules(&st, &p, &e) == 0) {
		for (size_t i = 0; i < p.n; i++)
			free(net_rule_text(&p.v[i]));
		net_plan_free(&p);
	}
	s = net_state_to_json(&st);
	if (net_state_parse(s, strlen(s), &again, &e) < 0)
		abort();
	net_state_free(&again);
	free(s);
	net_state_free(&st);
	return 0;
}
