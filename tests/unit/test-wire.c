// SPDX-License-Identifier: Apache-2.0
/* Unit tests of the controller ↔ cell JSON (agent/pod/wire.c): PodParameters as
 * Kip's controller marshals them, defaults, Kubernetes quantities, named
 * probe ports, every error with its message, unit fingerprints, and the
 * PodStatusReply read back with jansson. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/tap.h"
#include "podspec.h"
#include "cleanup.h"
#include "jsonutil.h"
#include "util.h"

/* What Kip's controller sends (pkg/server/pod_controller.go updatePodUnits:
 * json.Marshal of api.PodParameters): struct order, null for nil slices and
 * maps, "resources" always present, the resolvconf/etchosts packagePath
 * volumes and mounts it adds to every pod (pkg/server/convert.go), and
 * fields we ignore (imagePullSecrets, instanceType, spot, resources, …). */
static const char kip_pod[] =
    "{\"secrets\":null,\"credentials\":{\"689494258501.dkr.ecr.us-east-"
    "1.amazonaws.com\":{\"server\":\"689494258501.dkr.ecr.us-east-1.ama"
    "zonaws.com\",\"username\":\"AWS\",\"password\":\"eyJwYXlsb2FkIjoiZ"
    "XhhbXBsZSJ9\"}},\"spec\":{\"phase\":\"Running\",\"restartPolicy\":"
    "\"Always\",\"units\":[{\"name\":\"nginx\",\"image\":\"nginx:1.19\""
    ",\"command\":[\"/docker-entrypoint.sh\"],\"args\":[\"nginx\",\"-g"
    "\",\"daemon off;\"],\"env\":[{\"name\":\"GREETING\",\"value\":\"he"
    "llo\"},{\"name\":\"EMPTY\"}],\"volumeMounts\":[{\"name\":\"data\","
    "\"mountPath\":\"/usr/share/nginx/html\"},{\"name\":\"config\",\"mo"
    "untPath\":\"/etc/nginx/conf.d\",\"subPath\":\"conf.d\"},{\"name\":"
    "\"resolvconf\",\"mountPath\":\"/etc/resolv.conf\"},{\"name\":\"etc"
    "hosts\",\"mountPath\":\"/etc/hosts\"}],\"ports\":[{\"name\":\"http"
    "\",\"containerPort\":80,\"protocol\":\"TCP\"},{\"name\":\"metrics"
    "\",\"hostPort\":9113,\"containerPort\":9113,\"protocol\":\"TCP\","
    "\"hostIP\":\"0.0.0.0\"}],\"workingDir\":\"/srv\",\"securityContext"
    "\":{\"capabilities\":{\"add\":[\"NET_ADMIN\"],\"drop\":[\"MKNOD\"]"
    "},\"runAsUser\":101,\"runAsGroup\":101},\"livenessProbe\":{\"httpG"
    "et\":{\"path\":\"/healthz\",\"port\":\"http\",\"scheme\":\"HTTP\","
    "\"httpHeaders\":[{\"name\":\"X-Probe\",\"value\":\"live\"}]},\"ini"
    "tialDelaySeconds\":5,\"timeoutSeconds\":2,\"periodSeconds\":15,\"s"
    "uccessThreshold\":1,\"failureThreshold\":4},\"readinessProbe\":{\""
    "tcpSocket\":{\"port\":80},\"periodSeconds\":5},\"startupProbe\":{"
    "\"exec\":{\"command\":[\"cat\",\"/tmp/started\"]},\"failureThresho"
    "ld\":30,\"periodSeconds\":10},\"resources\":{\"Limits\":null,\"Req"
    "uests\":null},\"terminationMessagePath\":\"/dev/termination-log\","
    "\"terminationMessagePolicy\":\"File\",\"imagePullPolicy\":\"IfNotP"
    "resent\"},{\"name\":\"sidecar\",\"image\":\"busybox:1.32\",\"comma"
    "nd\":[\"sh\",\"-c\",\"while true; do sleep 5; done\"],\"volumeMoun"
    "ts\":[{\"name\":\"data\",\"mountPath\":\"/data\",\"readOnly\":true"
    "},{\"name\":\"resolvconf\",\"mountPath\":\"/etc/resolv.conf\"},{\""
    "name\":\"etchosts\",\"mountPath\":\"/etc/hosts\"}],\"resources\":{"
    "\"Limits\":null,\"Requests\":null}}],\"initUnits\":[{\"name\":\"in"
    "it-db\",\"image\":\"busybox:1.32\",\"command\":[\"sh\",\"-c\",\"ec"
    "ho init\"],\"volumeMounts\":[{\"name\":\"resolvconf\",\"mountPath"
    "\":\"/etc/resolv.conf\"},{\"name\":\"etchosts\",\"mountPath\":\"/e"
    "tc/hosts\"}],\"resources\":{\"Limits\":null,\"Requests\":null}}],"
    "\"imagePullSecrets\":[\"ecr-pull\"],\"instanceType\":\"t3.small\","
    "\"spot\":{\"policy\":\"Never\"},\"resources\":{\"cpu\":\"1.00\",\""
    "memory\":\"1.00Gi\",\"volumeSize\":\"20G\",\"privateIPOnly\":true}"
    ",\"volumes\":[{\"name\":\"data\",\"emptyDir\":{\"medium\":\"Memory"
    "\",\"sizeLimit\":268435456}},{\"name\":\"config\",\"configMap\":{"
    "\"name\":\"nginx-conf\",\"items\":[{\"key\":\"default.conf\",\"pat"
    "h\":\"conf.d/default.conf\"}],\"defaultMode\":420}},{\"name\":\"de"
    "fault-token-x7k2p\",\"secret\":{\"secretName\":\"default-token-x7k"
    "2p\",\"defaultMode\":420}},{\"name\":\"host-logs\",\"hostPath\":{"
    "\"path\":\"/var/log\",\"type\":\"Directory\"}},{\"name\":\"token\""
    ",\"projected\":{\"sources\":[{\"secret\":{\"name\":\"tok\",\"items"
    "\":[{\"key\":\"t\",\"path\":\"t\"}]}},{\"configMap\":{\"name\":\"c"
    "a\"}}],\"defaultMode\":292}},{\"name\":\"resolvconf\",\"packagePat"
    "h\":{\"path\":\"/etc/resolv.conf\"}},{\"name\":\"etchosts\",\"pack"
    "agePath\":{\"path\":\"/etc/hosts\"}}],\"securityContext\":{\"names"
    "paceOptions\":{\"pid\":1,\"ipc\":1},\"runAsUser\":1000,\"runAsGrou"
    "p\":3000,\"supplementalGroups\":[4000,4001],\"sysctls\":[{\"name\""
    ":\"net.core.somaxconn\",\"value\":\"1024\"}]},\"dnsPolicy\":\"Clus"
    "terFirst\",\"dnsConfig\":{\"nameservers\":[\"10.96.0.10\"],\"searc"
    "hes\":[\"default.svc.cluster.local\",\"svc.cluster.local\"],\"opti"
    "ons\":[{\"name\":\"ndots\",\"value\":\"5\"},{\"name\":\"rotate\"}]"
    "},\"hostname\":\"web-0\",\"subdomain\":\"web\",\"hostAliases\":[{"
    "\"ip\":\"10.1.2.3\",\"hostnames\":[\"foo.local\",\"bar.local\"]}],"
    "\"terminationGracePeriodSeconds\":45},\"Annotations\":{\"pod.elotl"
    ".co/image-overlay-rootfs\":\"false\",\"kubectl.kubernetes.io/last-"
    "applied-configuration\":\"{}\"},\"PodName\":\"default_web-0\",\"No"
    "deName\":\"virtual-kubelet\",\"PodIP\":\"10.0.1.23\",\"PodHostname"
    "\":\"web-0.web.default.svc.cluster.local\"}";

static int parse(const char *json, struct pod_spec *p, struct cerr *e)
{
	return wire_parse_pod(json, strlen(json), p, e);
}

/* Set (or with value NULL, delete) the member at a dotted path such as
 * "spec.units.1.ports.0.containerPort" in a copy of base; numbers index
 * arrays. Returns the new JSON text. */
static char *mutate(const char *base, const char *path, const char *value)
{
	cleanup_json json_t *root = json_loads(base, 0, NULL);
	cleanup_free char *p = xstrdup(path);
	json_t *cur = root, *v = NULL;
	char *save = NULL, *tok = strtok_r(p, ".", &save), *next;
	char *out;

	for (; (next = strtok_r(NULL, ".", &save)); tok = next)
		cur = json_is_array(cur)
			  ? json_array_get(cur, strtoul(tok, NULL, 10))
			  : json_object_get(cur, tok);
	if (value) {
		v = json_loads(value, JSON_DECODE_ANY, NULL);
		if (!v)
			abort();
	}
	if (json_is_array(cur)) {
		size_t i = strtoul(tok, NULL, 10);
		if (v)
			json_array_set_new(cur, i, v);
		else
			json_array_remove(cur, i);
	} else if (v) {
		json_object_set_new(cur, tok, v);
	} else {
		json_object_del(cur, tok);
	}
	out = json_dumps(root, JSON_COMPACT);
	if (!out)
		abort();
	return out;
}

static const struct unit_spec *find_unit(const struct pod_spec *p,
					 const char *name)
{
	for (size_t i = 0; i < p->n_units; i++)
		if (!strcmp(p->units[i].name, name))
			return &p->units[i];
	for (size_t i = 0; i < p->n_init_units; i++)
		if (!strcmp(p->init_units[i].name, name))
			return &p->init_units[i];
	return NULL;
}

