// SPDX-License-Identifier: Apache-2.0
/* Deploy packages (WIRE.md, "Deploy packages"): the multipart upload that
 * carries one, and its extraction into packages/<name>/.
 *
 * Both halves take input from the network, so both are pure of civetweb:
 * the multipart parser is fed bytes and hands the package field's bytes to
 * a sink (which is what makes it fuzzable), and the extractor reads a
 * gzip'd tar from a file descriptor. */
#ifndef CELL_DEPLOY_H
#define CELL_DEPLOY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "err.h"

/* The package file as uploaded (413 beyond). */
#define DEPLOY_UPLOAD_MAX (1ull << 30)
/* Bytes written while extracting one package: a small gzip can expand to
 * a full disk, so the unpacked size has its own cap (EFBIG). */
#define DEPLOY_UNPACKED_MAX (4ull << 30)
#define DEPLOY_ENTRIES_MAX (1u << 20)
/* A package name is one path component, a Kubernetes volume name or one of
 * the controller's own (resolvconf, etchosts, kubeconfig). */
#define DEPLOY_NAME_MAX 253

/* ---- multipart/form-data, streamed ---- */

#define MPART_BOUNDARY_MAX 200	 /* RFC 2046 says 70; be lenient */
#define MPART_HEADERS_MAX 16384	 /* one part's header block */
#define MPART_PREAMBLE_MAX 65536 /* bytes before the first delimiter */

/* Receives the wanted field's bytes as they arrive; a -1 return (with e
 * set) stops the parse with that error. */
typedef int (*mpart_sink)(void *ud, const void *p, size_t n, struct cerr *e);

struct mpart;

/* The boundary parameter of "multipart/form-data; boundary=…" (quoted or
 * not). EINVAL for any other type or a missing or oversized boundary. */
int mpart_boundary(const char *content_type, char *out, size_t outsz,
		   struct cerr *e);
/* A parser that sends the body of the first part named `field` to sink and
 * skips every other part. */
struct mpart *mpart_new(const char *boundary, const char *field,
			mpart_sink sink, void *ud);
/* Feed the next bytes of the body, in pieces of any size. EINVAL for a
 * malformed body; the sink's error as it returned it. */
int mpart_feed(struct mpart *m, const void *p, size_t n, struct cerr *e);
/* After the last byte: EINVAL unless the closing delimiter was seen and the
 * field was found. */
int mpart_finish(struct mpart *m, struct cerr *e);
void mpart_free(struct mpart *m);

/* ---- packages ---- */

/* A name that can be a directory in packages/: [A-Za-z0-9._-], not
 * starting with '.', at most DEPLOY_NAME_MAX bytes. */
bool deploy_name_ok(const char *name);

/* Extract the gzip'd tar read from fd: entries named ROOTFS/<path> (or
 * ./ROOTFS/<path>) land in <pkgdir>/<name>/<path>, others are skipped. The
 * package is built in a temporary directory beside it and swapped in with
 * one rename, so readers see the old package or the new one, and a failed
 * deploy leaves the old one as it was. A hostile archive (a ".." name, a
 * link that leaves the package, an entry through an absolute symlink) is
 * EINVAL; too large is EFBIG. */
int deploy_package(int pkgdirfd, const char *name, int fd, struct cerr *e);

/* Remove what interrupted deploys left in pkgdir (".<name>.tmp-*"). */
int deploy_cleanup(int pkgdirfd, struct cerr *e);

/* pkgswap.c: put the package extracted at pkgdirfd/tmp (".tmp-<hex>") in
 * force as packages/name/, the kubelet's way (a ..data link flipped in one
 * rename, top-level names linked through it), so that a unit that has
 * packages/name/ mounted sees the old version or the new one. */
int deploy_swap_in(int pkgdirfd, const char *tmp, const char *name,
		   struct cerr *e);

#endif
