// SPDX-License-Identifier: Apache-2.0
/* Kubernetes quantities (resource.Quantity: "1Gi", "500M", "1e3", "1500m")
 * as exact integers, for the agent's spec decoder and cellctl alike. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "quantity.h"
#include "util.h"

/* A quantity's digits D (integer digits then fraction digits, the '.'
 * skipped) and the scale the suffix applies: value = 0.D × 10^point × 2^bexp,
 * i.e. the decimal point sits after `point` digits of D (point may lie
 * outside D: the missing digits are zeros). */
struct quantity {
	const char *ip, *fp; /* integer and fraction digits */
	int64_t n_ip, n_fp;
	int64_t dexp; /* decimal exponent of the suffix */
	int bexp;     /* binary exponent of the suffix */
};

static int qdigit(const struct quantity *q, int64_t i)
{
	if (i < 0 || i >= q->n_ip + q->n_fp)
		return 0;
	return i < q->n_ip ? q->ip[i] - '0' : q->fp[i - q->n_ip] - '0';
}

/* The suffix as resource.ParseQuantity reads it: binary Ki…Ei, decimal
 * n u m "" k M G T P E, or an exponent e<int>/E<int> ("E" alone is exa). */
static int quantity_suffix(const char *s, struct quantity *q)
{
	static const char *const bin[] = {"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
	static const char *const dec[] = {"n", "u", "m", "",  "k",
					  "M", "G", "T", "P", "E"};
	const char *num;
	char *end;
	long long x;

	for (size_t i = 0; i < ARRAY_SIZE(bin); i++)
		if (!strcmp(s, bin[i])) {
			q->bexp = 10 * (int)(i + 1);
			return 0;
		}
	for (size_t i = 0; i < ARRAY_SIZE(dec); i++)
		if (!strcmp(s, dec[i])) {
			q->dexp = 3 * ((int64_t)i - 3);
			return 0;
		}
	if (s[0] != 'e' && s[0] != 'E')
		return -1;
	num = s + 1 + (s[1] == '+' || s[1] == '-');
	if (*num < '0' || *num > '9')
		return -1;
	errno = 0;
	x = strtoll(s + 1, &end, 10);
	if (*end)
		return -1;
	/* An exponent beyond long long saturates: it only decides between
	 * 0, 1 and "too large" below. */
	q->dexp = x;
	return 0;
}

/* ceil(value) exactly, or ERANGE above INT64_MAX. The integer part has at
 * most 19 significant digits; the fraction is multiplied by 2^bexp digit by
 * digit from the right, so nothing is lost to floating point. */
static int quantity_ceil(struct quantity *q, int64_t *out, struct cerr *e)
{
	int64_t total = q->n_ip + q->n_fp, first = 0, point;
	unsigned __int128 ip = 0, carry = 0;
	bool rem = false;

	while (first < total && qdigit(q, first) == 0)
		first++;
	if (first == total) {
		*out = 0;
		return 0;
	}
	/* Clamping the exponent keeps the arithmetic in range without
	 * changing which case below applies. */
	if (q->dexp > total + 64)
		q->dexp = total + 64;
	if (q->dexp < -(total + 64))
		q->dexp = -(total + 64);
	point = q->n_ip + q->dexp;
	/* The leading digit stands for 10^(point - 1 - first). */
	if (point - 1 - first > 18)
		return cerr_set(e, ERANGE, "too large");
	if (point - 1 - first < -40) {
		*out = 1; /* below 10^-40 × 2^60 < 1, and not zero */
		return 0;
	}
	for (int64_t i = first; i < point; i++)
		ip = ip * 10 + (unsigned)qdigit(q, i);
	for (int64_t i = total - 1; i >= point; i--) {
		unsigned __int128 x =
		    ((unsigned __int128)qdigit(q, i) << q->bexp) + carry;
		rem |= x % 10 != 0;
		carry = x / 10;
	}
	ip = (ip << q->bexp) + carry + (rem ? 1 : 0);
	if (ip > (unsigned __int128)INT64_MAX)
		return cerr_set(e, ERANGE, "too large");
	*out = (int64_t)ip;
	return 0;
}

static int parse_quantity(const char *s, int64_t dexp, int64_t *out,
			  struct cerr *e)
{
	struct quantity q = {0};
	const char *p = s;
	bool neg = false;

	if (!*s)
		return cerr_set(e, EINVAL, "empty quantity");
	if (*p == '+' || *p == '-')
		neg = *p++ == '-';
	q.ip = p;
	while (*p >= '0' && *p <= '9')
		p++;
	q.n_ip = p - q.ip;
	q.fp = p;
	if (*p == '.') {
		q.fp = ++p;
		while (*p >= '0' && *p <= '9')
			p++;
		q.n_fp = p - q.fp;
	}
	if (quantity_suffix(p, &q) < 0)
		return cerr_set(e, EINVAL, "\"%.64s\" is not a quantity", s);
	q.dexp += dexp;
	if (quantity_ceil(&q, out, e) < 0)
		return cerr_set(e, ERANGE, "\"%.64s\" is too large", s);
	if (neg && *out)
		return cerr_set(e, EINVAL, "\"%.64s\" is negative", s);
	return 0;
}

int quantity_value(const char *s, int64_t *out, struct cerr *e)
{
	return parse_quantity(s, 0, out, e);
}

int quantity_milli(const char *s, int64_t *out, struct cerr *e)
{
	return parse_quantity(s, 3, out, e);
}
