// SPDX-License-Identifier: Apache-2.0
/* run, convert and delete: a Kubernetes Pod manifest dispatched to a cell
 * the way Kip's pod controller does it (wait for ping, deploy the
 * packages, updatepod), then its status followed until it runs or fails. */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base64.h"
#include "cleanup.h"
#include "ctl-internal.h"
#include "fsutil.h"
#include "util.h"

#define OBJ_FILE_MAX (16u << 20)

struct run_opts {
	const char *manifest;
	json_t *objects; /* ConfigMaps, Secrets and Services */
	bool wait, quiet;
	int64_t timeout_s;
	const char *prices, *region, *save_pkgs;
	const char *image_arch,
	    *insecure; /* --image-arch, --insecure-registry */
	struct convert_opts conv;
	char *host_resolv;
};

static const char run_usage[] =
    "usage: cellctl run POD.yaml --cell ADDR [--cell ADDR…] [options]\n"
    "       cellctl convert POD.yaml [options]   (print the PodParameters)\n"
    "  -f, --filename FILE       ConfigMap, Secret or Service manifests\n"
    "                            (YAML/JSON, a v1 List too): the pod's\n"
    "                            volumes and env, its service variables\n"
    "  --kubernetes-service IP[:PORT]  the API server's Service address\n"
    "                            (default/kubernetes, port 443): sets\n"
    "                            KUBERNETES_SERVICE_HOST, KUBERNETES_PORT…\n"
    "  --from-literal configmap|secret/NAME/KEY=VALUE   (repeatable)\n"
    "  --from-file configmap|secret/NAME/KEY=PATH       (repeatable)\n"
    "  (several --cell: the pod goes to each cell at once)\n"
    "  --wait                    follow until the pod completes, not only\n"
    "                            until it runs\n"
    "  --timeout SECONDS         give up after this long (120)\n"
    "  --node-name NAME          PodParameters.NodeName (cellctl)\n"
    "  --pod-ip IP               PodParameters.PodIP and /etc/hosts\n"
    "  --cluster-dns IP          nameserver for dnsPolicy ClusterFirst\n"
    "  --cluster-domain D        (cluster.local)\n"
    "  --resolv-conf FILE        the \"node\" resolv.conf (/etc/resolv.conf)\n"
    "  --prices FILE --region R  instance data in Kip's JSON format\n"
    "                            (default: the us-east-1 table shipped)\n"
    "  --default-instance-type T (t3.nano)\n"
    "  --image-arch amd64|arm64|amd64,arm64|registry  the architectures\n"
    "                            every image of the pod has (registry: ask\n"
    "                            its registry); the instance type is of one\n"
    "                            of them (default: amd64)\n"
    "  --insecure-registry H:P,… registries asked over plain HTTP\n"
    "  -o json|yaml              convert's output format (json)\n"
    "  --packages DIR            convert: also write each deploy package\n"
    "                            as DIR/<name>.tar.gz\n"
    "  --kip                     exactly what Kip sends: none of the\n"
    "                            extensions (lifecycle, fsGroup, downward\n"
    "                            API volumes, …; docs/agent-wire.md)\n";

enum {
	R_LIT = 1,
	R_FILE,
	R_WAIT,
	R_TIMEOUT,
	R_NODE,
	R_PODIP,
	R_DNS,
	R_DOMAIN,
	R_RESOLV,
	R_PRICES,
	R_REGION,
	R_DEFTYPE,
	R_QUIET,
	R_PKGS,
	R_KUBESVC,
	R_KIP,
	R_IMGARCH,
	R_INSECURE
};

/* The shipped table: <bindir>/../share/cell/aws-us-east-1.json. */
static char *default_prices(void)
{
	char exe[PATH_MAX];
	ssize_t n;
	const char *env = getenv("CELLCTL_PRICES");

	if (env && *env)
		return xstrdup(env);
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return NULL;
	exe[n] = 0;
	return xasprintf("%s/../share/cell/aws-us-east-1.json", dirname(exe));
}

