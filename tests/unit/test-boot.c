// SPDX-License-Identifier: Apache-2.0
/* Unit tests of the boot pieces that need no network: the flat YAML map,
 * the payload check and its all-or-nothing writer, the IMDS credentials
 * document, and the XML reader behind ovf-env.xml and the goal state. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../lib/tap.h"
#include "boot-internal.h"
#include "cleanup.h"
#include "ci-internal.h"
#include "fsutil.h"
#include "util.h"
#include "yamlmap.h"

static void test_yamlmap(void)
{
	struct yamlmap m;
	struct cerr e = {0};
	const char *doc = "a: \"true\"\nb: |\n  line1\n  line2\nc: 6421\nd:\n";

	ok(yamlmap_parse(doc, strlen(doc), &m, &e) == 0, "a flat map parses");
	ok(m.n == 4, "four entries");
	is_str(yamlmap_get(&m, "a"), "true", "quoted scalar");
	is_str(yamlmap_get(&m, "b"), "line1\nline2\n", "block scalar kept");
	is_str(yamlmap_get(&m, "c"), "6421", "plain number as text");
	is_str(yamlmap_get(&m, "d"), "", "empty value");
	ok(m.v[2].line == 5, "line numbers");
	yamlmap_free(&m);
	ok(yamlmap_parse("", 0, &m, &e) == 0 && m.n == 0, "empty is empty");
	ok(yamlmap_parse("a: 1\na: 2\n", 10, &m, &e) < 0 &&
	       strstr(e.msg, "line 2: duplicate key"),
	   "duplicate key refused with its line: %s", e.msg);
	ok(yamlmap_parse("a: [1]\n", 7, &m, &e) < 0 && strstr(e.msg, "a list"),
	   "a list refused");
	ok(yamlmap_parse("a: &x 1\nb: *x\n", 14, &m, &e) < 0, "alias refused");
	ok(yamlmap_parse("a: \"x\\0y\"\n", 10, &m, &e) < 0 &&
	       strstr(e.msg, "NUL"),
	   "NUL in a value refused");
	ok(yamlmap_parse("a: 'x\n", 6, &m, &e) < 0 && strstr(e.msg, "line"),
	   "syntax error has a line: %s", e.msg);
}

static void test_payload(void)
{
	char dir[] = "/tmp/cell-test-boot.XXXXXX";
	struct yamlmap m;
	struct cerr e = {0};
	struct stat st;
	const char *good = "ca.crt: A\nserver.crt: B\nserver.key: C\nx_y: D\n";
	const char *bad =
	    "ca.crt: A\nserver.crt: B\nserver.key: C\n.hidden: x\n";

	ok(mkdtemp(dir) != NULL, "temp dir");
	ok(payload_parse(bad, strlen(bad), &m, &e) < 0 &&
	       strstr(e.msg, "plain file name"),
	   "a dot file is not a boot file");
	ok(payload_parse("ca.crt: A\n", 10, &m, &e) < 0 &&
	       strstr(e.msg, "no server.crt"),
	   "incomplete payload: %s", e.msg);
	ok(payload_parse(good, strlen(good), &m, &e) == 0, "good payload");
	ok(payload_write(&m, dir, &e) == 0, "written");
	ok(payload_complete(dir), "complete");
	{
		cleanup_free char *p = xasprintf("%s/server.key", dir);
		struct buf b;
		buf_init(&b, 100);
		ok(fs_read_file(p, &b, &e) == 0 && !strcmp(b.data, "C"),
		   "content");
		ok(stat(p, &st) == 0 && (st.st_mode & 0777) == 0600,
		   "mode 0600");
		buf_free(&b);
	}
	yamlmap_free(&m);
	fs_rm_rf(dir, &e);
}

static void test_creds(void)
{
	struct aws_creds c;
	struct cerr e = {0};
	const char *doc =
	    "{\"Code\":\"Success\",\"AccessKeyId\":\"AK\",\"SecretAccessKey\":"
	    "\"SK\",\"Token\":\"TK\",\"Expiration\":\"2030-01-02T03:04:05Z\"}";

	ok(aws_creds_parse(doc, strlen(doc), &c, &e) == 0, "credentials");
	is_str(c.token, "TK", "token");
	ok(c.expires == 1893553445, "expiry in UTC (%lld)",
	   (long long)c.expires);
	aws_creds_free(&c);
	ok(aws_creds_parse("{\"Code\":\"Failed\"}", 17, &c, &e) < 0,
	   "a failed Code");
	doc = "{\"AccessKeyId\":\"AK\",\"SecretAccessKey\":\"SK\",\"Token\":"
	      "\"TK\",\"Expiration\":\"1970-01-01T00:00:00Z\"}";
	ok(aws_creds_parse(doc, strlen(doc), &c, &e) < 0,
	   "an expiry at the epoch is refused (0 means never)");
}

static void test_xml(void)
{
	static const char *const path[] = {"Environment", "Section", "Data"};
	const char *doc =
	    "<?xml version=\"1.0\"?><!-- c --><e:Environment xmlns:e=\"x\">"
	    "<e:Section a=\"<>\"><Other>no</Other><Data>a&amp;b&#65;&#x42;"
	    "<![CDATA[<c>]]></Data><Data>second</Data></e:Section>"
	    "</e:Environment>";
	struct buf b;
	struct cerr e = {0};
	char *inc, *cid, *iid;

	buf_init(&b, 1000);
	ok(ci_xml_text(doc, strlen(doc), path, 3, &b, &e) == 1, "found: %s",
	   e.msg);
	is_str(b.data, "a&bAB<c>", "entities, references, CDATA");
	buf_free(&b);
	buf_init(&b, 1000);
	ok(ci_xml_text("<Environment/>", 14, path, 3, &b, &e) == 0,
	   "not there");
	ok(ci_xml_text("<!DOCTYPE x><Environment/>", 26, path, 3, &b, &e) < 0 &&
	       strstr(e.msg, "DTD"),
	   "DTD refused");
	ok(ci_xml_text("<Environment><Section></Environment>", 36, path, 3, &b,
		       &e) < 0,
	   "mismatched close refused");
	buf_free(&b);
	doc = "<GoalState><Incarnation>2</Incarnation><Container><ContainerId>"
	      "c1</ContainerId><RoleInstanceList><RoleInstance><InstanceId>"
	      "i1</InstanceId></RoleInstance></RoleInstanceList></Container>"
	      "</GoalState>";
	ok(ci_goalstate_parse(doc, strlen(doc), &inc, &cid, &iid, &e) == 0 &&
	       !strcmp(inc, "2") && !strcmp(cid, "c1") && !strcmp(iid, "i1"),
	   "goal state");
	free(inc);
	free(cid);
	free(iid);
}

int main(void)
{
	test_yamlmap();
	test_payload();
	test_creds();
	test_xml();
	return tap_done();
}
