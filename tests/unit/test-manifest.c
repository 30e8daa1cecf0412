// SPDX-License-Identifier: Apache-2.0
/* Unit tests of the registry document parsers: manifests and indexes (with
 * platform selection and layer compression), platforms and image configs. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "../lib/tap.h"
#include "buf.h"
#include "cleanup.h"
#include "digest.h"
#include "pull-internal.h"
#include "util.h"

#define H1 "1111111111111111111111111111111111111111111111111111111111111111"
#define H2 "2222222222222222222222222222222222222222222222222222222222222222"
#define H3 "3333333333333333333333333333333333333333333333333333333333333333"
#define H4 "4444444444444444444444444444444444444444444444444444444444444444"
#define H5 "5555555555555555555555555555555555555555555555555555555555555555"
#define H6 "6666666666666666666666666666666666666666666666666666666666666666"
#define H7 "7777777777777777777777777777777777777777777777777777777777777777"
#define H8 "8888888888888888888888888888888888888888888888888888888888888888"
#define H9 "9999999999999999999999999999999999999999999999999999999999999999"

#define LT_DOCKER "application/vnd.docker.image.rootfs.diff.tar.gzip"
#define LT_OCI "application/vnd.oci.image.layer.v1.tar+gzip"
#define CT_DOCKER "application/vnd.docker.container.image.v1+json"
#define CT_OCI "application/vnd.oci.image.config.v1+json"

#define DESC(mt, hex, size)                                                    \
	"{\"mediaType\":\"" mt "\",\"digest\":\"sha256:" hex                   \
	"\",\"size\":" #size "}"
#define ENTRY(mt, hex, plat)                                                   \
	"{\"mediaType\":\"" mt "\",\"digest\":\"sha256:" hex                   \
	"\",\"size\":1234,\"platform\":" plat "}"
#define PLAT(os, arch) "{\"os\":\"" os "\",\"architecture\":\"" arch "\"}"
#define PLATV(os, arch, v)                                                     \
	"{\"os\":\"" os "\",\"architecture\":\"" arch "\",\"variant\":\"" v    \
	"\"}"

static const char docker_manifest[] =
    "{\"schemaVersion\":2,\"mediaType\":\"" MT_DOCKER_MANIFEST "\","
    "\"config\":" DESC(CT_DOCKER, H1,
		       1469) ","
			     "\"layers\":[" DESC(LT_DOCKER, H2,
						 2811478) "," DESC(LT_DOCKER,
								   H3, 32) "]}";

static const char oci_manifest_bare[] = "{\"schemaVersion\":2,\"config\":" DESC(
    CT_OCI, H1,
    581) ","
	 "\"layers\":[" DESC(LT_OCI, H2,
			     3401613) "],"
				      "\"annotations\":{\"org.opencontainers."
				      "image.created\":\"2024\"}}";

static const char docker_list[] =
    "{\"schemaVersion\":2,\"mediaType\":\"" MT_DOCKER_LIST "\","
    "\"manifests\":[" ENTRY(MT_DOCKER_MANIFEST, H1, PLAT("linux", "amd64")) "," ENTRY(MT_DOCKER_MANIFEST, H2, PLATV("linux", "arm", "v5")) "," ENTRY(
	MT_DOCKER_MANIFEST, H3,
	PLATV(
	    "linux", "arm",
	    "v6")) "," ENTRY(MT_DOCKER_MANIFEST, H4,
			     PLATV(
				 "linux",
				 "arm",
				 "v7")) "," ENTRY(MT_DOCKER_MANIFEST, H5,
						  PLATV(
						      "linux",
						      "arm64",
						      "v8")) "," ENTRY(MT_DOCKER_MANIFEST,
								       H6,
								       PLAT(
									   "lin"
									   "ux",
									   "38"
									   "6")) "," ENTRY(MT_DOCKER_MANIFEST,
											   H7,
											   PLAT(
											       "linux",
											       "ppc64le")) "," ENTRY(MT_DOCKER_MANIFEST,
														     H8,
														     PLAT(
															 "linux",
															 "s390x")) "]}";

/* As buildkit pushes it: attestation manifests next to the images, and an
 * arm64 entry without a variant. */
static const char oci_index[] =
    "{\"schemaVersion\":2,\"mediaType\":\"" MT_OCI_INDEX "\","
    "\"manifests\":[" ENTRY(MT_OCI_MANIFEST, H9, PLAT("unknown", "unknown")) "," ENTRY(
	MT_OCI_MANIFEST, H1,
	PLAT(
	    "linux",
	    "amd64")) "," ENTRY(MT_OCI_MANIFEST, H2,
				PLAT(
				    "linux",
				    "arm64")) "," ENTRY(MT_OCI_MANIFEST, H3,
							PLAT(
							    "windows",
							    "amd64")) "," ENTRY(MT_OCI_MANIFEST,
										H4,
										PLAT(
										    "unknown",
										    "unknown")) "]}";

