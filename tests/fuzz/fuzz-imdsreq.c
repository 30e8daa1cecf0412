// SPDX-License-Identifier: Apache-2.0
/* Fuzz the metadata proxy's judge (agent/pod/imdsreq.c): a unit's request
 * head. Beyond "no crash": a passed request is GET or PUT, its target is
 * one the judge allows again on its own (no '%', '?', '#', dot segment, "//"),
 * under one of the four places an SDK needs (a placement key that merely
 * spells "user-data" is a key the service answers 404 for),
 * and the token headers passed on hold only their alphabets. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "imdsreq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A "." or ".." segment (".." inside a role name is only a name). */
static int dot_segment(const char *t)
{
	for (const char *s = strchr(t, '/'); s; s = strchr(s + 1, '/')) {
		size_t n = strcspn(s + 1, "/");

		if ((n == 1 && s[1] == '.') ||
		    (n == 2 && s[1] == '.' && s[2] == '.'))
			return 1;
	}
	return 0;
}

/* Only what an SDK needs: never user-data nor any other path. */
static int allowed_place(const char *t)
{
	static const char *const ok[] = {
	    "/latest/api/token",
	    "/latest/meta-data/iam/security-credentials/",
	    "/latest/meta-data/placement/",
	    "/latest/dynamic/instance-identity/document",
	};

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
		if (!strncmp(t, ok[i], strlen(ok[i])))
			return 1;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct imds_req r;
	int status = imds_req_judge((const char *)data, size, &r);

	if (status != 200 && status != 400 && status != 403 && status != 405 &&
	    status != 431)
		abort();
	if (status != 200)
		return 0;
	if ((strcmp(r.method, "GET") && strcmp(r.method, "PUT")) ||
	    r.target[0] != '/' || strpbrk(r.target, "%?#\\ \r\n") ||
	    dot_segment(r.target) || strstr(r.target, "//") ||
	    !allowed_place(r.target) ||
	    strspn(r.ttl, "0123456789") != strlen(r.ttl) ||
	    strpbrk(r.token, " \t\r\n:"))
		abort();
	return 0;
}
