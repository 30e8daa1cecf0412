// SPDX-License-Identifier: Apache-2.0
/* Unit tests of the registry authentication inputs: WWW-Authenticate
 * challenges, docker config.json look-ups and token endpoint replies. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/tap.h"
#include "cleanup.h"
#include "pull-internal.h"
#include "util.h"

static const struct {
	const char *in, *scheme, *realm, *service, *scope, *error;
} good_challenges[] = {
    {"Bearer realm=\"https://auth.docker.io/token\",service=\"registry."
     "docker.io\",scope=\"repository:library/busybox:pull\"",
     "Bearer", "https://auth.docker.io/token", "registry.docker.io",
     "repository:library/busybox:pull", NULL},
    {"Basic realm=\"Registry Realm\"", "Basic", "Registry Realm", NULL, NULL,
     NULL},
    {"bearer Realm=\"x\", SERVICE=y", "bearer", "x", "y", NULL, NULL},
    {"Bearer realm=\"https://auth.example/token\",service=\"r\","
     "error=\"insufficient_scope\",scope=\"repository:a:pull,push\"",
     "Bearer", "https://auth.example/token", "r", "repository:a:pull,push",
     "insufficient_scope"},
    {"Bearer realm=\"a\\\"b\\\\c\"", "Bearer", "a\"b\\c", NULL, NULL, NULL},
    {"Bearer realm = \"x\" , service = y", "Bearer", "x", "y", NULL, NULL},
    {"Bearer ,, realm=\"x\",,", "Bearer", "x", NULL, NULL, NULL},
    {"Bearer realm=\"x\",foo=\"bar\",charset=UTF-8", "Bearer", "x", NULL, NULL,
     NULL},
    {"Basic", "Basic", NULL, NULL, NULL, NULL},
    {"  Bearer realm=\"x\"  ", "Bearer", "x", NULL, NULL, NULL},
    {"Bearer\trealm=x", "Bearer", "x", NULL, NULL, NULL},
    {"Negotiate abc==", "Negotiate", NULL, NULL, NULL, NULL},
    {"Negotiate abc==, Bearer realm=\"x\"", "Negotiate", NULL, NULL, NULL,
     NULL},
    {"Negotiate, Bearer realm=\"x\"", "Negotiate", NULL, NULL, NULL, NULL},
    {"Bearer realm=\"x\",service=\"y\", Basic realm=\"z\"", "Bearer", "x", "y",
     NULL, NULL},
    {"Bearer realm=\"x\",scope=\"repository:a:pull repository:b:pull\"",
     "Bearer", "x", NULL, "repository:a:pull repository:b:pull", NULL},
    {"Bearer realm=\"\"", "Bearer", "", NULL, NULL, NULL},
    {"Bearer realm=\"tab\there\"", "Bearer", "tab\there", NULL, NULL, NULL},
    {"Bearer realm=", "Bearer", NULL, NULL, NULL, NULL}, /* token68 */
};

static const struct {
	const char *in, *msg;
} bad_challenges[] = {
    {"", "empty header"},
    {"Bearer realm=\"unterminated", "unterminated quoted string"},
    {"Bearer realm=\"x\\", "unterminated quoted string"},
    {"Bearer realm=\"x\" service=\"y\"", "expected ',' after parameter "
					 "'realm'"},
    {"Bearer realm=x y", "expected ',' after parameter 'realm'"},
    {"Bearer realm=\"x\",realm=\"y\"", "parameter 'realm' given twice"},
    {"Bearer REALM=\"x\",realm=\"y\"", "parameter 'realm' given twice"},
    {"Bearer realm=\"a\001b\"", "control character"},
    {"Bearer realm=\"a\nb\"", "control character"},
    {"Bearer realm=\"a\177b\"", "control character"},
    {"=\"x\"", "missing authentication scheme"},
    {"   ", "missing authentication scheme"},
    {"Bearer =x", "expected a parameter name"},
    {"Bearer realm=\"x\",=\"y\"", "expected a parameter name"},
    {"Bearer; realm=x", "expected a blank after the scheme"},
    {"Bearer realm \"x\"", "expected '=' after 'realm'"},
    {"Bearer realm=,service=x", "parameter 'realm' has no value"},
    {"Bearer realm=@", "parameter 'realm' has no value"},
};