static json_t *find_or_add(json_t *objects, const char *kind, const char *name)
{
	json_t *o;
	size_t i;

	json_array_foreach(objects, i, o)
	{
		if (!strcmp(json_string_value(json_object_get(o, "kind")) ?: "",
			    kind) &&
		    !strcmp(json_string_value(json_object_get(
				json_object_get(o, "metadata"), "name"))
				?: "",
			    name))
			return o;
	}
	o = json_pack("{s:s,s:s,s:{s:s}}", "apiVersion", "v1", "kind", kind,
		      "metadata", "name", name);
	json_array_append_new(objects, o);
	return o;
}

static json_t *map_at(json_t *o, const char *k)
{
	json_t *m = json_object_get(o, k);

	if (!json_is_object(m)) {
		m = json_object();
		json_object_set_new(o, k, m);
	}
	return m;
}

/* "configmap|secret/NAME/KEY=VALUE" (from_file: VALUE is a path). */
static int add_literal(json_t *objects, const char *spec, bool from_file,
		       struct cerr *e)
{
	cleanup_free char *s = xstrdup(spec);
	char *n1 = strchr(s, '/'), *n2 = n1 ? strchr(n1 + 1, '/') : NULL;
	char *eq = n2 ? strchr(n2 + 1, '=') : NULL;
	bool secret;
	json_t *o;
	struct buf b;

	if (!eq)
		return cerr_set(e, EINVAL,
				"usage: --from-%s KIND/NAME/KEY=%s, not %s",
				from_file ? "file" : "literal",
				from_file ? "PATH" : "VALUE", spec);
	*n1 = *n2 = *eq = 0;
	if (!strcasecmp(s, "configmap"))
		secret = false;
	else if (!strcasecmp(s, "secret"))
		secret = true;
	else
		return cerr_set(
		    e, EINVAL, "usage: the kind is configmap or secret, not %s",
		    s);
	o = find_or_add(objects, secret ? "Secret" : "ConfigMap", n1 + 1);
	if (!from_file) {
		json_object_set_new(map_at(o, secret ? "stringData" : "data"),
				    n2 + 1, json_string(eq + 1));
		return 0;
	}
	buf_init(&b, OBJ_FILE_MAX);
	if (fs_read_file(eq + 1, &b, e) < 0) {
		buf_free(&b);
		return cerr_prefix(e, "--from-file %s", eq + 1);
	}
	cleanup_free char *b64 = b64_encode_str(b.data ? b.data : "", b.len);
	json_object_set_new(map_at(o, secret ? "data" : "binaryData"), n2 + 1,
			    json_string(b64));
	buf_free(&b);
	return 0;
}

static int add_objects(json_t *objects, const char *path, struct cerr *e)
{
	json_t *j = kdoc_load(path, e), *items, *it;
	size_t i;

	if (!j)
		return -1;
	items = json_object_get(j, "items");
	if (json_is_array(items)) {
		json_array_foreach(items, i, it)
		{
			json_array_append(objects, it);
		}
	} else {
		json_array_append(objects, j);
	}
	json_decref(j);
	return 0;
}

/* --kubernetes-service IP[:PORT]: the Service every cluster has,
 * default/kubernetes, as the API server creates it (port "https", TCP).
 * An IPv6 address goes in brackets when it has a port. */
static int add_kube_service(json_t *objects, const char *arg, struct cerr *e)
{
	cleanup_free char *ip = NULL;
	const char *colon = strrchr(arg, ':');
	int64_t port = 443;

	if (arg[0] == '[') {
		const char *close = strchr(arg, ']');
		if (!close || (close[1] && close[1] != ':'))
			return cerr_set(e, EINVAL,
					"--kubernetes-service %s: "
					"bad address",
					arg);
		ip = xstrndup(arg + 1, (size_t)(close - arg - 1));
		colon = close[1] ? close + 1 : NULL;
	} else if (colon && strchr(arg, ':') != colon) {
		ip = xstrdup(arg); /* a bare IPv6 address */
		colon = NULL;
	} else {
		ip =
		    colon ? xstrndup(arg, (size_t)(colon - arg)) : xstrdup(arg);
	}
	if (colon && parse_int64(colon + 1, 1, 65535, &port, e) < 0)
		return cerr_prefix(e, "--kubernetes-service %s", arg);
	if (!*ip)
		return cerr_set(e, EINVAL,
				"--kubernetes-service %s: no address", arg);
	/* First in the list: the first default/kubernetes wins
	 * (getServiceEnvVarMap), so the flag beats one given with -f. */
	json_array_insert_new(
	    objects, 0,
	    json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s,s:[{s:s,s:I,s:s}]}}",
		      "apiVersion", "v1", "kind", "Service", "metadata", "name",
		      "kubernetes", "namespace", "default", "spec", "clusterIP",
		      ip, "ports", "name", "https", "port", (json_int_t)port,
		      "protocol", "TCP"));
	return 0;
}

