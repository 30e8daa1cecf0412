// SPDX-License-Identifier: Apache-2.0
/* Fuzz the metadata proxy's judge (agent/pod/imdsreq.c): a unit's request
 * head. Beyond "no crash": a passed request is GET or PUT, its target is
 * one the judge allows again on its own (no '%', '?', '#', "..", "//"),
 * and the token headers passed on hold only their alphabets. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "imdsreq.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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
	    strstr(r.target, "..") || strstr(r.target, "//") ||
	    strstr(r.target, "user-data") ||
	    strspn(r.ttl, "0123456789") != strlen(r.ttl) ||
	    strpbrk(r.token, " \t\r\n:"))
		abort();
	return 0;
}