static void test_www_auth(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(good_challenges); i++) {
		struct www_auth w;
		struct cerr e = {0};
		const char *in = good_challenges[i].in;

		if (www_auth_parse(in, &w, &e) < 0) {
			ok(0, "challenge %zu parses: %s", i, e.msg);
			continue;
		}
		is_str(w.scheme, good_challenges[i].scheme, "%zu: scheme", i);
		is_str(w.realm, good_challenges[i].realm, "%zu: realm", i);
		is_str(w.service, good_challenges[i].service, "%zu: service",
		       i);
		is_str(w.scope, good_challenges[i].scope, "%zu: scope", i);
		is_str(w.error, good_challenges[i].error, "%zu: error", i);
		www_auth_free(&w);
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad_challenges); i++) {
		struct www_auth w;
		struct cerr e = {0};
		int rc = www_auth_parse(bad_challenges[i].in, &w, &e);

		ok(rc < 0 && e.code == EINVAL &&
		       strstr(e.msg, bad_challenges[i].msg),
		   "bad challenge %zu refused: %s", i, e.msg);
		ok(!w.scheme && !w.realm && !w.service,
		   "bad challenge %zu leaves nothing behind", i);
		if (rc == 0)
			www_auth_free(&w);
	}
}

static void test_www_auth_limits(void)
{
	struct www_auth w, zero = {0};
	struct cerr e = {0};
	cleanup_free char *big = xmalloc(WWW_AUTH_MAX + 2);
	cleanup_free char *fits = NULL;

	ok(www_auth_parse(NULL, &w, &e) < 0 && e.code == EINVAL,
	   "NULL header refused");
	memset(big, 'a', WWW_AUTH_MAX + 1);
	big[WWW_AUTH_MAX + 1] = '\0';
	ok(www_auth_parse(big, &w, &e) < 0 && e.code == EFBIG,
	   "header over WWW_AUTH_MAX refused with EFBIG");
	fits = xasprintf("Bearer realm=\"%0*d\"", WWW_AUTH_MAX - 15, 0);
	ok(strlen(fits) == WWW_AUTH_MAX && www_auth_parse(fits, &w, &e) == 0 &&
	       strlen(w.realm) == WWW_AUTH_MAX - 15,
	   "header of exactly WWW_AUTH_MAX accepted");
	www_auth_free(&w);
	www_auth_free(&zero);
	www_auth_free(NULL);
	ok(1, "www_auth_free accepts zeroed and NULL");
}

/* base64 of the user:password pairs used below */
#define B_HUB "aHVidXNlcjpodWJwYXNz"  /* hubuser:hubpass */
#define B_GH "Z2g6dG9r"		      /* gh:tok */
#define B_QUAY "cTpwOndpdGg6Y29sb25z" /* q:p:with:colons */
#define B_EX "ZXg6cHc="		      /* ex:pw */
#define B_UPPER "dXA6VVA="	      /* up:UP */
#define B_A "YTox"		      /* a:1 */
#define B_B "Yjoy"		      /* b:2 */

static const char authfile[] =
    "{\"auths\":{"
    "\"https://index.docker.io/v1/\":{\"auth\":\"" B_HUB "\"},"
    "\"ghcr.io\":{\"auth\":\"" B_GH "\"},"
    "\"https://quay.io\":{\"auth\":\"" B_QUAY "\"},"
    "\"http://insecure.local:5000/v2/\":{\"username\":\"u\","
    "\"password\":\"p\"},"
    "\"localhost:5000\":{\"identitytoken\":\"xyz\"},"
    "\"registry.example.com/v1/\":{\"auth\":\"" B_EX "\"},"
    "\"broken.example\":{\"auth\":\"!!!!\"},"
    "\"Upper.Example.COM\":{\"auth\":\"" B_UPPER "\"},"
    "\"helper.example\":{},"
    "\"nopass.example\":{\"username\":\"solo\"},"
    "\"both.example\":{\"auth\":\"" B_A "\",\"username\":\"x\","
    "\"password\":\"y\"},"
    "\"emptyauth.example\":{\"auth\":\"\",\"username\":\"v\","
    "\"password\":\"w\"}"
    "},\"credsStore\":\"desktop\"}";

