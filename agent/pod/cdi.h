// SPDX-License-Identifier: Apache-2.0
/* The Container Device Interface (github cncf-tags/container-device-interface,
 * SPEC.md): spec files (JSON or YAML) in /etc/cdi and /var/run/cdi name the
 * devices of a kind ("nvidia.com/gpu=0") and the container edits each one
 * needs: device nodes, mounts, environment, hooks, extra groups.
 *
 * cdi.c parses one spec (pure: text in, struct out; fuzzed by
 * tests/fuzz/fuzz-cdi.c), loads a directory list into a registry and
 * resolves requested device names into one merged set of edits.
 * cdiapply.c turns those edits into a unit's run.json. */
#ifndef CELL_CDI_H
#define CELL_CDI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

#define CDI_SPEC_MAX (1u << 20) /* a spec file's size cap */
#define CDI_MAX_FILES 256	/* spec files read per directory list */
#define CDI_MAX_ENTRIES 1024	/* devices, or edits of one kind, per spec */
#define CDI_DEFAULT_DIRS "/etc/cdi:/var/run/cdi"

struct cdi_node {
	char *path, *host_path; /* host_path NULL: path */
	char type;		/* 'c', 'b', 'p' (fifo), 0: the host's */
	bool has_major, has_minor, has_mode, has_uid, has_gid;
	int64_t major, minor;
	uint32_t mode, uid, gid;
	char *permissions; /* NULL or "": rwm; "none": nothing */
};

struct cdi_mount {
	char *host_path, *container_path, *type; /* type may be NULL */
	char **options;				 /* NULL-terminated */
};

struct cdi_hook {
	char *name, *path;
	char **args, **env; /* NULL when absent */
	int timeout;	    /* seconds, 0: none given */
};

struct cdi_edits {
	char **env; /* NULL-terminated, never NULL after parse */
	struct cdi_node *nodes;
	size_t n_nodes;
	struct cdi_mount *mounts;
	size_t n_mounts;
	struct cdi_hook *hooks;
	size_t n_hooks;
	uint32_t *gids;
	size_t n_gids;
};

struct cdi_device {
	char *name;
	struct cdi_edits edits;
};

struct cdi_spec {
	char *version, *kind;
	struct cdi_device *devices;
	size_t n_devices;
	struct cdi_edits edits; /* for any of its devices */
	char *path;		/* the file it came from (registry only) */
};

/* Parse a spec (JSON, or YAML when it does not start with '{'). EINVAL
 * with the field named ("devices[1].containerEdits.deviceNodes[0].path:
 * missing") for a malformed spec, ENOTSUP for a cdiVersion this parser does
 * not know or a field it cannot apply (intelRdt, netDevices). */
int cdi_spec_parse(const char *text, size_t len, struct cdi_spec *out,
		   struct cerr *e);
void cdi_spec_free(struct cdi_spec *s);
void cdi_edits_free(struct cdi_edits *x);

/* Every spec file (*.json, *.yaml, *.yml) of a ':'-separated directory
 * list, directories in order and files sorted within each. A file that
 * does not parse is kept out and its error in errors ("<path>: <why>"). */
struct cdi_registry {
	struct cdi_spec *specs;
	size_t n_specs;
	char **errors;
	size_t n_errors;
};
void cdi_registry_load(const char *dirs, struct cdi_registry *r);
void cdi_registry_free(struct cdi_registry *r);
/* Whether some spec of the registry is of this kind. */
bool cdi_registry_has_kind(const struct cdi_registry *r, const char *kind);

/* "vendor.com/class=name": EINVAL unless it is a valid qualified name. */
int cdi_parse_name(const char *qualified, char *kind, size_t kind_sz,
		   char *name, size_t name_sz, struct cerr *e);

/* The merged edits for the requested devices (qualified names), in the
 * order requested; each spec's own edits once. "=all" is the spec's device
 * named all when it has one, else every device of the kind. ENODEV
 * ("CDIDeviceNotFound: <name>") when one is defined nowhere, EEXIST
 * ("CDIDeviceConflict: …") when two spec files define it. */
int cdi_resolve(const struct cdi_registry *r, char *const *names,
		struct cdi_edits *out, struct cerr *e);

#endif
