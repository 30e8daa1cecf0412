// SPDX-License-Identifier: Apache-2.0
/* agent/base/lazystats.c: the lazy layers' stats files (issue 29), parsed
 * strictly, and totals that never go back when a layer's directory goes
 * or a new server counts from 0. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/tap.h"
#include "lazystats.h"

#define GOOD                                                                   \
	"pid 12\ndemand_bytes 100\nbackground_bytes 2000\ndemand_fetches "     \
	"3\ndemand_ns 4000000\nrefused 1\n"

static int parse(const char *s, struct lazystats *st, uint64_t *pid)
{
	return lazystats_parse(s, strlen(s), st, pid, NULL);
}

/* The failure lines (issue 29: a stalled read's status message). */
static void test_failure(void)
{
	static const char *const bad[] = {
	    GOOD "last_failure timed out\n", /* a cause of no failure */
	    GOOD "failed_reads 0\nlast_failure timed out\n",
	    GOOD "failed_reads 1\nlast_failure \n",
	    GOOD "failed_reads 1\nlast_failure  lead space\n",
	    GOOD "failed_reads 1\nlast_failure tab\there\n",
	    GOOD "failed_reads 1\nlast_failure caf\xc3\xa9\n",
	    GOOD "failed_reads 1\nlast_failure a\nlast_failure b\n",
	    GOOD "failed_reads 1\nfailed_reads 2\n",
	    GOOD "failed_reads -1\n",
	    GOOD "failed_reads 1\nlast_failure no newline",
	};
	struct lazystats st;
	uint64_t pid = 0;
	char why[LAZYSTATS_FAILURE_MAX], line[512];
	char text[LAZYSTATS_FAILURE_MAX + 1];

	snprintf(why, sizeof(why), "x");
	ok(lazystats_parse(GOOD, strlen(GOOD), &st, &pid, why) == 0 &&
	       st.failed_reads == 0 && !why[0],
	   "an older server's file: no failures, no cause");
	snprintf(line, sizeof(line),
		 "%slast_failure range read of layer sha256:0123456789ab... "
		 "from reg:5000: timed out after 3 tries\nfailed_reads 4\n",
		 GOOD);
	ok(lazystats_parse(line, strlen(line), &st, &pid, why) == 0 &&
	       st.failed_reads == 4 &&
	       !strcmp(why, "range read of layer sha256:0123456789ab... from "
			    "reg:5000: timed out after 3 tries"),
	   "failed_reads and last_failure, in any order: %s", why);
	snprintf(line, sizeof(line), "%sfailed_reads 2\n", GOOD);
	ok(lazystats_parse(line, strlen(line), &st, &pid, why) == 0 &&
	       st.failed_reads == 2 && !why[0],
	   "failures without a cause");
	memset(text, 'a', sizeof(text));
	text[LAZYSTATS_FAILURE_MAX - 1] = '\0';
	snprintf(line, sizeof(line), "%sfailed_reads 1\nlast_failure %s\n",
		 GOOD, text);
	ok(lazystats_parse(line, strlen(line), &st, &pid, why) == 0 &&
	       strlen(why) == LAZYSTATS_FAILURE_MAX - 1,
	   "a cause of %d bytes", LAZYSTATS_FAILURE_MAX - 1);
	text[LAZYSTATS_FAILURE_MAX - 1] = 'a';
	text[LAZYSTATS_FAILURE_MAX] = '\0';
	snprintf(line, sizeof(line), "%sfailed_reads 1\nlast_failure %s\n",
		 GOOD, text);
	snprintf(why, sizeof(why), "kept");
	ok(lazystats_parse(line, strlen(line), &st, &pid, why) < 0 &&
	       !strcmp(why, "kept"),
	   "a cause of %d bytes: refused", LAZYSTATS_FAILURE_MAX);
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		st.refused = 77;
		snprintf(why, sizeof(why), "kept");
		ok(lazystats_parse(bad[i], strlen(bad[i]), &st, &pid, why) <
			   0 &&
		       st.refused == 77 && !strcmp(why, "kept"),
		   "refused, out untouched: bad failure lines %zu", i);
	}
}

static void test_parse(void)
{
	static const char *const bad[] = {
	    "",
	    "pid 12\n",
	    GOOD "pid 13\n",
	    "pid 12\ndemand_bytes 100\nbackground_bytes 2000\ndemand_fetches "
	    "3\ndemand_ns 4000000\nrefused 1", /* no last newline */
	    "pid 12\ndemand_bytes 0100\nbackground_bytes 2000\ndemand_fetches "
	    "3\ndemand_ns 4000000\nrefused 1\n",
	    "pid 12\ndemand_bytes -1\nbackground_bytes 2000\ndemand_fetches "
	    "3\ndemand_ns 4000000\nrefused 1\n",
	    "pid 12\ndemand_bytes 9223372036854775808\nbackground_bytes "
	    "2000\ndemand_fetches 3\ndemand_ns 4000000\nrefused 1\n",
	    "pid 12\ndemand_bytes  100\nbackground_bytes 2000\ndemand_fetches "
	    "3\ndemand_ns 4000000\nrefused 1\n",
	    "pid 12\ndemand_bytes 100\nbackground_bytes 2000\ndemand_fetches "
	    "3\ndemand_ns 4000000\nrefused 1\nextra 1\n",
	};
	struct lazystats st;
	uint64_t pid = 0;
	char big[LAZYSTATS_FILE_MAX + 64];

	ok(parse(GOOD, &st, &pid) == 0 && pid == 12 && st.demand_bytes == 100 &&
	       st.background_bytes == 2000 && st.demand_fetches == 3 &&
	       st.demand_ns == 4000000 && st.refused == 1,
	   "a server's file parses");
	ok(parse("refused 0\ndemand_ns 0\ndemand_fetches 0\nbackground_bytes "
		 "0\ndemand_bytes 9223372036854775807\npid 1\n",
		 &st, &pid) == 0 &&
	       st.demand_bytes == 9223372036854775807ull,
	   "any order, 2^63-1 at most");
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		st.refused = 77;
		ok(parse(bad[i], &st, &pid) < 0 && st.refused == 77,
		   "refused, out untouched: bad file %zu", i);
	}
	memset(big, '\n', sizeof(big));
	memcpy(big, GOOD, strlen(GOOD));
	ok(lazystats_parse(big, sizeof(big), &st, &pid, NULL) < 0,
	   "longer than %d bytes: refused", LAZYSTATS_FILE_MAX);
	ok(lazystats_parse("pid 1\0\n", 7, &st, &pid, NULL) < 0,
	   "a NUL: refused");
}