static void test_authfile(void)
{
	static const struct {
		const char *registry, *user, *pass;
	} cases[] = {
	    {DOCKER_HUB_HOST, "hubuser", "hubpass"},
	    {"docker.io", "hubuser", "hubpass"},
	    {"ghcr.io", "gh", "tok"},
	    {"quay.io", "q", "p:with:colons"},
	    {"insecure.local:5000", "u", "p"},
	    {"insecure.local", NULL, NULL},
	    {"localhost:5000", NULL, NULL},
	    {"registry.example.com", "ex", "pw"},
	    {"upper.example.com", "up", "UP"},
	    {"helper.example", NULL, NULL},
	    {"nopass.example", "solo", ""},
	    {"both.example", "a", "1"},
	    {"emptyauth.example", "v", "w"},
	    {"nothing.example", NULL, NULL},
	    {"ghcr.io.evil", NULL, NULL},
	};
	struct cerr e = {0};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		cleanup_free char *user = NULL, *pass = NULL;
		int rc = authfile_lookup(authfile, strlen(authfile),
					 cases[i].registry, &user, &pass, &e);

		ok(rc == 0, "look up %s (%s)", cases[i].registry,
		   rc ? e.msg : "ok");
		is_str(user, cases[i].user, "%s: user", cases[i].registry);
		is_str(pass, cases[i].pass, "%s: password", cases[i].registry);
	}
}

static void test_authfile_hub(void)
{
	static const struct {
		const char *doc, *user;
	} cases[] = {
	    {"{\"auths\":{\"docker.io\":{\"auth\":\"" B_A "\"}}}", "a"},
	    {"{\"auths\":{\"index.docker.io\":{\"auth\":\"" B_A "\"}}}", "a"},
	    {"{\"auths\":{\"registry-1.docker.io\":{\"auth\":\"" B_A "\"}}}",
	     "a"},
	    {"{\"auths\":{\"https://registry-1.docker.io/v2/\":{\"auth\":\"" B_A
	     "\"}}}",
	     "a"},
	    /* The canonical key wins over an earlier alias. */
	    {"{\"auths\":{\"docker.io\":{\"auth\":\"" B_A "\"},"
	     "\"https://index.docker.io/v1/\":{\"auth\":\"" B_B "\"}}}",
	     "b"},
	    /* An identity token alone is skipped, not fatal. */
	    {"{\"auths\":{\"https://index.docker.io/v1/\":{"
	     "\"identitytoken\":\"t\"},\"docker.io\":{\"auth\":\"" B_A "\"}}}",
	     "a"},
	    {"{\"auths\":{\"quay.io\":{\"auth\":\"" B_A "\"}}}", NULL},
	    {"{\"credsStore\":\"osxkeychain\"}", NULL},
	    {"{\"auths\":null}", NULL},
	    {"{\"auths\":{}}", NULL},
	};
	struct cerr e = {0};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		cleanup_free char *user = NULL, *pass = NULL;
		int rc = authfile_lookup(cases[i].doc, strlen(cases[i].doc),
					 DOCKER_HUB_HOST, &user, &pass, &e);

		ok(rc == 0, "hub file %zu (%s)", i, rc ? e.msg : "ok");
		is_str(user, cases[i].user, "hub file %zu: user", i);
		ok(!user == !pass, "hub file %zu: user and password together",
		   i);
	}
}

static void test_authfile_nul(void)
{
	static const struct {
		const char *b64, *pass;
	} cases[] = {
	    {"dTpwAA==", "p"}, /* u:p\0 */
	    {"dTpwAAA=", "p"}, /* u:p\0\0 */
	    {"dToAcA==", "p"}, /* u:\0p */
	};
	struct cerr e = {0};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		cleanup_free char *doc = xasprintf(
		    "{\"auths\":{\"r.io\":{\"auth\":\"%s\"}}}", cases[i].b64);
		cleanup_free char *user = NULL, *pass = NULL;

		ok(authfile_lookup(doc, strlen(doc), "r.io", &user, &pass,
				   &e) == 0,
		   "NUL around the password: %s", cases[i].b64);
		is_str(pass, cases[i].pass, "NULs dropped as Docker does");
	}
}