static int run_opts_parse(int argc, char **argv, struct ctl_global *g,
			  struct run_opts *o, struct cerr *e)
{
	static const struct option lo[] = {
	    GLOBAL_OPTS,
	    {"filename", required_argument, NULL, 'f'},
	    {"from-literal", required_argument, NULL, R_LIT},
	    {"from-file", required_argument, NULL, R_FILE},
	    {"wait", no_argument, NULL, R_WAIT},
	    {"timeout", required_argument, NULL, R_TIMEOUT},
	    {"node-name", required_argument, NULL, R_NODE},
	    {"pod-ip", required_argument, NULL, R_PODIP},
	    {"cluster-dns", required_argument, NULL, R_DNS},
	    {"cluster-domain", required_argument, NULL, R_DOMAIN},
	    {"resolv-conf", required_argument, NULL, R_RESOLV},
	    {"prices", required_argument, NULL, R_PRICES},
	    {"region", required_argument, NULL, R_REGION},
	    {"default-instance-type", required_argument, NULL, R_DEFTYPE},
	    {"quiet", no_argument, NULL, R_QUIET},
	    {"packages", required_argument, NULL, R_PKGS},
	    {"kubernetes-service", required_argument, NULL, R_KUBESVC},
	    {"kip", no_argument, NULL, R_KIP},
	    {"image-arch", required_argument, NULL, R_IMGARCH},
	    {"insecure-registry", required_argument, NULL, R_INSECURE},
	    {NULL, 0, NULL, 0}};
	const char *resolv = "/etc/resolv.conf";
	int c, r = 0;

	o->objects = json_array();
	o->timeout_s = 120;
	o->region = "us-east-1";
	o->conv.node_name = "cellctl";
	o->conv.pod_ip = "";
	o->conv.cluster_domain = "cluster.local";
	o->conv.default_instance_type = "t3.nano";
	optind = 1;
	while (r == 0 && (c = ctl_getopt(argc, argv, "hf:o:q", lo, g)) != -1) {
		switch (c) {
		case G_HELP:
			fputs(run_usage, stdout);
			return 0;
		case 'f':
			r = add_objects(o->objects, optarg, e);
			break;
		case R_LIT:
			r = add_literal(o->objects, optarg, false, e);
			break;
		case R_FILE:
			r = add_literal(o->objects, optarg, true, e);
			break;
		case R_WAIT:
			o->wait = true;
			break;
		case R_TIMEOUT:
			r = parse_int64(optarg, 1, 86400, &o->timeout_s, e);
			break;
		case R_NODE:
			o->conv.node_name = optarg;
			break;
		case R_PODIP:
			o->conv.pod_ip = optarg;
			break;
		case R_DNS:
			o->conv.cluster_dns = optarg;
			break;
		case R_DOMAIN:
			o->conv.cluster_domain = optarg;
			break;
		case R_RESOLV:
			resolv = optarg;
			break;
		case R_PRICES:
			o->prices = optarg;
			break;
		case R_REGION:
			o->region = optarg;
			break;
		case R_DEFTYPE:
			o->conv.default_instance_type = optarg;
			break;
		case R_PKGS:
			o->save_pkgs = optarg;
			break;
		case R_KUBESVC:
			r = add_kube_service(o->objects, optarg, e);
			break;
		case R_KIP:
			o->conv.kip = true;
			break;
		case R_IMGARCH:
			o->image_arch = optarg;
			if (strcmp(optarg, "registry"))
				r = arch_bits_parse(optarg,
						    &o->conv.image_archs, e);
			break;
		case R_INSECURE:
			o->insecure = optarg;
			break;
		case 'q':
		case R_QUIET:
			o->quiet = true;
			break;
		default:
			return ctl_usage(run_usage);
		}
	}
	if (r < 0)
		return -2;
	if (argc - optind != 1)
		return ctl_usage(run_usage);
	o->manifest = argv[optind];
	struct buf b;
	buf_init(&b, 1 << 20);
	/* A missing resolv.conf is an empty one, as on a minimal host. */
	if (fs_read_file(resolv, &b, e) < 0 && e->code != ENOENT) {
		buf_free(&b);
		return -2;
	}
	cerr_clear(e);
	o->host_resolv = b.data ? buf_steal(&b, NULL) : xstrdup("");
	buf_free(&b);
	o->conv.host_resolv = o->host_resolv;
	return -1;
}