static void test_kip_pod_top(const struct pod_spec *p)
{
	is_str(p->pod_name, "default_web-0", "PodName");
	is_str(p->node_name, "virtual-kubelet", "NodeName");
	is_str(p->pod_ip, "10.0.1.23", "PodIP");
	is_str(p->pod_hostname, "web-0.web.default.svc.cluster.local",
	       "PodHostname");
	ok(p->n_secrets == 0 && !p->secrets, "secrets null: none");
	ok(p->n_credentials == 1, "one credential");
	is_str(p->credentials[0].host,
	       "689494258501.dkr.ecr.us-east-1.amazonaws.com",
	       "credential host");
	is_str(p->credentials[0].server,
	       "689494258501.dkr.ecr.us-east-1.amazonaws.com",
	       "credential server");
	is_str(p->credentials[0].username, "AWS", "credential username");
	is_str(p->credentials[0].password, "eyJwYXlsb2FkIjoiZXhhbXBsZSJ9",
	       "credential password (not base64-decoded)");
	ok(p->n_annotations == 1, "only pod.elotl.co/ annotations kept");
	is_str(p->annotations[0].name, "pod.elotl.co/image-overlay-rootfs",
	       "annotation key");
	is_str(p->annotations[0].value, "false", "annotation value");
	is_str(p->phase, "Running", "phase");
	ok(p->restart_policy == RESTART_ALWAYS, "restartPolicy Always");
	ok(p->termination_grace_s == 45, "terminationGracePeriodSeconds");
	is_str(p->hostname, "web-0", "hostname");
	is_str(p->subdomain, "web", "subdomain");
}

static void test_kip_pod_security_dns(const struct pod_spec *p)
{
	ok(p->ns_network == NS_POD && p->ns_pid == NS_CONTAINER &&
	       p->ns_ipc == NS_CONTAINER,
	   "namespaceOptions: network omitted (0), pid 1, ipc 1");
	ok(p->has_run_as_user && p->run_as_user == 1000, "pod runAsUser");
	ok(p->has_run_as_group && p->run_as_group == 3000, "pod runAsGroup");
	ok(p->n_supplemental_groups == 2 && p->supplemental_groups[0] == 4000 &&
	       p->supplemental_groups[1] == 4001,
	   "supplementalGroups");
	ok(p->n_sysctls == 1, "one sysctl");
	is_str(p->sysctls[0].name, "net.core.somaxconn", "sysctl name");
	is_str(p->sysctls[0].value, "1024", "sysctl value");
	is_str(p->dns_policy, "ClusterFirst", "dnsPolicy");
	ok(strv_len(p->dns_nameservers) == 1 &&
	       !strcmp(p->dns_nameservers[0], "10.96.0.10"),
	   "dnsConfig.nameservers");
	ok(strv_len(p->dns_searches) == 2 &&
	       !strcmp(p->dns_searches[1], "svc.cluster.local"),
	   "dnsConfig.searches");
	ok(p->n_dns_options == 2, "dnsConfig.options");
	is_str(p->dns_options[0].value, "5", "option with a value");
	ok(p->dns_options[1].value == NULL, "option without a value: NULL");
	ok(p->n_host_aliases == 1, "hostAliases");
	is_str(p->host_aliases[0].ip, "10.1.2.3", "hostAlias ip");
	ok(strv_len(p->host_aliases[0].hostnames) == 2, "hostAlias hostnames");
}

static void test_kip_pod_volumes(const struct pod_spec *p)
{
	const struct volume *v = p->volumes;

	ok(p->n_volumes == 7, "seven volumes");
	if (p->n_volumes != 7)
		return;
	ok(v[0].kind == VOL_EMPTY_DIR && v[0].memory &&
	       v[0].size_limit == 268435456,
	   "emptyDir Memory with an integer sizeLimit");
	ok(v[1].kind == VOL_CONFIG_MAP && v[1].default_mode == 0644,
	   "configMap with defaultMode 0644");
	is_str(v[1].source_name, "nginx-conf", "configMap name");
	ok(v[2].kind == VOL_SECRET, "secret volume");
	is_str(v[2].source_name, "default-token-x7k2p", "secret secretName");
	ok(v[3].kind == VOL_HOST_PATH, "hostPath volume");
	is_str(v[3].path, "/var/log", "hostPath path");
	is_str(v[3].host_path_type, "Directory", "hostPath type");
	ok(v[4].kind == VOL_PROJECTED && v[4].default_mode == 0444,
	   "projected with defaultMode");
	ok(v[5].kind == VOL_PACKAGE_PATH && v[6].kind == VOL_PACKAGE_PATH,
	   "resolvconf and etchosts are packagePath volumes");
	is_str(v[5].name, "resolvconf", "resolvconf volume");
	is_str(v[5].path, "/etc/resolv.conf", "packagePath path");
	ok(v[0].default_mode == -1 && v[3].default_mode == -1,
	   "defaultMode -1 when unset");
}

static void test_kip_pod_nginx(const struct unit_spec *u)
{
	ok(u != NULL, "unit nginx");
	if (!u)
		return;
	is_str(u->image, "nginx:1.19", "image");
	ok(strv_len(u->command) == 1 && strv_len(u->args) == 3,
	   "command and args");
	is_str(u->args[2], "daemon off;", "args[2]");
	ok(u->n_env == 2, "two env vars");
	is_str(u->env[0].value, "hello", "env value");
	is_str(u->env[1].value, "", "env without value: \"\"");
	ok(!u->env[0].secret_name, "no secretKeyRef");
	ok(u->n_mounts == 4, "four mounts");
	is_str(u->mounts[1].sub_path, "conf.d", "subPath");
	ok(!u->mounts[0].sub_path && !u->mounts[0].read_only,
	   "no subPath, read-write");
	ok(u->n_ports == 2 && u->ports[0].container_port == 80 &&
	       u->ports[1].host_port == 9113,
	   "ports");
	is_str(u->ports[1].host_ip, "0.0.0.0", "hostIP");
	is_str(u->working_dir, "/srv", "workingDir");
	ok(strv_len(u->caps_add) == 1 && !strcmp(u->caps_add[0], "NET_ADMIN"),
	   "capabilities.add");
	ok(strv_len(u->caps_drop) == 1 && !strcmp(u->caps_drop[0], "MKNOD"),
	   "capabilities.drop");
	ok(u->has_run_as_user && u->run_as_user == 101 && u->has_run_as_group &&
	       u->run_as_group == 101,
	   "unit runAsUser/runAsGroup");
	is_str(u->termination_message_path, "/dev/termination-log",
	       "terminationMessagePath");
	is_str(u->termination_message_policy, "File",
	       "terminationMessagePolicy");
	ok(u->fingerprint && u->fingerprint[0] == '{', "fingerprint is JSON");
}

static void test_kip_pod_probes(const struct unit_spec *u)
{
	const struct probe *l = &u->liveness, *r = &u->readiness,
			   *s = &u->startup;

	ok(l->kind == PROBE_HTTP && l->port == 80 && !l->port_name,
	   "liveness httpGet on named port http resolves to 80");
	is_str(l->path, "/healthz", "httpGet path");
	is_str(l->scheme, "HTTP", "httpGet scheme");
	ok(l->n_http_headers == 1, "httpHeaders");
	is_str(l->http_headers[0].value, "live", "httpHeader value");
	ok(l->initial_delay_s == 5 && l->timeout_s == 2 && l->period_s == 15 &&
	       l->success_threshold == 1 && l->failure_threshold == 4,
	   "liveness timings as sent");
	ok(r->kind == PROBE_TCP && r->port == 80, "readiness tcpSocket 80");
	ok(r->initial_delay_s == 0 && r->timeout_s == 1 && r->period_s == 5 &&
	       r->success_threshold == 1 && r->failure_threshold == 3,
	   "readiness: Kubernetes defaults for the absent timings");
	ok(s->kind == PROBE_EXEC && strv_len(s->exec_command) == 2,
	   "startup exec");
	ok(s->failure_threshold == 30 && s->period_s == 10, "startup timings");
}

static void test_kip_pod(void)
{
	struct pod_spec p;
	struct cerr e = {0};
	const struct unit_spec *side, *init;

	ok(parse(kip_pod, &p, &e) == 0, "Kip's PodParameters parse: %s", e.msg);
	test_kip_pod_top(&p);
	test_kip_pod_security_dns(&p);
	test_kip_pod_volumes(&p);
	ok(p.n_units == 2 && p.n_init_units == 1, "two units, one init unit");
	test_kip_pod_nginx(find_unit(&p, "nginx"));
	if (find_unit(&p, "nginx"))
		test_kip_pod_probes(find_unit(&p, "nginx"));
	side = find_unit(&p, "sidecar");
	ok(side && side->n_mounts == 3 && side->mounts[0].read_only,
	   "sidecar: readOnly mount");
	ok(side && side->liveness.kind == PROBE_NONE && !side->caps_add &&
	       !side->has_run_as_user && !side->args,
	   "sidecar: no probes, caps, user or args");
	init = find_unit(&p, "init-db");
	ok(init && init == &p.init_units[0], "init unit");
	pod_spec_free(&p);
	ok(p.units == NULL && p.n_units == 0, "pod_spec_free zeroes");
	pod_spec_free(&p);
	pod_spec_free(NULL);
	ok(1, "pod_spec_free on zeroed and NULL");
}

