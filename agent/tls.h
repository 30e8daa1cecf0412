/* The agent's TLS: the server's SSL_CTX (certificate, key, client CA,
 * what a client certificate must carry). */
#ifndef CELL_AGENT_TLS_H
#define CELL_AGENT_TLS_H

#include <stddef.h>

struct tls_files {
	const char *ca;	 /* client certificates chain to this */
	const char *crt; /* the server's chain */
	const char *key;
};

/* Configure ctx (an SSL_CTX *) from f; on failure err holds what failed
 * and OpenSSL's reason. */
int tls_ctx_setup(void *ctx, const struct tls_files *f, char *err,
		  size_t errlen);

#endif
