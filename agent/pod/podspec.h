// SPDX-License-Identifier: Apache-2.0
/* The agent's pod: the typed spec (WIRE.md's PodParameters) and the status
 * it reports (PodStatusReply). Only wire.c and wirestatus.c touch JSON for
 * these; the rest of the agent sees the structs below. */
#ifndef CELL_PODSPEC_H
#define CELL_PODSPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "buf.h"
#include "err.h"
#include "quantity.h"

#define UPDATEPOD_MAX (8u << 20) /* request body cap */

/* Caps on a PodParameters body beyond its size (wire.c; docs/agent-wire.md).
 * Each list (units, initUnits) holds at most WIRE_MAX_UNITS. */
#define WIRE_MAX_UNITS 64
#define WIRE_MAX_ENV 256 /* env vars per unit */
#define WIRE_MAX_VOLUMES 256
#define WIRE_MAX_SECRET_ITEMS 1024	 /* keys over all secrets */
#define WIRE_MAX_LIST 4096		 /* any other array or map */
#define WIRE_MAX_STR (64u << 10)	 /* any string we keep */
#define WIRE_MAX_SECRET_VALUE (1u << 20) /* decoded bytes */
#define WIRE_MAX_WARNINGS 64		 /* kept per parse; more are dropped */

/* ---- the pod spec (wire.c parses PodParameters into this) ---- */

enum restart_policy { RESTART_ALWAYS, RESTART_ON_FAILURE, RESTART_NEVER };
enum ns_mode { NS_POD = 0, NS_CONTAINER = 1, NS_NODE = 2 };
/* PROBE_SLEEP: a lifecycle hook's sleep{seconds} only. */
enum probe_kind { PROBE_NONE, PROBE_EXEC, PROBE_HTTP, PROBE_TCP, PROBE_SLEEP };

struct kv {
	char *name;
	char *value;
};

struct env_var {
	char *name;
	char *value;	   /* literal, may be NULL */
	char *secret_name; /* valueFrom.secretKeyRef, or NULL */
	char *secret_key;
};

struct volume_mount {
	char *name;
	char *mount_path;
	char *sub_path; /* NULL when unset */
	bool read_only;
};

struct port {
	char *name;
	int container_port;
	int host_port;	/* 0 = none */
	char *protocol; /* "TCP", "UDP", "SCTP" */
	char *host_ip;
};

struct probe {
	enum probe_kind kind;
	char **exec_command;	    /* PROBE_EXEC */
	char *path, *host, *scheme; /* PROBE_HTTP (scheme "HTTP"/"HTTPS") */
	struct kv *http_headers;
	size_t n_http_headers;
	int port;	 /* resolved number, or 0 when port_name is set */
	char *port_name; /* a named port of the unit */
	/* Kubernetes defaults applied where the wire says 0. */
	int initial_delay_s, timeout_s, period_s, success_threshold,
	    failure_threshold;
	int64_t sleep_s; /* PROBE_SLEEP */
};

/* A Kubernetes seccompProfile (a wire extension: Kip does not send it):
 * type "Unconfined", "RuntimeDefault" or "Localhost" (with localhost, a
 * file name under the agent's --seccomp-profile-dir); NULL type: not
 * given (the unit takes the pod's, the pod the agent's default). */
struct seccomp_ref {
	char *type, *localhost;
};
enum tri { TRI_UNSET, TRI_FALSE, TRI_TRUE }; /* a Go *bool */
/* PULL_DEFAULT: none given (Kip): the cache's rule, IfNotPresent but
 * Always for "latest". */
enum pull_policy { PULL_DEFAULT, PULL_IF_NOT_PRESENT, PULL_ALWAYS, PULL_NEVER };

struct unit_spec {
	char *name;
	char *image;
	char **command; /* NULL: the image's Entrypoint */
	char **args;	/* NULL: the image's Cmd (when command is NULL) */
	struct env_var *env;
	size_t n_env;
	struct volume_mount *mounts;
	size_t n_mounts;
	struct port *ports;
	size_t n_ports;
	char *working_dir;
	bool tty; /* TERM=xterm by default */
	/* resources.limits (Kip's untagged "Limits", or "limits"): 0 = none.
	 * Requests never limit anything. */
	int64_t memory_limit; /* bytes */
	int64_t cpu_millis;
	char **caps_add, **caps_drop; /* "NET_ADMIN" or "CAP_NET_ADMIN" */
	bool has_run_as_user, has_run_as_group;
	int64_t run_as_user, run_as_group;
	struct seccomp_ref seccomp; /* securityContext.seccompProfile */
	struct probe liveness, readiness, startup;
	char *termination_message_path;	  /* default /dev/termination-log */
	char *termination_message_policy; /* "File" | "FallbackToLogsOnError" */
	/* Extensions (docs/agent-wire.md): absent in what Kip sends, and their
	 * zero values are Kip's behaviour. */
	/* lifecycle hooks: exec and httpGet run as a probe attempt does,
	 * PROBE_SLEEP waits; PROBE_NONE when there is none. */
	struct probe post_start, pre_stop;
	bool read_only_root;
	enum tri run_as_non_root; /* unset: the pod's */
	enum tri allow_priv_esc;
	bool privileged;
	bool proc_unmasked; /* procMount "Unmasked" */
	enum pull_policy pull_policy;
	bool stdin_open, stdin_once;
	/* A canonical serialization of every field: two units are "the same"
	 * exactly when these are equal (a change restarts the unit). */
	char *fingerprint;
};

