/* Kubernetes resource quantities ("500m", "1.5", "128Mi", "1e3", "2G"):
 * Value() and MilliValue() as k8s.io/apimachinery computes them (exact,
 * rounded up), in integer arithmetic so "0.1" is 100 milli, not 101. */
#include <ctype.h>
#include <errno.h>
#include <string.h>

#include "cellctl.h"

struct qty {
	__int128 mant; /* digits without the point */
	int dec;       /* power of ten */
	int bin;       /* power of two */
	bool neg;
};

static const struct {
	const char *s;
	int dec, bin;
} suffixes[] = {
    {"Ki", 0, 10}, {"Mi", 0, 20}, {"Gi", 0, 30}, {"Ti", 0, 40},
    {"Pi", 0, 50}, {"Ei", 0, 60}, {"n", -9, 0},	 {"u", -6, 0},
    {"m", -3, 0},  {"", 0, 0},	  {"k", 3, 0},	 {"M", 6, 0},
    {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},	 {"E", 18, 0},
};

static int parse(const char *s, struct qty *q, struct cerr *e)
{
	const char *p = s;
	int digits = 0;
	bool point = false;

	memset(q, 0, sizeof(*q));
	if (*p == '+' || *p == '-')
		q->neg = *p++ == '-';
	for (; isdigit((unsigned char)*p) || (*p == '.' && !point); p++) {
		if (*p == '.') {
			point = true;
			continue;
		}
		if (q->mant == 0 && *p == '0' && !point)
			continue;
		if (++digits > 30)
			goto bad;
		q->mant = q->mant * 10 + (*p - '0');
		if (point)
			q->dec--;
	}
	if (p == s || (p - s == 1 && (*s == '.' || *s == '+' || *s == '-')))
		goto bad;
	if ((*p == 'e' || *p == 'E') && p[1]) {
		char *end;
		long x = strtol(p + 1, &end, 10);
		if (*end || x < -40 || x > 40)
			goto bad;
		q->dec += (int)x;
		return 0;
	}
	for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++)
		if (!strcmp(p, suffixes[i].s)) {
			q->dec += suffixes[i].dec;
			q->bin = suffixes[i].bin;
			return 0;
		}
bad:
	return cerr_set(e, EINVAL, "bad quantity \"%s\"", s);
}

/* ceil(mant * 10^(dec+extra) * 2^bin) into an int64. */
static int scale(const struct qty *q, int extra, int64_t *out, struct cerr *e,
		 const char *s)
{
	__int128 v = q->mant, lim = (__int128)INT64_MAX;
	int d = q->dec + extra;

	for (int i = 0; i < q->bin; i++)
		if ((v <<= 1) > lim)
			goto big;
	for (; d > 0; d--)
		if ((v *= 10) > lim)
			goto big;
	for (; d < 0; d++) {
		bool rem = v % 10 != 0;
		v = v / 10 + (rem && !q->neg);
	}
	*out = q->neg ? -(int64_t)v : (int64_t)v;
	return 0;
big:
	return cerr_set(e, ERANGE, "quantity \"%s\" is too large", s);
}

int quantity_value(const char *s, int64_t *out, struct cerr *e)
{
	struct qty q;

	return parse(s, &q, e) < 0 ? -1 : scale(&q, 0, out, e, s);
}

int quantity_milli(const char *s, int64_t *out, struct cerr *e)
{
	struct qty q;

	return parse(s, &q, e) < 0 ? -1 : scale(&q, 3, out, e, s);
}
