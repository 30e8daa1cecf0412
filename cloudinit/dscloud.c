// SPDX-License-Identifier: Apache-2.0
/* The cloud metadata services: EC2 (IMDSv2 with a fallback to v1), GCE and
 * Azure IMDS, plus the concurrent probe behind --datasource auto. Every
 * base URL comes from the options, so tests point them at fakes. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ci-internal.h"
#include "cleanup.h"
#include "log.h"
#include "util.h"

#define TRY_MS 2000	/* one request's try; retries fill the deadline */
#define EC2_TTL "21600" /* the largest token lifetime IMDS grants */
#define AZURE_API "2021-02-01"
#define AZURE_USERDATA_API "2021-01-01"

static char *url_join(const char *base, const char *path)
{
	size_t n = strlen(base);

	while (n && base[n - 1] == '/')
		n--;
	return xasprintf("%.*s/%s", (int)n, base, path);
}

/* ---- EC2 ---- */

static const char *const ec2_paths[] = {
    "latest/meta-data/instance-id",
    "latest/meta-data/local-hostname",
    "latest/meta-data/hostname",
    "latest/meta-data/local-ipv4",
    "latest/meta-data/public-ipv4",
    "latest/meta-data/public-keys/",
    "latest/user-data",
};
enum {
	EC2_IID,
	EC2_LHOST,
	EC2_HOST,
	EC2_LIP,
	EC2_PIP,
	EC2_KEYS,
	EC2_UD,
	EC2_N
};

/* PUT a session token. NULL token with 0: IMDSv1 only (the token endpoint
 * said 403/404/405 or stayed silent, which is what a hop limit of 1 looks
 * like from a container), as botocore decides. */
int ci_ec2_token(const char *base, uint64_t deadline, char **token,
		 struct cerr *e)
{
	cleanup_free char *url = url_join(base, "latest/api/token");
	struct ci_http_req r;
	uint64_t soon = now_ns() + 3000000000ull;
	int rc = 0;

	*token = NULL;
	ci_http_req_init(&r, url, 4096);
	r.method = "PUT";
	r.headers[0] = "X-aws-ec2-metadata-token-ttl-seconds: " EC2_TTL;
	if (ci_http_run(&r, 1, soon < deadline ? soon : deadline, TRY_MS, e) <
	    0)
		rc = -1;
	else if (r.status == 200 &&
		 !(*token = ci_meta_value(r.body.data, r.body.len)))
		rc = cerr_set(e, EPROTO, "IMDS returned an empty token");
	else if (r.status == 400)
		rc = cerr_set(e, EPROTO,
			      "IMDS refused the token request "
			      "(HTTP 400)");
	else if (r.status != 200)
		ci_log(LOG_INFO, "IMDSv2 token: %s; using IMDSv1",
		       r.status ? "refused" : r.err.msg);
	ci_http_req_free(&r);
	return rc;
}

static void ec2_setup(struct ci_http_req *r, char *url, const char *hdr)
{
	ci_http_req_init(r, url, CI_MAX_METADATA);
	r->headers[0] = hdr;
}

/* GET every path with the token; 1 when the token was refused (401). */
static int ec2_batch(struct ci_http_req *rq, char **urls, size_t n,
		     const char *hdr, uint64_t deadline, struct cerr *e)
{
	for (size_t i = 0; i < n; i++) {
		ec2_setup(&rq[i], urls[i], hdr);
		if (strstr(urls[i], "/latest/user-data"))
			rq[i].max_body = CI_MAX_USERDATA;
	}
	if (ci_http_run(rq, n, deadline, TRY_MS, e) < 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (rq[i].status == 401)
			return 1;
	return 0;
}

static void free_reqs(struct ci_http_req *rq, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ci_http_req_free(&rq[i]);
}

static char *value_of(const struct ci_http_req *r)
{
	return r->status == 200 ? ci_meta_value(r->body.data, r->body.len)
				: NULL;
}

/* "0=my-key\n1=other" → GET public-keys/N/openssh-key for each. */
static void ec2_keys(const char *base, const struct ci_http_req *list,
		     const char *hdr, uint64_t deadline, struct ci_meta *m)
{
	struct ci_http_req rq[CI_MAX_KEYS];
	char *urls[CI_MAX_KEYS];
	size_t n = 0;
	const char *p = list->body.data, *end = p + list->body.len;
	struct cerr e = {0};

	while (list->status == 200 && p < end && n < CI_MAX_KEYS) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		size_t d = 0;
		while (d < len && p[d] >= '0' && p[d] <= '9' && d < 6)
			d++;
		if (d > 0 && d < len && p[d] == '=') {
			char path[96];
			snprintf(
			    path, sizeof(path),
			    "latest/meta-data/public-keys/%.*s/openssh-key",
			    (int)d, p);
			urls[n++] = url_join(base, path);
		}
		p += len + 1;
	}
	if (n && ec2_batch(rq, urls, n, hdr, deadline, &e) >= 0)
		for (size_t i = 0; i < n; i++)
			if (rq[i].status == 200)
				ci_meta_add_key(m, rq[i].body.data,
						rq[i].body.len);
	if (n)
		free_reqs(rq, n);
	for (size_t i = 0; i < n; i++)
		free(urls[i]);
}

