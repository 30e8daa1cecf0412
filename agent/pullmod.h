/* The pull module: the parts of the agent that need libcurl and libarchive
 * (the image puller, imagepull/, and the package extractor, package.c),
 * built as a shared object that the agent loads when a unit's image is
 * pulled or a package is deployed, and unloads when it has been unused for
 * a while.
 *
 * Why: Debian's libcurl and libarchive bring about thirty libraries with
 * them (GnuTLS, Kerberos, LDAP, libxml2, ICU, ...), about 5 MiB resident
 * once loaded, and an agent mostly sits idle between pulls. The code still
 * runs in-process (the library API of pull.h, with its progress callback);
 * only its loading is deferred.
 *
 *   const struct pullmod_ops *m = pullmod_get(&e);   loads it, holds it
 *   m->pull_image(...) / m->deploy_package(...)
 *   pullmod_put();                                   lets it go
 *   pullmod_tick(now_ns())   from the supervisor's loop: unloads it once
 *                            nothing has held it for the linger time
 *
 * The module is found at $CELL_AGENT_PULLMOD, else
 * <dir of the agent binary>/../lib/cell/pullmod.so. */
#ifndef CELL_PULLMOD_H
#define CELL_PULLMOD_H

#include <stdint.h>

#include "err.h"
#include "log.h"
#include "pull.h"

#define PULLMOD_ABI 1
#define PULLMOD_ENTRY "cell_pullmod_init"
/* How long an unused module stays loaded: pulls come in bursts (the units
 * of a pod, restarts), and a load costs about 5 ms. */
#define PULLMOD_LINGER_MS 10000

struct pullmod_ops {
	unsigned abi;
	int (*pull_image)(const struct pull_opts *o, struct pull_result *res,
			  struct cerr *e);
	void (*pull_result_free)(struct pull_result *r);
	int (*deploy_package)(int pkgdirfd, const char *name, int fd,
			      struct cerr *e);
	/* Before unloading: release libcurl's global state. */
	void (*fini)(void);
};

/* The module's one exported symbol: it takes the agent's log settings (the
 * module has its own copy of common/, log.c included). */
typedef const struct pullmod_ops *(*pullmod_init_fn)(const char *prog,
						     enum log_level level,
						     int log_fd);

const struct pullmod_ops *pullmod_get(struct cerr *e);
void pullmod_put(void);
/* Unload the module if nothing holds it and it was last let go at least
 * the linger time before now. */
void pullmod_tick(uint64_t now_ns);
/* When pullmod_tick has work next (0: nothing loaded or still held). */
uint64_t pullmod_next_due(void);
/* Record the threads now running as the agent's own (after the API has
 * started its workers): the module is unloaded only when no other thread
 * exists, since one might be running its code. */
void pullmod_note_threads(void);
/* Is it loaded? (tests, and the status of the agent). */
int pullmod_loaded(void);

#endif