static const char oci_index_bare[] =
    "{\"schemaVersion\":2,\"manifests\":[" ENTRY(MT_OCI_MANIFEST, H1,
						 PLAT("linux", "amd64")) "]}";

static void test_image_manifests(void)
{
	struct manifest m;
	struct cerr e = {0};
	enum compression c;

	ok(manifest_parse(docker_manifest, strlen(docker_manifest), NULL, &m,
			  &e) == 0,
	   "docker schema2 manifest parses (%s)", e.msg);
	ok(m.kind == MANIFEST_IMAGE, "docker manifest is an image");
	is_str(m.media_type, MT_DOCKER_MANIFEST, "docker media type");
	is_str(m.config.digest, "sha256:" H1, "config digest");
	ok(m.config.size == 1469, "config size");
	is_str(m.config.media_type, CT_DOCKER, "config media type");
	ok(m.n_layers == 2, "two layers");
	is_str(m.layers[0].digest, "sha256:" H2, "bottom layer first");
	ok(m.layers[0].size == 2811478 && m.layers[1].size == 32,
	   "layer sizes");
	ok(layer_compression(m.layers[1].media_type, &c, &e) == 0 &&
	       c == COMP_GZIP,
	   "docker layer is gzip");
	manifest_free(&m);
	ok(m.layers == NULL && m.media_type == NULL, "manifest_free zeroes");

	ok(manifest_parse(oci_manifest_bare, strlen(oci_manifest_bare),
			  MT_OCI_MANIFEST "; charset=utf-8", &m, &e) == 0 &&
	       m.kind == MANIFEST_IMAGE,
	   "OCI manifest without mediaType: Content-Type decides");
	is_str(m.media_type, MT_OCI_MANIFEST, "OCI media type");
	manifest_free(&m);
	ok(manifest_parse(oci_manifest_bare, strlen(oci_manifest_bare), NULL,
			  &m, &e) == 0 &&
	       m.kind == MANIFEST_IMAGE,
	   "OCI manifest, no types at all: the shape decides");
	is_str(m.media_type, MT_OCI_MANIFEST, "shape implies OCI");
	manifest_free(&m);
	ok(manifest_parse(oci_manifest_bare, strlen(oci_manifest_bare),
			  "application/json", &m, &e) == 0 &&
	       m.kind == MANIFEST_IMAGE,
	   "an unknown Content-Type falls back to the shape");
	manifest_free(&m);
	ok(manifest_parse(docker_list, strlen(docker_list), MT_DOCKER_MANIFEST,
			  &m, &e) == 0 &&
	       m.kind == MANIFEST_INDEX,
	   "the document's mediaType wins over the Content-Type");
	manifest_free(&m);
	manifest_free(&m);
	ok(1, "manifest_free twice is harmless");
}

static void test_indexes(void)
{
	struct manifest m;
	struct cerr e = {0};

	ok(manifest_parse(docker_list, strlen(docker_list), NULL, &m, &e) == 0,
	   "docker manifest list parses (%s)", e.msg);
	ok(m.kind == MANIFEST_INDEX && m.n_manifests == 8, "8 entries");
	is_str(m.media_type, MT_DOCKER_LIST, "list media type");
	ok(m.manifests[1].has_platform, "entry has a platform");
	is_str(m.manifests[1].platform.variant, "v5", "arm variant kept");
	ok(m.manifests[1].size == 1234, "entry size");
	manifest_free(&m);

	ok(manifest_parse(oci_index, strlen(oci_index), NULL, &m, &e) == 0 &&
	       m.n_manifests == 5,
	   "OCI index with attestations parses");
	is_str(m.manifests[2].platform.variant, "v8",
	       "arm64 without variant is normalised to v8");
	manifest_free(&m);

	ok(manifest_parse(oci_index_bare, strlen(oci_index_bare), NULL, &m,
			  &e) == 0 &&
	       m.kind == MANIFEST_INDEX,
	   "OCI index without mediaType: the shape decides");
	is_str(m.media_type, MT_OCI_INDEX, "index shape implies OCI");
	manifest_free(&m);
	ok(manifest_parse(oci_index_bare, strlen(oci_index_bare),
			  " " MT_DOCKER_LIST " ;q=1", &m, &e) == 0 &&
	       m.kind == MANIFEST_INDEX,
	   "Content-Type with blanks and parameters");
	is_str(m.media_type, MT_DOCKER_LIST, "Content-Type's spelling kept");
	manifest_free(&m);
}