static void test_defaults(void)
{
	static const char min[] =
	    "{\"spec\":{\"units\":[{\"name\":\"a\",\"image\":\"busybox\","
	    "\"env\":[{\"name\":\"X\",\"value\":\"\"}],"
	    "\"ports\":[{\"containerPort\":8080}],"
	    "\"livenessProbe\":{\"httpGet\":{\"port\":8080},"
	    "\"timeoutSeconds\":0,\"periodSeconds\":0,\"successThreshold\":0,"
	    "\"failureThreshold\":0}}]}}";
	struct pod_spec p;
	struct cerr e = {0};
	const struct unit_spec *u;

	ok(parse(min, &p, &e) == 0, "a minimal pod parses: %s", e.msg);
	u = p.units;
	ok(p.restart_policy == RESTART_ALWAYS, "restartPolicy default Always");
	ok(p.termination_grace_s == 30, "terminationGracePeriodSeconds 30");
	ok(p.ns_network == NS_POD && p.ns_pid == NS_CONTAINER &&
	       p.ns_ipc == NS_CONTAINER,
	   "no securityContext: the pod's network, each unit its own PID and "
	   "IPC namespace (the v1 PodSpec's default)");
	ok(!p.has_run_as_user && !p.n_supplemental_groups && !p.pod_name &&
	       !p.n_annotations && !p.n_volumes && !p.n_init_units,
	   "everything else absent");
	is_str(u->termination_message_path, "/dev/termination-log",
	       "terminationMessagePath default");
	is_str(u->termination_message_policy, "File",
	       "terminationMessagePolicy default");
	is_str(u->ports[0].protocol, "TCP", "protocol default TCP");
	ok(u->ports[0].host_port == 0 && !u->ports[0].name,
	   "no hostPort, no name");
	is_str(u->liveness.path, "/", "httpGet path default /");
	is_str(u->liveness.scheme, "HTTP", "httpGet scheme default HTTP");
	ok(u->liveness.initial_delay_s == 0 && u->liveness.timeout_s == 1 &&
	       u->liveness.period_s == 10 &&
	       u->liveness.success_threshold == 1 &&
	       u->liveness.failure_threshold == 3,
	   "probe timings: 0 means the Kubernetes default");
	ok(!u->command && !u->args && !u->working_dir && !u->n_mounts,
	   "no command/args/workingDir/mounts: NULL");
	is_str(u->env[0].value, "", "empty env value");
	pod_spec_free(&p);

	ok(parse("{\"spec\":{\"restartPolicy\":\"Never\",\"units\":null}}", &p,
		 &e) == 0 &&
	       p.restart_policy == RESTART_NEVER && p.n_units == 0,
	   "units null: a pod without units; Never");
	pod_spec_free(&p);
	ok(parse("{\"spec\":{\"restartPolicy\":\"OnFailure\",\"terminationGrace"
		 "PeriodSeconds\":0}}",
		 &p, &e) == 0 &&
	       p.restart_policy == RESTART_ON_FAILURE &&
	       p.termination_grace_s == 0,
	   "OnFailure; a grace period of 0 is kept");
	pod_spec_free(&p);
	ok(parse("{\"spec\":{\"restartPolicy\":\"\"}}", &p, &e) == 0 &&
	       p.restart_policy == RESTART_ALWAYS,
	   "restartPolicy \"\" (Go zero value) is Always");
	pod_spec_free(&p);
}

/* Quantities as resource.ParseQuantity reads them, rounded up to whole
 * bytes like Quantity.Value(); errors by errno. */
static const struct {
	const char *in;
	int64_t want;
	int code;
} qcases[] = {
    {"0", 0, 0},
    {"1", 1, 0},
    {"1Ki", 1024, 0},
    {"1Mi", 1048576, 0},
    {"1Gi", 1073741824, 0},
    {"1Ti", 1099511627776LL, 0},
    {"1Pi", 1125899906842624LL, 0},
    {"1Ei", 1152921504606846976LL, 0},
    {"7Ei", 8070450532247928832LL, 0},
    {"8Ei", 0, ERANGE},
    {"1k", 1000, 0},
    {"500M", 500000000, 0},
    {"1G", 1000000000, 0},
    {"2T", 2000000000000LL, 0},
    {"3P", 3000000000000000LL, 0},
    {"1E", 1000000000000000000LL, 0},
    {"9E", 9000000000000000000LL, 0},
    {"10E", 0, ERANGE},
    {"1e3", 1000, 0},
    {"1E3", 1000, 0},
    {"1e+3", 1000, 0},
    {"1.5e3", 1500, 0},
    {"1e-3", 1, 0},
    {"2.5E-1", 1, 0},
    {"1500m", 2, 0},
    {"1000m", 1, 0},
    {"100n", 1, 0},
    {"5u", 1, 0},
    {"0.5Gi", 536870912, 0},
    {"1.5Gi", 1610612736, 0},
    {".5Ki", 512, 0},
    {"0.25Ki", 256, 0},
    {"0.3Ki", 308, 0},
    {"0.0001Ki", 1, 0},
    {"1.0000000001Ki", 1025, 0},
    {"1.", 1, 0},
    {"0.1", 1, 0},
    {"+5k", 5000, 0},
    {"-0", 0, 0},
    {"0.000Ki", 0, 0},
    {"9223372036854775807", INT64_MAX, 0},
    {"9223372036854775808", 0, ERANGE},
    {"9223372036854775807000m", INT64_MAX, 0},
    {"12345678901234567890123e-10", 1234567890124LL, 0},
    {"0000000000000000000000000001k", 1000, 0},
    {"0.0e99999999999999999999999", 0, 0},
    {"1e99999999999999999999", 0, ERANGE},
    {"1e-99999999999999999999", 1, 0},
    {"e3", 0, 0}, /* no digits: resource.ParseQuantity says 0 */
    {"", 0, EINVAL},
    {"-1", 0, EINVAL},
    {"-1Gi", 0, EINVAL},
    {"1Kb", 0, EINVAL},
    {"1K", 0, EINVAL},
    {"1ki", 0, EINVAL},
    {"1 Gi", 0, EINVAL},
    {" 1", 0, EINVAL},
    {"1e", 0, EINVAL},
    {"1e3.5", 0, EINVAL},
    {"1.5.5", 0, EINVAL},
    {"0x10", 0, EINVAL},
    {"1Gi ", 0, EINVAL},
    {"1e+", 0, EINVAL},
};

static void test_quantities(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(qcases); i++) {
		struct cerr e = {0};
		int64_t v = -7;
		int rc = quantity_value(qcases[i].in, &v, &e);

		if (qcases[i].code)
			ok(rc < 0 && e.code == qcases[i].code,
			   "quantity \"%s\": error %d (%s)", qcases[i].in,
			   qcases[i].code, e.msg);
		else
			ok(rc == 0 && v == qcases[i].want,
			   "quantity \"%s\" = %lld (got %lld)", qcases[i].in,
			   (long long)qcases[i].want, (long long)v);
	}
}

static void test_size_limits(void)
{
	static const struct {
		const char *json;
		int64_t want;
	} cases[] = {
	    {"\"1Gi\"", 1073741824},
	    {"\"500M\"", 500000000},
	    {"\"1e3\"", 1000},
	    {"1e3", 1000},
	    {"1.5", 2},
	    {"0", 0},
	    {"null", 0},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		cleanup_free char *j =
		    mutate(kip_pod, "spec.volumes.0.emptyDir.sizeLimit",
			   cases[i].json);
		struct pod_spec p;
		struct cerr e = {0};

		ok(parse(j, &p, &e) == 0 &&
		       p.volumes[0].size_limit == cases[i].want,
		   "sizeLimit %s = %lld %s", cases[i].json,
		   (long long)cases[i].want, e.msg);
		pod_spec_free(&p);
	}
}

static void probe_port_case(const char *port, int want, const char *name,
			    const char *what)
{
	cleanup_free char *j =
	    mutate(kip_pod, "spec.units.0.livenessProbe.httpGet.port", port);
	struct pod_spec p;
	struct cerr e = {0};
	const struct probe *pr;

	if (parse(j, &p, &e) < 0) {
		ok(0, "%s: %s", what, e.msg);
		return;
	}
	pr = &p.units[0].liveness;
	ok(pr->port == want, "%s: port %d (got %d)", what, want, pr->port);
	is_str(pr->port_name, name, "%s: port_name", what);
	pod_spec_free(&p);
}

/* Itzo's Go struct spells the key "Drop" (a broken struct tag); Kip's
 * spells it "drop". */
static void test_drop_spellings(void)
{
	static const struct {
		const char *caps, *want;
	} cases[] = {
	    {"{\"Drop\":[\"ALL\"]}", "ALL"},
	    {"{\"drop\":[\"NET_RAW\"]}", "NET_RAW"},
	    {"{\"drop\":[\"NET_RAW\"],\"Drop\":[\"ALL\"]}", "NET_RAW"},
	    {"{\"drop\":null,\"Drop\":[\"ALL\"]}", "ALL"},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		cleanup_free char *j =
		    mutate(kip_pod, "spec.units.0.securityContext.capabilities",
			   cases[i].caps);
		struct pod_spec p;
		struct cerr e = {0};

		ok(parse(j, &p, &e) == 0 &&
		       strv_len(p.units[0].caps_drop) == 1 &&
		       !strcmp(p.units[0].caps_drop[0], cases[i].want) &&
		       !p.units[0].caps_add,
		   "capabilities %s drops %s", cases[i].caps, cases[i].want);
		pod_spec_free(&p);
	}
}

static void test_probe_ports(void)
{
	probe_port_case("\"http\"", 80, NULL, "named port http");
	probe_port_case("\"metrics\"", 9113, NULL, "named port metrics");
	probe_port_case("\"8080\"", 8080, NULL, "numeric string");
	probe_port_case("\"admin\"", 0, "admin", "unknown name kept");
	probe_port_case("65535", 65535, NULL, "integer port");
	{
		cleanup_free char *j = mutate(
		    kip_pod, "spec.units.0.readinessProbe.tcpSocket.port",
		    "\"metrics\"");
		struct pod_spec p;
		struct cerr e = {0};

		ok(parse(j, &p, &e) == 0 && p.units[0].readiness.port == 9113,
		   "tcpSocket named port resolves too %s", e.msg);
		pod_spec_free(&p);
	}
}

