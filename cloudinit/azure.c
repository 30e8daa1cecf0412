// SPDX-License-Identifier: Apache-2.0
/* Azure's provisioning medium and wire server. Kip's Azure backend puts the
 * user data in osProfile.customData, which Azure delivers base64-encoded in
 * ovf-env.xml on a CD-ROM (UDF or ISO 9660) attached at provisioning, not in
 * IMDS's userData. While that medium is attached the platform waits for the
 * guest to report "Ready" to the wire server (the goal state's container
 * and role instance, then a Health document), or it marks the VM failed;
 * cloud-init's helpers/azure.py does the same two requests. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#include "ci-internal.h"
#include "cleanup.h"
#include "fsutil.h"
#include "log.h"
#include "util.h"

#define WIRESERVER "168.63.129.16"
#define MAX_FIELD 256

void ci_ovf_free(struct ci_ovf *o)
{
	buf_free(&o->userdata);
	free(o->hostname);
	memset(o, 0, sizeof(*o));
}

static int field(const char *xml, size_t len, const char *const *path, size_t n,
		 size_t max, char **out, struct cerr *e)
{
	struct buf b;
	int r;

	buf_init(&b, max);
	r = ci_xml_text(xml, len, path, n, &b, e);
	if (r == 1)
		*out = buf_steal(&b, NULL);
	buf_free(&b);
	return r;
}

int ci_ovf_parse(const char *xml, size_t len, struct ci_ovf *o, struct cerr *e)
{
	static const char *const custom[] = {
	    "Environment", "ProvisioningSection",
	    "LinuxProvisioningConfigurationSet", "CustomData"};
	static const char *const userdata[] = {
	    "Environment", "ProvisioningSection",
	    "LinuxProvisioningConfigurationSet", "UserData"};
	static const char *const host[] = {"Environment", "ProvisioningSection",
					   "LinuxProvisioningConfigurationSet",
					   "HostName"};
	cleanup_free char *b64 = NULL;
	int r;

	memset(o, 0, sizeof(*o));
	buf_init(&o->userdata, CI_MAX_USERDATA);
	r = field(xml, len, custom, 4, CI_MAX_USERDATA * 4 / 3 + 1024, &b64, e);
	if (r == 0)
		r = field(xml, len, userdata, 4, CI_MAX_USERDATA * 4 / 3 + 1024,
			  &b64, e);
	if (r < 0 || field(xml, len, host, 4, MAX_FIELD, &o->hostname, e) < 0) {
		ci_ovf_free(o);
		return cerr_prefix(e, "ovf-env.xml");
	}
	if (o->hostname) {
		char *h = o->hostname;
		o->hostname = ci_meta_value(h, strlen(h));
		free(h);
	}
	if (b64) {
		o->has_userdata = true;
		if (ci_b64_decode(b64, strlen(b64), &o->userdata, e) < 0) {
			ci_ovf_free(o);
			return cerr_prefix(e, "ovf-env.xml CustomData");
		}
	}
	return 0;
}

static int read_mounted(const char *mp, void *arg, struct cerr *e)
{
	struct ci_ovf *o = arg;
	cleanup_free char *p = xasprintf("%s/ovf-env.xml", mp);
	struct buf b;
	int r;

	buf_init(&b, CI_MAX_OVF);
	if (fs_read_file(p, &b, e) < 0) {
		buf_free(&b);
		return cerr_prefix(e, "provisioning medium");
	}
	r = ci_ovf_parse(b.data, b.len, o, e);
	buf_free(&b);
	return r;
}

int ci_azure_ovf_read(const char *dev, struct ci_ovf *o, struct cerr *e)
{
	static const char *const devs[] = {"/dev/sr0", "/dev/cdrom"};
	/* Azure's medium is UDF (ISO 9660 on older hosts). ext4 lets a local
	 * image stand in on kernels built without both (our test machines). */
	static const char *const types[] = {"udf", "iso9660", "ext4", NULL};
	int r;

	for (size_t i = 0; !dev && i < ARRAY_SIZE(devs); i++)
		if (fs_exists(devs[i]))
			dev = devs[i];
	if (!dev)
		return 1;
	r = ci_with_medium(dev, "azure-ovf", types, read_mounted, o, e);
	/* An empty drive (ENOMEDIUM) is not a provisioning medium. */
	if (r == CI_MEDIUM_NO_MOUNT && (errno == ENOMEDIUM || errno == ENXIO))
		return 1;
	if (r == CI_MEDIUM_NO_MOUNT)
		return cerr_sys(e, "mount %s read-only (udf, iso9660, ext4)",
				dev);
	return r;
}

int ci_goalstate_parse(const char *xml, size_t len, char **incarnation,
		       char **container, char **instance, struct cerr *e)
{
	static const char *const inc[] = {"GoalState", "Incarnation"};
	static const char *const cid[] = {"GoalState", "Container",
					  "ContainerId"};
	static const char *const iid[] = {"GoalState", "Container",
					  "RoleInstanceList", "RoleInstance",
					  "InstanceId"};

	*incarnation = *container = *instance = NULL;
	if (field(xml, len, inc, 2, MAX_FIELD, incarnation, e) == 1 &&
	    field(xml, len, cid, 3, MAX_FIELD, container, e) == 1 &&
	    field(xml, len, iid, 5, MAX_FIELD, instance, e) == 1)
		return 0;
	free(*incarnation);
	free(*container);
	free(*instance);
	*incarnation = *container = *instance = NULL;
	if (!e->code)
		cerr_set(e, EPROTO,
			 "goal state lacks Incarnation, ContainerId or "
			 "InstanceId");
	return cerr_prefix(e, "goal state");
}