static const struct {
	const char *doc, *ctype, *msg;
	int code;
} bad_manifests[] = {
    {"{\"schemaVersion\":1,\"name\":\"x\",\"fsLayers\":[]}", NULL,
     "schema1 manifests are not supported", EINVAL},
    {"{\"schemaVersion\":2,\"mediaType\":\"application/"
     "vnd.docker.distribution.manifest.v1+prettyjws\"}",
     NULL, "schema1 manifests are not supported", EINVAL},
    {"{\"schemaVersion\":2,\"layers\":[]}",
     "application/vnd.docker.distribution.manifest.v1+json",
     "schema1 manifests are not supported", EINVAL},
    {"{\"layers\":[]}", NULL, "schemaVersion is missing", EINVAL},
    {"{\"schemaVersion\":\"2\"}", NULL, "not an integer", EINVAL},
    {"{\"schemaVersion\":3}", NULL, "unsupported schemaVersion 3", EINVAL},
    {"{\"schemaVersion\":2,\"mediaType\":\"text/html\"}", NULL,
     "unsupported manifest media type 'text/html'", EINVAL},
    {"{\"schemaVersion\":2,\"mediaType\":5}", NULL, "mediaType is not a string",
     EINVAL},
    {"{\"schemaVersion\":2}", NULL, "neither an image manifest nor an index",
     EINVAL},
    {"{\"schemaVersion\":2,\"config\":" DESC(
	 CT_OCI, H1, 1) ",\"layers\":[" DESC(LT_OCI, H2,
					     1) ",{\"mediaType\":\"" LT_OCI
						"\",\"digest\":\"sha256:abc\","
						"\"size\":1}]}",
     NULL, "layers[1]: malformed digest", EINVAL},
    {"{\"schemaVersion\":2,\"config\":" DESC(
	 CT_OCI, H1, 1) ",\"layers\":[" DESC(LT_OCI, H2, -1) "]}",
     NULL, "layers[0]: size is negative", EINVAL},
    {"{\"schemaVersion\":2,\"config\":" DESC(
	 CT_OCI, H1, 1) ",\"layers\":[" DESC(LT_OCI, H2, 1.5) "]}",
     NULL, "size is missing or not an integer", EINVAL},
    {"{\"schemaVersion\":2,\"config\":" DESC(
	 CT_OCI, H1, 1) ",\"layers\":["
			"{\"digest\":\"sha256:" H2 "\",\"size\":1}]}",
     NULL, "layers[0]: mediaType is missing", EINVAL},
    {"{\"schemaVersion\":2,\"config\":" DESC(
	 CT_OCI, H1, 1) ",\"layers\":["
			"{\"mediaType\":\"" LT_OCI "\",\"size\":1}]}",
     NULL, "layers[0]: digest is missing", EINVAL},
    {"{\"schemaVersion\":2,\"config\":" DESC(
	 CT_OCI, H1, 1) ",\"layers\":["
			"{\"mediaType\":\"" LT_OCI "\",\"digest\":\"sha256:" H2
			"\"}]}",
     NULL, "layers[0]: size is missing", EINVAL},
    {"{\"schemaVersion\":2,\"config\":" DESC(CT_OCI, H1, 1) ",\"layers\":[7]}",
     NULL, "layers[0]: descriptor is not an object", EINVAL},
    {"{\"schemaVersion\":2,\"mediaType\":\"" MT_OCI_MANIFEST
     "\",\"layers\":[]}",
     NULL, "'config' is missing", EINVAL},
    {"{\"schemaVersion\":2,\"config\":{\"digest\":\"sha256:xyz\",\"size\":"
     "1},\"layers\":[]}",
     NULL, "config: malformed digest", EINVAL},
    {"{\"schemaVersion\":2,\"mediaType\":\"" MT_OCI_MANIFEST
     "\",\"config\":" DESC(CT_OCI, H1, 1) ",\"layers\":{}}",
     NULL, "'layers' is missing or not an array", EINVAL},
    {"{\"schemaVersion\":2,\"mediaType\":\"" MT_OCI_MANIFEST
     "\",\"manifests\":[]}",
     NULL, "'config' is missing", EINVAL},
    {"{\"schemaVersion\":2,\"mediaType\":\"" MT_OCI_INDEX
     "\",\"manifests\":[{\"digest\":\"sha256:" H1
     "\",\"size\":1,\"platform\":{\"architecture\":\"amd64\"}}]}",
     NULL, "manifests[0]: platform needs os and architecture", EINVAL},
    {"{\"schemaVersion\":2,\"manifests\":[{\"digest\":\"sha256:" H1
     "\",\"size\":1,\"platform\":\"linux/amd64\"}]}",
     NULL, "platform is not an object", EINVAL},
    {"{\"schemaVersion\":2,\"manifests\":[" ENTRY(
	 MT_OCI_MANIFEST, H1,
	 PLAT("linuxlinuxlinuxlinuxlinuxlinuxlinux", "amd64")) "]}",
     NULL, "platform os must be 1 to 31 bytes", EINVAL},
    {"{\"schemaVersion\":2,\"manifests\":[" ENTRY(MT_OCI_MANIFEST, H1,
						  PLAT("linux", "amd 64")) "]}",
     NULL, "platform architecture 'amd 64' holds", EINVAL},
    {"{\"schemaVersion\":2,\"manifests\":[" ENTRY(
	 MT_OCI_MANIFEST, H1,
	 "{\"os\":\"linux\",\"architecture\":"
	 "\"arm\",\"variant\":7}") "]}",
     NULL, "variant is not a string", EINVAL},
    {"{\"schemaVersion\":2,", NULL, "malformed JSON", EINVAL},
    {"[1,2]", NULL, "not an object", EINVAL},
    {"", NULL, "empty document", EINVAL},
};