/* Extra keys at every level, as a newer controller might send. */
static void test_unknown_fields(void)
{
	static const char *const where[] = {
	    "future",
	    "spec.future",
	    "spec.units.0.future",
	    "spec.units.0.env.0.future",
	    "spec.units.0.ports.0.future",
	    "spec.units.0.volumeMounts.0.mountPropagation",
	    "spec.units.0.livenessProbe.future",
	    "spec.units.0.livenessProbe.httpGet.future",
	    "spec.units.0.securityContext.future",
	    "spec.units.0.securityContext.capabilities.future",
	    "spec.volumes.0.future",
	    "spec.volumes.0.emptyDir.future",
	    "spec.securityContext.future",
	    "spec.securityContext.namespaceOptions.user",
	    "spec.dnsConfig.future",
	    "spec.ephemeralContainers",
	    "spec.spot.future",
	    "spec.units.0.resources.Limits",
	};
	struct pod_spec base, p;
	struct cerr e = {0};

	if (parse(kip_pod, &base, &e) < 0)
		abort();
	for (size_t i = 0; i < ARRAY_SIZE(where); i++) {
		cleanup_free char *j =
		    mutate(kip_pod, where[i], "{\"any\":[1,\"x\",null]}");
		int rc = parse(j, &p, &e);

		ok(rc == 0 && p.n_units == base.n_units &&
		       p.n_volumes == base.n_volumes,
		   "unknown field %s ignored %s", where[i],
		   rc < 0 ? e.msg : "");
		if (rc == 0)
			pod_spec_free(&p);
	}
	pod_spec_free(&base);
}

/* Each case changes one member of Kip's pod and expects this message. */
static const struct {
	const char *path, *value, *msg;
} mutations[] = {
    {"spec.units.1.ports", "[{\"containerPort\":\"80\"}]",
     "spec.units[1].ports[0].containerPort: not an integer"},
    {"spec.units.0.ports.1.hostPort", "65536",
     "spec.units[0].ports[1].hostPort: 65536 is out of range [0, 65535]"},
    {"spec.units.0.ports.0", "5", "spec.units[0].ports[0]: not an object"},
    {"spec.units.0.name", "\"Nginx\"",
     "spec.units[0].name: \"Nginx\" is not a DNS-1123 label (a-z, 0-9, '-', "
     "at most 63)"},
    {"spec.units.0.name", "\"-a\"",
     "spec.units[0].name: \"-a\" is not a DNS-1123 label (a-z, 0-9, '-', "
     "at most 63)"},
    {"spec.units.0.name", NULL, "spec.units[0].name: required"},
    {"spec.units.0.name", "\"\"", "spec.units[0].name: required"},
    {"spec.units.0.name", "7", "spec.units[0].name: not a string"},
    {"spec.units.0.image", NULL, "spec.units[0].image: required"},
    {"spec.units.1.name", "\"init-db\"",
     "spec: unit name \"init-db\" is used twice"},
    {"spec.units.1.name", "\"nginx\"",
     "spec: unit name \"nginx\" is used twice"},
    {"spec.units.0", "5", "spec.units[0]: not an object"},
    {"spec.units", "{}", "spec.units: not an array"},
    {"spec.initUnits.0.image", "[]", "spec.initUnits[0].image: not a string"},
    {"spec.units.0.command", "[\"sh\",1]",
     "spec.units[0].command[1]: not a string"},
    {"spec.units.0.args", "\"nginx\"", "spec.units[0].args: not an array"},
    {"spec.units.0.workingDir", "false",
     "spec.units[0].workingDir: not a string"},
    {"spec.units.0.env.0.name", NULL, "spec.units[0].env[0].name: required"},
    {"spec.units.0.env.0.name", "\"A=B\"",
     "spec.units[0].env[0].name: \"A=B\" contains '='"},
    {"spec.units.0.env.0.value", "1",
     "spec.units[0].env[0].value: not a string"},
    {"spec.units.0.env.0.valueFrom", "{\"secretKeyRef\":{\"name\":\"s\"}}",
     "spec.units[0].env[0].valueFrom.secretKeyRef.key: required"},
    {"spec.units.0.env.0.valueFrom", "{\"secretKeyRef\":5}",
     "spec.units[0].env[0].valueFrom.secretKeyRef: not an object"},
    {"spec.units.0.volumeMounts.0.mountPath", "\"data\"",
     "spec.units[0].volumeMounts[0].mountPath: \"data\" is not absolute or "
     "has '..'"},
    {"spec.units.0.volumeMounts.0.mountPath", "\"/data/../etc\"",
     "spec.units[0].volumeMounts[0].mountPath: \"/data/../etc\" is not "
     "absolute or has '..'"},
    {"spec.units.0.volumeMounts.0.mountPath", NULL,
     "spec.units[0].volumeMounts[0].mountPath: required"},
    {"spec.units.0.volumeMounts.1.subPath", "\"/abs\"",
     "spec.units[0].volumeMounts[1].subPath: \"/abs\" is absolute or has "
     "'..'"},
    {"spec.units.0.volumeMounts.1.subPath", "\"a/../../b\"",
     "spec.units[0].volumeMounts[1].subPath: \"a/../../b\" is absolute or "
     "has '..'"},
    {"spec.units.0.volumeMounts.1.readOnly", "\"yes\"",
     "spec.units[0].volumeMounts[1].readOnly: not a boolean"},
    {"spec.units.0.securityContext.capabilities.add", "\"NET_ADMIN\"",
     "spec.units[0].securityContext.capabilities.add: not an array"},
    {"spec.units.0.securityContext.runAsUser", "-1",
     "spec.units[0].securityContext.runAsUser: -1 is out of range [0, "
     "4294967294]"},
    {"spec.units.0.securityContext", "[]",
     "spec.units[0].securityContext: not an object"},
    {"spec.units.0.livenessProbe.exec", "{\"command\":[\"true\"]}",
     "spec.units[0].livenessProbe: more than one of exec, httpGet, "
     "tcpSocket"},
    {"spec.units.0.livenessProbe.httpGet.port", "70000",
     "spec.units[0].livenessProbe.httpGet.port: 70000 is out of range [1, "
     "65535]"},
    {"spec.units.0.livenessProbe.httpGet.port", "true",
     "spec.units[0].livenessProbe.httpGet.port: not an integer or a port "
     "name"},
    {"spec.units.0.livenessProbe.httpGet.port", "\"99999\"",
     "spec.units[0].livenessProbe.httpGet.port: \"99999\" is out of range"},
    {"spec.units.0.livenessProbe.httpGet.scheme", "\"FTP\"",
     "spec.units[0].livenessProbe.httpGet.scheme: \"FTP\" is not HTTP or "
     "HTTPS"},
    {"spec.units.0.livenessProbe.httpGet.httpHeaders.0.name", NULL,
     "spec.units[0].livenessProbe.httpGet.httpHeaders[0].name: required"},
    {"spec.units.0.livenessProbe.timeoutSeconds", "-1",
     "spec.units[0].livenessProbe.timeoutSeconds: -1 is out of range [0, "
     "2147483647]"},
    {"spec.units.0.readinessProbe.periodSeconds", "1.5",
     "spec.units[0].readinessProbe.periodSeconds: not an integer"},
    {"spec.units.0.terminationMessagePolicy", "\"Bogus\"",
     "spec.units[0].terminationMessagePolicy: \"Bogus\" is not File or "
     "FallbackToLogsOnError"},
    {"spec.volumes.0.hostPath", "{\"path\":\"/x\"}",
     "spec.volumes[0]: volume \"data\" has both emptyDir and hostPath; "
     "exactly one source is allowed"},
    {"spec.volumes.0.emptyDir", "\"yes\"",
     "spec.volumes[0].emptyDir: not an object"},
    {"spec.volumes.0.emptyDir.sizeLimit", "\"1Gx\"",
     "spec.volumes[0].emptyDir.sizeLimit: \"1Gx\" is not a quantity"},
    {"spec.volumes.0.emptyDir.sizeLimit", "\"-1Gi\"",
     "spec.volumes[0].emptyDir.sizeLimit: \"-1Gi\" is negative"},
    {"spec.volumes.0.emptyDir.sizeLimit", "\"1e30\"",
     "spec.volumes[0].emptyDir.sizeLimit: \"1e30\" is too large"},
    {"spec.volumes.0.emptyDir.sizeLimit", "-1",
     "spec.volumes[0].emptyDir.sizeLimit: negative"},
    {"spec.volumes.0.emptyDir.sizeLimit", "1e300",
     "spec.volumes[0].emptyDir.sizeLimit: out of range"},
    {"spec.volumes.0.emptyDir.sizeLimit", "true",
     "spec.volumes[0].emptyDir.sizeLimit: not a number or quantity"},
    {"spec.volumes.0.emptyDir.medium", "\"HugePages\"",
     "spec.volumes[0].emptyDir.medium: \"HugePages\" is not \"\" or "
     "\"Memory\""},
    {"spec.volumes.0.name", "\"Data_1\"",
     "spec.volumes[0].name: \"Data_1\" is not a DNS-1123 label (a-z, 0-9, "
     "'-', at most 63)"},
    {"spec.volumes.1.name", "\"data\"",
     "spec.volumes[1].name: \"data\" is used twice"},
    {"spec.volumes.3.hostPath.path", "\"var/log\"",
     "spec.volumes[3].hostPath.path: not absolute or has '..'"},
    {"spec.volumes.3.hostPath.path", NULL,
     "spec.volumes[3].hostPath.path: required"},
    {"spec.volumes.5.packagePath.path", "\"../../etc/shadow\"",
     "spec.volumes[5].packagePath.path: has '..'"},
    {"spec.volumes.1.configMap.defaultMode", "\"0644\"",
     "spec.volumes[1].configMap.defaultMode: not an integer"},
    {"spec.volumes.4.projected.sources", "{}",
     "spec.volumes[4].projected.sources: not an array"},
    {"spec.volumes", "{}", "spec.volumes: not an array"},
    {"spec.restartPolicy", "\"Sometimes\"",
     "spec.restartPolicy: \"Sometimes\" is not Always, OnFailure or Never"},
    {"spec.phase", "1", "spec.phase: not a string"},
    {"spec.securityContext.namespaceOptions.pid", "3",
     "spec.securityContext.namespaceOptions.pid: 3 is out of range [0, 2]"},
    {"spec.securityContext.namespaceOptions.network", "\"host\"",
     "spec.securityContext.namespaceOptions.network: not an integer"},
    {"spec.securityContext.runAsGroup", "4294967295",
     "spec.securityContext.runAsGroup: 4294967295 is out of range [0, "
     "4294967294]"},
    {"spec.securityContext.supplementalGroups", "[\"a\"]",
     "spec.securityContext.supplementalGroups[0]: not an integer"},
    {"spec.securityContext.supplementalGroups", "[-3]",
     "spec.securityContext.supplementalGroups[0]: out of range"},
    {"spec.securityContext.sysctls", "[{\"value\":\"1\"}]",
     "spec.securityContext.sysctls[0].name: required"},
    {"spec.dnsConfig.nameservers", "\"10.0.0.1\"",
     "spec.dnsConfig.nameservers: not an array"},
    {"spec.dnsConfig.options.0", "[]",
     "spec.dnsConfig.options[0]: not an "
     "object"},
    {"spec.hostAliases.0.ip", NULL, "spec.hostAliases[0].ip: required"},
    {"spec.terminationGracePeriodSeconds", "-5",
     "spec.terminationGracePeriodSeconds: -5 is out of range [0, "
     "2147483647]"},
    {"spec", NULL, "spec: required"},
    {"spec", "[]", "spec: not an object"},
    {"PodName", "5", "PodName: not a string"},
    {"PodIP", "{}", "PodIP: not a string"},
    {"Annotations", "[]", "Annotations: not an object"},
    {"Annotations", "{\"pod.elotl.co/x\":5}",
     "Annotations[\"pod.elotl.co/x\"]: not a string"},
    {"credentials", "[]", "credentials: not an object"},
    {"credentials", "{\"r.io\":\"user:pass\"}",
     "credentials[\"r.io\"]: not an object"},
    {"credentials", "{\"r.io\":{\"username\":1}}",
     "credentials[\"r.io\"].username: not a string"},
    {"secrets", "[]", "secrets: not an object"},
    {"secrets", "{\"s\":[\"x\"]}", "secrets[\"s\"]: not an object"},
    {"secrets", "{\"s\":{\"k\":5}}", "secrets[\"s\"][\"k\"]: not a string"},
    {"secrets", "{\"s\":{\"k\":\"aGVsbG8\"}}",
     "secrets[\"s\"][\"k\"]: not valid base64"},
};

