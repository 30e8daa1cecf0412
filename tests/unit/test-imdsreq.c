// SPDX-License-Identifier: Apache-2.0
/* The metadata proxy's judge (agent/pod/imdsreq.c): what an SDK asks passes
 * with only the token headers; user-data, other paths, any spelling of a
 * dot segment, an encoding, a query, a body or a bad head does not. */
#include <stdio.h>
#include <string.h>

#include "../lib/tap.h"
#include "imdsreq.h"

static int judge(const char *head, struct imds_req *r)
{
	return imds_req_judge(head, strlen(head), r);
}

static int get(const char *target)
{
	char head[512];
	struct imds_req r;

	snprintf(head, sizeof(head), "GET %s HTTP/1.1\r\nHost: x\r\n\r\n",
		 target);
	return judge(head, &r);
}

static void test_allowed(void)
{
	static const char *const ok_paths[] = {
	    "/latest/meta-data/iam/security-credentials/",
	    "/latest/meta-data/iam/security-credentials/cell-role",
	    "/latest/meta-data/iam/security-credentials/a+b=c,d.e@f_g-h",
	    "/latest/meta-data/placement/",
	    "/latest/meta-data/placement/region",
	    "/latest/meta-data/placement/availability-zone",
	    "/latest/dynamic/instance-identity/document",
	};
	struct imds_req r;

	for (size_t i = 0; i < sizeof(ok_paths) / sizeof(*ok_paths); i++)
		ok(get(ok_paths[i]) == 200, "GET %s", ok_paths[i]);
	ok(judge("PUT /latest/api/token HTTP/1.1\r\nHost: 169.254.169.254\r\n"
		 "X-aws-ec2-metadata-token-ttl-seconds: 21600\r\n"
		 "User-Agent: aws-sdk\r\nX-Forwarded-For: 1.2.3.4\r\n\r\n",
		 &r) == 200 &&
	       !strcmp(r.method, "PUT") && !strcmp(r.ttl, "21600") &&
	       !r.token[0],
	   "token request: the TTL kept, nothing else");
	ok(judge("GET /latest/meta-data/iam/security-credentials/ HTTP/1.0\r\n"
		 "x-AWS-ec2-metadata-token:  AQAEAB-x_y+z/w==  \r\n\r\n",
		 &r) == 200 &&
	       !strcmp(r.token, "AQAEAB-x_y+z/w=="),
	   "token header, any case, trimmed");
}

static void test_refused(void)
{
	static const char *const bad_paths[] = {
	    "/latest/user-data",
	    "/latest/user-data/",
	    "/latest/meta-data/",
	    "/latest/meta-data/local-ipv4",
	    "/latest/meta-data/iam/info",
	    "/latest/meta-data/iam/security-credentials",
	    "/latest/meta-data/iam/security-credentials/..",
	    "/latest/meta-data/iam/security-credentials/.",
	    "/latest/meta-data/iam/security-credentials/...",
	    "/latest/meta-data/iam/security-credentials/../../user-data",
	    "/latest/meta-data/iam/security-credentials/%2e%2e/user-data",
	    "/latest/meta-data/iam/security-credentials/..%2fuser-data",
	    "/latest/meta-data/iam/security-credentials/r/",
	    "/latest/meta-data/iam/security-credentials/r?x",
	    "/latest/meta-data/iam/security-credentials/r;x",
	    "/latest/meta-data/iam/security-credentials/r\\..\\x",
	    "/latest/meta-data/iam/security-credentials//",
	    "/latest/meta-data/placement/Region",
	    "/latest/meta-data/placement/../user-data",
	    "/latest/%75ser-data",
	    "//latest/user-data",
	    "/2021-01-03/user-data",
	    "http://169.254.169.254/latest/user-data",
	    "/latest/api/token",
	    "*",
	};
	struct imds_req r;

	for (size_t i = 0; i < sizeof(bad_paths) / sizeof(*bad_paths); i++)
		ok(get(bad_paths[i]) == 403, "GET %s refused", bad_paths[i]);
	ok(judge("POST /latest/api/token HTTP/1.1\r\n\r\n", &r) == 405,
	   "POST: 405");
	ok(judge("PUT /latest/user-data HTTP/1.1\r\n\r\n", &r) == 403,
	   "PUT elsewhere: 403");
	ok(judge("get /latest/meta-data/placement/ HTTP/1.1\r\n\r\n", &r) ==
	       405,
	   "method case");
}

static void test_malformed(void)
{
	static const char *const heads[] = {
	    "",
	    "GET /latest/meta-data/placement/ HTTP/1.1\r\n",
	    "GET /latest/meta-data/placement/ HTTP/1.1\n\n",
	    "GET /latest/meta-data/placement/ HTTP/2\r\n\r\n",
	    "GET  /latest/meta-data/placement/ HTTP/1.1\r\n\r\n",
	    "GET /latest/meta-data/placement/\r\n\r\n",
	    "GET /latest/meta-data/placement/ HTTP/1.1\r\nNoColon\r\n\r\n",
	    "GET /latest/meta-data/placement/ HTTP/1.1\r\n folded: x\r\n\r\n",
	    "GET /latest/meta-data/placement/ HTTP/1.1\r\nA\rB: x\r\n\r\n",
	    "GET /latest/meta-data/placement/ HTTP/1.1\r\n"
	    "Content-Length: 5\r\n\r\nhello",
	    "GET /latest/meta-data/placement/ HTTP/1.1\r\n"
	    "Transfer-Encoding: chunked\r\n\r\n",
	    "GET /latest/meta-data/placement/ HTTP/1.1\r\n"
	    "X-aws-ec2-metadata-token: a\r\n"
	    "X-aws-ec2-metadata-token: b\r\n\r\n",
	    "GET /latest/meta-data/placement/ HTTP/1.1\r\n"
	    "X-aws-ec2-metadata-token: a b\r\n\r\n",
	    "GET /latest/meta-data/placement/ HTTP/1.1\r\n"
	    "X-aws-ec2-metadata-token:\r\n\r\n",
	    "PUT /latest/api/token HTTP/1.1\r\n"
	    "X-aws-ec2-metadata-token-ttl-seconds: 123456\r\n\r\n",
	    "PUT /latest/api/token HTTP/1.1\r\n"
	    "X-aws-ec2-metadata-token-ttl-seconds: -1\r\n\r\n",
	};
	struct imds_req r;
	char big[IMDS_HEAD_MAX + 64], many[4096];
	size_t n = 0;

	for (size_t i = 0; i < sizeof(heads) / sizeof(*heads); i++)
		ok(judge(heads[i], &r) == 400, "malformed %zu: 400 (%s)", i,
		   r.reason);
	memset(big, 'a', sizeof(big));
	memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
	memcpy(big + sizeof(big) - 4, "\r\n\r\n", 4);
	ok(imds_req_judge(big, sizeof(big), &r) == 431, "oversized head");
	n = (size_t)snprintf(many, sizeof(many),
			     "GET /latest/meta-data/placement/ HTTP/1.1\r\n");
	for (int i = 0; i <= IMDS_HEADERS_MAX; i++)
		n += (size_t)snprintf(many + n, sizeof(many) - n, "A: b\r\n");
	n += (size_t)snprintf(many + n, sizeof(many) - n, "\r\n");
	ok(imds_req_judge(many, n, &r) == 431, "too many headers");
}

int main(void)
{
	test_allowed();
	test_refused();
	test_malformed();
	return tap_done();
}
