// SPDX-License-Identifier: Apache-2.0
/* The controller's PKI, as Kip's pkg/certs makes it: one CA (ECDSA P-256,
 * CN "Milpa Server CA", 10 years, serial 1) and leaf certificates with a
 * fresh P-256 key, CN and only SAN "MilpaNode", O "Elotl", OU
 * "MilpaServer", key usage digitalSignature and one extended usage:
 * serverAuth for cells, clientAuth for the controller. Keys are SEC1 PEM
 * ("EC PRIVATE KEY"), as x509.MarshalECPrivateKey writes them. Built with
 * OpenSSL's API; nothing runs the openssl command. */
#include <errno.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <string.h>
#include <sys/stat.h>

#include "cellctl.h"
#include "cleanup.h"
#include "fsutil.h"
#include "util.h"

#define TEN_YEARS (10L * 365 * 24 * 3600)

static int ssl_err(struct cerr *e, const char *what)
{
	char msg[256];
	unsigned long c = ERR_get_error();

	ERR_error_string_n(c, msg, sizeof(msg));
	ERR_clear_error();
	return cerr_set(e, EIO, "%s: %s", what, c ? msg : "failed");
}

static EVP_PKEY *new_key(struct cerr *e)
{
	EVP_PKEY *k = EVP_EC_gen("P-256");

	if (!k)
		ssl_err(e, "generate P-256 key");
	return k;
}

static int add_ext(X509 *crt, X509 *issuer, int nid, const char *value,
		   struct cerr *e)
{
	X509V3_CTX ctx;
	X509_EXTENSION *ext;

	X509V3_set_ctx(&ctx, issuer, crt, NULL, NULL, 0);
	ext = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
	if (!ext)
		return ssl_err(e, "certificate extension");
	if (!X509_add_ext(crt, ext, -1)) {
		X509_EXTENSION_free(ext);
		return ssl_err(e, "add certificate extension");
	}
	X509_EXTENSION_free(ext);
	return 0;
}

static int set_serial(X509 *crt, bool random, struct cerr *e)
{
	unsigned char b[16];
	BIGNUM *bn;
	int ok;

	if (!random)
		return ASN1_INTEGER_set(X509_get_serialNumber(crt), 1)
			   ? 0
			   : ssl_err(e, "serial");
	/* Kip: a random serial below 2^128. */
	if (RAND_bytes(b, sizeof(b)) != 1)
		return ssl_err(e, "random serial");
	b[0] &= 0x7f;
	bn = BN_bin2bn(b, sizeof(b), NULL);
	ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(crt));
	BN_free(bn);
	return ok ? 0 : ssl_err(e, "serial");
}

static int set_name(X509_NAME *n, const char *o, const char *ou, const char *cn,
		    struct cerr *e)
{
	const unsigned char *u;

	if (o) {
		u = (const unsigned char *)o;
		if (!X509_NAME_add_entry_by_txt(n, "O", MBSTRING_UTF8, u, -1,
						-1, 0))
			return ssl_err(e, "subject O");
	}
	if (ou) {
		u = (const unsigned char *)ou;
		if (!X509_NAME_add_entry_by_txt(n, "OU", MBSTRING_UTF8, u, -1,
						-1, 0))
			return ssl_err(e, "subject OU");
	}
	u = (const unsigned char *)cn;
	if (!X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_UTF8, u, -1, -1, 0))
		return ssl_err(e, "subject CN");
	return 0;
}

/* A certificate for key: the CA's own when ca_crt is NULL. */
static X509 *make_cert(EVP_PKEY *key, X509 *ca_crt, EVP_PKEY *ca_key,
		       const char *eku, struct cerr *e)
{
	X509 *crt = X509_new();
	bool is_ca = !ca_crt;
	int r = -1;

	if (!crt || !X509_set_version(crt, 2) || set_serial(crt, !is_ca, e) < 0)
		goto out;
	X509_gmtime_adj(X509_getm_notBefore(crt), is_ca ? -600 : 0);
	X509_gmtime_adj(X509_getm_notAfter(crt), TEN_YEARS);
	if (!X509_set_pubkey(crt, key))
		goto out;
	if (is_ca) {
		if (set_name(X509_get_subject_name(crt), NULL, NULL,
			     "Milpa Server CA", e) < 0 ||
		    !X509_set_issuer_name(crt, X509_get_subject_name(crt)))
			goto out;
		if (add_ext(crt, crt, NID_basic_constraints, "critical,CA:TRUE",
			    e) < 0 ||
		    add_ext(crt, crt, NID_key_usage,
			    "critical,digitalSignature,keyEncipherment,"
			    "dataEncipherment,keyAgreement,keyCertSign",
			    e) < 0 ||
		    add_ext(crt, crt, NID_subject_key_identifier, "hash", e) <
			0)
			goto out;
	} else {
		if (set_name(X509_get_subject_name(crt), "Elotl", "MilpaServer",
			     CTL_SERVER_NAME, e) < 0 ||
		    !X509_set_issuer_name(crt, X509_get_subject_name(ca_crt)))
			goto out;
		if (add_ext(crt, ca_crt, NID_key_usage,
			    "critical,digitalSignature", e) < 0 ||
		    add_ext(crt, ca_crt, NID_ext_key_usage, eku, e) < 0 ||
		    add_ext(crt, ca_crt, NID_subject_alt_name,
			    "DNS:" CTL_SERVER_NAME, e) < 0 ||
		    add_ext(crt, ca_crt, NID_authority_key_identifier, "keyid",
			    e) < 0)
			goto out;
	}
	if (!X509_sign(crt, is_ca ? key : ca_key, EVP_sha256())) {
		ssl_err(e, "sign certificate");
		goto out;
	}
	r = 0;
out:
	if (r < 0) {
		if (!e->code)
			ssl_err(e, "make certificate");
		X509_free(crt);
		return NULL;
	}
	return crt;
}