static void test_bad_manifests(void)
{
	for (size_t i = 0; i < ARRAY_SIZE(bad_manifests); i++) {
		struct manifest m;
		struct cerr e = {0};
		const char *doc = bad_manifests[i].doc;
		int rc = manifest_parse(doc, strlen(doc),
					bad_manifests[i].ctype, &m, &e);

		ok(rc < 0 && e.code == bad_manifests[i].code &&
		       strstr(e.msg, bad_manifests[i].msg) &&
		       str_has_prefix(e.msg, "manifest: "),
		   "bad manifest %zu refused: %s", i, e.msg);
		if (rc == 0 || !strstr(e.msg, bad_manifests[i].msg))
			printf("#   want '%s'\n", bad_manifests[i].msg);
		ok(!m.media_type && !m.layers && !m.manifests &&
		       !m.config.digest,
		   "bad manifest %zu leaves nothing behind", i);
		manifest_free(&m);
	}
}

/* A document with n descriptors in the array named key. */
static char *many(const char *key, size_t n, bool index)
{
	struct buf b;
	struct cerr e = {0};
	const char *one =
	    index ? ENTRY(MT_OCI_MANIFEST, H1, PLAT("linux", "amd64"))
		  : DESC(LT_OCI, H2, 1);

	buf_init(&b, 0);
	buf_append(&b, "{\"schemaVersion\":2,\"config\":", 28, &e);
	buf_append(&b, DESC(CT_OCI, H1, 1), strlen(DESC(CT_OCI, H1, 1)), &e);
	buf_append(&b, ",\"", 2, &e);
	buf_append(&b, key, strlen(key), &e);
	buf_append(&b, "\":[", 3, &e);
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_append(&b, ",", 1, &e);
		buf_append(&b, one, strlen(one), &e);
	}
	buf_append(&b, "]}", 2, &e);
	return buf_steal(&b, NULL);
}

static void test_caps(void)
{
	struct manifest m;
	struct cerr e = {0};
	cleanup_free char *l1024 = many("layers", 1024, false);
	cleanup_free char *l1025 = many("layers", 1025, false);
	cleanup_free char *i4096 = many("manifests", 4096, true);
	cleanup_free char *i4097 = many("manifests", 4097, true);
	cleanup_free char *l0 = many("layers", 0, false);
	cleanup_free char *huge = xcalloc(MANIFEST_MAX + 1, 1);

	ok(manifest_parse(l1024, strlen(l1024), NULL, &m, &e) == 0 &&
	       m.n_layers == 1024,
	   "1024 layers accepted");
	manifest_free(&m);
	ok(manifest_parse(l1025, strlen(l1025), NULL, &m, &e) < 0 &&
	       strstr(e.msg, "1025 layers exceed the limit of 1024"),
	   "1025 layers refused: %s", e.msg);
	ok(manifest_parse(i4096, strlen(i4096), NULL, &m, &e) == 0 &&
	       m.n_manifests == 4096,
	   "4096 index entries accepted");
	manifest_free(&m);
	ok(manifest_parse(i4097, strlen(i4097), NULL, &m, &e) < 0 &&
	       strstr(e.msg, "4097 manifests exceed"),
	   "4097 index entries refused");
	ok(manifest_parse(l0, strlen(l0), NULL, &m, &e) == 0 && m.n_layers == 0,
	   "an image without layers is accepted");
	manifest_free(&m);
	ok(manifest_parse(huge, MANIFEST_MAX + 1, NULL, &m, &e) < 0 &&
	       e.code == EFBIG,
	   "a document over MANIFEST_MAX is refused with EFBIG");
	ok(manifest_parse(NULL, 10, NULL, &m, &e) < 0 && e.code == EINVAL,
	   "NULL buffer refused");
}

static const struct descriptor *pick(const struct manifest *m, const char *want,
				     struct cerr *e)
{
	struct platform p;

	if (platform_parse(want, &p, e) < 0)
		return NULL;
	return manifest_select(m, &p, e);
}