enum volume_kind {
	VOL_EMPTY_DIR,
	VOL_PACKAGE_PATH,
	VOL_CONFIG_MAP,
	VOL_SECRET,
	VOL_HOST_PATH,
	VOL_PROJECTED,
	VOL_UNKNOWN, /* a kind this cell does not support: accepted, unusable */
};

struct volume {
	char *name;
	enum volume_kind kind;
	bool memory;	    /* emptyDir medium "Memory" */
	int64_t size_limit; /* bytes; 0 = none */
	char *path;	    /* packagePath.path or hostPath.path */
	char *host_path_type;
	int default_mode;  /* -1 when unset */
	char *source_name; /* configMap.name or secret.secretName */
};

struct pod_spec {
	char *pod_name; /* "<namespace>_<name>" */
	char *node_name, *pod_ip, *pod_hostname;
	char *phase;
	enum restart_policy restart_policy;
	struct unit_spec *units, *init_units;
	size_t n_units, n_init_units;
	struct volume *volumes;
	size_t n_volumes;
	enum ns_mode ns_network, ns_pid, ns_ipc;
	bool has_run_as_user, has_run_as_group, has_fs_group;
	int64_t run_as_user, run_as_group;
	int64_t fs_group; /* extension: Kip never sends it */
	int64_t *supplemental_groups;
	size_t n_supplemental_groups;
	struct seccomp_ref seccomp; /* the units' default */
	struct kv *sysctls;
	size_t n_sysctls;
	char *hostname, *subdomain;
	int64_t termination_grace_s; /* default 30 */
	/* Extensions (docs/agent-wire.md); Kip sends none of them (fs_group
	 * above is one too). */
	bool fs_group_on_root_mismatch; /* fsGroupChangePolicy */
	bool run_as_non_root;
	int64_t active_deadline_s; /* 0 = none */
	/* spec.resources.memory, bytes (0 none): what Kip sized the instance
	 * by (the sum of the units' limits, else requests). Never a unit's
	 * limit. */
	int64_t memory_limit;
	/* spec.resources.gpu ("1", "2 nvidia-tesla-t4"): not empty means every
	 * unit gets nvidia.com/gpu=all through CDI (agent/pod/cdiapply.c). */
	char *gpu;
	/* secrets: name → key → bytes (decoded from base64) */
	struct secret {
		char *name;
		struct kv *items; /* value holds raw bytes; see item_len */
		size_t *item_len;
		size_t n_items;
	} * secrets;
	size_t n_secrets;
	/* credentials: registry host → basic credentials */
	struct credential {
		char *host, *username, *password;
		char *server;
	} * credentials;
	size_t n_credentials;
	struct kv *annotations; /* only "pod.elotl.co/", "cdi.k8s.io/" kept */
	size_t n_annotations;
	/* DNS and /etc/hosts inputs. The controller also deploys the finished
	 * files as the resolvconf and etchosts packages. */
	char *dns_policy;
	char **dns_nameservers, **dns_searches; /* NULL when absent */
	struct kv *dns_options;			/* value NULL when absent */
	size_t n_dns_options;
	struct host_alias {
		char *ip;
		char **hostnames;
	} * host_aliases;
	size_t n_host_aliases;
	/* Inputs accepted that cannot take effect (a probe without a handler,
	 * a volume of an unknown kind, …): for the caller to log. */
	char **warnings;
	size_t n_warnings;
};

/* Parse a PodParameters body. Unknown fields are ignored; a wrong type or a
 * missing required field is EINVAL with a message naming the field
 * ("spec.units[1].ports[0].containerPort: not an integer"). */
int wire_parse_pod(const char *buf, size_t len, struct pod_spec *out,
		   struct cerr *e);
void pod_spec_free(struct pod_spec *p);
/* What a struct probe owns (a spec's, or a probe job's copy). */
void probe_free(struct probe *p);

/* ---- status (wire.c serializes PodStatusReply from this) ---- */

enum unit_state_kind {
	STATE_NONE,
	STATE_WAITING,
	STATE_RUNNING,
	STATE_TERMINATED
};

struct unit_state {
	enum unit_state_kind kind;
	char *reason;	       /* waiting/terminated */
	char *message;	       /* terminated */
	bool start_failure;    /* waiting */
	int exit_code;	       /* terminated: 128+N for signal N */
	int64_t started_at_ns; /* wall clock, 0 = null */
	int64_t finished_at_ns;
};

struct unit_status {
	char *name, *image;
	char *const *devices; /* its CDI devices; NULL: none */
	bool ready;
	int started; /* -1 null, 0 false, 1 true */
	int restart_count;
	struct unit_state state, last_state;
};

struct pod_status {
	struct unit_status *units, *init_units;
	size_t n_units, n_init_units;
	struct kv *usage; /* resourceUsage: name → decimal number text */
	size_t n_usage;
	char *pod_ip;
};

/* The JSON text of a PodStatusReply (caller frees). */
char *wire_status_json(const struct pod_status *s);

#endif