/* The values go into XML: only what goal states hold (GUIDs, numbers,
 * names with dots and dashes) is accepted. */
static bool plain(const char *s)
{
	return *s && strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstu"
			       "vwxyz0123456789.-_") == strlen(s);
}

static int post_health(const char *base, const char *inc, const char *cid,
		       const char *iid, uint64_t deadline, struct cerr *e)
{
	cleanup_free char *url = xasprintf("%s/machine?comp=health", base);
	cleanup_free char *doc = xasprintf(
	    "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n"
	    "<Health xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\""
	    " xmlns:xsd=\"http://www.w3.org/2001/XMLSchema\">\n"
	    "  <GoalStateIncarnation>%s</GoalStateIncarnation>\n"
	    "  <Container>\n    <ContainerId>%s</ContainerId>\n"
	    "    <RoleInstanceList>\n      <Role>\n"
	    "        <InstanceId>%s</InstanceId>\n"
	    "        <Health>\n          <State>Ready</State>\n"
	    "        </Health>\n      </Role>\n    </RoleInstanceList>\n"
	    "  </Container>\n</Health>\n",
	    inc, cid, iid);
	struct ci_http_req r;
	int rc = 0;

	ci_http_req_init(&r, url, 64 << 10);
	r.method = "POST";
	r.post = doc;
	r.headers[0] = "x-ms-agent-name: WALinuxAgent";
	r.headers[1] = "x-ms-version: 2012-11-30";
	r.headers[2] = "Content-Type: text/xml; charset=utf-8";
	if (ci_http_run(&r, 1, deadline, 10000, e) < 0)
		rc = -1;
	else if (r.status < 200 || r.status > 299)
		rc = r.status ? cerr_set(e, EPROTO, "health report: HTTP %ld",
					 r.status)
			      : (*e = r.err, -1);
	ci_http_req_free(&r);
	return rc;
}

int ci_azure_report_ready(const char *wireserver, uint64_t deadline,
			  struct cerr *e)
{
	cleanup_free char *base =
	    xasprintf("http://%s", wireserver ? wireserver : WIRESERVER);
	cleanup_free char *url = xasprintf("%s/machine/?comp=goalstate", base);
	cleanup_free char *inc = NULL, *cid = NULL, *iid = NULL;
	struct ci_http_req r;
	int rc = -1;

	ci_http_req_init(&r, url, 256 << 10);
	r.headers[0] = "x-ms-agent-name: WALinuxAgent";
	r.headers[1] = "x-ms-version: 2012-11-30";
	if (ci_http_run(&r, 1, deadline, 10000, e) < 0)
		goto out;
	if (r.status != 200) {
		if (r.status)
			cerr_set(e, EPROTO, "goal state: HTTP %ld", r.status);
		else
			*e = r.err;
		goto out;
	}
	if (ci_goalstate_parse(r.body.data, r.body.len, &inc, &cid, &iid, e) <
	    0)
		goto out;
	if (!plain(inc) || !plain(cid) || !plain(iid)) {
		cerr_set(e, EPROTO, "goal state: unexpected characters");
		goto out;
	}
	rc = post_health(base, inc, cid, iid, deadline, e);
	if (rc == 0)
		ci_log(LOG_INFO,
		       "Azure: reported ready to %s (container %s, instance "
		       "%s, incarnation %s)",
		       base, cid, iid, inc);
out:
	ci_http_req_free(&r);
	return rc < 0 ? cerr_prefix(e, "Azure wire server %s", base) : 0;
}

/* The Azure datasource: user data from the provisioning medium when there
 * is one (then report ready), else IMDS's userData; meta-data from IMDS. */
int ci_ds_azure_full(const struct ci_opts *o, uint64_t deadline,
		     struct ci_source *out, struct cerr *e)
{
	struct ci_ovf ovf;
	struct cerr re = {0};
	int r = ci_azure_ovf_read(o->azure_ovf_device, &ovf, e);

	if (r < 0)
		return -1;
	if (ci_ds_azure(o->azure_url, deadline, out, e) < 0) {
		if (r == 0)
			ci_ovf_free(&ovf);
		return -1;
	}
	if (r == 1)
		return 0;
	if (ovf.has_userdata) {
		buf_free(&out->userdata);
		out->userdata = ovf.userdata;
		buf_init(&ovf.userdata, 0);
		free(out->name);
		out->name = xstrdup("azure (ovf-env.xml)");
	}
	if (ovf.hostname && !out->meta.hostname)
		out->meta.hostname = steal_ptr(&ovf.hostname);
	ci_ovf_free(&ovf);
	if (ci_azure_report_ready(o->azure_wireserver, deadline, &re) < 0)
		ci_log(LOG_WARN, "%s; the platform may mark this VM failed",
		       re.msg);
	return 0;
}