static void test_select(void)
{
	static const struct {
		const char *want, *hex;
	} list_cases[] = {
	    {"linux/amd64", H1},    {"linux/arm/v5", H2},
	    {"linux/arm/v6", H3},   {"linux/arm/v7", H4},
	    {"linux/arm", H4},	    {"linux/armhf", H4},
	    {"linux/arm64", H5},    {"linux/arm64/v8", H5},
	    {"linux/aarch64", H5},  {"Linux/X86_64", H1},
	    {"linux/386", H6},	    {"linux/i386", H6},
	    {"linux/ppc64le", H7},  {"linux/s390x", H8},
	    {"linux/amd64/v1", H1},
	};
	struct manifest m;
	struct cerr e = {0};
	const struct descriptor *d;

	manifest_parse(docker_list, strlen(docker_list), NULL, &m, &e);
	for (size_t i = 0; i < ARRAY_SIZE(list_cases); i++) {
		d = pick(&m, list_cases[i].want, &e);
		ok(d && !strcmp(digest_hex(d->digest), list_cases[i].hex),
		   "%s selects the right entry", list_cases[i].want);
	}
	d = pick(&m, "linux/riscv64", &e);
	ok(!d && e.code == ENOENT, "missing platform: ENOENT");
	ok(strstr(e.msg, "no image for platform linux/riscv64") &&
	       strstr(e.msg, "available: linux/amd64, linux/arm/v5, "
			     "linux/arm/v6, linux/arm/v7, linux/arm64/v8"),
	   "the error lists what is there: %s", e.msg);
	d = pick(&m, "linux/arm/v8", &e);
	ok(!d && e.code == ENOENT, "arm/v8 does not fall back to arm/v7");
	d = pick(&m, "windows/amd64", &e);
	ok(!d && e.code == ENOENT, "os must match");
	manifest_free(&m);

	manifest_parse(oci_index, strlen(oci_index), NULL, &m, &e);
	d = pick(&m, "linux/amd64", &e);
	ok(d && d == &m.manifests[1], "attestation entries are skipped");
	d = pick(&m, "linux/arm64/v8", &e);
	ok(d && d == &m.manifests[2], "arm64/v8 matches an arm64 entry");
	d = pick(&m, "windows/amd64", &e);
	ok(d && d == &m.manifests[3], "windows entry");
	d = pick(&m, "unknown/unknown", &e);
	ok(!d && e.code == ENOENT, "attestations are never selected");
	ok(!strstr(e.msg, "unknown/unknown,") &&
	       strstr(e.msg, "available: linux/amd64, linux/arm64/v8, "
			     "windows/amd64)"),
	   "nor listed: %s", e.msg);
	manifest_free(&m);
}

static void test_select_variants(void)
{
	static const char plain_then_v3[] =
	    "{\"schemaVersion\":2,\"manifests\":[" ENTRY(
		MT_OCI_MANIFEST, H1,
		PLAT("linux", "amd64")) "," ENTRY(MT_OCI_MANIFEST, H2,
						  PLATV("linux", "amd64",
							"v3")) "]}";
	static const char only_plain[] =
	    "{\"schemaVersion\":2,\"manifests\":[" ENTRY(
		MT_OCI_MANIFEST, H1, PLAT("linux", "riscv64")) "]}";
	static const char no_platform[] =
	    "{\"schemaVersion\":2,\"manifests\":["
	    "{\"mediaType\":\"" MT_OCI_INDEX "\",\"digest\":\"sha256:" H1
	    "\",\"size\":1},"
	    "{\"mediaType\":\"" MT_OCI_MANIFEST "\",\"digest\":\"sha256:" H2
	    "\",\"size\":1}]}";
	static const char nested_only[] =
	    "{\"schemaVersion\":2,\"manifests\":["
	    "{\"mediaType\":\"" MT_OCI_INDEX "\",\"digest\":\"sha256:" H1
	    "\",\"size\":1}]}";
	static const char empty[] = "{\"schemaVersion\":2,\"manifests\":[]}";
	struct manifest m;
	struct cerr e = {0};
	const struct descriptor *d;
	struct platform amd64 = {"linux", "amd64", ""};

	manifest_parse(plain_then_v3, strlen(plain_then_v3), NULL, &m, &e);
	d = pick(&m, "linux/amd64/v3", &e);
	ok(d == &m.manifests[1], "exact variant beats an earlier plain entry");
	d = pick(&m, "linux/amd64", &e);
	ok(d == &m.manifests[0], "no variant wanted: the plain entry");
	manifest_free(&m);

	manifest_parse(only_plain, strlen(only_plain), NULL, &m, &e);
	d = pick(&m, "linux/riscv64/rva22", &e);
	ok(d == &m.manifests[0],
	   "an entry without variant matches when none has the exact one");
	manifest_free(&m);

	manifest_parse(no_platform, strlen(no_platform), NULL, &m, &e);
	d = pick(&m, "linux/s390x", &e);
	ok(d == &m.manifests[1],
	   "an image entry without platform is the last resort");
	manifest_free(&m);

	manifest_parse(nested_only, strlen(nested_only), NULL, &m, &e);
	d = manifest_select(&m, &amd64, &e);
	ok(!d && e.code == ENOENT && strstr(e.msg, "lists no platforms"),
	   "a nested index is not selected blindly: %s", e.msg);
	manifest_free(&m);

	manifest_parse(empty, strlen(empty), NULL, &m, &e);
	d = manifest_select(&m, &amd64, &e);
	ok(!d && e.code == ENOENT, "empty index: ENOENT");
	manifest_free(&m);

	manifest_parse(docker_manifest, strlen(docker_manifest), NULL, &m, &e);
	d = manifest_select(&m, &amd64, &e);
	ok(!d && e.code == EINVAL, "selecting in an image manifest: EINVAL");
	manifest_free(&m);
	ok(manifest_select(NULL, &amd64, &e) == NULL && e.code == EINVAL,
	   "NULL index: EINVAL");
}