/* The architectures every image of the pod has, from their registries
 * (an image without a platform list counts as what its config says). */
static int pod_image_archs(const json_t *pod, const char *insecure,
			   unsigned *out, struct cerr *e)
{
	static const char *const lists[] = {"initContainers", "containers"};
	const json_t *spec = json_object_get(pod, "spec"), *c;
	size_t i;

	*out = ARCH_AMD64 | ARCH_ARM64;
	for (size_t l = 0; l < ARRAY_SIZE(lists); l++) {
		json_array_foreach(json_object_get(spec, lists[l]), i, c)
		{
			const char *img =
			    json_string_value(json_object_get(c, "image"));
			struct regplat p;
			if (!img)
				continue;
			if (regplat_query(img, insecure, 30000, &p, e) < 0)
				return -1;
			*out &= p.archs;
			if (!*out) {
				cerr_set(e, ENOEXEC,
					 "image %s has no platform a cell "
					 "runs with the pod's other images "
					 "(it has: %s)",
					 img, *p.list ? p.list : "none");
				regplat_free(&p);
				return -1;
			}
			regplat_free(&p);
		}
	}
	return 0;
}

static int convert_manifest(struct run_opts *o, struct converted *out,
			    struct cerr *e)
{
	cleanup_free char *def = o->prices ? NULL : default_prices();
	const char *prices = o->prices ? o->prices : def;
	struct inst_table t = {0};
	json_t *pod = kdoc_load(o->manifest, e);
	int r = -1;

	if (!pod)
		return -1;
	/* Without the shipped table (a build tree without share/), only
	 * pods that name their instance type or ask for nothing convert. */
	if (prices && (o->prices || fs_exists(prices)) &&
	    inst_table_load(prices, o->region, &t, e) < 0)
		goto out;
	o->conv.instances = &t;
	if (o->image_arch && !strcmp(o->image_arch, "registry") &&
	    pod_image_archs(pod, o->insecure, &o->conv.image_archs, e) < 0)
		goto out;
	if (pod_defaults(pod, e) == 0 &&
	    pod_convert(pod, o->objects, &o->conv, out, e) == 0)
		r = 0;
out:
	if (r < 0)
		cerr_prefix(e, "%s", o->manifest);
	inst_table_free(&t);
	json_decref(pod);
	return r;
}

static void run_opts_free(struct run_opts *o)
{
	json_decref(o->objects);
	free(o->host_resolv);
}

int cmd_convert(int argc, char **argv, struct ctl_global *g)
{
	struct run_opts o = {0};
	struct converted c;
	struct cerr e = {0};
	int r = run_opts_parse(argc, argv, g, &o, &e);

	if (r == -2)
		r = ctl_fail("convert", &e);
	if (r >= 0) {
		run_opts_free(&o);
		return r;
	}
	if (convert_manifest(&o, &c, &e) < 0) {
		run_opts_free(&o);
		return ctl_fail("convert", &e);
	}
	for (size_t i = 0; o.save_pkgs && i < c.n_pkgs; i++) {
		struct buf b;
		cleanup_free char *path =
		    xasprintf("%s/%s.tar.gz", o.save_pkgs, c.pkgs[i].name);
		if (pkg_build(&c.pkgs[i], &b, &e) < 0 ||
		    fs_mkdir_p(o.save_pkgs, 0755, &e) < 0 ||
		    fs_write_atomic(path, b.data, b.len, 0644, &e) < 0) {
			buf_free(&b);
			converted_free(&c);
			run_opts_free(&o);
			return ctl_fail("convert", &e);
		}
		buf_free(&b);
	}
	if (g->output && !strcmp(g->output, "yaml"))
		print_yaml(stdout, c.params);
	else
		print_json(stdout, c.params);
	converted_free(&c);
	run_opts_free(&o);
	return 0;
}