static int ec2_collect(const char *base, struct ci_http_req *rq,
		       const char *hdr, uint64_t deadline,
		       struct ci_source *out, struct cerr *e)
{
	struct ci_meta *m = &out->meta;

	if (rq[EC2_IID].status != 200)
		return cerr_set(e, EPROTO, "EC2 instance-id: %s",
				rq[EC2_IID].status ? "unexpected HTTP status"
						   : rq[EC2_IID].err.msg);
	if (rq[EC2_UD].err.code == EFBIG) {
		*e = rq[EC2_UD].err; /* over the cap: the document's fault */
		return -1;
	}
	if (rq[EC2_UD].status != 200 && rq[EC2_UD].status != 404)
		return cerr_set(e, EPROTO, "EC2 user-data: %s",
				rq[EC2_UD].status ? "unexpected HTTP status"
						  : rq[EC2_UD].err.msg);
	m->instance_id = value_of(&rq[EC2_IID]);
	m->hostname = value_of(&rq[EC2_LHOST]);
	if (!m->hostname)
		m->hostname = value_of(&rq[EC2_HOST]);
	m->local_ipv4 = value_of(&rq[EC2_LIP]);
	m->public_ipv4 = value_of(&rq[EC2_PIP]);
	if (rq[EC2_UD].status == 200) {
		out->userdata = rq[EC2_UD].body;
		buf_init(&rq[EC2_UD].body, 0);
	}
	ec2_keys(base, &rq[EC2_KEYS], hdr, deadline, m);
	return 0;
}

int ci_ds_ec2(const char *base, uint64_t deadline, struct ci_source *out,
	      struct cerr *e)
{
	struct ci_http_req rq[EC2_N];
	char *urls[EC2_N], *token = NULL, *hdr = NULL;
	int r = -1;

	for (size_t i = 0; i < EC2_N; i++)
		urls[i] = url_join(base, ec2_paths[i]);
	/* One retry with a fresh token if the first was refused (expired
	 * or revoked between PUT and GET). */
	for (int attempt = 0;; attempt++) {
		if (ci_ec2_token(base, deadline, &token, e) < 0) {
			r = -1;
			break;
		}
		free(hdr);
		hdr = token ? xasprintf("X-aws-ec2-metadata-token: %s", token)
			    : NULL;
		free(token);
		r = ec2_batch(rq, urls, EC2_N, hdr, deadline, e);
		if (r == 0)
			r = ec2_collect(base, rq, hdr, deadline, out, e);
		free_reqs(rq, EC2_N);
		if (r != 1)
			break;
		/* Without a token (IMDS was not up for the PUT, or IMDSv2 was
		 * made mandatory meanwhile) the second round asks again. */
		if (attempt) {
			r = cerr_set(e, EACCES, "IMDS answered 401 %s",
				     hdr ? "to a fresh session token"
					 : "and gave no session token");
			break;
		}
		ci_log(LOG_INFO,
		       "IMDS refused the session token; getting a new one");
	}
	if (r == 0)
		out->name = xstrdup(hdr ? "ec2 (IMDSv2)" : "ec2 (IMDSv1)");
	for (size_t i = 0; i < EC2_N; i++)
		free(urls[i]);
	free(hdr);
	return r < 0 ? -1 : 0;
}

/* ---- GCE ---- */