/* An index with many platforms: the error message stays bounded. */
static void test_select_long_list(void)
{
	struct buf b;
	struct cerr e = {0};
	struct manifest m;
	struct platform want = {"linux", "mips", ""};
	cleanup_free char *doc = NULL;
	char one[256];

	buf_init(&b, 0);
	buf_append(&b, "{\"schemaVersion\":2,\"manifests\":[", 32, &e);
	for (int i = 0; i < 200; i++) {
		int n = snprintf(one, sizeof(one),
				 "%s{\"digest\":\"sha256:" H1 "\",\"size\":1,"
				 "\"platform\":{\"os\":\"linux\","
				 "\"architecture\":\"arch%d\"}}",
				 i ? "," : "", i);
		buf_append(&b, one, (size_t)n, &e);
	}
	buf_append(&b, "]}", 2, &e);
	doc = buf_steal(&b, NULL);
	ok(manifest_parse(doc, strlen(doc), NULL, &m, &e) == 0,
	   "200-entry index parses");
	ok(!manifest_select(&m, &want, &e) && e.code == ENOENT &&
	       str_has_suffix(e.msg, "...)") && strlen(e.msg) < 700,
	   "long platform list is cut short");
	manifest_free(&m);
}

static void test_compression(void)
{
	static const struct {
		const char *type;
		enum compression c;
	} good[] = {
	    {"application/vnd.docker.image.rootfs.diff.tar.gzip", COMP_GZIP},
	    {"application/vnd.docker.image.rootfs.diff.tar", COMP_NONE},
	    {"application/vnd.docker.image.rootfs.foreign.diff.tar.gzip",
	     COMP_GZIP},
	    {"application/vnd.oci.image.layer.v1.tar", COMP_NONE},
	    {"application/vnd.oci.image.layer.v1.tar+gzip", COMP_GZIP},
	    {"application/vnd.oci.image.layer.v1.tar+zstd", COMP_ZSTD},
	    {"application/vnd.oci.image.layer.nondistributable.v1.tar",
	     COMP_NONE},
	    {"application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
	     COMP_GZIP},
	    {"application/vnd.oci.image.layer.nondistributable.v1.tar+zstd",
	     COMP_ZSTD},
	};
	static const char *const bad[] = {
	    "application/vnd.oci.image.layer.v1.tar+bzip2",
	    "application/vnd.cncf.helm.chart.content.v1.tar+gzip",
	    "application/octet-stream",
	    "",
	};
	struct cerr e = {0};
	enum compression c;

	for (size_t i = 0; i < ARRAY_SIZE(good); i++)
		ok(layer_compression(good[i].type, &c, &e) == 0 &&
		       c == good[i].c,
		   "%s", good[i].type);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		ok(layer_compression(bad[i], &c, &e) < 0 && e.code == EINVAL &&
		       (!*bad[i] || strstr(e.msg, bad[i])),
		   "'%s' refused: %s", bad[i], e.msg);
	ok(layer_compression(NULL, &c, &e) < 0 && e.code == EINVAL,
	   "NULL media type refused");
}

static void test_platform_parse(void)
{
	static const struct {
		const char *in, *os, *arch, *variant;
	} good[] = {
	    {"linux/amd64", "linux", "amd64", ""},
	    {"linux/arm64", "linux", "arm64", "v8"},
	    {"linux/arm64/v8", "linux", "arm64", "v8"},
	    {"linux/arm64/8", "linux", "arm64", "v8"},
	    {"linux/aarch64", "linux", "arm64", "v8"},
	    {"linux/arm", "linux", "arm", "v7"},
	    {"linux/arm/7", "linux", "arm", "v7"},
	    {"linux/arm/6", "linux", "arm", "v6"},
	    {"linux/arm/v5", "linux", "arm", "v5"},
	    {"linux/armhf", "linux", "arm", "v7"},
	    {"linux/armel", "linux", "arm", "v6"},
	    {"Linux/X86_64", "linux", "amd64", ""},
	    {"linux/x86-64", "linux", "amd64", ""},
	    {"linux/amd64/v1", "linux", "amd64", ""},
	    {"linux/amd64/V3", "linux", "amd64", "v3"},
	    {"linux/i386", "linux", "386", ""},
	    {"linux/386", "linux", "386", ""},
	    {"linux/ppc64le", "linux", "ppc64le", ""},
	    {"linux/s390x", "linux", "s390x", ""},
	    {"linux/riscv64", "linux", "riscv64", ""},
	    {"windows/amd64", "windows", "amd64", ""},
	};
	static const char *const bad[] = {
	    "",
	    "linux",
	    "linux/",
	    "/amd64",
	    "linux//v7",
	    "linux/amd64/",
	    "linux/amd64/v8/x",
	    "linux/amd 64",
	    "linux/amd64\n",
	    "linuxlinuxlinuxlinuxlinuxlinuxli/amd64",
	};
	struct platform p;
	struct cerr e = {0};

	for (size_t i = 0; i < ARRAY_SIZE(good); i++) {
		ok(platform_parse(good[i].in, &p, &e) == 0 &&
		       !strcmp(p.os, good[i].os) &&
		       !strcmp(p.arch, good[i].arch) &&
		       !strcmp(p.variant, good[i].variant),
		   "platform '%s' -> %s/%s/%s", good[i].in, p.os, p.arch,
		   p.variant);
	}
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		ok(platform_parse(bad[i], &p, &e) < 0 && e.code == EINVAL &&
		       !*p.os && !*p.arch,
		   "bad platform %zu refused: %s", i, e.msg);
	ok(platform_parse(NULL, &p, &e) < 0, "NULL platform refused");
	ok(platform_parse("linux", &p, &e) < 0 &&
	       strstr(e.msg, "expected os/arch[/variant]"),
	   "message says what is expected");
}