/* ---- run ---- */

static int wait_ping(struct ctl_cell *cell, uint64_t deadline, struct cerr *e)
{
	for (;;) {
		if (cell_ping(cell, e) == 0)
			return 0;
		if (now_ns() > deadline)
			return cerr_prefix(e, "the cell never answered ping");
		usleep(200000);
	}
}

static int deploy_all(struct ctl_cell *cell, const struct converted *c,
		      struct cerr *e)
{
	for (size_t i = 0; i < c->n_pkgs; i++) {
		struct buf b;
		int r = pkg_build(&c->pkgs[i], &b, e);
		if (r == 0)
			r = cell_deploy(cell, c->pod_name, c->pkgs[i].name,
					b.data, b.len, e);
		buf_free(&b);
		if (r < 0)
			return cerr_prefix(e, "deploy package %s",
					   c->pkgs[i].name);
	}
	return 0;
}

/* Follow status until the pod runs (or, with --wait, ends): 0 when it
 * runs or succeeded, -1 with the reason when it failed or time ran out. */
static int follow(struct ctl_cell *cell, const struct run_opts *o,
		  const char *pod, const char *policy, uint64_t deadline,
		  struct cerr *e)
{
	char reason[512], last[600] = "";

	for (;;) {
		json_t *st = cell_status(cell, e);
		const char *ph;
		char line[600];
		if (!st)
			return -1;
		ph = pod_phase(st, policy, reason, sizeof(reason));
		json_decref(st);
		snprintf(line, sizeof(line), "%s%s%s%s", ph,
			 *reason ? " (" : "", reason, *reason ? ")" : "");
		if (strcmp(line, last) && !o->quiet)
			printf("pod %s: %s\n", pod, line);
		fflush(stdout);
		snprintf(last, sizeof(last), "%s", line);
		if (!strcmp(ph, "Failed"))
			return cerr_set(e, EREMOTEIO, "pod %s failed: %s", pod,
					reason);
		if (!strcmp(ph, "Succeeded") ||
		    (!strcmp(ph, "Running") && !o->wait))
			return 0;
		if (now_ns() > deadline)
			return cerr_set(e, ETIMEDOUT,
					"pod %s: still %s after %llds", pod,
					line, (long long)o->timeout_s);
		usleep(250000);
	}
}

/* One cell's dispatch (a thread each when there are several). */
struct dispatch {
	const struct ctl_global *g;
	const struct run_opts *o;
	const struct converted *c;
	const char *addr;
	uint64_t deadline;
	struct cerr e;
	int r;
};

static void *dispatch_one(void *arg)
{
	struct dispatch *d = arg;
	struct ctl_cell cell = {0};
	const char *policy = json_string_value(json_object_get(
	    json_object_get(d->c->params, "spec"), "restartPolicy"));
	cleanup_free char *label = NULL;

	d->r = ctl_open_cell(d->g, d->addr, &cell, &d->e);
	if (d->r == 0)
		d->r = wait_ping(&cell, d->deadline, &d->e);
	if (d->r == 0)
		d->r = deploy_all(&cell, d->c, &d->e);
	if (d->r == 0)
		d->r = cell_update_pod(&cell, d->c->params, &d->e);
	if (d->r == 0) {
		label = d->g->n_cells > 1
			    ? xasprintf("%s on %s", d->c->pod_name, cell.host)
			    : xstrdup(d->c->pod_name);
		if (!d->o->quiet)
			printf("pod %s: dispatched to %s\n", label, cell.host);
		d->r = follow(&cell, d->o, label, policy ? policy : "Always",
			      d->deadline, &d->e);
	}
	if (d->r < 0 && d->g->n_cells > 1)
		cerr_prefix(&d->e, "%s", cell.host ? cell.host : d->addr);
	cell_free(&cell);
	return NULL;
}

