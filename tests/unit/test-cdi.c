// SPDX-License-Identifier: Apache-2.0
/* CDI specs (agent/pod/cdi.c) and their edits in run.json
 * (agent/pod/cdiapply.c): what nvidia-ctk writes parses, a bad spec says why,
 * names resolve (=all, numbered, conflicts), and the edits land as the runtime
 * expects them. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>

#include "../lib/tap.h"
#include "cdi.h"
#include "cdiapply.h"
#include "fsutil.h"
#include "util.h"

static const char nvidia_yaml[] =
    "---\n"
    "cdiVersion: 0.5.0\n"
    "containerEdits:\n"
    "  env:\n"
    "  - NVIDIA_VISIBLE_DEVICES=void\n"
    "  deviceNodes:\n"
    "  - path: /dev/nvidiactl\n"
    "  hooks:\n"
    "  - hookName: createContainer\n"
    "    path: /usr/bin/nvidia-ctk\n"
    "    args: [nvidia-ctk, hook, update-ldcache]\n"
    "  mounts:\n"
    "  - containerPath: /usr/bin/nvidia-smi\n"
    "    hostPath: /usr/bin/nvidia-smi\n"
    "    options: [ro, nosuid, nodev, bind]\n"
    "devices:\n"
    "- name: \"0\"\n"
    "  containerEdits:\n"
    "    deviceNodes:\n"
    "    - path: /dev/nvidia0\n"
    "- name: 1\n"
    "  containerEdits:\n"
    "    deviceNodes:\n"
    "    - {path: /dev/nvidia1, type: c, major: 195, minor: 1}\n"
    "kind: nvidia.com/gpu\n";

static void test_parse(void)
{
	struct cdi_spec s;
	struct cerr e = {0};

	ok(cdi_spec_parse(nvidia_yaml, strlen(nvidia_yaml), &s, &e) == 0,
	   "nvidia-ctk's YAML parses: %s", e.msg);
	is_str(s.kind, "nvidia.com/gpu", "kind");
	ok(s.n_devices == 2, "two devices");
	is_str(s.devices[1].name, "1", "an unquoted number is a name");
	ok(s.devices[1].edits.nodes[0].major == 195 &&
	       s.devices[1].edits.nodes[0].type == 'c',
	   "numbers and type");
	ok(s.edits.n_hooks == 1 && s.edits.hooks[0].args[2] &&
	       !strcmp(s.edits.hooks[0].args[2], "update-ldcache"),
	   "hook args");
	cdi_spec_free(&s);

	static const struct {
		const char *text, *want;
	} bad[] = {
	    {"cdiVersion: 9.9.9\nkind: a.com/b\ndevices: [{name: d}]\n",
	     "unsupported cdiVersion \"9.9.9\""},
	    {"{\"cdiVersion\":\"0.6.0\",\"kind\":\"a.com/b\",\"devices\":[{"
	     "\"name\":\"x\",\"bogus\":1}]}",
	     "devices[0]: unknown field \"bogus\""},
	    {"cdiVersion: 0.3.0\nkind: a.com/b\ndevices: []\n",
	     "devices: none"},
	    {"cdiVersion: 0.3.0\nkind: a\ndevices: [{name: d}]\n",
	     "kind: \"a\" is not vendor.com/class"},
	    {"cdiVersion: 0.3.0\nkind: a.com/b\ndevices:\n- name: d\n"
	     "  containerEdits: {deviceNodes: [{path: rel}]}\n",
	     "path not absolute"},
	    {"cdiVersion: 0.3.0\nkind: a.com/b\n: [\n", "YAML line"},
	    {"cdiVersion: 0.7.0\nkind: a.com/b\ndevices:\n- name: d\n"
	     "  containerEdits: {intelRdt: {closID: x}}\n",
	     "not supported"},
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		cerr_clear(&e);
		ok(cdi_spec_parse(bad[i].text, strlen(bad[i].text), &s, &e) <
			   0 &&
		       strstr(e.msg, bad[i].want),
		   "bad spec %zu: %s", i, e.msg);
	}
}

static void load(struct cdi_spec *s, const char *text, const char *path)
{
	struct cerr e = {0};

	if (cdi_spec_parse(text, strlen(text), s, &e) < 0)
		abort();
	s->path = xstrdup(path);
}

static void test_resolve(void)
{
	struct cdi_spec specs[2];
	struct cdi_registry r = {.specs = specs, .n_specs = 1};
	struct cdi_edits x;
	struct cerr e = {0};
	char *all[] = {(char *)"nvidia.com/gpu=all", NULL};
	char *one[] = {(char *)"nvidia.com/gpu=1", (char *)"nvidia.com/gpu=1",
		       NULL};
	char *none[] = {(char *)"nvidia.com/gpu=7", NULL};
	char *bad[] = {(char *)"gpu", NULL};

	load(&specs[0], nvidia_yaml, "/etc/cdi/a.yaml");
	ok(cdi_resolve(&r, all, &x, &e) == 0, "=all: %s", e.msg);
	ok(x.n_nodes == 3 && x.n_mounts == 1 && x.n_hooks == 1,
	   "=all without an all device: every device, the spec's edits "
	   "once (%zu nodes)",
	   x.n_nodes);
	cdi_edits_free(&x);
	ok(cdi_resolve(&r, one, &x, &e) == 0 && x.n_nodes == 2 &&
	       !strcmp(x.nodes[1].path, "/dev/nvidia1"),
	   "a numbered device, asked twice, once");
	cdi_edits_free(&x);
	ok(cdi_resolve(&r, none, &x, &e) < 0 &&
	       !strcmp(e.msg, "CDIDeviceNotFound: nvidia.com/gpu=7"),
	   "not found: %s", e.msg);
	cerr_clear(&e);
	ok(cdi_resolve(&r, bad, &x, &e) < 0, "a bad name: %s", e.msg);
	load(&specs[1], nvidia_yaml, "/var/run/cdi/b.yaml");
	r.n_specs = 2;
	cerr_clear(&e);
	ok(cdi_resolve(&r, one, &x, &e) < 0 &&
	       strstr(e.msg, "CDIDeviceConflict: nvidia.com/gpu=1") &&
	       strstr(e.msg, "a.yaml") && strstr(e.msg, "b.yaml"),
	   "two specs defining a device: %s", e.msg);
	cdi_spec_free(&specs[0]);
	cdi_spec_free(&specs[1]);
}

static void test_requests(void)
{
	struct kv ann[] = {
	    {(char *)"pod.elotl.co/cdi-x",
	     (char *)"example.com/dev=a, example.com/dev=b"},
	    {(char *)"cdi.k8s.io/y", (char *)"example.com/dev=a"},
	    {(char *)"pod.elotl.co/other", (char *)"example.com/dev=z"},
	};
	struct kv gpu_ann[] = {
	    {(char *)"cdi.k8s.io/g", (char *)"nvidia.com/gpu=0"},
	};
	struct run_config rc = {0};
	struct cdi_opts o = {.dirs = "/nonexistent"};
	struct cerr e = {0};
	char **v;

	ok(cdi_set_annotation_kinds("nvidia.com/gpu,example.com/dev", &e) == 0,
	   "kinds set: %s", e.msg);
	v = cdi_requests("1", ann, ARRAY_SIZE(ann));
	ok(v && strv_len(v) == 3 && !strcmp(v[0], "nvidia.com/gpu=all") &&
	       !strcmp(v[1], "example.com/dev=a") &&
	       !strcmp(v[2], "example.com/dev=b"),
	   "gpu and annotations, each name once");
	strv_free(v);
	ok(cdi_requests("", NULL, 0) == NULL, "no GPU, no annotation: none");

	/* The default: annotations get the GPUs only (issue 27). */
	ok(cdi_set_annotation_kinds(NULL, &e) == 0, "default kinds");
	v = cdi_requests("", ann, ARRAY_SIZE(ann));
	ok(v && cdi_apply(&o, v, &rc, &e) < 0 && e.code == EPERM &&
	       strstr(e.msg, "CDIDeviceRefused: annotation pod.elotl.co/cdi-x "
			     "asks for example.com/dev=a"),
	   "another kind is refused: %s", e.msg);
	strv_free(v);
	v = cdi_requests("", gpu_ann, ARRAY_SIZE(gpu_ann));
	ok(v && strv_len(v) == 1 && !strcmp(v[0], "nvidia.com/gpu=0"),
	   "a GPU by annotation is allowed");
	strv_free(v);
	/* None: the pod's own GPUs still come, an annotation's do not. */
	ok(cdi_set_annotation_kinds("", &e) == 0, "no kinds");
	v = cdi_requests("1", gpu_ann, ARRAY_SIZE(gpu_ann));
	ok(v && strv_len(v) == 2 && !strcmp(v[0], "nvidia.com/gpu=all") &&
	       str_has_prefix(v[1], CDI_REFUSED),
	   "spec.resources.gpu is never gated; the annotation is");
	strv_free(v);
	ok(cdi_set_annotation_kinds("nvidia.com", &e) < 0 &&
	       cdi_set_annotation_kinds("a.com/b=c", &e) < 0,
	   "a malformed kind is refused: %s", e.msg);
	ok(cdi_set_annotation_kinds(NULL, &e) == 0, "back to the default");
}