static const struct {
	const char *doc, *registry, *msg;
	int code;
} bad_authfiles[] = {
    {"{\"auths\":{\"r.io\":{\"auth\":\"!!!!\"}}}", "r.io",
     "auth of 'r.io' is not valid base64", EINVAL},
    {"{\"auths\":{\"r.io\":{\"auth\":\"YTox=\"}}}", "r.io", "not valid base64",
     EINVAL},
    {"{\"auths\":{\"r.io\":{\"auth\":\"dXNlcjpwYXNzd29yZA\"}}}", "r.io",
     "not valid base64", EINVAL}, /* padding missing */
    {"{\"auths\":{\"r.io\":{\"auth\":\"YQ=x\"}}}", "r.io", "not valid base64",
     EINVAL},
    {"{\"auths\":{\"r.io\":{\"auth\":\"Y===\"}}}", "r.io", "not valid base64",
     EINVAL},
    {"{\"auths\":{\"r.io\":{\"auth\":\"YTox\\nYTox\"}}}", "r.io",
     "not valid base64", EINVAL},
    {"{\"auths\":{\"r.io\":{\"auth\":\"dXNlcg==\"}}}", "r.io",
     "does not hold user:password", EINVAL}, /* "user" */
    {"{\"auths\":{\"r.io\":{\"auth\":\"OnBhc3M=\"}}}", "r.io",
     "does not hold user:password", EINVAL}, /* ":pass" */
    {"{\"auths\":{\"r.io\":{\"auth\":\"dQB4OnA=\"}}}", "r.io",
     "does not hold user:password", EINVAL}, /* "u\0x:p" */
    {"{\"auths\":{\"r.io\":{\"auth\":\"dTpwAHE=\"}}}", "r.io",
     "holds a NUL byte", EINVAL}, /* "u:p\0q" */
    {"{\"auths\":{\"r.io\":{\"auth\":5}}}", "r.io",
     "auth of 'r.io' is not a string", EINVAL},
    {"{\"auths\":{\"r.io\":[]}}", "r.io",
     "auths entry 'r.io' is not an "
     "object",
     EINVAL},
    {"{\"auths\":{\"r.io\":{\"username\":\"u\",\"password\":1}}}", "r.io",
     "password of 'r.io' is not a string", EINVAL},
    {"{\"auths\":[]}", "r.io", "'auths' is not an object", EINVAL},
    {"{\"auths\":", "r.io", "malformed JSON", EINVAL},
    {"[]", "r.io", "not an object", EINVAL},
    {"", "r.io", "empty document", EINVAL},
    {"{}", "", "no registry", EINVAL},
};

static void test_bad_authfiles(void)
{
	struct cerr e = {0};
	char *user, *pass;
	const char *ok_doc = "{\"auths\":{\"a.io\":{\"auth\":\"!!!!\"},"
			     "\"b.io\":{\"auth\":\"" B_A "\"}}}";
	cleanup_free char *huge = xcalloc(AUTHFILE_MAX + 1, 1);

	for (size_t i = 0; i < ARRAY_SIZE(bad_authfiles); i++) {
		int rc = authfile_lookup(
		    bad_authfiles[i].doc, strlen(bad_authfiles[i].doc),
		    bad_authfiles[i].registry, &user, &pass, &e);

		ok(rc < 0 && e.code == bad_authfiles[i].code &&
		       strstr(e.msg, bad_authfiles[i].msg) &&
		       str_has_prefix(e.msg, "auth file: "),
		   "bad auth file %zu refused: %s", i, e.msg);
		ok(!user && !pass, "bad auth file %zu: no credentials", i);
		if (rc == 0) {
			free(user);
			free(pass);
		}
	}
	ok(authfile_lookup(ok_doc, strlen(ok_doc), "b.io", &user, &pass, &e) ==
		   0 &&
	       user && !strcmp(user, "a"),
	   "a broken entry for another registry does not matter");
	free(user);
	free(pass);
	ok(authfile_lookup(huge, AUTHFILE_MAX + 1, "r.io", &user, &pass, &e) <
		   0 &&
	       e.code == EFBIG,
	   "auth file over AUTHFILE_MAX refused with EFBIG");
	ok(authfile_lookup(NULL, 0, "r.io", &user, &pass, &e) < 0 &&
	       e.code == EINVAL,
	   "NULL auth file refused");
	ok(authfile_lookup("{}", 2, NULL, &user, &pass, &e) < 0 &&
	       e.code == EINVAL,
	   "NULL registry refused");
}