static const char *const gce_paths[] = {
    "computeMetadata/v1/instance/id",
    "computeMetadata/v1/instance/hostname",
    "computeMetadata/v1/instance/network-interfaces/0/ip",
    "computeMetadata/v1/instance/network-interfaces/0/access-configs/0/"
    "external-ip",
    "computeMetadata/v1/instance/attributes/user-data",
    "computeMetadata/v1/instance/attributes/user-data-encoding",
    "computeMetadata/v1/instance/attributes/ssh-keys",
    "computeMetadata/v1/instance/attributes/block-project-ssh-keys",
    "computeMetadata/v1/project/attributes/ssh-keys",
};
enum {
	G_ID,
	G_HOST,
	G_IP,
	G_EIP,
	G_UD,
	G_UDENC,
	G_KEYS,
	G_BLOCK,
	G_PKEYS,
	G_N
};

#define GCE_FLAVOR "Metadata-Flavor: Google"

/* A reply counts only with the Metadata-Flavor header, as cloud-init
 * checks, so that some other server on the address is not mistaken. */
static bool gce_ok(const struct ci_http_req *r)
{
	return r->status == 200 && r->header_value &&
	       !strcmp(r->header_value, "Google");
}

static void gce_userdata(struct ci_http_req *rq, struct ci_source *out)
{
	char *enc = gce_ok(&rq[G_UDENC]) ? value_of(&rq[G_UDENC]) : NULL;
	struct cerr e = {0};

	if (!gce_ok(&rq[G_UD])) {
		free(enc);
		return;
	}
	if (enc && !strcmp(enc, "base64")) {
		buf_init(&out->userdata, CI_MAX_USERDATA);
		if (ci_b64_decode(rq[G_UD].body.data, rq[G_UD].body.len,
				  &out->userdata, &e) < 0)
			ci_log(LOG_WARN, "GCE user-data: %s; ignored", e.msg);
	} else {
		out->userdata = rq[G_UD].body;
		buf_init(&rq[G_UD].body, 0);
	}
	free(enc);
}

static void gce_collect(struct ci_http_req *rq, const char *user,
			struct ci_source *out)
{
	struct ci_meta *m = &out->meta;
	char *block = gce_ok(&rq[G_BLOCK]) ? value_of(&rq[G_BLOCK]) : NULL;

	m->hostname = gce_ok(&rq[G_HOST]) ? value_of(&rq[G_HOST]) : NULL;
	m->local_ipv4 = gce_ok(&rq[G_IP]) ? value_of(&rq[G_IP]) : NULL;
	m->public_ipv4 = gce_ok(&rq[G_EIP]) ? value_of(&rq[G_EIP]) : NULL;
	if (gce_ok(&rq[G_KEYS]))
		ci_meta_parse_gce_keys(rq[G_KEYS].body.data,
				       rq[G_KEYS].body.len, user, time(NULL),
				       m);
	if (gce_ok(&rq[G_PKEYS]) && !(block && !strcmp(block, "true")))
		ci_meta_parse_gce_keys(rq[G_PKEYS].body.data,
				       rq[G_PKEYS].body.len, user, time(NULL),
				       m);
	free(block);
	gce_userdata(rq, out);
}

int ci_ds_gce(const char *base, const char *user, uint64_t deadline,
	      struct ci_source *out, struct cerr *e)
{
	struct ci_http_req rq[G_N];
	char *urls[G_N];
	int r = 0;

	for (size_t i = 0; i < G_N; i++) {
		urls[i] = url_join(base, gce_paths[i]);
		ci_http_req_init(&rq[i], urls[i],
				 i == G_UD ? CI_MAX_USERDATA * 4 / 3 + 4
					   : CI_MAX_METADATA);
		rq[i].headers[0] = GCE_FLAVOR;
		rq[i].want_header = "Metadata-Flavor";
	}
	if (ci_http_run(rq, G_N, deadline, TRY_MS, e) < 0)
		r = -1;
	else if (rq[G_UD].err.code == EFBIG)
		r = -1, *e = rq[G_UD].err;
	else if (!gce_ok(&rq[G_ID]) ||
		 !(out->meta.instance_id = value_of(&rq[G_ID])))
		r = cerr_set(e, EPROTO, "GCE instance/id: %s",
			     rq[G_ID].status ? "not a GCE metadata reply"
					     : rq[G_ID].err.msg);
	else
		gce_collect(rq, user, out);
	if (r == 0)
		out->name = xstrdup("gce");
	free_reqs(rq, G_N);
	for (size_t i = 0; i < G_N; i++)
		free(urls[i]);
	return r;
}

/* ---- Azure ---- */

int ci_ds_azure(const char *base, uint64_t deadline, struct ci_source *out,
		struct cerr *e)
{
	struct ci_http_req rq[2];
	char *urls[2];
	int r = 0;