static int write_pem(const char *dir, const char *name, X509 *crt,
		     EVP_PKEY *key, struct cerr *e)
{
	cleanup_free char *path = xasprintf("%s/%s", dir, name);
	BIO *b = BIO_new(BIO_s_mem());
	char *p;
	long n;
	int ok, r;

	ok = b && (crt ? PEM_write_bio_X509(b, crt)
		       : PEM_write_bio_PrivateKey_traditional(
			     b, key, NULL, NULL, 0, NULL, NULL));
	if (!ok) {
		BIO_free(b);
		return ssl_err(e, name);
	}
	n = BIO_get_mem_data(b, &p);
	r = fs_write_atomic(path, p, (size_t)n, crt ? 0644 : 0600, e);
	BIO_free(b);
	return r < 0 ? cerr_prefix(e, "write %s", path) : 0;
}

static int load_ca(const char *dir, X509 **crt, EVP_PKEY **key, struct cerr *e)
{
	cleanup_free char *cp = xasprintf("%s/ca.crt", dir);
	cleanup_free char *kp = xasprintf("%s/ca.key", dir);
	cleanup_fclose FILE *cf = fopen(cp, "re");
	cleanup_fclose FILE *kf = NULL;

	if (!cf)
		return cerr_sys(e, "open %s (run `cellctl pki init %s`)", cp,
				dir);
	kf = fopen(kp, "re");
	if (!kf)
		return cerr_sys(e, "open %s", kp);
	*crt = PEM_read_X509(cf, NULL, NULL, NULL);
	if (!*crt)
		return ssl_err(e, cp);
	*key = PEM_read_PrivateKey(kf, NULL, NULL, NULL);
	if (!*key) {
		X509_free(*crt);
		*crt = NULL;
		return ssl_err(e, kp);
	}
	return 0;
}

/* A leaf for the CA in dir, written as <name>.crt and <name>.key. */
static int issue(const char *dir, X509 *ca, EVP_PKEY *ca_key, const char *name,
		 const char *eku, struct cerr *e)
{
	EVP_PKEY *k = new_key(e);
	X509 *crt = NULL;
	cleanup_free char *cn = xasprintf("%s.crt", name);
	cleanup_free char *kn = xasprintf("%s.key", name);
	int r = -1;

	if (!k)
		return -1;
	crt = make_cert(k, ca, ca_key, eku, e);
	if (crt && write_pem(dir, kn, NULL, k, e) == 0 &&
	    write_pem(dir, cn, crt, NULL, e) == 0)
		r = 0;
	X509_free(crt);
	EVP_PKEY_free(k);
	return r;
}

int pki_init(const char *dir, bool force, struct cerr *e)
{
	cleanup_free char *cp = xasprintf("%s/ca.crt", dir);
	EVP_PKEY *k = NULL;
	X509 *ca = NULL;
	int r = -1;

	if (fs_mkdir_p(dir, 0700, e) < 0)
		return cerr_prefix(e, "pki init");
	if (fs_exists(cp) && !force)
		return cerr_set(e, EEXIST,
				"pki init: %s exists (--force makes a new CA)",
				cp);
	k = new_key(e);
	if (!k)
		return -1;
	ca = make_cert(k, NULL, NULL, NULL, e);
	if (ca && write_pem(dir, "ca.key", NULL, k, e) == 0 &&
	    write_pem(dir, "ca.crt", ca, NULL, e) == 0 &&
	    issue(dir, ca, k, "client", "clientAuth", e) == 0)
		r = 0;
	X509_free(ca);
	EVP_PKEY_free(k);
	return r < 0 ? cerr_prefix(e, "pki init %s", dir) : 0;
}

static int copy_file(const char *from, const char *dir, const char *name,
		     mode_t mode, struct cerr *e)
{
	struct buf b;
	cleanup_free char *to = xasprintf("%s/%s", dir, name);
	int r;

	buf_init(&b, 1 << 20);
	r = fs_read_file(from, &b, e);
	if (r == 0)
		r = fs_write_atomic(to, b.data, b.len, mode, e);
	buf_free(&b);
	return r;
}

int pki_cell(const char *dir, const char *boot_dir, struct cerr *e)
{
	X509 *ca = NULL;
	EVP_PKEY *k = NULL;
	cleanup_free char *ca_path = xasprintf("%s/ca.crt", dir);
	cleanup_free char *crt_path = xasprintf("%s/server.crt", dir);
	cleanup_free char *key_path = xasprintf("%s/server.key", dir);
	int r;

	if (load_ca(dir, &ca, &k, e) < 0)
		return cerr_prefix(e, "pki cell");
	r = issue(dir, ca, k, "server", "serverAuth", e);
	X509_free(ca);
	EVP_PKEY_free(k);
	if (r < 0)
		return cerr_prefix(e, "pki cell %s", dir);
	if (!boot_dir)
		return 0;
	if (fs_mkdir_p(boot_dir, 0700, e) < 0 ||
	    copy_file(ca_path, boot_dir, "ca.crt", 0644, e) < 0 ||
	    copy_file(crt_path, boot_dir, "server.crt", 0644, e) < 0 ||
	    copy_file(key_path, boot_dir, "server.key", 0600, e) < 0)
		return cerr_prefix(e, "pki cell: boot directory %s", boot_dir);
	return 0;
}
