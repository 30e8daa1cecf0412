// SPDX-License-Identifier: Apache-2.0
/* CDI devices for a unit: which it asks for, and their edits in its
 * run.json (cdiapply.c; the spec format is cdi.h). */
#ifndef CELL_CDIAPPLY_H
#define CELL_CDIAPPLY_H

#include "podspec.h"
#include "cdi.h"
#include "runtime.h"

#define CDI_ANN_PREFIX "cdi.k8s.io/"	  /* Kubernetes' key prefix */
#define CDI_ANN_ELOTL "pod.elotl.co/cdi-" /* what Kip forwards */
/* The CDI kinds pod annotations may ask for unless --cdi-annotation-kinds
 * says otherwise: the GPUs, what a Kip GPU pod gets anyway. */
#define CDI_ANN_KINDS_DEFAULT "nvidia.com/gpu"
/* How cdi_requests marks a request it refused (never a qualified name). */
#define CDI_REFUSED "!refused: "

struct cdi_opts {
	const char *dirs;	     /* ':'-separated; NULL: CDI_DEFAULT_DIRS */
	const char *nvidia_ctl;	     /* NULL: /dev/nvidiactl (a test seam) */
	const char *nvidia_ctk;	     /* NULL: nvidia-ctk in PATH */
	const char *generate_output; /* NULL: /var/run/cdi/nvidia.yaml */
};

/* The CDI kinds ("vendor.com/class", comma- or space-separated; "" none,
 * NULL: CDI_ANN_KINDS_DEFAULT) that annotations may ask for. Called once
 * at start, before any unit. EINVAL for a malformed kind. */
int cdi_set_annotation_kinds(const char *list, struct cerr *e);
/* The qualified device names every unit of a pod asks for (NULL when
 * none; caller frees with strv_free): nvidia.com/gpu=all when gpu (the
 * pod's spec.resources.gpu) is not empty, then each annotation's list. An
 * annotation's request of a kind not allowed (cdi_set_annotation_kinds)
 * is kept as CDI_REFUSED and its reason, which cdi_apply refuses. */
char **cdi_requests(const char *gpu, const struct kv *ann, size_t n_ann);
/* Load the spec directories (running nvidia-ctk once when the host has
 * an NVIDIA driver and no spec for its GPUs), resolve requests and apply
 * the edits to rc. ENODEV "CDIDeviceNotFound: <name>" (with why, where
 * known) when a device is defined nowhere; EPERM "CDIDeviceRefused: …"
 * for a request cdi_requests refused. */
int cdi_apply(const struct cdi_opts *o, char *const *requests,
	      struct run_config *rc, struct cerr *e);
/* Apply resolved edits to rc: device nodes, mounts, hooks, env (the
 * unit's own wins), groups. */
int cdi_apply_edits(const struct cdi_edits *x, struct run_config *rc,
		    struct cerr *e);
/* Let the next cdi_apply try nvidia-ctk again (tests). */
void cdi_reset_generate(void);

#endif
