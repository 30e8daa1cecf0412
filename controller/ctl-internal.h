// SPDX-License-Identifier: Apache-2.0
/* What controller/ files and their tests share beyond cellctl.h. */
#ifndef CELL_CTL_INTERNAL_H
#define CELL_CTL_INTERNAL_H

#include <getopt.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cellctl.h"

/* ---- ws.c: RFC 6455 frames (pure; fuzz-wsframe.c) ---- */
#define WS_FRAME_MAX (16u << 20)
struct ws_frame {
	bool fin;
	int opcode;
	size_t hdr_len;	 /* bytes before the payload */
	uint64_t len;	 /* payload length */
	uint8_t mask[4]; /* valid when masked */
	bool masked;
};
/* Parse one frame head in p[0..n): 1 with *f filled when the head and its
 * payload are all there, 0 when more bytes are needed, -1 (e) when the head
 * is invalid (reserved bits, a control frame over 125 bytes or fragmented,
 * a length over WS_FRAME_MAX, a 64-bit length with the top bit set). */
int ws_frame_parse(const uint8_t *p, size_t n, struct ws_frame *f,
		   struct cerr *e);
/* A masked client frame of payload p[0..n) appended to out. */
int ws_frame_build(int opcode, const void *p, size_t n, const uint8_t mask[4],
		   struct buf *out, struct cerr *e);
/* "<digit><base64>" into *ch and payload; -1 when malformed. */
int ws_msg_decode(const char *p, size_t n, int *ch, struct buf *payload,
		  struct cerr *e);

/* ---- convert.c helpers ---- */
/* Go's fmt "%.2f" of float32(milli)/1000 and "%.2fGi" of
 * float32(bytes)/2^30, as aggregateResources writes them. */
char *fmt_cpu(int64_t milli);
char *fmt_mem(int64_t bytes);

/* podfiles.c: PodParameters.PodHostname and the deploy packages (volume
 * contents, resolvconf, etchosts) for a converted pod. */
int pod_hostname(const json_t *pod, const struct convert_opts *o, char **out,
		 struct cerr *e);
/* kdoc.c: the object of that kind and metadata.name in objects (the
 * ConfigMaps and Secrets a pod refers to), or NULL. */
const json_t *k8s_find_object(const json_t *objects, const char *kind,
			      const char *name);
/* env.c: the virtual-kubelet's environment resolution (in place). */
int pod_env_resolve(json_t *pod, const json_t *objects,
		    const struct convert_opts *o, struct cerr *e);
/* downward.c: a fieldRef's value (metadata.*, spec.*, status.podIP). */
int pod_field_ref(const json_t *pod, const json_t *fr,
		  const struct convert_opts *o, char **out, struct cerr *e);
/* downward.c: a resourceFieldRef's value (container: the default when it
 * names none), and a label/annotation map as the kubelet writes it. */
int downward_resource(const json_t *pod, const char *container,
		      const json_t *rfr, char **out, struct cerr *e);
char *downward_format_map(const json_t *m);
int pod_packages(const json_t *pod, const json_t *objects,
		 const struct convert_opts *o, struct converted *c,
		 struct cerr *e);

/* ---- the verbs (cmd-*.c); main.c dispatches ---- */
enum { EXIT_OK = 0, EXIT_REMOTE = 1, EXIT_USAGE = 2 };
struct ctl_global {
	const char *cell, *pki, *output; /* --cell, --pki, -o */
	const char **cells;		 /* every --cell (watch) */
	size_t n_cells;
};
/* Options every verb takes; getopt_long codes from 1000. */
enum { G_CELL = 1000, G_PKI, G_OUTPUT, G_HELP };
#define GLOBAL_OPTS                                                            \
	{"cell", required_argument, NULL, G_CELL},                             \
	    {"pki", required_argument, NULL, G_PKI},                           \
	    {"output", required_argument, NULL, G_OUTPUT},                     \
	{                                                                      \
		"help", no_argument, NULL, G_HELP                              \
	}
/* 1 when c was a global option (consumed), 0 when not, -1 on --help. */
int ctl_global_opt(struct ctl_global *g, int c, const char *arg);
/* getopt_long that handles the global options itself: the next verb
 * option, -1 at the end, '?' on a bad one, G_HELP for --help/-h. Start
 * with optind = 1 (each verb parses argv once). */
int ctl_getopt(int argc, char **argv, const char *sopts,
	       const struct option *lo, struct ctl_global *g);
/* Print an error and return the exit code for it. */
int ctl_fail(const char *verb, const struct cerr *e);
int ctl_usage(const char *usage);
int ctl_open_cell(const struct ctl_global *g, const char *addr,
		  struct ctl_cell *c, struct cerr *e);

int cmd_pki(int argc, char **argv, struct ctl_global *g);
int cmd_ping(int argc, char **argv, struct ctl_global *g);
int cmd_version(int argc, char **argv, struct ctl_global *g);
int cmd_metrics(int argc, char **argv, struct ctl_global *g);
int cmd_status(int argc, char **argv, struct ctl_global *g);
int cmd_logs(int argc, char **argv, struct ctl_global *g);
int cmd_file(int argc, char **argv, struct ctl_global *g);
int cmd_exec(int argc, char **argv, struct ctl_global *g);
int cmd_attach(int argc, char **argv, struct ctl_global *g);
int cmd_port_forward(int argc, char **argv, struct ctl_global *g);
int cmd_run(int argc, char **argv, struct ctl_global *g);
int cmd_convert(int argc, char **argv, struct ctl_global *g);
int cmd_delete(int argc, char **argv, struct ctl_global *g);
int cmd_select(int argc, char **argv, struct ctl_global *g);
int cmd_platforms(int argc, char **argv, struct ctl_global *g);
int cmd_watch(int argc, char **argv, struct ctl_global *g);
int cmd_userdata(int argc, char **argv, struct ctl_global *g);
int cmd_ssm_payload(int argc, char **argv, struct ctl_global *g);

/* ---- output.c ---- */
/* JSON as YAML (block style, strings double-quoted). */
void print_yaml(FILE *f, const json_t *j);
void print_json(FILE *f, const json_t *j);
/* The pod's phase as Kip reads a status reply, with a reason. */
const char *pod_phase(const json_t *status, const char *restart_policy,
		      char *reason, size_t reason_len);
/* Units ready / total, restarts summed. */
void pod_counts(const json_t *status, int *ready, int *total, int *restarts);

#endif
