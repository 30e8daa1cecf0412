// SPDX-License-Identifier: Apache-2.0
/* One boot attempt: fill the boot directory from the source asked for,
 * then check the agent's version. Every reason to wait is logged once per
 * attempt; the agent runs the next attempt after a back-off. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "boot-internal.h"
#include "cleanup.h"
#include "cloudinit.h"
#include "log.h"
#include "util.h"

static int from_ssm(const struct boot_opts *o, struct cerr *e)
{
	cleanup_free char *iid = NULL, *region = NULL;
	struct aws_creds c = {0};
	struct yamlmap m;
	struct buf payload;
	int r;

	if (aws_identity(o, &iid, &region, e) < 0)
		return -1;
	buf_init(&payload, BOOT_MAX_PAYLOAD);
	r = ssm_fetch_payload(o, iid, region, &c, &payload, e);
	aws_creds_free(&c);
	if (r == 0)
		r = payload_parse(payload.data, payload.len, &m, e);
	if (payload.data)
		explicit_bzero(payload.data, payload.len);
	buf_free(&payload);
	if (r < 0)
		return -1;
	r = payload_write(&m, o->boot_dir, e);
	if (r == 0)
		log_info("SSM: instance %s (%s): wrote %zu boot files to %s",
			 iid, region, m.n, o->boot_dir);
	yamlmap_free(&m);
	return r;
}

static int from_userdata(const struct boot_opts *o, enum ci_ds_kind kind,
			 struct cerr *e)
{
	struct ci_opts co = {
	    .datasource = kind,
	    .ec2_url = o->ec2_url,
	    .gce_url = o->gce_url,
	    .azure_url = o->azure_url,
	    .azure_ovf_device = o->azure_ovf_device,
	    .azure_wireserver = o->azure_wireserver,
	    .timeout = o->timeout,
	};
	struct ci_userdata ud;
	int n;

	if (ci_fetch_userdata(&co, &ud, e) < 0)
		return cerr_prefix(e, "user data");
	n = ci_write_prefixed_files(ud.data.data, ud.data.len, o->userdata_dir,
				    o->boot_dir, e);
	if (n >= 0)
		log_info("user data from %s (instance %s): wrote %d boot files "
			 "to %s",
			 ud.source, ud.instance_id, n, o->boot_dir);
	if (n >= 0 && !payload_complete(o->boot_dir))
		n = cerr_set(e, ENODATA,
			     "user data from %s has no %s/ca.crt, server.crt "
			     "and server.key",
			     ud.source, o->userdata_dir);
	ci_userdata_free(&ud);
	return n < 0 ? cerr_prefix(e, "user data") : 0;
}

/* auto: SSM on AWS when an instance profile exists, else user data; on
 * AWS without the parameter, user data may still hold the files (a
 * controller without useCloudParameterStore). */
static int from_auto(const struct boot_opts *o, struct cerr *e)
{
	struct boot_opts probe = *o;
	struct cerr pe = {0};
	int has;

	probe.timeout = o->timeout < 3 ? o->timeout : 3;
	has = aws_has_profile(&probe, &pe);
	if (has == 1) {
		if (from_ssm(o, e) == 0)
			return 0;
		log_info("%s; trying user data", e->msg);
		cerr_clear(e);
		return from_userdata(o, CI_DS_EC2, e);
	}
	log_debug("no AWS instance profile (%s); user data",
		  has < 0 ? pe.msg : "none listed");
	return from_userdata(o, CI_DS_AUTO, e);
}

static int fill(const struct boot_opts *o, struct cerr *e)
{
	switch (o->source) {
	case BOOT_SSM:
		return from_ssm(o, e);
	case BOOT_USERDATA:
		return from_userdata(o, CI_DS_AUTO, e);
	case BOOT_DIR:
		if (payload_complete(o->boot_dir))
			return 0;
		return cerr_set(e, ENOENT,
				"%s has no ca.crt, server.crt and server.key "
				"yet (cell-cloudinit writes them)",
				o->boot_dir);
	case BOOT_AUTO:
	default:
		if (payload_complete(o->boot_dir)) {
			log_info("boot files already in %s", o->boot_dir);
			return 0;
		}
		return from_auto(o, e);
	}
}

int boot_run(const struct boot_opts *o)
{
	struct cerr e = {0};
	int r;

	if (!o->update_only && fill(o, &e) < 0) {
		log_error("%s", e.msg);
		return BOOT_EXIT_FAILED;
	}
	/* A failed update must not keep the cell from coming up: the
	 * running agent serves, and the next start tries again. */
	r = update_agent(o, &e);
	if (r < 0)
		log_error("%s; keeping the running agent %s", e.msg,
			  o->agent_version);
	return r == 1 ? BOOT_EXIT_UPDATED : BOOT_EXIT_OK;
}
