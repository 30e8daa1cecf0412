// SPDX-License-Identifier: Apache-2.0
/* Fuzz the authentication inputs: the same bytes as a WWW-Authenticate
 * header, a docker config.json and a token endpoint reply. Whatever comes
 * out must be free of the bytes that would break a request header. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pull-internal.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const registries[] = {
    DOCKER_HUB_HOST,
    "ghcr.io",
    "localhost:5000",
};

static void check_header_value(const char *s)
{
	for (; s && *s; s++)
		if ((unsigned char)*s < 0x20 && *s != '\t')
			abort();
}

static void fuzz_challenge(const char *s)
{
	struct www_auth w;
	struct cerr e = {0};

	if (www_auth_parse(s, &w, &e) < 0) {
		if (w.scheme || w.realm)
			abort();
		return;
	}
	if (!w.scheme || !*w.scheme)
		abort();
	check_header_value(w.realm);
	check_header_value(w.service);
	check_header_value(w.scope);
	www_auth_free(&w);
}

static void fuzz_authfile(const char *buf, size_t size)
{
	for (size_t i = 0; i < sizeof(registries) / sizeof(registries[0]);
	     i++) {
		char *user = NULL, *pass = NULL;
		struct cerr e = {0};

		if (authfile_lookup(buf, size, registries[i], &user, &pass,
				    &e) < 0) {
			if (user || pass)
				abort();
			continue;
		}
		if (!user != !pass || (user && !*user))
			abort();
		free(user);
		free(pass);
	}
}

static void fuzz_token(const char *buf, size_t size)
{
	char *token = NULL;
	long ttl = 0;
	struct cerr e = {0};

	if (token_reply_parse(buf, size, &token, &ttl, &e) < 0) {
		if (token)
			abort();
		return;
	}
	if (!token || !*token || ttl < 60 || ttl > 86400 ||
	    strpbrk(token, " \r\n\t"))
		abort();
	free(token);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = xmalloc(size + 1);

	memcpy(s, data, size);
	s[size] = '\0';
	fuzz_challenge(s);
	fuzz_authfile((const char *)data, size);
	fuzz_token((const char *)data, size);
	free(s);
	return 0;
}
