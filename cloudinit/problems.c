// SPDX-License-Identifier: Apache-2.0
/* The problems a parse of user data collects: each with its severity,
 * part and line, capped at CI_MAX_PROBLEMS (errors still counted). The
 * lowest of the parser files: every one of them reports here. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ci-internal.h"
#include "util.h"

int ci_problem_add(struct ci_problems *p, enum ci_sev sev, const char *part,
		   int line, const char *fmt, ...)
{
	struct ci_problem *q;
	va_list ap;
	char *msg;

	if (sev == CI_ERROR)
		p->errors++;
	/* Errors still count past the cap, so the verdict stays right. */
	if (p->n >= CI_MAX_PROBLEMS) {
		p->dropped++;
		return -1;
	}
	va_start(ap, fmt);
	msg = xvasprintf(fmt, ap);
	va_end(ap);
	q = VEC_PUSH(p->v, p->n, p->cap);
	q->sev = sev;
	q->line = line;
	q->part = part ? xstrdup(part) : NULL;
	q->msg = msg;
	return -1;
}

void ci_problems_free(struct ci_problems *p)
{
	for (size_t i = 0; i < p->n; i++) {
		free(p->v[i].part);
		free(p->v[i].msg);
	}
	free(p->v);
	memset(p, 0, sizeof(*p));
}
