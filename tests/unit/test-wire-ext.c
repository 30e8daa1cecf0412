// SPDX-License-Identifier: Apache-2.0
/* The wire's extensions (docs/agent-wire.md "Extensions"): what Kip never
 * sends, read when another client (cellctl) does, and their absence
 * leaving Kip's behaviour. */
#include <errno.h>
#include <string.h>

#include "../lib/tap.h"
#include "podspec.h"

static int parse(const char *json, struct pod_spec *p, struct cerr *e)
{
	return wire_parse_pod(json, strlen(json), p, e);
}

#define POD(spec_extra, unit_extra)                                            \
	"{\"spec\":{" spec_extra "\"units\":[{\"name\":\"a\",\"image\":"       \
	"\"busybox\"" unit_extra "}]}}"

static void test_absent(void)
{
	struct pod_spec p;
	struct cerr e = {0};
	const struct unit_spec *u;

	ok(parse(POD("", ",\"securityContext\":{\"Privileged\":null,"
			 "\"RunAsNonRoot\":null,\"ReadOnlyRootFilesystem\":"
			 "null,\"AllowPrivilegeEscalation\":null,"
			 "\"ProcMount\":null}"),
		 &p, &e) == 0,
	   "Kip's nulls parse: %s", e.msg);
	u = &p.units[0];
	ok(u->post_start.kind == PROBE_NONE && u->pre_stop.kind == PROBE_NONE,
	   "no hooks");
	ok(!u->read_only_root && u->run_as_non_root == TRI_UNSET &&
	       u->allow_priv_esc == TRI_UNSET && !u->privileged &&
	       !u->proc_unmasked,
	   "security extensions unset");
	ok(u->pull_policy == PULL_DEFAULT && !u->stdin_open,
	   "the default pull policy, no stdin");
	ok(!p.has_fs_group && !p.run_as_non_root && !p.active_deadline_s,
	   "pod extensions unset");
	pod_spec_free(&p);
}

static void test_present(void)
{
	struct pod_spec p;
	struct cerr e = {0};
	const struct unit_spec *u;

	ok(parse(POD("\"activeDeadlineSeconds\":30,\"securityContext\":{"
		     "\"fsGroup\":2000,\"fsGroupChangePolicy\":"
		     "\"OnRootMismatch\",\"runAsNonRoot\":true},",
		     ",\"imagePullPolicy\":\"Never\",\"stdin\":true,"
		     "\"tty\":true,\"securityContext\":{"
		     "\"ReadOnlyRootFilesystem\":true,\"runAsNonRoot\":false,"
		     "\"AllowPrivilegeEscalation\":false,\"privileged\":true,"
		     "\"procMount\":\"Unmasked\"},\"lifecycle\":{\"PostStart\":"
		     "{\"exec\":{\"command\":[\"sh\",\"-c\",\"x\"]}},"
		     "\"preStop\":{\"sleep\":{\"seconds\":5}}}"),
		 &p, &e) == 0,
	   "extensions parse: %s", e.msg);
	u = &p.units[0];
	ok(u->post_start.kind == PROBE_EXEC &&
	       !strcmp(u->post_start.exec_command[2], "x"),
	   "postStart exec (Go spelling)");
	ok(u->pre_stop.kind == PROBE_SLEEP && u->pre_stop.sleep_s == 5,
	   "preStop sleep (Kubernetes spelling)");
	ok(u->read_only_root && u->run_as_non_root == TRI_FALSE &&
	       u->allow_priv_esc == TRI_FALSE && u->privileged &&
	       u->proc_unmasked,
	   "security extensions");
	ok(u->pull_policy == PULL_NEVER && u->stdin_open && u->tty,
	   "Never, stdin, tty");
	ok(p.has_fs_group && p.fs_group == 2000 &&
	       p.fs_group_on_root_mismatch && p.run_as_non_root &&
	       p.active_deadline_s == 30,
	   "fsGroup, OnRootMismatch, runAsNonRoot, activeDeadlineSeconds");
	pod_spec_free(&p);
}

static void refused(const char *json, const char *want)
{
	struct pod_spec p;
	struct cerr e = {0};

	ok(parse(json, &p, &e) < 0 && e.code == EINVAL && strstr(e.msg, want),
	   "refused: %s (%s)", want, e.msg);
	pod_spec_free(&p);
}

static void test_refused(void)
{
	refused(POD("", ",\"imagePullPolicy\":\"Sometimes\""),
		"spec.units[0].imagePullPolicy");
	refused(POD("\"securityContext\":{\"fsGroupChangePolicy\":\"x\"},", ""),
		"spec.securityContext.fsGroupChangePolicy");
	refused(POD("\"securityContext\":{\"fsGroup\":-1},", ""),
		"spec.securityContext.fsGroup");
	refused(POD("\"activeDeadlineSeconds\":\"1\",", ""),
		"spec.activeDeadlineSeconds");
	refused(POD("", ",\"securityContext\":{\"procMount\":\"Raw\"}"),
		"procMount");
	refused(POD("", ",\"lifecycle\":{\"preStop\":{\"sleep\":{\"seconds\":"
			"-1}}}"),
		"spec.units[0].lifecycle.preStop.sleep.seconds");
	refused(POD("", ",\"lifecycle\":{\"postStart\":{\"exec\":{},"
			"\"httpGet\":{\"port\":1}}}"),
		"spec.units[0].lifecycle.postStart");
	refused(POD("", ",\"stdin\":1"), "spec.units[0].stdin");
}

int main(void)
{
	test_absent();
	test_present();
	test_refused();
	return tap_done();
}
