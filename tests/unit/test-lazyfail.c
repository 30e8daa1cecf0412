// SPDX-License-Identifier: Apache-2.0
/* agent/sup/lazyfail.c: which lazy layers a unit's rootfs overlay has
 * below it, from /proc/self/mountinfo's text (issue 29). */
#include <stdlib.h>
#include <string.h>

#include "../lib/tap.h"
#include "sup-internal.h"
#include "util.h"

#define MP "/st/units/app/1/rootfs"
#define LAZY_A "sha256-aaaa"
#define LAZY_B "sha256-bbbb"

static char **parse(const char *text, const char *mp)
{
	char *copy = xstrdup(text);
	char **v = lazyfail_layers_parse(copy, mp);

	free(copy);
	return v;
}

int main(void)
{
	char **v;

	v = parse("36 35 98:0 / / rw - ext4 /dev/root rw\n"
		  "90 36 0:51 / " MP " rw,relatime - overlay overlay "
		  "rw,lowerdir=lazy/" LAZY_A
		  "/mnt:l/0123456789ab:/c/lazy/" LAZY_B
		  "/mnt,upperdir=/st/units/app/1/overlay/upper,workdir=/w\n"
		  "91 36 0:52 / /st/units/web/1/rootfs rw - overlay overlay "
		  "rw,lowerdir=lazy/sha256-cccc/mnt\n",
		  MP);
	ok(strv_len(v) == 2 && !strcmp(v[0], LAZY_A) && !strcmp(v[1], LAZY_B),
	   "its overlay's lazy lowers, relative and absolute, in order");
	strv_free(v);

	v = parse("90 36 0:51 / " MP " rw - overlay overlay "
		  "rw,lowerdir=l/0123456789ab:l/ba9876543210\n",
		  MP);
	ok(v && !v[0], "no lazy lower: an empty list");
	strv_free(v);

	v = parse("90 36 0:51 / " MP " rw - overlay overlay "
		  "rw,lowerdir=lazy/" LAZY_A "/mnt\n"
		  "95 90 0:53 / " MP " rw - overlay overlay "
		  "rw,lowerdir=lazy/" LAZY_B "/mnt\n",
		  MP);
	ok(strv_len(v) == 1 && !strcmp(v[0], LAZY_B),
	   "two mounts there: the last one's (what the unit sees)");
	strv_free(v);

	v = parse("90 36 0:51 / /st/units/a\\040b/1/rootfs rw - overlay "
		  "overlay rw,lowerdir=lazy/" LAZY_A "/mnt\n",
		  "/st/units/a b/1/rootfs");
	ok(strv_len(v) == 1, "an escaped mount point");
	strv_free(v);

	v = parse("90 36 0:51 / " MP " rw - overlay overlay "
		  "rw,lowerdir=lazy/../mnt:lazy/SHA-x/mnt:notlazy/" LAZY_A
		  "/mnt:xlazy/" LAZY_A "/mnt:lazy/sha256-/mnt:lazy/" LAZY_A
		  "/mnt/x:lazy/" LAZY_A "\n"
		  "91 36 0:52 / " MP "2 rw - overlay overlay "
		  "rw,lowerdir=lazy/" LAZY_A "/mnt\n"
		  "92 36 0:53 / /other rw - fuse.cell fuse rw\n"
		  "garbage\n",
		  MP);
	ok(v && !v[0], "nothing but lazy/<algo>-<hex>/mnt, of that mount");
	strv_free(v);

	v = parse("90 36 0:51 / " MP " rw - fuse.x x rw\n", MP);
	ok(v && !v[0], "not an overlay");
	strv_free(v);
	return tap_done();
}