static void test_errors(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(mutations); i++) {
		cleanup_free char *j =
		    mutate(kip_pod, mutations[i].path, mutations[i].value);
		struct pod_spec p;
		struct cerr e = {0};
		int rc = parse(j, &p, &e);

		ok(rc < 0 && e.code == EINVAL && p.units == NULL &&
		       p.n_volumes == 0,
		   "%s = %s: EINVAL, spec left empty", mutations[i].path,
		   mutations[i].value ? mutations[i].value : "(deleted)");
		is_str(e.msg, mutations[i].msg, "message for %s",
		       mutations[i].path);
		if (rc == 0)
			pod_spec_free(&p);
	}
}

/* What Kip may send that cannot take effect is accepted with a warning
 * (agent-wire.md, "Tolerance"), never refused. */
static const struct {
	const char *path, *value, *warning;
} tolerated[] = {
    {"spec.units.0.ports.0.containerPort", "0",
     "spec.units[0].ports[0]: no containerPort"},
    {"spec.units.0.ports.0.containerPort", NULL,
     "spec.units[0].ports[0]: no containerPort"},
    {"spec.units.0.ports.0.protocol", "\"XTP\"",
     "spec.units[0].ports[0]: protocol \"XTP\" is not TCP, UDP, SCTP or "
     "ICMP"},
    {"spec.units.0.volumeMounts.0.name", "\"nope\"",
     "spec.units[0].volumeMounts[0]: no volume \"nope\" in the pod; the "
     "unit will not start"},
    {"spec.units.0.livenessProbe", "{\"periodSeconds\":5}",
     "spec.units[0].livenessProbe: no handler this cell supports (exec, "
     "httpGet, tcpSocket); the probe is ignored"},
    {"spec.units.0.livenessProbe", "{\"grpc\":{\"port\":5}}",
     "spec.units[0].livenessProbe: no handler this cell supports (exec, "
     "httpGet, tcpSocket); the probe is ignored"},
    {"spec.units.0.startupProbe.exec", "{}",
     "spec.units[0].startupProbe.exec: no command; the probe is ignored"},
    {"spec.units.0.startupProbe.exec.command", "[]",
     "spec.units[0].startupProbe.exec: no command; the probe is ignored"},
    {"spec.units.0.livenessProbe.httpGet.port", NULL,
     "spec.units[0].livenessProbe.httpGet: no port; the probe is ignored"},
    {"spec.units.0.readinessProbe.tcpSocket.port", "\"\"",
     "spec.units[0].readinessProbe.tcpSocket: no port; the probe is "
     "ignored"},
    {"spec.volumes.0.emptyDir", NULL,
     "spec.volumes[0]: volume \"data\" has no source this cell supports "
     "(emptyDir, packagePath, configMap, secret, hostPath, projected); "
     "units that mount it will not start"},
    {"spec.volumes.0", "{\"name\":\"data\",\"persistentVolumeClaim\":{}}",
     "spec.volumes[0]: volume \"data\" has no source this cell supports "
     "(emptyDir, packagePath, configMap, secret, hostPath, projected); "
     "units that mount it will not start"},
};

static void test_tolerated(void)
{
	struct pod_spec p;
	struct cerr e = {0};

	ok(parse(kip_pod, &p, &e) == 0 && p.n_warnings == 0,
	   "Kip's own pod has no warning");
	pod_spec_free(&p);
	for (size_t i = 0; i < ARRAY_SIZE(tolerated); i++) {
		cleanup_free char *j =
		    mutate(kip_pod, tolerated[i].path, tolerated[i].value);
		int rc = parse(j, &p, &e);

		ok(rc == 0 && p.n_warnings == 1, "%s = %s: accepted (%s)",
		   tolerated[i].path,
		   tolerated[i].value ? tolerated[i].value : "(deleted)",
		   rc < 0 ? e.msg : "");
		is_str(rc == 0 && p.n_warnings ? p.warnings[0] : "",
		       tolerated[i].warning, "… with a warning");
		if (rc == 0)
			pod_spec_free(&p);
	}
	{
		cleanup_free char *j =
		    mutate(kip_pod, "spec.units.0.livenessProbe",
			   "{\"periodSeconds\":5}");
		ok(parse(j, &p, &e) == 0 &&
		       p.units[0].liveness.kind == PROBE_NONE,
		   "a handler-less probe is no probe");
		pod_spec_free(&p);
	}
}

static void test_bad_documents(void)
{
	static const struct {
		const char *json, *msg;
	} cases[] = {
	    {"", "malformed JSON at line 1 column 0: '[' or '{' expected near "
		 "end of file"},
	    {"[]", "JSON document is not an object"},
	    {"{\"spec\":{}} x", NULL},
	    {"{\"spec\":{\"phase\":\"\\u0000\"}}", NULL},
	    {"{\"spec\":{\"units\":[{\"name\":\"a\",\"image\":\"b\"}]", NULL},
	};
	struct pod_spec p;
	struct cerr e = {0};
	cleanup_free char *big = xmalloc(UPDATEPOD_MAX + 2);

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		int rc = parse(cases[i].json, &p, &e);
		ok(rc < 0 && e.code == EINVAL, "bad document %zu: %s", i,
		   e.msg);
		if (cases[i].msg)
			is_str(e.msg, cases[i].msg, "message %zu", i);
	}
	memset(big, ' ', UPDATEPOD_MAX + 1);
	memcpy(big, "{\"spec\":{}", 10);
	big[UPDATEPOD_MAX - 1] = '}';
	ok(wire_parse_pod(big, UPDATEPOD_MAX, &p, &e) == 0,
	   "a body of exactly UPDATEPOD_MAX passes %s", e.msg);
	pod_spec_free(&p);
	big[UPDATEPOD_MAX] = ' ';
	ok(wire_parse_pod(big, UPDATEPOD_MAX + 1, &p, &e) < 0 &&
	       e.code == EFBIG,
	   "a body over UPDATEPOD_MAX is EFBIG: %s", e.msg);
}

/* An array of n copies of the JSON text tmpl, with its one "%d" replaced by
 * the index (names must differ). */
static char *array_of(size_t n, const char *tmpl)
{
	const char *hole = strstr(tmpl, "%d");
	json_t *a = json_array();
	char *out;

	for (size_t i = 0; i < n; i++) {
		cleanup_free char *item = xasprintf(
		    "%.*s%zu%s", (int)(hole - tmpl), tmpl, i, hole + 2);
		json_array_append_new(a, json_loads(item, 0, NULL));
	}
	out = json_dumps(a, JSON_COMPACT);
	json_decref(a);
	return out;
}

static void expect_cap(const char *path, size_t n, const char *fmt,
		       const char *msg)
{
	cleanup_free char *ok_arr = array_of(n, fmt);
	cleanup_free char *bad_arr = array_of(n + 1, fmt);
	cleanup_free char *good = mutate(kip_pod, path, ok_arr);
	cleanup_free char *bad = mutate(kip_pod, path, bad_arr);
	struct pod_spec p;
	struct cerr e = {0};

	ok(parse(good, &p, &e) == 0, "%s: %zu entries pass %s", path, n, e.msg);
	pod_spec_free(&p);
	ok(parse(bad, &p, &e) < 0 && e.code == EINVAL, "%s: %zu fail", path,
	   n + 1);
	is_str(e.msg, msg, "%s: cap message", path);
}

static char *long_string(size_t n, char c)
{
	char *s = xmalloc(n + 3);

	s[0] = '"';
	memset(s + 1, c, n);
	s[n + 1] = '"';
	s[n + 2] = '\0';
	return s;
}

