// SPDX-License-Identifier: Apache-2.0
/* What only cell-boot's own files and tests share. */
#ifndef CELL_BOOT_INTERNAL_H
#define CELL_BOOT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "boot.h"
#include "buf.h"
#include "err.h"
#include "yamlmap.h"

#define BOOT_MAX_PARAM (64u << 10)  /* one SSM reply */
#define BOOT_MAX_PAYLOAD (1u << 20) /* the joined payload */
#define BOOT_MAX_CHUNKS 64	    /* config_0 … config_63 */
#define BOOT_MAX_AGENT (256u << 20) /* a downloaded agent binary */
#define BOOT_CREDS_MARGIN_S 300	    /* refresh credentials this early */

/* ---- http.c: libcurl easy requests ---- */
struct boot_http {
	const char *url;
	const char *method; /* NULL: GET, or POST when body is set */
	const char *headers[6];
	const char *body;
	const char *sigv4;   /* "aws:amz:<region>:<service>" or NULL */
	const char *userpwd; /* the key pair SigV4 signs with */
	const char *ca_bundle;
	long timeout_ms;
	/* results */
	long status;
	struct buf reply; /* its max caps the body */
};
int boot_http(struct boot_http *r, struct cerr *e);
/* GET url into a file descriptor (a binary); the hash is updated as it
 * arrives. */
int boot_http_download(const char *url, const char *ca_bundle, int fd,
		       size_t max, char digest[136], struct cerr *e);

/* ---- aws.c: identity, region and credentials ---- */
struct aws_creds {
	char *akid, *secret, *token; /* token NULL for long-term keys */
	time_t expires;		     /* 0: never (environment keys) */
	bool from_env;
};
void aws_creds_free(struct aws_creds *c);
/* Instance id and region: options, then the environment, then IMDS. */
int aws_identity(const struct boot_opts *o, char **iid, char **region,
		 struct cerr *e);
/* Whether IMDS lists an instance profile role (1), none (0). */
int aws_has_profile(const struct boot_opts *o, struct cerr *e);
/* Environment keys, else the instance profile's; refreshed when they
 * expire within the margin or when `force` (the service refused them). */
int aws_creds_get(const struct boot_opts *o, struct aws_creds *c, bool force,
		  struct cerr *e);
/* The IMDS credentials document (pure, for tests and the fuzz replay). */
int aws_creds_parse(const char *json, size_t len, struct aws_creds *c,
		    struct cerr *e);

/* ---- ssm.c ---- */
/* The boot payload of this instance: "<base>/<iid>/config", or its chunks
 * config_0… (Kip's spelling) or config-0… joined in order. ENOENT when
 * nothing is there yet. */
int ssm_fetch_payload(const struct boot_opts *o, const char *iid,
		      const char *region, struct aws_creds *c, struct buf *out,
		      struct cerr *e);

/* ---- payload.c ---- */
/* Parse a payload map and check that every key is a plain file name and
 * the certificates are there; nothing is written on an error. */
int payload_parse(const char *text, size_t len, struct yamlmap *m,
		  struct cerr *e);
/* Write every entry as <dir>/<key>, mode 0600: all are written to
 * temporary names first and renamed only when all of them made it. */
int payload_write(const struct yamlmap *m, const char *dir, struct cerr *e);
/* The boot directory holds ca.crt, server.crt and server.key. */
bool payload_complete(const char *dir);

/* ---- update.c ---- */
/* 0 nothing to do (or refused: logged), 1 a new agent is in place, -1
 * failed (retry). */
int update_agent(const struct boot_opts *o, struct cerr *e);

/* ---- growroot.c: --grow-root ---- */
/* Off when env (CELL_BOOT_GROW_ROOT) is "0" or "off", or the kernel
 * command line says cell.growroot=0 (or =off). */
bool boot_grow_root_off(const char *env, const char *cmdline);

#endif
