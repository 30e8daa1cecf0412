/* The agent's TLS set-up: everything about the server's SSL_CTX is set
 * here, so nothing depends on civetweb's own option handling. */
#include "tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <stdio.h>

static int tls_fail(char *err, size_t errlen, const char *what,
		    const char *path)
{
	char ossl[256] = "";
	unsigned long code = ERR_get_error();

	if (code)
		ERR_error_string_n(code, ossl, sizeof(ossl));
	snprintf(err, errlen, "%s %s: %s", what, path,
		 ossl[0] ? ossl : "failed");
	ERR_clear_error();
	return -1;
}

/* The server's certificate and key, TLS 1.2 or later, and a client
 * certificate that chains to ca.crt, demanded during the handshake (a
 * client without one never reaches a handler). */
int tls_ctx_setup(void *ssl_ctx, const struct tls_files *f, char *err,
		  size_t errlen)
{
	SSL_CTX *ctx = ssl_ctx;
	STACK_OF(X509_NAME) * names;
	static const unsigned char sid[] = "cell-agent";

	if (!SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION))
		return tls_fail(err, errlen, "set", "TLS 1.2 minimum");
	if (SSL_CTX_use_certificate_chain_file(ctx, f->crt) != 1)
		return tls_fail(err, errlen, "load certificate", f->crt);
	if (SSL_CTX_use_PrivateKey_file(ctx, f->key, SSL_FILETYPE_PEM) != 1)
		return tls_fail(err, errlen, "load key", f->key);
	if (SSL_CTX_check_private_key(ctx) != 1)
		return tls_fail(err, errlen, "key does not match", f->crt);
	if (SSL_CTX_load_verify_locations(ctx, f->ca, NULL) != 1)
		return tls_fail(err, errlen, "load CA", f->ca);
	names = SSL_load_client_CA_file(f->ca);
	if (!names)
		return tls_fail(err, errlen, "read CA names from", f->ca);
	SSL_CTX_set_client_CA_list(ctx, names);
	SSL_CTX_set_verify(
	    ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	SSL_CTX_set_verify_depth(ctx, 4);
	/* Resumed sessions need an id context once peers are verified. */
	SSL_CTX_set_session_id_context(ctx, sid, sizeof(sid) - 1);
	/* No TLS 1.3 tickets: they would be written behind the back of a
	 * stream's pump thread; the controller does not resume anyway. */
	SSL_CTX_set_num_tickets(ctx, 0);
	return 0;
}