static void test_string_caps(void)
{
	cleanup_free char *s64 = long_string(WIRE_MAX_STR, 'x');
	cleanup_free char *s65 = long_string(WIRE_MAX_STR + 1, 'x');
	cleanup_free char *good = mutate(kip_pod, "spec.units.0.image", s64);
	cleanup_free char *bad = mutate(kip_pod, "spec.units.0.image", s65);
	cleanup_free char *badv = mutate(kip_pod, "spec.units.0.args", "[]");
	struct pod_spec p;
	struct cerr e = {0};

	ok(parse(good, &p, &e) == 0 && strlen(p.units[0].image) == WIRE_MAX_STR,
	   "a 64 KiB string passes");
	pod_spec_free(&p);
	ok(parse(bad, &p, &e) < 0 && e.code == EINVAL, "64 KiB + 1 fails");
	is_str(e.msg, "spec.units[0].image: too long (65537 bytes, max 65536)",
	       "string cap message");
	free(badv);
	badv = xasprintf("[\"a\",%s]", s65);
	free(bad);
	bad = mutate(kip_pod, "spec.units.0.args", badv);
	ok(parse(bad, &p, &e) < 0, "a long string inside an array fails");
	is_str(e.msg,
	       "spec.units[0].args[1]: too long (65537 bytes, max 65536)",
	       "array string cap message");
}

static void test_caps(void)
{
	char msg[256];

	expect_cap("spec.units.0.env", WIRE_MAX_ENV, "{\"name\":\"V%d\"}",
		   "spec.units[0].env: too many entries (257, max 256)");
	expect_cap("spec.units", WIRE_MAX_UNITS,
		   "{\"name\":\"u%d\",\"image\":\"busybox\"}",
		   "spec.units: too many entries (65, max 64)");
	expect_cap("spec.initUnits", WIRE_MAX_UNITS,
		   "{\"name\":\"i%d\",\"image\":\"busybox\"}",
		   "spec.initUnits: too many entries (65, max 64)");
	/* The units mount resolvconf, etchosts, data and config. */
	snprintf(msg, sizeof(msg),
		 "spec.volumes: too many entries (%d, max %d)",
		 WIRE_MAX_VOLUMES + 1, WIRE_MAX_VOLUMES);
	{
		cleanup_free char *a = array_of(
		    WIRE_MAX_VOLUMES - 4, "{\"name\":\"v%d\",\"emptyDir\":{}}");
		cleanup_free char *b = array_of(
		    WIRE_MAX_VOLUMES - 3, "{\"name\":\"v%d\",\"emptyDir\":{}}");
		const char *keep = ",{\"name\":\"data\",\"emptyDir\":{}},"
				   "{\"name\":\"config\",\"emptyDir\":{}},"
				   "{\"name\":\"resolvconf\",\"emptyDir\":{}},"
				   "{\"name\":\"etchosts\",\"emptyDir\":{}}]";
		cleanup_free char *va =
		    xasprintf("%.*s%s", (int)strlen(a) - 1, a, keep);
		cleanup_free char *vb =
		    xasprintf("%.*s%s", (int)strlen(b) - 1, b, keep);
		cleanup_free char *ja = mutate(kip_pod, "spec.volumes", va);
		cleanup_free char *jb = mutate(kip_pod, "spec.volumes", vb);
		struct pod_spec p;
		struct cerr e = {0};

		ok(parse(ja, &p, &e) == 0 && p.n_volumes == WIRE_MAX_VOLUMES,
		   "256 volumes pass %s", e.msg);
		pod_spec_free(&p);
		ok(parse(jb, &p, &e) < 0, "257 volumes fail");
		is_str(e.msg, msg, "volume cap message");
	}
	test_string_caps();
}

/* s as a JSON string literal. */
static char *quoted(const char *s)
{
	json_t *j = json_string(s);
	char *out = json_dumps(j, JSON_ENCODE_ANY);

	json_decref(j);
	return out;
}

static void test_secrets(void)
{
	static const char *const bad_b64[] = {
	    "aGVsbG8",				    /* unpadded */
	    "aGVsbG8=\n", "aGVs\nbG8=", "aGVsbG9=", /* unused bits set */
	    "aGVsbA===",  "a===",	"====",	    "aG=sbG8=",
	    "aGVsbG8-",	  "aGVsbG8_",	" aGVs",    "aGVsbA=",
	};
	static const char doc[] =
	    "{\"secrets\":{\"db\":{\"user\":\"YWRtaW4=\",\"bin\":\"AP8A\","
	    "\"empty\":\"\",\"nul\":null},\"none\":null},"
	    "\"spec\":{\"units\":[{\"name\":\"a\",\"image\":\"b\",\"env\":[{"
	    "\"name\":\"PASS\",\"value\":\"ignored\",\"valueFrom\":{"
	    "\"secretKeyRef\":{\"name\":\"db\",\"key\":\"user\"}}},{\"name\":"
	    "\"F\",\"value\":\"lit\",\"valueFrom\":{\"fieldRef\":{}}}]}]}}";
	struct pod_spec p;
	struct cerr e = {0};
	const struct secret *db = NULL;

	ok(parse(doc, &p, &e) == 0, "secrets parse: %s", e.msg);
	ok(p.n_secrets == 2, "two secrets");
	for (size_t i = 0; i < p.n_secrets; i++)
		if (!strcmp(p.secrets[i].name, "db"))
			db = &p.secrets[i];
	ok(db && db->n_items == 4, "db has four items");
	for (size_t i = 0; db && i < db->n_items; i++) {
		const char *k = db->items[i].name, *v = db->items[i].value;
		size_t n = db->item_len[i];
		if (!strcmp(k, "user"))
			ok(n == 5 && !strcmp(v, "admin"), "user = admin");
		else if (!strcmp(k, "bin"))
			ok(n == 3 && !memcmp(v, "\0\xff\0", 3),
			   "binary bytes with their length");
		else
			ok(n == 0 && v && !*v, "%s: empty value", k);
	}
	ok(p.units[0].env[0].value == NULL, "secretKeyRef: value NULL");
	is_str(p.units[0].env[0].secret_name, "db", "secretKeyRef.name");
	is_str(p.units[0].env[0].secret_key, "user", "secretKeyRef.key");
	is_str(p.units[0].env[1].value, "lit",
	       "another valueFrom source: the literal value stands");
	ok(!p.units[0].env[1].secret_name, "… and no secret");
	pod_spec_free(&p);

	for (size_t i = 0; i < ARRAY_SIZE(bad_b64); i++) {
		cleanup_free char *q = quoted(bad_b64[i]);
		cleanup_free char *v = xasprintf("{\"s\":{\"k\":%s}}", q);
		cleanup_free char *j = mutate(kip_pod, "secrets", v);
		ok(parse(j, &p, &e) < 0 && e.code == EINVAL &&
		       strstr(e.msg, "not valid base64"),
		   "strict base64 refuses %zu: %s", i, e.msg);
	}
}

/* base64 of n zero bytes: "AAAA" per three bytes, then the padded tail. */
static char *zeros_b64(size_t n)
{
	size_t full = n / 3, len = full * 4 + 6;
	char *s = xmalloc(len + 1), *p = s;

	*p++ = '"';
	for (size_t i = 0; i < full; i++, p += 4)
		memcpy(p, "AAAA", 4);
	if (n % 3 == 1)
		memcpy(p, "AA==", 4), p += 4;
	else if (n % 3 == 2)
		memcpy(p, "AAA=", 4), p += 4;
	*p++ = '"';
	*p = '\0';
	return s;
}

static void test_secret_caps(void)
{
	cleanup_free char *max = zeros_b64(WIRE_MAX_SECRET_VALUE);
	cleanup_free char *over = zeros_b64(WIRE_MAX_SECRET_VALUE + 1);
	cleanup_free char *vmax = xasprintf("{\"s\":{\"k\":%s}}", max);
	cleanup_free char *vover = xasprintf("{\"s\":{\"k\":%s}}", over);
	cleanup_free char *jmax = mutate(kip_pod, "secrets", vmax);
	cleanup_free char *jover = mutate(kip_pod, "secrets", vover);
	json_t *many = json_object(), *one = json_object();
	cleanup_free char *jmany = NULL, *vmany = NULL;
	struct pod_spec p;
	struct cerr e = {0};
	char msg[128];

	ok(parse(jmax, &p, &e) == 0 && p.n_secrets == 1 &&
	       p.secrets[0].item_len[0] == WIRE_MAX_SECRET_VALUE,
	   "a 1 MiB secret value passes %s", e.msg);
	pod_spec_free(&p);
	ok(parse(jover, &p, &e) < 0 && e.code == EINVAL,
	   "1 MiB + 1 byte fails");
	snprintf(msg, sizeof(msg),
		 "secrets[\"s\"][\"k\"]: longer than %u bytes",
		 WIRE_MAX_SECRET_VALUE);
	is_str(e.msg, msg, "secret value cap message");
	/* 1025 items over several secrets */
	for (int i = 0; i <= WIRE_MAX_SECRET_ITEMS; i++) {
		char k[32];
		snprintf(k, sizeof(k), "k%d", i);
		json_object_set_new(one, k, json_string("eA=="));
		if (json_object_size(one) == 100 ||
		    i == WIRE_MAX_SECRET_ITEMS) {
			snprintf(k, sizeof(k), "s%d", i);
			json_object_set_new(many, k, one);
			one = json_object();
		}
	}
	json_decref(one);
	vmany = json_dumps(many, JSON_COMPACT);
	json_decref(many);
	jmany = mutate(kip_pod, "secrets", vmany);
	ok(parse(jmany, &p, &e) < 0 && e.code == EINVAL, "1025 items fail");
	is_str(e.msg, "secrets: too many items (max 1024)",
	       "items cap message");
}

static char *fp_of(const char *json, const char *unit)
{
	struct pod_spec p;
	struct cerr e = {0};
	const struct unit_spec *u;
	char *fp;

	if (parse(json, &p, &e) < 0) {
		printf("# %s\n", e.msg);
		return xstrdup("(parse failed)");
	}
	u = find_unit(&p, unit);
	fp = xstrdup(u ? u->fingerprint : "(no unit)");
	pod_spec_free(&p);
	return fp;
}