	urls[0] = url_join(base, "metadata/instance?api-version=" AZURE_API);
	urls[1] =
	    url_join(base, "metadata/instance/compute/userData"
			   "?api-version=" AZURE_USERDATA_API "&format=text");
	ci_http_req_init(&rq[0], urls[0], CI_MAX_AZURE_JSON);
	ci_http_req_init(&rq[1], urls[1], CI_MAX_USERDATA * 4 / 3 + 4);
	for (int i = 0; i < 2; i++)
		rq[i].headers[0] = "Metadata: true";
	if (ci_http_run(rq, 2, deadline, TRY_MS, e) < 0)
		r = -1;
	else if (rq[1].err.code == EFBIG)
		r = -1, *e = rq[1].err;
	else if (rq[0].status != 200)
		r = cerr_set(e, EPROTO, "Azure IMDS instance: %s",
			     rq[0].status ? "unexpected HTTP status"
					  : rq[0].err.msg);
	else if (ci_meta_parse_azure(rq[0].body.data, rq[0].body.len,
				     &out->meta, e) < 0)
		r = -1;
	/* userData is base64; none set is an empty 200. */
	buf_init(&out->userdata, CI_MAX_USERDATA);
	if (r == 0 && rq[1].status == 200 &&
	    ci_b64_decode(rq[1].body.data, rq[1].body.len, &out->userdata, e) <
		0)
		r = cerr_prefix(e, "Azure userData");
	if (r == 0)
		out->name = xstrdup("azure");
	free_reqs(rq, 2);
	free(urls[0]);
	free(urls[1]);
	return r;
}

/* ---- the probe ---- */

static bool ec2_accept(const struct ci_http_req *r)
{
	/* 401 is IMDSv2 demanding a token: EC2, and no other cloud. */
	return r->status == 200 || r->status == 401;
}

static bool azure_accept(const struct ci_http_req *r)
{
	return r->status == 200 && r->body.len && r->body.data[0] == '{';
}

enum ci_ds_kind ci_ds_probe(const struct ci_opts *o, uint64_t deadline,
			    struct cerr *e)
{
	static const enum ci_ds_kind kinds[] = {CI_DS_EC2, CI_DS_GCE,
						CI_DS_AZURE};
	ci_http_accept_fn accept[] = {ec2_accept, gce_ok, azure_accept};
	struct ci_http_req rq[3];
	char *urls[3];
	int w;

	urls[0] = url_join(o->ec2_url, "latest/meta-data/instance-id");
	urls[1] = url_join(o->gce_url, "computeMetadata/v1/instance/id");
	urls[2] =
	    url_join(o->azure_url, "metadata/instance?api-version=" AZURE_API);
	for (int i = 0; i < 3; i++)
		ci_http_req_init(&rq[i], urls[i], CI_MAX_AZURE_JSON);
	rq[1].headers[0] = GCE_FLAVOR;
	rq[1].want_header = "Metadata-Flavor";
	rq[2].headers[0] = "Metadata: true";
	/* Short tries: a missing service is usually a silent address. */
	w = ci_http_race(rq, 3, accept, deadline, 1000, e);
	free_reqs(rq, 3);
	for (int i = 0; i < 3; i++)
		free(urls[i]);
	return w < 0 ? CI_DS_AUTO : kinds[w];
}

/* ---- the instance's private addresses (cell-net's pod IP) ---- */

/* The first two IPv4 addresses of a list of lines ("10.0.0.5" or, as GCE
 * writes alias ranges, "10.0.0.5/32"). */
static void two_ips(const struct ci_http_req *r, char **a, char **b)
{
	const char *p = r->body.data, *end = p + r->body.len;

	while (r->status == 200 && p < end && !*b) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
		char ip[INET_ADDRSTRLEN];
		struct in_addr ia;
		size_t k = 0;

		while (k < len && k < sizeof(ip) - 1 && p[k] != '/')
			ip[k] = p[k], k++;
		ip[k] = '\0';
		if (inet_pton(AF_INET, ip, &ia) == 1)
			*(*a ? b : a) = xstrdup(ip);
		p += len + 1;
	}
}

