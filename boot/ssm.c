// SPDX-License-Identifier: Apache-2.0
/* SSM Parameter Store: GetParameter WithDecryption over the AWS JSON 1.1
 * protocol, signed with SigV4 by libcurl. The controller writes one
 * SecureString "<base>/<instance-id>/config", or, over 4096 bytes, chunks
 * "config_0", "config_1", … (Kip's spelling; "config-0" is accepted too,
 * as itzo-launcher read it). Chunks are written one by one after the
 * instance started, so a short set is normal for a while: the payload
 * check (payload.c) then finds it incomplete and the agent retries. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "boot-internal.h"
#include "cleanup.h"
#include "jsonutil.h"
#include "log.h"
#include "util.h"

struct ssm {
	const struct boot_opts *o;
	const char *region;
	char *endpoint, *sigv4;
	struct aws_creds *c;
};

/* The error's type without its namespace ("com.amazonaws…#Type"). */
static const char *err_type(const json_t *j)
{
	const char *t = j ? jstr(j, "__type") : NULL;
	const char *h = t ? strrchr(t, '#') : NULL;

	return h ? h + 1 : t ? t : "unknown";
}

static bool creds_problem(const char *type)
{
	return !strcmp(type, "ExpiredTokenException") ||
	       !strcmp(type, "UnrecognizedClientException") ||
	       !strcmp(type, "InvalidSignatureException");
}

/* One signed POST. */
static int call(struct ssm *s, const char *body, struct buf *reply,
		long *status, struct cerr *e)
{
	cleanup_free char *tok = NULL, *userpwd = NULL;
	struct boot_http r = {
	    .url = s->endpoint,
	    .body = body,
	    .sigv4 = s->sigv4,
	    .ca_bundle = s->o->ca_bundle,
	    .timeout_ms = (long)(s->o->timeout * 1000),
	    .headers = {"Content-Type: application/x-amz-json-1.1",
			"X-Amz-Target: AmazonSSM.GetParameter"},
	};

	userpwd = xasprintf("%s:%s", s->c->akid, s->c->secret);
	r.userpwd = userpwd;
	if (s->c->token)
		r.headers[2] = tok =
		    xasprintf("X-Amz-Security-Token: %s", s->c->token);
	r.reply = *reply;
	if (boot_http(&r, e) < 0) {
		*reply = r.reply;
		return cerr_prefix(e, "SSM %s", s->endpoint);
	}
	*reply = r.reply;
	*status = r.status;
	explicit_bzero(userpwd, strlen(userpwd));
	return 0;
}

/* 0 with the value, 1 when the parameter does not exist. */
static int get_param(struct ssm *s, const char *name, struct buf *out,
		     struct cerr *e)
{
	cleanup_json json_t *req =
	    json_pack("{s:s, s:b}", "Name", name, "WithDecryption", 1);
	cleanup_free char *body = json_dumps(req, JSON_COMPACT);
	struct buf reply;
	long status = 0;
	int r = -1;

	buf_init(&reply, BOOT_MAX_PARAM);
	for (int attempt = 0; attempt < 2; attempt++) {
		cleanup_json json_t *j = NULL;
		if (aws_creds_get(s->o, s->c, attempt > 0, e) < 0 ||
		    call(s, body, &reply, &status, e) < 0)
			break;
		j = json_loadb(reply.data, reply.len, 0, NULL);
		if (status == 200) {
			json_t *p = j ? json_object_get(j, "Parameter") : NULL;
			const char *v = p ? jstr(p, "Value") : NULL;
			if (!v) {
				cerr_set(e, EPROTO,
					 "SSM %s: no Parameter.Value", name);
				break;
			}
			r = buf_append(out, v, strlen(v), e);
			break;
		}
		if (status == 400 &&
		    !strcmp(err_type(j), "ParameterNotFound")) {
			r = 1;
			break;
		}
		cerr_set(e, status == 400 ? EACCES : EIO,
			 "SSM GetParameter %s: HTTP %ld %s: %s", name, status,
			 err_type(j),
			 j && jstr(j, "message")   ? jstr(j, "message")
			 : j && jstr(j, "Message") ? jstr(j, "Message")
						   : "");
		if (!(status == 400 && creds_problem(err_type(j))) ||
		    s->c->from_env)
			break;
		log_warn("%s; fetching fresh credentials", e->msg);
	}
	buf_free(&reply);
	return r;
}

/* Chunks in one spelling: 0 with the joined value, 1 when chunk 0 is not
 * there. */
static int get_chunks(struct ssm *s, const char *base, char sep,
		      struct buf *out, struct cerr *e)
{
	int n = 0;

	for (; n < BOOT_MAX_CHUNKS; n++) {
		cleanup_free char *name = xasprintf("%s%c%d", base, sep, n);
		int r = get_param(s, name, out, e);
		if (r < 0)
			return -1;
		if (r == 1)
			break;
	}
	if (n == 0)
		return 1;
	log_info("SSM: joined %d chunks %s%c0… (%zu bytes)", n, base, sep,
		 out->len);
	return 0;
}

int ssm_fetch_payload(const struct boot_opts *o, const char *iid,
		      const char *region, struct aws_creds *c, struct buf *out,
		      struct cerr *e)
{
	struct ssm s = {.o = o, .region = region, .c = c};
	cleanup_free char *base = xasprintf(
	    "%s/%s/config", o->param_base ? o->param_base : "/kip/cells", iid);
	int r;

	s.endpoint = o->ssm_endpoint
			 ? xstrdup(o->ssm_endpoint)
			 : xasprintf("https://ssm.%s.amazonaws.com/", region);
	s.sigv4 = xasprintf("aws:amz:%s:ssm", region);
	r = get_param(&s, base, out, e);
	if (r == 1)
		r = get_chunks(&s, base, '_', out, e);
	if (r == 1)
		r = get_chunks(&s, base, '-', out, e);
	if (r == 1)
		r = cerr_set(e, ENOENT,
			     "SSM parameter %s (or %s_0, %s-0) is not there "
			     "yet; the controller writes it after the instance "
			     "starts",
			     base, base, base);
	free(s.endpoint);
	free(s.sigv4);
	return r;
}