static void test_fingerprints(void)
{
	static const struct {
		const char *path, *value;
	} changes[] = {
	    {"spec.units.0.image", "\"nginx:1.20\""},
	    {"spec.units.0.env.0.value", "\"bye\""},
	    {"spec.units.0.imagePullPolicy", "\"Always\""},
	    {"spec.units.0.resources.Limits", "{\"memory\":\"1Gi\"}"},
	    {"spec.units.0.stdin", "true"},
	    {"spec.units.0.livenessProbe.periodSeconds", "16"},
	    {"spec.units.0.ports.0.protocol", "\"UDP\""},
	    {"spec.units.0.volumeMounts.0.readOnly", "true"},
	    {"spec.units.0.terminationMessagePath", NULL},
	    {"spec.units.0.args.2", "\"daemon on;\""},
	    {"spec.units.0.securityContext.capabilities.drop", "[]"},
	    {"spec.units.0.future", "1"},
	};
	cleanup_free char *n0 = fp_of(kip_pod, "nginx");
	cleanup_free char *s0 = fp_of(kip_pod, "sidecar");
	cleanup_free char *i0 = fp_of(kip_pod, "init-db");
	json_t *doc = json_loads(kip_pod, 0, NULL);
	cleanup_free char *sorted =
	    json_dumps(doc, JSON_SORT_KEYS | JSON_INDENT(3));

	json_decref(doc);
	ok(strcmp(n0, s0) && strcmp(n0, i0),
	   "units have distinct fingerprints");
	for (size_t i = 0; i < ARRAY_SIZE(changes); i++) {
		cleanup_free char *j =
		    mutate(kip_pod, changes[i].path, changes[i].value);
		cleanup_free char *n1 = fp_of(j, "nginx");
		cleanup_free char *s1 = fp_of(j, "sidecar");
		cleanup_free char *i1 = fp_of(j, "init-db");

		ok(strcmp(n0, n1) != 0, "%s changes nginx's fingerprint",
		   changes[i].path);
		ok(!strcmp(s0, s1) && !strcmp(i0, i1), "… and no other unit's");
	}
	{
		cleanup_free char *j =
		    mutate(kip_pod, "spec.units.1.command.2", "\"sleep 9\"");
		cleanup_free char *n1 = fp_of(j, "nginx");
		cleanup_free char *s1 = fp_of(j, "sidecar");
		ok(!strcmp(n0, n1) && strcmp(s0, s1),
		   "a sidecar change changes only the sidecar's");
	}
	{
		cleanup_free char *j =
		    mutate(kip_pod, "spec.hostname", "\"x\"");
		cleanup_free char *n1 = fp_of(j, "nginx");
		ok(!strcmp(n0, n1), "a pod-level change leaves units alone");
	}
	{
		cleanup_free char *n1 = fp_of(sorted, "nginx");
		cleanup_free char *i1 = fp_of(sorted, "init-db");
		ok(!strcmp(n0, n1) && !strcmp(i0, i1),
		   "key order and whitespace do not matter");
	}
}

/* env and volumeMounts in another order (the controller rebuilds them from
 * Go maps) leave the fingerprint alone; a real change does not. */
static void test_fingerprint_order(void)
{
	cleanup_free char *n0 = fp_of(kip_pod, "nginx");
	cleanup_free char *env =
	    mutate(kip_pod, "spec.units.0.env",
		   "[{\"name\":\"EMPTY\"},{\"name\":\"GREETING\",\"value\":"
		   "\"hello\"}]");
	cleanup_free char *both = mutate(
	    env, "spec.units.0.volumeMounts",
	    "[{\"name\":\"etchosts\",\"mountPath\":\"/etc/hosts\"},"
	    "{\"name\":\"resolvconf\",\"mountPath\":\"/etc/resolv.conf\"},"
	    "{\"name\":\"config\",\"mountPath\":\"/etc/nginx/conf.d\","
	    "\"subPath\":\"conf.d\"},{\"name\":\"data\",\"mountPath\":"
	    "\"/usr/share/nginx/html\"}]");
	cleanup_free char *dup =
	    mutate(kip_pod, "spec.units.0.env",
		   "[{\"name\":\"A\",\"value\":\"1\"},{\"name\":\"A\","
		   "\"value\":\"2\"}]");
	cleanup_free char *dup2 =
	    mutate(kip_pod, "spec.units.0.env",
		   "[{\"name\":\"A\",\"value\":\"2\"},{\"name\":\"A\","
		   "\"value\":\"1\"}]");
	cleanup_free char *n1 = fp_of(env, "nginx");
	cleanup_free char *n2 = fp_of(both, "nginx");
	cleanup_free char *d1 = fp_of(dup, "nginx");
	cleanup_free char *d2 = fp_of(dup2, "nginx");

	ok(!strcmp(n0, n1), "env in another order: same fingerprint");
	ok(!strcmp(n0, n2), "volumeMounts in another order: same fingerprint");
	ok(strcmp(d1, d2) != 0,
	   "a name given twice keeps its order (the later one wins)");
}

static void test_unit_resources(void)
{
	struct pod_spec p;
	struct cerr e = {0};
	cleanup_free char *k =
	    mutate(kip_pod, "spec.units.0.resources",
		   "{\"Limits\":{\"memory\":\"256Mi\",\"cpu\":\"500m\"},"
		   "\"Requests\":{\"memory\":\"1Gi\"}}");
	cleanup_free char *l =
	    mutate(kip_pod, "spec.units.0.resources",
		   "{\"limits\":{\"memory\":1048576,\"cpu\":\"1.5\"}}");
	cleanup_free char *r = mutate(kip_pod, "spec.units.0.resources",
				      "{\"Requests\":{\"memory\":\"1Gi\"}}");
	cleanup_free char *bad = mutate(kip_pod, "spec.units.0.resources",
					"{\"Limits\":{\"memory\":\"lots\"}}");

	ok(parse(k, &p, &e) == 0 && p.units[0].memory_limit == 256 << 20 &&
	       p.units[0].cpu_millis == 500 && p.units[1].memory_limit == 0,
	   "Kip's Limits: memory and cpu of that unit only (%s)", e.msg);
	pod_spec_free(&p);
	ok(parse(l, &p, &e) == 0 && p.units[0].memory_limit == 1048576 &&
	       p.units[0].cpu_millis == 1500,
	   "the Kubernetes spelling, a number (%s)", e.msg);
	pod_spec_free(&p);
	ok(parse(r, &p, &e) == 0 && p.units[0].memory_limit == 0 &&
	       p.memory_limit == 1 << 30,
	   "requests and spec.resources are no unit's limit");
	pod_spec_free(&p);
	ok(parse(bad, &p, &e) < 0 && e.code == EINVAL &&
	       strstr(e.msg, "spec.units[0].resources.Limits.memory"),
	   "a bad limit is refused, naming it (%s)", e.msg);
}

#define T0 (1795326060LL * 1000000000LL) /* 2026-11-22T05:41:00Z */
/* The status structs hold char *; the serializer only reads them. */
#define S(lit) ((char *)(lit))

/* The set of keys of o is exactly the NULL-terminated list. */
static bool has_keys(const json_t *o, const char *const *keys)
{
	size_t n = 0;

	if (!json_is_object(o))
		return false;
	for (; keys[n]; n++)
		if (!json_object_get(o, keys[n]))
			return false;
	return json_object_size(o) == n;
}

static const char *const unit_keys[] = {
    "name",	    "image", "ready",	  "started",
    "restartCount", "state", "lastState", NULL};
static const char *const term_keys[] = {"exitCode", "finishedAt", "reason",
					"message",  "startedAt",  NULL};

static void check_unit0(const json_t *u)
{
	json_t *run = json_object_get(json_object_get(u, "state"), "running");
	json_t *term =
	    json_object_get(json_object_get(u, "lastState"), "terminated");

	ok(has_keys(u, unit_keys), "UnitStatus has exactly its seven keys");
	is_str(json_string_value(json_object_get(u, "name")), "nginx", "name");
	ok(json_is_true(json_object_get(u, "ready")), "ready true");
	ok(json_is_true(json_object_get(u, "started")), "started true");
	ok(json_integer_value(json_object_get(u, "restartCount")) == 2,
	   "restartCount");
	ok(json_object_size(json_object_get(u, "state")) == 1 &&
	       has_keys(run, (const char *const[]){"startedAt", NULL}),
	   "state holds running{startedAt} only");
	is_str(json_string_value(json_object_get(run, "startedAt")),
	       "2026-11-22T05:41:00Z", "startedAt: RFC 3339 UTC, seconds");
	ok(has_keys(term, term_keys), "terminated has its five keys");
	ok(json_integer_value(json_object_get(term, "exitCode")) == 137,
	   "exitCode 137");
	is_str(json_string_value(json_object_get(term, "reason")), "OOMKilled",
	       "reason");
	is_str(json_string_value(json_object_get(term, "message")),
	       "bad\xef\xbf\xbd\xef\xbf\xbdutf8",
	       "invalid UTF-8 becomes U+FFFD");
	is_str(json_string_value(json_object_get(term, "finishedAt")),
	       "2026-11-22T05:40:30Z", "finishedAt");
}

static void check_units12(const json_t *a)
{
	json_t *u1 = json_array_get(a, 1), *u2 = json_array_get(a, 2);
	json_t *w1 = json_object_get(json_object_get(u1, "state"), "waiting");
	json_t *w2 = json_object_get(json_object_get(u2, "state"), "waiting");

	ok(json_is_null(json_object_get(u1, "started")), "started null (-1)");
	ok(json_is_false(json_object_get(u2, "started")), "started false");
	is_str(json_string_value(json_object_get(u1, "image")), "",
	       "NULL image is \"\"");
	ok(has_keys(w1, (const char *const[]){"reason", "startFailure", NULL}),
	   "waiting has reason and startFailure");
	ok(json_is_false(json_object_get(w1, "startFailure")),
	   "startFailure false");
	ok(json_is_true(json_object_get(w2, "startFailure")),
	   "startFailure true");
	is_str(json_string_value(json_object_get(w2, "reason")), "ErrImagePull",
	       "waiting reason");
	ok(json_object_size(json_object_get(u1, "lastState")) == 0,
	   "STATE_NONE is {}");
	ok(json_integer_value(json_object_get(u2, "restartCount")) == 0,
	   "a negative restart count is 0");
}