static int ec2_addresses(const char *base, uint64_t deadline, char **pri,
			 char **sec, struct cerr *e)
{
	cleanup_free char *token = NULL, *hdr = NULL, *mac = NULL;
	cleanup_free char *u1 = url_join(base, "latest/meta-data/mac");
	cleanup_free char *u2 = NULL, *path = NULL;
	struct ci_http_req r;

	if (ci_ec2_token(base, deadline, &token, e) < 0)
		return -1;
	hdr = token ? xasprintf("X-aws-ec2-metadata-token: %s", token) : NULL;
	ec2_setup(&r, u1, hdr);
	if (ci_http_run(&r, 1, deadline, TRY_MS, e) == 0)
		mac = value_of(&r);
	ci_http_req_free(&r);
	if (!mac || strchr(mac, '/'))
		return cerr_set(e, EPROTO, "EC2 meta-data/mac: no answer");
	path = xasprintf("latest/meta-data/network/interfaces/macs/%s/"
			 "local-ipv4s",
			 mac);
	u2 = url_join(base, path);
	ec2_setup(&r, u2, hdr);
	if (ci_http_run(&r, 1, deadline, TRY_MS, e) == 0)
		two_ips(&r, pri, sec);
	ci_http_req_free(&r);
	if (!*pri)
		return cerr_set(e, EPROTO, "EC2 local-ipv4s: no address");
	return 0;
}

static int gce_addresses(const char *base, uint64_t deadline, char **pri,
			 char **sec, struct cerr *e)
{
	static const char *const paths[] = {
	    "computeMetadata/v1/instance/network-interfaces/0/ip",
	    "computeMetadata/v1/instance/network-interfaces/0/ip-aliases/0"};
	struct ci_http_req rq[2];
	char *urls[2], *none = NULL;
	int r = 0;

	for (int i = 0; i < 2; i++) {
		urls[i] = url_join(base, paths[i]);
		ci_http_req_init(&rq[i], urls[i], CI_MAX_METADATA);
		rq[i].headers[0] = GCE_FLAVOR;
		rq[i].want_header = "Metadata-Flavor";
	}
	if (ci_http_run(rq, 2, deadline, TRY_MS, e) < 0)
		r = -1;
	else if (!gce_ok(&rq[0]) || !(*pri = value_of(&rq[0])))
		r = cerr_set(e, EPROTO,
			     "GCE network-interfaces/0/ip: no answer");
	else if (gce_ok(&rq[1]))
		two_ips(&rq[1], sec, &none);
	free(none);
	free_reqs(rq, 2);
	free(urls[0]);
	free(urls[1]);
	return r;
}

static int azure_addresses(const char *base, uint64_t deadline, char **pri,
			   char **sec, struct cerr *e)
{
	cleanup_free char *url =
	    url_join(base, "metadata/instance?api-version=" AZURE_API);
	struct ci_http_req r;
	int rc = 0;

	ci_http_req_init(&r, url, CI_MAX_AZURE_JSON);
	r.headers[0] = "Metadata: true";
	if (ci_http_run(&r, 1, deadline, TRY_MS, e) < 0)
		rc = -1;
	else if (r.status != 200)
		rc = cerr_set(e, EPROTO, "Azure IMDS instance: HTTP %ld",
			      r.status);
	else
		rc = ci_meta_parse_azure_ips(r.body.data, r.body.len, pri, sec,
					     e);
	ci_http_req_free(&r);
	return rc;
}

int ci_cloud_addresses(const struct ci_addr_opts *ao, char **primary,
		       char **secondary, struct cerr *e)
{
	struct ci_opts o = {
	    .ec2_url = ao->ec2_url ? ao->ec2_url : "http://169.254.169.254",
	    .gce_url = ao->gce_url ? ao->gce_url : "http://169.254.169.254",
	    .azure_url =
		ao->azure_url ? ao->azure_url : "http://169.254.169.254",
	};
	uint64_t deadline =
	    now_ns() + (uint64_t)((ao->timeout > 0 ? ao->timeout : 5) * 1e9);
	int r;

	*primary = *secondary = NULL;
	if (!ci_http_available(e))
		return -1;
	switch (ci_ds_probe(&o, deadline, e)) {
	case CI_DS_EC2:
		r = ec2_addresses(o.ec2_url, deadline, primary, secondary, e);
		break;
	case CI_DS_GCE:
		r = gce_addresses(o.gce_url, deadline, primary, secondary, e);
		break;
	case CI_DS_AZURE:
		r = azure_addresses(o.azure_url, deadline, primary, secondary,
				    e);
		break;
	default:
		return cerr_set(e, e->code ? e->code : ENXIO,
				"no metadata service answered%s%s",
				e->code ? ": " : "", e->code ? e->msg : "");
	}
	if (r < 0) {
		free(*primary);
		free(*secondary);
		*primary = *secondary = NULL;
	}
	return r;
}
