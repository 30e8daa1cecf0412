// SPDX-License-Identifier: Apache-2.0
/* Platforms ("os/arch[/variant]") in the spelling registries use, which is
 * Go's (GOOS/GOARCH) plus containerd's variant conventions, so that what the
 * user types, what uname says and what an index lists compare equal. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>

#include "pull-internal.h"
#include "util.h"

/* uname's machine names in Go's spelling; the variant is what the kernel
 * name implies about the instruction set. */
static const struct {
	const char *machine, *arch, *variant;
} uname_arch[] = {
    {"x86_64", "amd64", ""},
    {"amd64", "amd64", ""},
    {"aarch64", "arm64", "v8"},
    {"arm64", "arm64", "v8"},
    {"armv8l", "arm", "v7"}, /* 32-bit userland on a 64-bit CPU */
    {"armv7l", "arm", "v7"},
    {"armv7", "arm", "v7"},
    {"armv6l", "arm", "v6"},
    {"armv5tel", "arm", "v5"},
    {"armv5tejl", "arm", "v5"},
    {"i686", "386", ""},
    {"i586", "386", ""},
    {"i486", "386", ""},
    {"i386", "386", ""},
    {"ppc64le", "ppc64le", ""},
    {"ppc64", "ppc64", ""},
    {"s390x", "s390x", ""},
    {"riscv64", "riscv64", ""},
    {"mips64", "mips64", ""},
    {"loongarch64", "loong64", ""},
};

static void set_field(char dst[32], const char *src)
{
	snprintf(dst, 32, "%s", src);
}

static void lower(char *s)
{
	for (; *s; s++)
		*s = (char)tolower((unsigned char)*s);
}

static bool field_ok(const char *s, size_t n)
{
	if (n == 0 || n >= sizeof(((struct platform *)0)->os))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)s[i]) && !strchr("_.-", s[i]))
			return false;
	return true;
}

int platform_parse(const char *s, struct platform *p, struct cerr *e)
{
	char *fields[3] = {p->os, p->arch, p->variant};
	const char *part = s;
	size_t i = 0;

	memset(p, 0, sizeof(*p));
	if (!s || !*s)
		return cerr_set(e, EINVAL, "empty platform");
	/* Refused before the message below echoes the input. */
	for (const char *c = s; *c; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			return cerr_set(e, EINVAL,
					"invalid platform: it holds a control "
					"character");
	for (;;) {
		const char *slash = strchr(part, '/');
		size_t n = slash ? (size_t)(slash - part) : strlen(part);

		if (i == 3 || !field_ok(part, n)) {
			memset(p, 0, sizeof(*p));
			return cerr_set(e, EINVAL,
					"invalid platform '%.100s': expected "
					"os/arch[/variant], each part 1 to 31 "
					"letters, digits, '_', '.' or '-'",
					s);
		}
		memcpy(fields[i++], part, n);
		if (!slash)
			break;
		part = slash + 1;
	}
	if (i < 2) {
		memset(p, 0, sizeof(*p));
		return cerr_set(e, EINVAL,
				"invalid platform '%.100s': expected "
				"os/arch[/variant]",
				s);
	}
	platform_normalize(p);
	return 0;
}

void platform_default(struct platform *p)
{
	struct utsname u;

	memset(p, 0, sizeof(*p));
	set_field(p->os, "linux");
	if (uname(&u) < 0) {
		set_field(p->arch, "unknown");
		return;
	}
	for (size_t i = 0; i < ARRAY_SIZE(uname_arch); i++) {
		if (!strcmp(u.machine, uname_arch[i].machine)) {
			set_field(p->arch, uname_arch[i].arch);
			set_field(p->variant, uname_arch[i].variant);
			return;
		}
	}
	/* An unlisted machine is most likely already Go's name for itself. */
	set_field(p->arch, u.machine);
	platform_normalize(p);
}

/* containerd's normalisation (platforms.Normalize), except that arm64
 * without a variant becomes "v8" so that a plain comparison matches. */
static void normalize_arm(struct platform *p)
{
	const char *v = p->variant;

	if (!strcmp(p->arch, "aarch64") || !strcmp(p->arch, "arm64")) {
		set_field(p->arch, "arm64");
		if (!*v || !strcmp(v, "8") || !strcmp(v, "v8.0"))
			set_field(p->variant, "v8");
	} else if (!strcmp(p->arch, "armhf")) {
		set_field(p->arch, "arm");
		set_field(p->variant, "v7");
	} else if (!strcmp(p->arch, "armel")) {
		set_field(p->arch, "arm");
		set_field(p->variant, "v6");
	} else if (!strcmp(p->arch, "arm")) {
		if (!*v || !strcmp(v, "7"))
			set_field(p->variant, "v7");
		else if (!strcmp(v, "5") || !strcmp(v, "6") || !strcmp(v, "8"))
			set_field(p->variant, v[0] == '5'   ? "v5"
					      : v[0] == '6' ? "v6"
							    : "v8");
	}
}

void platform_normalize(struct platform *p)
{
	lower(p->os);
	lower(p->arch);
	lower(p->variant);
	if (!strcmp(p->arch, "x86_64") || !strcmp(p->arch, "x86-64") ||
	    !strcmp(p->arch, "amd64")) {
		set_field(p->arch, "amd64");
		/* v1 is the baseline every amd64 CPU has: the same as none. */
		if (!strcmp(p->variant, "v1"))
			p->variant[0] = '\0';
	} else if (!strcmp(p->arch, "i386") || !strcmp(p->arch, "i686") ||
		   !strcmp(p->arch, "386")) {
		set_field(p->arch, "386");
		p->variant[0] = '\0';
	} else {
		normalize_arm(p);
	}
}

char *platform_string(const struct platform *p)
{
	return xasprintf("%s/%s%s%s", p->os, p->arch, p->variant[0] ? "/" : "",
			 p->variant);
}
