// SPDX-License-Identifier: Apache-2.0
/* Instance selection by Kip's rules (pkg/util/instanceselector, AWS):
 * an exact instance type is taken as it is; nothing asked gives the
 * default; otherwise the cheapest type with memory >= the request, enough
 * GPUs (of the kind, when one is named), matching the instanceType glob,
 * and enough CPU: a burstable type is priced with the surcharge for the CPU
 * above its baseline ($0.05 per vCPU-hour, T2/T3 unlimited), and chosen
 * "sustained" when it needs it. t1 types are never chosen. Prices are
 * float32 as in Kip, so ties break the same way (first in the table).
 *
 * Architectures (ours, not Kip's): a table entry may say "architecture":
 * "arm64" (Graviton); one that says nothing is amd64. A type is chosen
 * only when every image of the pod has its architecture (req.archs, which
 * cellctl learns from the registry: regplat.c); without that knowledge
 * only amd64 types, so a table with arm64 rows changes no choice for a
 * pod whose images nobody looked at. */
#include <errno.h>
#include <ctype.h>
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cellctl.h"
#include "cleanup.h"
#include "fsutil.h"
#include "jsonutil.h"
#include "util.h"

#define UNLIMITED_PRICE 0.05f
#define TABLE_MAX (16u << 20)

void inst_table_free(struct inst_table *t)
{
	json_decref(t->root);
	free(t->v);
	memset(t, 0, sizeof(*t));
}

unsigned arch_bit(const char *name)
{
	if (!name)
		return 0;
	if (!strcmp(name, "amd64") || !strcmp(name, "x86_64"))
		return ARCH_AMD64;
	if (!strcmp(name, "arm64") || !strcmp(name, "aarch64"))
		return ARCH_ARM64;
	return 0;
}

int arch_bits_parse(const char *list, unsigned *out, struct cerr *e)
{
	cleanup_free char *l = xstrdup(list);
	char *save = NULL;

	*out = 0;
	for (char *t = strtok_r(l, ", ", &save); t;
	     t = strtok_r(NULL, ", ", &save)) {
		unsigned b = arch_bit(t);
		if (!b)
			return cerr_set(e, EINVAL,
					"unknown architecture \"%.40s\" "
					"(amd64, arm64)",
					t);
		*out |= b;
	}
	if (!*out)
		return cerr_set(e, EINVAL, "no architecture in \"%.40s\"",
				list);
	return 0;
}

const char *arch_bits_name(unsigned bits)
{
	switch (bits & (ARCH_AMD64 | ARCH_ARM64)) {
	case ARCH_AMD64:
		return "amd64";
	case ARCH_ARM64:
		return "arm64";
	case ARCH_AMD64 | ARCH_ARM64:
		return "amd64, arm64";
	default:
		return "none";
	}
}

static float num(const json_t *o, const char *k)
{
	return (float)json_number_value(json_object_get(o, k));
}

int inst_table_parse(const char *text, size_t len, const char *region,
		     struct inst_table *t, struct cerr *e)
{
	json_t *list, *it;
	size_t i;

	memset(t, 0, sizeof(*t));
	t->root = json_parse_object(text, len, e);
	if (!t->root)
		return cerr_prefix(e, "instance data");
	list = json_object_get(t->root, region);
	if (!json_is_array(list)) {
		inst_table_free(t);
		return cerr_set(e, ENOENT, "no instance data for region %s",
				region);
	}
	t->v = xcalloc(json_array_size(list) + 1, sizeof(*t->v));
	json_array_foreach(list, i, it)
	{
		struct inst *x = &t->v[t->n];
		x->type = (char *)json_string_value(
		    json_object_get(it, "instanceType"));
		if (!x->type)
			continue;
		x->price = num(it, "price");
		x->memory = num(it, "memory");
		x->cpu = num(it, "cpu");
		x->baseline = num(it, "baseline");
		x->gpu = (int)json_integer_value(json_object_get(it, "gpu"));
		x->gpu_types = json_object_get(it, "supportedGPUTypes");
		x->burstable = json_is_true(json_object_get(it, "burstable"));
		x->arch = json_is_string(json_object_get(it, "architecture"))
			      ? arch_bit(json_string_value(
				    json_object_get(it, "architecture")))
			      : ARCH_AMD64;
		if (!x->arch)
			continue; /* an architecture no cell is built for */
		t->n++;
	}
	return 0;
}

int inst_table_load(const char *path, const char *region, struct inst_table *t,
		    struct cerr *e)
{
	struct buf b;
	int r;

	buf_init(&b, TABLE_MAX);
	r = fs_read_file(path, &b, e);
	if (r == 0)
		r = inst_table_parse(b.data ? b.data : "", b.len, region, t, e);
	buf_free(&b);
	return r < 0 ? cerr_prefix(e, "%s", path) : 0;
}

/* github.com/ryanuber/go-glob: '*' is the only wildcard. */
static bool glob(const char *pat, const char *s)
{
	cleanup_free char *p = xstrdup(pat);
	char *parts[64];
	size_t n = 0;
	char *q = p;

	if (!strchr(pat, '*'))
		return !strcmp(pat, s);
	for (;;) {
		char *star = strchr(q, '*');
		if (n == ARRAY_SIZE(parts))
			return false;
		parts[n++] = q;
		if (!star)
			break;
		*star = 0;
		q = star + 1;
	}
	if (!str_has_prefix(s, parts[0]))
		return false;
	s += strlen(parts[0]);
	for (size_t i = 1; i + 1 < n; i++) {
		const char *f = strstr(s, parts[i]);
		if (!f)
			return false;
		s = f + strlen(parts[i]);
	}
	return str_has_suffix(s, parts[n - 1]);
}