static const struct {
	const char *doc, *token;
	long ttl;
} good_tokens[] = {
    {"{\"token\":\"abc.def.ghi\",\"expires_in\":300,\"issued_at\":\"2024-"
     "01-01T00:00:00Z\"}",
     "abc.def.ghi", 300},
    {"{\"access_token\":\"xyz\"}", "xyz", 60},
    {"{\"token\":\"t\",\"access_token\":\"a\"}", "t", 60},
    {"{\"access_token\":\"a\",\"token\":\"t\"}", "t", 60},
    {"{\"token\":\"\",\"access_token\":\"a\"}", "a", 60},
    {"{\"token\":null,\"access_token\":\"a\"}", "a", 60},
    {"{\"token\":5,\"access_token\":\"a\"}", "a", 60},
    {"{\"token\":\"t\",\"expires_in\":10}", "t", 60},
    {"{\"token\":\"t\",\"expires_in\":-5}", "t", 60},
    {"{\"token\":\"t\",\"expires_in\":0}", "t", 60},
    {"{\"token\":\"t\",\"expires_in\":300.7}", "t", 300},
    {"{\"token\":\"t\",\"expires_in\":1e12}", "t", 86400},
    {"{\"token\":\"t\",\"expires_in\":9223372036854775807}", "t", 86400},
    {"{\"token\":\"t\",\"expires_in\":null}", "t", 60},
    {"{\"token\":\"t=+/_-~.\"}", "t=+/_-~.", 60},
};

static const struct {
	const char *doc, *msg;
} bad_tokens[] = {
    {"{\"expires_in\":300}", "neither 'token' nor 'access_token'"},
    {"{\"token\":\"\"}", "neither 'token' nor 'access_token'"},
    {"{\"token\":\"t\",\"expires_in\":\"300\"}", "expires_in is not a number"},
    {"{\"token\":\"t\",\"expires_in\":true}", "expires_in is not a number"},
    {"{\"token\":\"a b\"}", "not allowed in an HTTP header"},
    {"{\"token\":\"a\\r\\nX-Evil: 1\"}", "not allowed in an HTTP header"},
    {"{\"token\":\"\\u00e9\"}", "not allowed in an HTTP header"},
    {"{\"token\":", "malformed JSON"},
    {"[\"token\"]", "not an object"},
    {"", "empty document"},
};

static void test_tokens(void)
{
	struct cerr e = {0};
	cleanup_free char *huge = xcalloc(AUTHFILE_MAX + 1, 1);
	char *tok;
	long ttl;

	for (size_t i = 0; i < ARRAY_SIZE(good_tokens); i++) {
		const char *doc = good_tokens[i].doc;

		tok = NULL;
		ok(token_reply_parse(doc, strlen(doc), &tok, &ttl, &e) == 0,
		   "token reply %zu parses (%s)", i, e.msg);
		is_str(tok, good_tokens[i].token, "token reply %zu: token", i);
		ok(ttl == good_tokens[i].ttl, "token reply %zu: ttl %ld", i,
		   ttl);
		free(tok);
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad_tokens); i++) {
		const char *doc = bad_tokens[i].doc;

		ok(token_reply_parse(doc, strlen(doc), &tok, &ttl, &e) < 0 &&
		       e.code == EINVAL && strstr(e.msg, bad_tokens[i].msg) &&
		       !tok,
		   "bad token reply %zu refused: %s", i, e.msg);
	}
	ok(token_reply_parse(huge, AUTHFILE_MAX + 1, &tok, &ttl, &e) < 0 &&
	       e.code == EFBIG,
	   "token reply over the cap refused with EFBIG");
	ok(token_reply_parse(NULL, 0, &tok, &ttl, &e) < 0 && e.code == EINVAL,
	   "NULL token reply refused");
}

int main(void)
{
	test_www_auth();
	test_www_auth_limits();
	test_authfile();
	test_authfile_hub();
	test_authfile_nul();
	test_bad_authfiles();
	test_tokens();
	return tap_done();
}