int cmd_run(int argc, char **argv, struct ctl_global *g)
{
	struct run_opts o = {0};
	struct converted c = {0};
	struct cerr e = {0};
	struct dispatch *ds;
	pthread_t *th;
	size_t n;
	int r = run_opts_parse(argc, argv, g, &o, &e), failed = 0;

	if (r == -2)
		r = ctl_fail("run", &e);
	if (r >= 0) {
		run_opts_free(&o);
		return r;
	}
	if (convert_manifest(&o, &c, &e) < 0) {
		run_opts_free(&o);
		return ctl_fail("run", &e);
	}
	n = g->n_cells ? g->n_cells : 1;
	ds = xcalloc(n, sizeof(*ds));
	th = xcalloc(n, sizeof(*th));
	for (size_t i = 0; i < n; i++) {
		ds[i] = (struct dispatch){
		    .g = g,
		    .o = &o,
		    .c = &c,
		    .addr = g->n_cells ? g->cells[i] : NULL,
		    .deadline =
			now_ns() + (uint64_t)o.timeout_s * 1000000000ull};
		if (n == 1 ||
		    pthread_create(&th[i], NULL, dispatch_one, &ds[i]) != 0) {
			dispatch_one(&ds[i]);
			th[i] = 0;
		}
	}
	for (size_t i = 0; i < n; i++) {
		if (th[i])
			pthread_join(th[i], NULL);
		if (ds[i].r < 0) {
			ctl_fail("run", &ds[i].e);
			failed++;
		}
	}
	free(ds);
	free(th);
	converted_free(&c);
	run_opts_free(&o);
	return failed ? EXIT_REMOTE : 0;
}

int cmd_delete(int argc, char **argv, struct ctl_global *g)
{
	static const char usage[] =
	    "usage: cellctl delete --cell ADDR (POD.yaml | --pod NS_NAME) "
	    "[--grace S]\n"
	    "  stop the pod's units: updatepod with no units; --grace sets\n"
	    "  terminationGracePeriodSeconds (the agent's default otherwise)\n";
	static const struct option lo[] = {
	    GLOBAL_OPTS,
	    {"pod", required_argument, NULL, 'p'},
	    {"grace", required_argument, NULL, 'g'},
	    {0}};
	const char *pod = NULL;
	int64_t grace = -1;
	cleanup_free char *owned = NULL;
	struct ctl_cell cell;
	struct cerr e = {0};
	json_t *p;
	int c, r;

	optind = 1;
	while ((c = ctl_getopt(argc, argv, "ho:", lo, g)) != -1) {
		if (c == G_HELP)
			return fputs(usage, stdout), 0;
		if (c == 'p')
			pod = optarg;
		else if (c != 'g' ||
			 parse_int64(optarg, 0, 86400, &grace, &e) < 0)
			return ctl_usage(usage);
	}
	if (!pod && argc - optind == 1) {
		json_t *m = kdoc_load(argv[optind], &e);
		if (!m || pod_defaults(m, &e) < 0) {
			json_decref(m);
			return ctl_fail("delete", &e);
		}
		json_t *md = json_object_get(m, "metadata");
		owned = xasprintf(
		    "%s_%s",
		    json_string_value(json_object_get(md, "namespace")) ?: "",
		    json_string_value(json_object_get(md, "name")) ?: "");
		pod = owned;
		json_decref(m);
	}
	if (!pod)
		return ctl_usage(usage);
	if (ctl_open_cell(g, NULL, &cell, &e) < 0)
		return ctl_fail("delete", &e);
	p = json_pack("{s:n,s:{},s:{s:s,s:s,s:n,s:n,s:n,s:{s:s}},s:{},s:s,"
		      "s:s,s:s,s:s}",
		      "secrets", "credentials", "spec", "phase", "Running",
		      "restartPolicy", "Always", "units", "initUnits",
		      "imagePullSecrets", "spot", "policy", "Never",
		      "Annotations", "PodName", pod, "NodeName", "cellctl",
		      "PodIP", "", "PodHostname", "");
	if (grace >= 0)
		json_object_set_new(json_object_get(p, "spec"),
				    "terminationGracePeriodSeconds",
				    json_integer(grace));
	r = cell_update_pod(&cell, p, &e);
	json_decref(p);
	cell_free(&cell);
	return r < 0 ? ctl_fail("delete", &e) : 0;
}
