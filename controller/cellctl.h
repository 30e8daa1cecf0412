// SPDX-License-Identifier: Apache-2.0
/* cellctl's library: the controller's side of the cell contract (WIRE.md).
 * The PKI the controller makes, a mutual-TLS client for one cell (libcurl),
 * websocket streams over it, the Kubernetes Pod -> PodParameters conversion
 * as Kip's pkg/server/convert.go does it, deploy packages, instance
 * selection and user data. main.c parses options and prints; nothing here
 * prints or exits. */
#ifndef CELL_CELLCTL_H
#define CELL_CELLCTL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "err.h"
#include "quantity.h"

#define CTL_PORT 6421
#define CTL_SERVER_NAME "MilpaNode"

/* ---- pki.c: the controller's PKI (ECDSA P-256, as Kip's pkg/certs) ---- */

/* DIR/ca.crt, ca.key, client.crt, client.key (keys 0600, SEC1 PEM). An
 * existing CA in DIR is kept; EEXIST when force is false and one exists. */
int pki_init(const char *dir, bool force, struct cerr *e);
/* A cell's server certificate signed by DIR's CA: DIR/server.crt and
 * server.key, and, when boot_dir is set, ca.crt, server.crt and
 * server.key copied into it (the cell's boot directory). */
int pki_cell(const char *dir, const char *boot_dir, struct cerr *e);

/* ---- client.c: one cell over mutual TLS (libcurl) ---- */

struct ctl_cell {
	char *host; /* as given: an IPv4/IPv6 address or a name */
	int port;
	char *ca, *cert, *key;
	void *curl; /* CURL *, kept alive between calls like Kip's client */
	char *base; /* https://MilpaNode:<port>/ */
	char *connect_to;
	long timeout_ms; /* per call; Kip: 120 s */
};

/* Address "host", "host:port", "[v6]:port"; pki_dir holds ca.crt,
 * client.crt, client.key. */
int cell_init(struct ctl_cell *c, const char *addr, const char *pki_dir,
	      struct cerr *e);
void cell_free(struct ctl_cell *c);
/* GET or POST rest/v1/<path>. *status gets the HTTP status; body into out.
 * Transport failures are errors; a non-200 reply is left to the caller. */
int cell_request(struct ctl_cell *c, const char *method, const char *path,
		 const char *ctype, const void *body, size_t len,
		 long timeout_ms, struct buf *out, long *status,
		 struct cerr *e);
/* GET and insist on 200; a non-200 becomes an error with the body. */
int cell_get_ok(struct ctl_cell *c, const char *path, long timeout_ms,
		struct buf *out, struct cerr *e);
int cell_ping(struct ctl_cell *c, struct cerr *e);
/* GET status parsed (Kip does not check the status code). */
json_t *cell_status(struct ctl_cell *c, struct cerr *e);
int cell_update_pod(struct ctl_cell *c, const json_t *params, struct cerr *e);
/* POST deploy/<pod>/<name>: multipart field "package". */
int cell_deploy(struct ctl_cell *c, const char *pod, const char *name,
		const void *pkg, size_t len, struct cerr *e);
/* Set up a curl handle for this cell (TLS, name check, timeouts). */
int cell_curl_setup(struct ctl_cell *c, void *curl, const char *url,
		    struct cerr *e);

/* ---- ws.c: websocket streams (exec, attach, port-forward, logs) ---- */

struct ws;
enum { WS_MSG = 1, WS_NONE = 0, WS_CLOSED = 2 };

/* Open rest/v1/<path> as a websocket (connect, TLS, upgrade). */
int ws_open(struct ctl_cell *c, const char *path, struct ws **out,
	    struct cerr *e);
void ws_close(struct ws *w);
int ws_fd(const struct ws *w);
/* A raw text message (the first one: the parameters JSON). */
int ws_send_text(struct ws *w, const char *p, size_t n, struct cerr *e);
/* A framed message: '0'+ch then base64 of the payload. */
int ws_send_chan(struct ws *w, int ch, const void *p, size_t n, struct cerr *e);
/* The next data message, decoded: WS_MSG with *ch and payload (reset
 * first), WS_NONE when nothing came within timeout_ms (0: do not wait),
 * WS_CLOSED when the peer closed; -1 on error. Pings are answered here. */
int ws_recv(struct ws *w, int timeout_ms, int *ch, struct buf *payload,
	    struct cerr *e);

/* ---- kdoc.c: YAML or JSON documents into jansson ---- */

/* YAML (1.1 scalars, as sigs.k8s.io/yaml reads them) or JSON text into one
 * JSON value; the first document only. */
json_t *kdoc_parse(const char *text, size_t len, struct cerr *e);
json_t *kdoc_load(const char *path, struct cerr *e);

/* ---- select.c: Kip's instance selection ---- */

/* CPU architectures, as bits: what an instance type is, what a pod's
 * images all have. */
enum { ARCH_AMD64 = 1u, ARCH_ARM64 = 2u };
/* "amd64"/"x86_64" → ARCH_AMD64, "arm64"/"aarch64" → ARCH_ARM64, else 0. */
unsigned arch_bit(const char *name);
/* "amd64,arm64" → the bits; -1 on an unknown name. */
int arch_bits_parse(const char *list, unsigned *out, struct cerr *e);
/* The bits' names, "amd64", "arm64" or "amd64, arm64" (static). */
const char *arch_bits_name(unsigned bits);