static bool unsupported(const char *type)
{
	return strlen(type) < 2 || !strncmp(type, "t1", 2);
}

static bool gpus_fit(const struct inst *x, int count, const char *kind)
{
	if (!*kind)
		return x->gpu >= count;
	const char *k;
	json_t *v;
	json_object_foreach(x->gpu_types, k, v)
	{
		if (!strcmp(k, kind)) /* Kip lowercases the request only */
			return json_integer_value(v) >= count;
	}
	return count <= 0;
}

static int parse_req(const struct select_req *r, float *cpu, float *mem,
		     int *gpus, char *kind, size_t kind_len, struct cerr *e)
{
	int64_t v;

	*cpu = *mem = 0;
	*gpus = 0;
	kind[0] = 0;
	if (r->memory && *r->memory) {
		if (quantity_value(r->memory, &v, e) < 0)
			return -1;
		*mem = (float)((double)v / (1024.0 * 1024 * 1024));
	}
	if (r->cpu && *r->cpu) {
		if (quantity_milli(r->cpu, &v, e) < 0)
			return -1;
		*cpu = (float)((double)v / 1000.0);
	}
	if (r->gpu && *r->gpu) {
		char *end;
		long n = strtol(r->gpu, &end, 10);
		if (end == r->gpu || n < 0 || n > 1024)
			return cerr_set(e, EINVAL, "bad GPU spec \"%s\"",
					r->gpu);
		*gpus = (int)n;
		end += strspn(end, " ");
		snprintf(kind, kind_len, "%s", end);
		for (char *c = kind; *c; c++)
			*c = (char)tolower((unsigned char)*c);
	}
	return 0;
}

static unsigned req_archs(const struct select_req *r)
{
	return r->archs ? r->archs : ARCH_AMD64;
}

static const struct inst *find_type(const struct inst_table *t,
				    const char *type)
{
	for (size_t i = 0; t && i < t->n; i++)
		if (!strcmp(t->v[i].type, type))
			return &t->v[i];
	return NULL;
}

/* An exact (or default) type the table knows, of an architecture the
 * pod's images lack: refused, never started to fail with ENOEXEC. */
static int arch_refused(const struct inst_table *t, const struct select_req *r,
			const char *type, struct cerr *e)
{
	const struct inst *x = find_type(t, type);

	if (!x || (x->arch & req_archs(r)))
		return 0;
	if (!r->archs)
		return cerr_set(e, ENOEXEC,
				"instance type %s is %s, and the pod's images "
				"are not known to have it (amd64 is assumed; "
				"--image-arch says otherwise)",
				type, arch_bits_name(x->arch));
	return cerr_set(e, ENOEXEC,
			"instance type %s is %s, but the pod's images are "
			"for %s only",
			type, arch_bits_name(x->arch),
			arch_bits_name(req_archs(r)));
}

static bool fits(const struct inst *x, const struct select_req *r, float mem,
		 int gpus, const char *kind)
{
	if (unsupported(x->type) || (mem != 0 && x->memory < mem))
		return false;
	if (!(x->arch & req_archs(r)))
		return false;
	if (r->instance_type && *r->instance_type &&
	    !glob(r->instance_type, x->type))
		return false;
	return gpus_fit(x, gpus, kind);
}

int inst_select(const struct inst_table *t, const struct select_req *r,
		const char **out, int *sustained, struct cerr *e)
{
	const char *it = r->instance_type ? r->instance_type : "";
	bool dflt = false;
	float cpu, mem, best = FLT_MAX;
	char kind[64];
	int gpus;

	*sustained = r->sustained_cpu;
	*out = NULL;
	if (*it && !strchr(it, '*')) {
		if (arch_refused(t, r, it, e) < 0)
			return -1;
		*out = it;
		return 0;
	}
	*sustained = -1;
	if (!*it && !(r->cpu && *r->cpu) && !(r->memory && *r->memory) &&
	    !(r->gpu && *r->gpu)) {
		/* The default, unless it is of an architecture the images
		 * lack: then the cheapest type that is not. */
		const struct inst *d = find_type(t, r->default_type);
		if (!d || (d->arch & req_archs(r))) {
			*out = r->default_type;
			return 0;
		}
		dflt = true;
	}
	if (!t || !t->n)
		return cerr_set(e, ENOENT, "no instance data to choose from");
	if (parse_req(r, &cpu, &mem, &gpus, kind, sizeof(kind), e) < 0)
		return -1;
	*sustained = 0;
	for (size_t i = 0; i < t->n; i++) {
		const struct inst *x = &t->v[i];
		float price = x->price;
		bool sus = false;
		if (!fits(x, r, mem, gpus, kind))
			continue;
		if (r->dedicated_cpu) {
			if (x->burstable)
				continue;
		} else if (r->sustained_cpu == 0) {
			if ((x->burstable ? x->baseline : x->cpu) < cpu)
				continue;
		} else {
			if (x->cpu < cpu)
				continue;
			if (x->burstable && cpu > x->baseline) {
				price += (cpu - x->baseline) * UNLIMITED_PRICE;
				sus = true;
			}
		}
		if (price > 0.0f && price < best) {
			best = price;
			*out = x->type;
			*sustained = sus;
		}
	}
	if (!*out)
		return cerr_set(e, ENOENT,
				"could not compute instance type from "
				"Spec.Resources: no instance type fits "
				"(of architecture %s)",
				arch_bits_name(req_archs(r)));
	if (dflt)
		*sustained = -1; /* as for the default itself */
	return 0;
}