static void test_apply(void)
{
	static const char spec[] =
	    "{\"cdiVersion\":\"0.6.0\",\"kind\":\"example.com/gpu\","
	    "\"devices\":[{\"name\":\"0\",\"containerEdits\":{"
	    "\"env\":[\"KEEP=cdi\",\"ADDED=1\"],"
	    "\"deviceNodes\":[{\"path\":\"/dev/fake0\",\"hostPath\":"
	    "\"/dev/zero\",\"permissions\":\"rw\"}],"
	    "\"mounts\":[{\"hostPath\":\"/etc/hostname\",\"containerPath\":"
	    "\"/lib/fake.so\"},{\"hostPath\":\"/tmp\",\"containerPath\":"
	    "\"/rw\",\"options\":[\"rw\",\"rbind\"]}],"
	    "\"hooks\":[{\"hookName\":\"startContainer\",\"path\":\"/x\"}],"
	    "\"additionalGids\":[44]}}]}";
	struct cdi_spec s;
	struct cdi_registry r = {.specs = &s, .n_specs = 1};
	struct cdi_edits x;
	struct run_config rc = {0};
	struct cerr e = {0};
	char *req[] = {(char *)"example.com/gpu=0", NULL};
	char *env[] = {(char *)"KEEP=unit", NULL};

	load(&s, spec, "/x.json");
	rc.env = xcalloc(2, sizeof(char *));
	rc.env[0] = xstrdup(env[0]);
	ok(cdi_resolve(&r, req, &x, &e) == 0 &&
	       cdi_apply_edits(&x, &rc, &e) == 0,
	   "apply: %s", e.msg);
	ok(rc.n_devices == 1 && rc.devices[0].type == 'c' &&
	       rc.devices[0].major == 1 && rc.devices[0].minor == 5 &&
	       !strcmp(rc.devices[0].access, "rw") &&
	       !strcmp(rc.devices[0].path, "/dev/fake0"),
	   "the node's type and numbers from its host path");
	ok(rc.n_mounts == 2 && (rc.mounts[0].flags & MS_RDONLY) &&
	       !(rc.mounts[1].flags & MS_RDONLY) &&
	       (rc.mounts[1].flags & MS_REC),
	   "mounts read-only unless rw");
	ok(strv_len(rc.env) == 2 && !strcmp(rc.env[0], "KEEP=unit") &&
	       !strcmp(rc.env[1], "ADDED=1"),
	   "the unit's env wins");
	ok(rc.n_hooks == 1 && rc.hooks[0].kind == HOOK_START_CONTAINER &&
	       rc.hooks[0].timeout_s == RUN_HOOK_TIMEOUT_S,
	   "hook with the default timeout");
	ok(rc.n_groups == 1 && rc.groups[0] == 44, "extra group");
	cdi_edits_free(&x);
	runconfig_free(&rc);
	cdi_spec_free(&s);
}

int main(void)
{
	test_parse();
	test_resolve();
	test_requests();
	test_apply();
	return tap_done();
}
