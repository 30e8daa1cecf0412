// SPDX-License-Identifier: Apache-2.0
/* Who and where this instance is, and the credentials it signs with: the
 * options and the environment first (tests, or a cell outside EC2), then
 * EC2's IMDS through cell-cloudinit's client (IMDSv2 with v1 fallback). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "boot-internal.h"
#include "cleanup.h"
#include "cloudinit.h"
#include "jsonutil.h"
#include "log.h"
#include "util.h"

#define CREDS_PATH "latest/meta-data/iam/security-credentials/"

void aws_creds_free(struct aws_creds *c)
{
	free(c->akid);
	if (c->secret)
		explicit_bzero(c->secret, strlen(c->secret));
	free(c->secret);
	free(c->token);
	memset(c, 0, sizeof(*c));
}

static char *env(const char *a, const char *b)
{
	const char *v = getenv(a);

	if ((!v || !*v) && b)
		v = getenv(b);
	return v && *v ? xstrdup(v) : NULL;
}

/* A meta-data value: trimmed, one line. */
static char *trim(char *s)
{
	size_t n;

	if (!s)
		return NULL;
	n = strcspn(s, "\r\n");
	s[n] = '\0';
	while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
		s[--n] = '\0';
	if (!*s) {
		free(s);
		return NULL;
	}
	return s;
}

int aws_identity(const struct boot_opts *o, char **iid, char **region,
		 struct cerr *e)
{
	static const char *const paths[] = {
	    "latest/meta-data/instance-id", "latest/meta-data/placement/region",
	    "latest/meta-data/placement/availability-zone"};
	char *v[3] = {NULL, NULL, NULL};

	*iid = o->instance_id ? xstrdup(o->instance_id) : NULL;
	*region = o->region ? xstrdup(o->region)
			    : env("AWS_REGION", "AWS_DEFAULT_REGION");
	if (*iid && *region)
		return 0;
	if (ci_ec2_get(o->ec2_url, paths, 3, o->timeout, v, e) < 0)
		goto fail;
	for (int i = 0; i < 3; i++)
		v[i] = trim(v[i]);
	if (!*iid)
		*iid = steal_ptr(&v[0]);
	if (!*region && v[1])
		*region = steal_ptr(&v[1]);
	/* Older IMDS versions have no placement/region: "us-east-1a". */
	if (!*region && v[2] && strlen(v[2]) > 1) {
		v[2][strlen(v[2]) - 1] = '\0';
		*region = steal_ptr(&v[2]);
	}
	for (int i = 0; i < 3; i++)
		free(v[i]);
	if (!*iid || !*region) {
		cerr_set(e, ENOENT, "IMDS gave no %s",
			 *iid ? "region" : "instance-id");
		goto fail;
	}
	return 0;
fail:
	free(*iid);
	free(*region);
	*iid = *region = NULL;
	return cerr_prefix(e, "instance identity");
}

/* The first role IMDS lists, or NULL. */
static char *profile_role(const struct boot_opts *o, struct cerr *e)
{
	const char *path = CREDS_PATH;
	char *v = NULL;

	if (ci_ec2_get(o->ec2_url, &path, 1, o->timeout, &v, e) < 0)
		return NULL;
	return trim(v);
}

int aws_has_profile(const struct boot_opts *o, struct cerr *e)
{
	char *role;

	if (getenv("AWS_ACCESS_KEY_ID") && getenv("AWS_SECRET_ACCESS_KEY"))
		return 1;
	role = profile_role(o, e);
	if (!role)
		return e->code ? -1 : 0;
	free(role);
	return 1;
}

/* "2024-01-01T00:00:00Z" */
static int parse_time(const char *s, time_t *out)
{
	struct tm tm = {0};
	const char *end = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;

	if (!end)
		return -1;
	if (*end == '.')
		end += strspn(end + 1, "0123456789") + 1;
	if (strcmp(end, "Z") != 0 && strcmp(end, "+00:00") != 0)
		return -1;
	/* 0 is "never" (keys from the environment): an expiry at or before
	 * the epoch is no expiry a document can mean. */
	*out = timegm(&tm);
	return *out > 0 ? 0 : -1;
}

int aws_creds_parse(const char *json, size_t len, struct aws_creds *c,
		    struct cerr *e)
{
	cleanup_json json_t *j = json_parse_object(json, len, e);
	const char *code;

	memset(c, 0, sizeof(*c));
	if (!j)
		return -1;
	code = jstr(j, "Code");
	if (code && strcmp(code, "Success") != 0)
		return cerr_set(e, EACCES, "IMDS credentials: Code %s", code);
	c->akid = jstrdup(j, "AccessKeyId");
	c->secret = jstrdup(j, "SecretAccessKey");
	c->token = jstrdup(j, "Token");
	if (!c->akid || !c->secret || !c->token ||
	    parse_time(jstr(j, "Expiration"), &c->expires) < 0) {
		aws_creds_free(c);
		return cerr_set(e, EPROTO,
				"IMDS credentials: want AccessKeyId, "
				"SecretAccessKey, Token and an Expiration");
	}
	return 0;
}

static int creds_from_imds(const struct boot_opts *o, struct aws_creds *c,
			   struct cerr *e)
{
	cleanup_free char *role = profile_role(o, e);
	cleanup_free char *path = NULL;
	char *doc = NULL;
	const char *p;
	int r;

	if (!role)
		return e->code ? -1
			       : cerr_set(e, ENOENT,
					  "no instance profile (IMDS lists no "
					  "role under %s)",
					  CREDS_PATH);
	path = xasprintf(CREDS_PATH "%s", role);
	p = path;
	if (ci_ec2_get(o->ec2_url, &p, 1, o->timeout, &doc, e) < 0)
		return -1;
	if (!doc)
		return cerr_set(e, ENOENT, "IMDS has no credentials for %s",
				role);
	r = aws_creds_parse(doc, strlen(doc), c, e);
	explicit_bzero(doc, strlen(doc));
	free(doc);
	if (r == 0) {
		char until[32];
		struct tm tm;
		strftime(until, sizeof(until), "%Y-%m-%dT%H:%M:%SZ",
			 gmtime_r(&c->expires, &tm));
		log_info("credentials of role %s, valid until %s", role, until);
	}
	return r;
}

int aws_creds_get(const struct boot_opts *o, struct aws_creds *c, bool force,
		  struct cerr *e)
{
	long margin = BOOT_CREDS_MARGIN_S;
	const char *m = getenv("CELL_BOOT_CREDS_MARGIN_S");

	if (m && *m)
		margin = strtol(m, NULL, 10);
	if (c->akid &&
	    (c->from_env || (!force && c->expires - time(NULL) > margin)))
		return 0;
	aws_creds_free(c);
	c->akid = env("AWS_ACCESS_KEY_ID", NULL);
	c->secret = env("AWS_SECRET_ACCESS_KEY", NULL);
	if (c->akid && c->secret) {
		c->token = env("AWS_SESSION_TOKEN", NULL);
		c->from_env = true;
		return 0;
	}
	aws_creds_free(c);
	if (creds_from_imds(o, c, e) < 0)
		return cerr_prefix(e, "credentials");
	return 0;
}