static void test_platform_default(void)
{
	struct platform p, q;
	struct utsname u;

	platform_default(&p);
	is_str(p.os, "linux", "default os");
	ok(*p.arch != '\0', "default arch '%s'", p.arch);
	q = p;
	platform_normalize(&q);
	ok(!memcmp(&p, &q, sizeof(p)), "default is already normalised");
	uname(&u);
	if (!strcmp(u.machine, "x86_64"))
		ok(!strcmp(p.arch, "amd64") && !*p.variant, "x86_64 is amd64");
	else if (!strcmp(u.machine, "aarch64"))
		ok(!strcmp(p.arch, "arm64") && !strcmp(p.variant, "v8"),
		   "aarch64 is arm64/v8");
	else
		ok(1, "machine %s maps to %s", u.machine, p.arch);
}

#define ENV_JSON "[\"PATH=/usr/local/sbin:/usr/bin\",\"NGINX_VERSION=1.25.3\"]"

static const char docker_config[] =
    "{\"architecture\":\"amd64\",\"os\":\"linux\",\"created\":\"2024-01-"
    "01T00:00:00Z\","
    "\"config\":{\"Hostname\":\"\",\"User\":\"\",\"Env\":" ENV_JSON ","
    "\"Cmd\":[\"nginx\",\"-g\",\"daemon off;\"],\"Entrypoint\":null,"
    "\"WorkingDir\":\"\",\"StopSignal\":\"SIGQUIT\","
    "\"ExposedPorts\":{\"80/tcp\":{},\"443/tcp\":{}},"
    "\"Volumes\":{\"/var/cache/nginx\":{}},\"Labels\":{\"a\":\"b\"}},"
    "\"history\":[{\"created_by\":\"x\"}],"
    "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:" H1
    "\",\"sha256:" H2 "\"]}}";

static const char oci_config[] =
    "{\"architecture\":\"arm64\",\"variant\":\"v8\",\"os\":\"linux\","
    "\"config\":{\"User\":\"1000:1000\",\"WorkingDir\":\"/app\","
    "\"Entrypoint\":[],\"Cmd\":null},"
    "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[]}}";

static void test_config(void)
{
	struct image_config c;
	struct cerr e = {0};

	ok(image_config_parse(docker_config, strlen(docker_config), &c, &e) ==
	       0,
	   "docker config parses (%s)", e.msg);
	is_str(c.os, "linux", "os");
	is_str(c.architecture, "amd64", "architecture");
	ok(c.variant == NULL, "no variant");
	ok(strv_len(c.env) == 2, "two env entries");
	is_str(c.env ? c.env[1] : NULL, "NGINX_VERSION=1.25.3", "env order");
	ok(c.entrypoint == NULL, "null Entrypoint is unset");
	ok(strv_len(c.cmd) == 3, "Cmd");
	is_str(c.cmd ? c.cmd[2] : NULL, "daemon off;", "Cmd argument");
	ok(c.working_dir == NULL && c.user == NULL,
	   "empty WorkingDir and User are unset");
	is_str(c.stop_signal, "SIGQUIT", "StopSignal");
	ok(strv_len(c.exposed_ports) == 2, "two exposed ports");
	is_str(c.exposed_ports ? c.exposed_ports[0] : NULL, "80/tcp",
	       "ports in document order");
	is_str(c.exposed_ports ? c.exposed_ports[1] : NULL, "443/tcp",
	       "second port");
	is_str(c.volumes ? c.volumes[0] : NULL, "/var/cache/nginx", "volume");
	ok(c.n_diff_ids == 2 && c.diff_ids[2] == NULL,
	   "diff_ids counted and NULL-terminated");
	is_str(c.diff_ids[0], "sha256:" H1, "bottom diff_id first");
	image_config_free(&c);
	ok(c.os == NULL && c.diff_ids == NULL, "image_config_free zeroes");

	ok(image_config_parse(oci_config, strlen(oci_config), &c, &e) == 0,
	   "OCI config parses (%s)", e.msg);
	is_str(c.variant, "v8", "variant");
	is_str(c.user, "1000:1000", "User");
	is_str(c.working_dir, "/app", "WorkingDir");
	ok(c.entrypoint && c.entrypoint[0] == NULL,
	   "an empty Entrypoint is set, to nothing");
	ok(c.cmd == NULL && c.env == NULL && c.exposed_ports == NULL,
	   "missing fields are NULL");
	ok(c.n_diff_ids == 0 && c.diff_ids && !c.diff_ids[0],
	   "no layers: empty diff_ids");
	image_config_free(&c);
	image_config_free(&c);
}