static void check_usage(const json_t *u)
{
	static const struct {
		const char *key;
		bool integer;
		double v;
	} want[] = {
	    {"cpu", true, 12},
	    {"memory", false, 0.5},
	    {"disk", true, 1000},
	    {"netRx", true, -3},
	    {"fsUsed", true, 12},
	    {"fsCapacity", false, 1.5e300},
	    {"nginx.cpuUsage", true, 123456789012345.0},
	    {"nginx.memoryUsage", false, 18446744073709551616.0},
	    {"m\xef\xbf\xbd", true, 1},
	};

	ok(json_object_size(u) == ARRAY_SIZE(want),
	   "resourceUsage keeps the %zu numbers (got %zu)", ARRAY_SIZE(want),
	   json_object_size(u));
	for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
		json_t *v = json_object_get(u, want[i].key);
		ok(want[i].integer ? json_is_integer(v) : json_is_real(v),
		   "%s is an %s", want[i].key,
		   want[i].integer ? "integer" : "real");
		ok(json_number_value(v) == want[i].v, "%s value", want[i].key);
	}
}

static struct unit_status status_units[3];
static struct unit_status status_init[1];
static struct kv status_usage[] = {
    {S("cpu"), S("12")},
    {S("memory"), S("0.5")},
    {S("disk"), S("1e3")},
    {S("netRx"), S("-3")},
    {S("fsUsed"), S("12.0")},
    {S("fsCapacity"), S("1.5e300")},
    {S("nginx.cpuUsage"), S("123456789012345")},
    {S("nginx.memoryUsage"), S("18446744073709551616")},
    {S("m\xff"), S("1")},
    {S("bad"), S("abc")},
    {S("nan"), S("nan")},
    {S("inf"), S("inf")},
    {S("hex"), S("0x10")},
    {S("empty"), S("")},
    {S("null"), NULL},
    {NULL, S("5")},
    {S("spaced"), S(" 5")},
};

static void fill_status(struct pod_status *s)
{
	struct unit_status *u = status_units;
	char *msg = S("bad\xff\xfeutf8");

	memset(s, 0, sizeof(*s));
	u[0] = (struct unit_status){.name = S("nginx"),
				    .image = S("nginx:1.19"),
				    .ready = true,
				    .started = 1,
				    .restart_count = 2};
	u[0].state = (struct unit_state){.kind = STATE_RUNNING,
					 .started_at_ns = T0 + 999999999};
	u[0].last_state =
	    (struct unit_state){.kind = STATE_TERMINATED,
				.exit_code = 137,
				.reason = S("OOMKilled"),
				.message = msg,
				.started_at_ns = T0 - 60000000000LL,
				.finished_at_ns = T0 - 30000000000LL};
	u[1] = (struct unit_status){.name = S("side"), .started = -1};
	u[1].state = (struct unit_state){.kind = STATE_WAITING,
					 .reason = S("ContainerCreating")};
	u[2] = (struct unit_status){.name = S("bad"),
				    .image = S("x"),
				    .started = 0,
				    .restart_count = -5};
	u[2].state = (struct unit_state){.kind = STATE_WAITING,
					 .reason = S("ErrImagePull"),
					 .start_failure = true};
	status_init[0] = (struct unit_status){
	    .name = S("init-db"), .image = S("b"), .started = 0};
	status_init[0].state = (struct unit_state){.kind = STATE_TERMINATED,
						   .reason = S("Completed"),
						   .finished_at_ns = -1};
	s->units = u;
	s->n_units = 3;
	s->init_units = status_init;
	s->n_init_units = 1;
	s->usage = status_usage;
	s->n_usage = ARRAY_SIZE(status_usage);
	s->pod_ip = S("10.0.1.23");
}

static void test_status(void)
{
	struct pod_status s;
	cleanup_free char *txt = NULL;
	json_t *root, *a, *term;

	fill_status(&s);
	txt = wire_status_json(&s);
	root = json_loads(txt, 0, NULL);
	ok(has_keys(root,
		    (const char *const[]){"unitStatus", "initUnitStatus",
					  "resourceUsage", "podIP", NULL}),
	   "PodStatusReply has exactly its four keys");
	a = json_object_get(root, "unitStatus");
	ok(json_array_size(a) == 3, "three unit statuses");
	check_unit0(json_array_get(a, 0));
	check_units12(a);
	term = json_object_get(
	    json_object_get(
		json_array_get(json_object_get(root, "initUnitStatus"), 0),
		"state"),
	    "terminated");
	ok(has_keys(term, term_keys) &&
	       json_is_null(json_object_get(term, "startedAt")),
	   "a zero time is null");
	is_str(json_string_value(json_object_get(term, "finishedAt")),
	       "1969-12-31T23:59:59Z", "a time before 1970 rounds down");
	is_str(json_string_value(json_object_get(term, "message")), "",
	       "NULL message is \"\"");
	ok(json_integer_value(json_object_get(term, "exitCode")) == 0,
	   "exitCode 0");
	check_usage(json_object_get(root, "resourceUsage"));
	is_str(json_string_value(json_object_get(root, "podIP")), "10.0.1.23",
	       "podIP");
	json_decref(root);
}

static void test_status_exact(void)
{
	struct unit_status u = {
	    .name = S("a"), .image = S("b"), .ready = true, .started = 1};
	struct kv junk = {S("cpu"), S("n/a")};
	struct pod_status s = {0};
	cleanup_free char *empty = wire_status_json(&s);
	cleanup_free char *one = NULL, *nousage = NULL;

	is_str(empty,
	       "{\"unitStatus\":[],\"initUnitStatus\":[],\"podIP\":\"\"}",
	       "an empty status: [] for the lists, no resourceUsage");
	u.state.kind = STATE_RUNNING;
	u.state.started_at_ns = T0;
	s.units = &u;
	s.n_units = 1;
	s.pod_ip = S("10.0.0.1");
	s.usage = &junk;
	s.n_usage = 1;
	one = wire_status_json(&s);
	is_str(
	    one,
	    "{\"unitStatus\":[{\"name\":\"a\",\"image\":\"b\",\"ready\":true,"
	    "\"started\":true,\"restartCount\":0,\"state\":{\"running\":{"
	    "\"startedAt\":\"2026-11-22T05:41:00Z\"}},\"lastState\":{}}],"
	    "\"initUnitStatus\":[],\"podIP\":\"10.0.0.1\"}",
	    "one running unit, byte for byte; no usage when nothing is a "
	    "number");
	u.state.kind = STATE_NONE;
	u.started = -1;
	s.n_usage = 0;
	nousage = wire_status_json(&s);
	ok(strstr(nousage, "\"started\":null,") &&
	       strstr(nousage, "\"state\":{},\"lastState\":{}"),
	   "started null, empty states");
}

/* The status built from a parsed pod survives a jansson round trip. */
static void test_status_from_pod(void)
{
	struct pod_spec p;
	struct cerr e = {0};
	struct unit_status us[2] = {{0}};
	struct pod_status s = {0};
	cleanup_free char *txt = NULL;
	json_t *root;

	if (parse(kip_pod, &p, &e) < 0)
		abort();
	for (size_t i = 0; i < 2; i++) {
		us[i].name = p.units[i].name;
		us[i].image = p.units[i].image;
		us[i].started = -1;
	}
	s.units = us;
	s.n_units = 2;
	s.pod_ip = p.pod_ip;
	txt = wire_status_json(&s);
	root = json_loads(txt, 0, NULL);
	is_str(json_string_value(json_object_get(
		   json_array_get(json_object_get(root, "unitStatus"), 1),
		   "image")),
	       "busybox:1.32", "round trip of a parsed pod's units");
	json_decref(root);
	pod_spec_free(&p);
}

/* namespaceOptions with the CRI's meanings (agent/sup/podns.c): absent, each
 * unit its own PID and IPC namespace; present, a key left out is POD (0,
 * Go's zero: Kip's omitempty drops it). */
static void test_namespace_options(void)
{
	static const char *const docs[] = {
	    "{\"spec\":{\"securityContext\":{\"namespaceOptions\":null}}}",
	    "{\"spec\":{\"securityContext\":{\"namespaceOptions\":"
	    "{\"network\":2}}}}",
	    "{\"spec\":{\"securityContext\":{\"namespaceOptions\":"
	    "{\"pid\":2,\"ipc\":2}}}}",
	};
	static const enum ns_mode want[][3] = {
	    {NS_POD, NS_CONTAINER, NS_CONTAINER},
	    {NS_NODE, NS_POD, NS_POD},
	    {NS_POD, NS_NODE, NS_NODE},
	};

	for (size_t i = 0; i < ARRAY_SIZE(docs); i++) {
		struct pod_spec p;
		struct cerr e = {0};

		ok(parse(docs[i], &p, &e) == 0 && p.ns_network == want[i][0] &&
		       p.ns_pid == want[i][1] && p.ns_ipc == want[i][2],
		   "namespaceOptions %zu: %d %d %d (%s)", i, p.ns_network,
		   p.ns_pid, p.ns_ipc, e.msg);
		pod_spec_free(&p);
	}
}

int main(void)
{
	test_kip_pod();
	test_defaults();
	test_namespace_options();
	test_quantities();
	test_size_limits();
	test_probe_ports();
	test_drop_spellings();
	test_unknown_fields();
	test_errors();
	test_tolerated();
	test_bad_documents();
	test_caps();
	test_secrets();
	test_secret_caps();
	test_fingerprints();
	test_fingerprint_order();
	test_unit_resources();
	test_status();
	test_status_exact();
	test_status_from_pod();
	return tap_done();
}