static void put(const char *dir, const char *layer, const char *text)
{
	char p[512];
	FILE *f;

	snprintf(p, sizeof(p), "%s/lazy/%s", dir, layer);
	mkdir(p, 0700);
	snprintf(p, sizeof(p), "%s/lazy/%s/stats", dir, layer);
	f = fopen(p, "w");
	fputs(text, f);
	fclose(f);
}

static void drop(const char *dir, const char *layer)
{
	char p[512];

	snprintf(p, sizeof(p), "%s/lazy/%s/stats", dir, layer);
	unlink(p);
	snprintf(p, sizeof(p), "%s/lazy/%s", dir, layer);
	rmdir(p);
}

#define FILE_OF(pid, demand, bg, n, ns, refused)                               \
	"pid " #pid "\ndemand_bytes " #demand "\nbackground_bytes " #bg        \
	"\ndemand_fetches " #n "\ndemand_ns " #ns "\nrefused " #refused "\n"

static void test_totals(void)
{
	char dir[] = "/tmp/test-lazystats-XXXXXX", p[512], link[512];
	struct lazystats t, st;

	if (!mkdtemp(dir))
		abort();
	snprintf(p, sizeof(p), "%s/lazy", dir);
	mkdir(p, 0700);
	lazystats_set_dir(dir);
	lazystats_totals(&t);
	ok(!t.demand_bytes && !t.refused, "no layers: zeros");

	put(dir, "sha256-aa", FILE_OF(10, 100, 1000, 2, 2000000, 0));
	put(dir, "sha256-bb", FILE_OF(11, 5, 50, 1, 1000000, 1));
	put(dir, "sha256-cc", "pid 12\ngarbage\n");
	snprintf(p, sizeof(p), "%s/lazy/sha256-dd", dir);
	mkdir(p, 0700);
	snprintf(link, sizeof(link), "%s/lazy/sha256-aa/stats", dir);
	snprintf(p, sizeof(p), "%s/lazy/sha256-dd/stats", dir);
	if (symlink(link, p) < 0)
		abort();
	lazystats_totals(&t);
	ok(t.demand_bytes == 105 && t.background_bytes == 1050 &&
	       t.demand_fetches == 3 && t.demand_ns == 3000000 &&
	       t.refused == 1,
	   "two layers summed; a bad file and a link are not counted");

	put(dir, "sha256-aa", FILE_OF(10, 300, 1000, 3, 2000000, 0));
	drop(dir, "sha256-bb");
	lazystats_totals(&t);
	ok(t.demand_bytes == 305 && t.refused == 1,
	   "a layer gone keeps what it counted (305: %llu)",
	   (unsigned long long)t.demand_bytes);
	{
		char why[LAZYSTATS_FAILURE_MAX];

		put(dir, "sha256-ee",
		    FILE_OF(13, 0, 0, 1, 1, 0) "failed_reads 3\nlast_failure "
					       "HTTP 503 after 3 tries\n");
		ok(lazystats_layer("sha256-ee", &st, why) == 0 &&
		       st.failed_reads == 3 &&
		       !strcmp(why, "HTTP 503 after 3 tries"),
		   "one layer's failures and cause");
		ok(lazystats_layer("sha256-zz", &st, why) < 0 &&
		       lazystats_layer("../lazy", &st, why) < 0 &&
		       lazystats_layer("sha256-dd", &st, why) < 0,
		   "a layer not there, a path, a link: none");
		lazystats_totals(&t);
		ok(t.failed_reads == 3, "failed reads in the totals");
		drop(dir, "sha256-ee");
		lazystats_totals(&t);
		ok(t.failed_reads == 3, "and kept when the layer goes");
	}

	put(dir, "sha256-aa", FILE_OF(20, 7, 0, 1, 1, 0));
	lazystats_totals(&t);
	ok(t.demand_bytes == 312 && t.background_bytes == 1050,
	   "a new server counting from 0: the old one's counts kept (312: "
	   "%llu)",
	   (unsigned long long)t.demand_bytes);
	put(dir, "sha256-aa", "not a stats file\n");
	lazystats_totals(&t);
	ok(t.demand_bytes == 312, "a file turned bad: its last counts stand");

	drop(dir, "sha256-aa");
	drop(dir, "sha256-cc");
	snprintf(p, sizeof(p), "%s/lazy/sha256-dd/stats", dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/lazy/sha256-dd", dir);
	rmdir(p);
	snprintf(p, sizeof(p), "%s/lazy", dir);
	rmdir(p);
	lazystats_totals(&t);
	ok(t.demand_bytes == 312 && t.refused == 1,
	   "no lazy directory at all: the totals stay");
	rmdir(dir);
	lazystats_set_dir(NULL);
}

int main(void)
{
	test_parse();
	test_failure();
	test_totals();
	return tap_done();
}