#define ROOTFS                                                                 \
	"\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:" H1 "\"]}"

static const struct {
	const char *doc, *msg;
} bad_configs[] = {
    {"{\"os\":\"linux\"}", "'rootfs' is missing or not an object"},
    {"{\"rootfs\":[]}", "'rootfs' is missing or not an object"},
    {"{\"rootfs\":{\"type\":\"foo\",\"diff_ids\":[]}}",
     "rootfs type must be 'layers'"},
    {"{\"rootfs\":{\"diff_ids\":[]}}", "rootfs type must be 'layers'"},
    {"{\"rootfs\":{\"type\":\"layers\"}}",
     "'rootfs.diff_ids' is missing or not an array"},
    {"{\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:" H1
     "\",\"sha256:nothex\"]}}",
     "rootfs.diff_ids[1]: malformed digest"},
    {"{\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[3]}}",
     "rootfs.diff_ids[0] is not a string"},
    {"{\"config\":{\"Env\":\"PATH=/bin\"}," ROOTFS "}",
     "config: 'Env' is not an array"},
    {"{\"config\":{\"Env\":[\"A=1\",2]}," ROOTFS "}",
     "config: 'Env' holds a non-string"},
    {"{\"config\":{\"Cmd\":\"sh\"}," ROOTFS "}",
     "config: 'Cmd' is not an array"},
    {"{\"config\":{\"Entrypoint\":{}}," ROOTFS "}",
     "config: 'Entrypoint' is not an array"},
    {"{\"config\":{\"WorkingDir\":5}," ROOTFS "}",
     "config: 'WorkingDir' is not a string"},
    {"{\"config\":{\"User\":true}," ROOTFS "}",
     "config: 'User' is not a string"},
    {"{\"config\":{\"ExposedPorts\":[\"80/tcp\"]}," ROOTFS "}",
     "config: 'ExposedPorts' is not an object"},
    {"{\"config\":{\"Volumes\":\"/data\"}," ROOTFS "}",
     "config: 'Volumes' is not an object"},
    {"{\"config\":[]," ROOTFS "}", "'config' is not an object"},
    {"{\"os\":5," ROOTFS "}", "'os' is not a string"},
    {"{\"architecture\":[]," ROOTFS "}", "'architecture' is not a string"},
    {"{\"config\":{\"Env\":[\"A\\u0000B\"]}," ROOTFS "}", "malformed JSON"},
    {"{\"config\":", "malformed JSON"},
    {"\"x\"", "malformed JSON"},
    {"[]", "not an object"},
    {"", "empty document"},
};

static void test_bad_configs(void)
{
	struct image_config c;
	struct cerr e = {0};
	cleanup_free char *huge = xcalloc(CONFIG_MAX + 1, 1);

	for (size_t i = 0; i < ARRAY_SIZE(bad_configs); i++) {
		const char *doc = bad_configs[i].doc;
		int rc = image_config_parse(doc, strlen(doc), &c, &e);

		ok(rc < 0 && e.code == EINVAL &&
		       strstr(e.msg, bad_configs[i].msg) &&
		       str_has_prefix(e.msg, "image config: "),
		   "bad config %zu refused: %s", i, e.msg);
		ok(!c.os && !c.env && !c.diff_ids && !c.n_diff_ids,
		   "bad config %zu leaves nothing behind", i);
		image_config_free(&c);
	}
	ok(image_config_parse(huge, CONFIG_MAX + 1, &c, &e) < 0 &&
	       e.code == EFBIG,
	   "a config over CONFIG_MAX is refused with EFBIG");
	ok(image_config_parse(NULL, 0, &c, &e) < 0 && e.code == EINVAL,
	   "NULL config refused");
	ok(image_config_parse("{\"config\":null," ROOTFS "}",
			      strlen("{\"config\":null," ROOTFS "}"), &c,
			      &e) == 0 &&
	       !c.env && c.n_diff_ids == 1,
	   "config: null is accepted");
	image_config_free(&c);
}

int main(void)
{
	test_image_manifests();
	test_indexes();
	test_bad_manifests();
	test_caps();
	test_select();
	test_select_variants();
	test_select_long_list();
	test_compression();
	test_platform_parse();
	test_platform_default();
	test_config();
	test_bad_configs();
	return tap_done();
}
