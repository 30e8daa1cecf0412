// SPDX-License-Identifier: Apache-2.0
/* Unit tests of the shared image cache's pure parts: the records a cell
 * reads from the share (imagepull/sharerec.c) and the mount command the
 * agent runs for imageCacheEndpoint (agent/base/imagecache.c). */
/* The fixtures build record structs from string literals. */
#pragma GCC diagnostic ignored "-Wdiscarded-qualifiers"
#include <stdlib.h>
#include <string.h>

#include "../lib/tap.h"
#include "imagecache.h"
#include "pull-internal.h"
#include "util.h"

#define D1                                                                     \
	"sha256:"                                                              \
	"ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"
#define D2                                                                     \
	"sha256:"                                                              \
	"3e23e8160039594a33894f6564e1b1348bbd7a0088d42c4acb73eeaed59c009d"

static char *joined(char **v)
{
	size_t n = 1;
	char *s;

	for (size_t i = 0; v[i]; i++)
		n += strlen(v[i]) + 1;
	s = xcalloc(1, n);
	for (size_t i = 0; v[i]; i++) {
		if (i)
			strncat(s, " ", n - strlen(s) - 1);
		strncat(s, v[i], n - strlen(s) - 1);
	}
	return s;
}

static void mount_argv(void)
{
	struct imagecache_opts o = {.endpoint = "10.20.0.2:/data"};
	char **v = imagecache_mount_argv(&o);
	char *s = joined(v);

	is_str(s, "/bin/mount -t nfs -o ro -o ro 10.20.0.2:/data /nfs",
	       "defaults: Itzo's -o ro, read-only, /nfs");
	free(s);
	strv_free(v);
	o.mount_opts = "  -o nfsvers=4.1,rw\t-v ";
	o.mount_dir = "/var/cache/images";
	o.mount_cmd = "/sbin/mount.seam";
	v = imagecache_mount_argv(&o);
	s = joined(v);
	is_str(s,
	       "/sbin/mount.seam -t nfs -o nfsvers=4.1,rw -v -o ro "
	       "10.20.0.2:/data /var/cache/images",
	       "options split on blanks; -o ro last whatever they say");
	free(s);
	strv_free(v);
}

static void layer_records(void)
{
	struct share_layer_rec r, back;
	struct cerr e = {0};
	char *text;

	ok(share_layer_rec_parse("{\"version\":1,\"diff_id\":\"" D1 "\"}", 80,
				 &r, &e) < 0,
	   "a record is read whole or not at all (cut short)");
	const char *good = "{\"version\":1,\"diff_id\":\"" D1
			   "\",\"blob\":\"" D2 "\",\"opaque\":\"a/b\","
			   "\"whiteout\":\".\"}";
	ok(share_layer_rec_parse(good, strlen(good), &r, &e) == 0, "parses: %s",
	   e.msg);
	is_str(r.diff_id, D1, "diff_id");
	is_str(r.opaque, "a/b", "opaque probe");
	text = share_layer_rec_format(&r);
	ok(share_layer_rec_parse(text, strlen(text), &back, &e) == 0 &&
	       !strcmp(back.blob, D2) && !strcmp(back.whiteout, "."),
	   "round trip");
	free(text);
	share_layer_rec_free(&back);
	share_layer_rec_free(&r);
	static const char *const bad[] = {
	    "{\"version\":2,\"diff_id\":\"" D1 "\"}",
	    "{\"diff_id\":\"" D1 "\"}",
	    "{\"version\":1,\"diff_id\":\"sha256:abc\"}",
	    "{\"version\":1,\"diff_id\":\"" D1 "\",\"opaque\":\"../etc\"}",
	    "{\"version\":1,\"diff_id\":\"" D1 "\",\"opaque\":\"/etc\"}",
	    "{\"version\":1,\"diff_id\":\"" D1 "\",\"whiteout\":\"a//b\"}",
	    "{\"version\":1,\"diff_id\":\"" D1 "\",\"whiteout\":\"a/\"}",
	    "[]",
	};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		ok(share_layer_rec_parse(bad[i], strlen(bad[i]), &r, &e) < 0 &&
		       !r.diff_id,
		   "refused: %s", bad[i]);
}

static void tag_records(void)
{
	struct share_tag_rec r = {.ref = "reg.example/app:v1",
				  .platform = "linux/arm64/v8",
				  .manifest = D1,
				  .config = D2},
			     back;
	struct cerr e = {0};
	char *text = share_tag_rec_format(&r), *k1, *k2;

	ok(share_tag_rec_parse(text, strlen(text), &back, &e) == 0 &&
	       !strcmp(back.ref, r.ref) && !strcmp(back.platform, r.platform) &&
	       !strcmp(back.manifest, D1) && !strcmp(back.config, D2),
	   "tag record round trip");
	share_tag_rec_free(&back);
	free(text);
	k1 = share_tag_key("reg.example/app:v1", "linux/amd64");
	k2 = share_tag_key("reg.example/app:v1", "linux/arm64/v8");
	ok(strncmp(k1, "tags/", 5) == 0 && strlen(k1) == 5 + 64 + 5 &&
	       strcmp(k1, k2) != 0,
	   "one record per reference and platform: %s", k1);
	free(k1);
	free(k2);
}

int main(void)
{
	mount_argv();
	layer_records();
	tag_records();
	return tap_done();
}