struct inst {
	char *type;
	float price, memory, cpu, baseline;
	int gpu;
	json_t *gpu_types; /* name -> count; borrowed from the table */
	bool burstable;
	unsigned arch; /* "architecture", ARCH_AMD64 when absent (Kip's) */
};
struct inst_table {
	json_t *root;
	struct inst *v;
	size_t n;
};
/* Kip's JSON format: {"<region>": [{instanceType, price, memory, cpu,
 * gpu, supportedGPUTypes, burstable, baseline}, …]}. */
int inst_table_load(const char *path, const char *region, struct inst_table *t,
		    struct cerr *e);
int inst_table_parse(const char *text, size_t len, const char *region,
		     struct inst_table *t, struct cerr *e);
void inst_table_free(struct inst_table *t);
struct select_req {
	const char *cpu, *memory, *gpu; /* ResourceSpec strings or NULL */
	const char *instance_type;	/* exact, glob or NULL */
	bool dedicated_cpu;
	int sustained_cpu; /* -1 unset, 0 false, 1 true */
	const char *default_type;
	/* The architectures every image of the pod has (regplat.c); 0 when
	 * nobody asked: amd64 only, as Kip's table always was. */
	unsigned archs;
};
/* *out is the chosen type (static or owned by t); *sustained -1 when Kip
 * leaves sustainedCPU unset, else 0/1. */
int inst_select(const struct inst_table *t, const struct select_req *r,
		const char **out, int *sustained, struct cerr *e);

/* ---- regplat.c: the platforms an image has, asked of its registry ---- */

struct regplat {
	unsigned archs; /* ARCH_* bits of its linux platforms */
	char *list;	/* "linux/amd64, linux/arm64/v8" (owned) */
	char *config;	/* parse only: an image manifest's config digest */
	bool indexed;	/* an index (else a single image) */
};
void regplat_free(struct regplat *p);
/* A manifest, index or image config body: its platforms, or (an image
 * manifest) the config digest to ask next. Pure; fuzzed. */
int regplat_parse(const char *body, size_t len, struct regplat *p,
		  struct cerr *e);
/* The platforms of image (a Kubernetes image reference): the index, or
 * the single image's config. insecure: "host:port,…" spoken to over plain
 * HTTP. */
int regplat_query(const char *image, const char *insecure, long timeout_ms,
		  struct regplat *out, struct cerr *e);

/* ---- convert.c: a v1 Pod into PodParameters, as Kip does it ---- */

struct convert_opts {
	const char *node_name;	    /* PodParameters.NodeName */
	const char *pod_ip;	    /* PodParameters.PodIP and /etc/hosts */
	const char *cluster_domain; /* cluster.local */
	const char *cluster_dns;    /* nameserver for ClusterFirst, or NULL */
	const char *host_resolv;    /* the "host" resolv.conf text */
	const struct inst_table *instances;
	const char *default_instance_type;
	unsigned image_archs; /* select_req.archs: what the images all have */
	/* Exactly what Kip sends (convert --kip): none of the extensions of
	 * docs/agent-wire.md, env and volumes only as Kip resolves them. */
	bool kip;
};
struct pkg_file {
	char *path;
	void *data;
	size_t len;
	int mode;
};
struct pkg {
	char *name; /* the volume (package) name */
	struct pkg_file *files;
	size_t n;
};
struct converted {
	json_t *params; /* PodParameters */
	char *pod_name; /* <namespace>_<name> */
	struct pkg *pkgs;
	size_t n_pkgs;
};
/* Apply the API server's defaults to a Pod (in place), as Kip sees pods. */
int pod_defaults(json_t *pod, struct cerr *e);
/* objects: ConfigMaps and Secrets (v1 JSON) the pod's volumes refer to. */
int pod_convert(json_t *pod, json_t *objects, const struct convert_opts *o,
		struct converted *out, struct cerr *e);
void converted_free(struct converted *c);
/* Kubernetes $(VAR) expansion (pkg/util/expand.go). */
char *k8s_expand(const char *in, const json_t *env);

/* ---- package.c: deploy packages (gzip'd tar of ROOTFS/<path>) ---- */

int pkg_build(const struct pkg *p, struct buf *out, struct cerr *e);

/* ---- userdata.c: boot files as user data or an SSM parameter ---- */

#define USERDATA_MAX 16000
#define SSM_CHUNK_MAX 4096
struct boot_files {
	const char *pki_dir;	 /* ca.crt, server.crt, server.key */
	const char *cell_config; /* a flat YAML map file, or NULL */
	const char *cloud_init;	 /* the user's #cloud-config, or NULL */
	const char *agent_version, *agent_url;
	const char *boot_dir; /* /tmp/itzo */
};
/* The parameters Kip's getInstanceParameters makes: file name -> text. */
json_t *boot_params(const struct boot_files *b, struct cerr *e);
/* #cloud-config: the user's document plus write_files under boot_dir
 * (owner root, "0400"); EFBIG above USERDATA_MAX. */
int userdata_build(const struct boot_files *b, struct buf *out, struct cerr *e);
/* The SSM "config" parameter (a YAML map of the same files) as Kip puts it:
 * {"config": text} when it fits in SSM_CHUNK_MAX bytes, else config_0,
 * config_1, … of at most SSM_CHUNK_MAX bytes, cut at UTF-8 boundaries. */
json_t *ssm_payload_build(const struct boot_files *b, struct cerr *e);

#endif
