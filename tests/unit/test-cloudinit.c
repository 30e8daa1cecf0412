// SPDX-License-Identifier: Apache-2.0
/* Unit tests of cell-cloudinit: the user-data parser (every key, the
 * encodings, multipart, gzip, malformed YAML with line numbers, caps,
 * unknown keys), the meta-data parsers, and the modules against a
 * temporary root (these need root for owners, like test-unpack). */
#include <errno.h>
#include <fcntl.h>
#include <isa-l/igzip_lib.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../lib/tap.h"
#include "ci-internal.h"
#include "cleanup.h"
#include "fsutil.h"
#include "log.h"
#include "util.h"

/* ---- helpers ---- */

static char *gz(const char *s, size_t n, size_t *outlen)
{
	struct isal_zstream z;
	size_t cap = n + n / 2 + 1024;
	char *out = xmalloc(cap);

	isal_deflate_init(&z);
	z.gzip_flag = IGZIP_GZIP;
	z.end_of_stream = 1;
	z.flush = NO_FLUSH;
	z.next_in = (uint8_t *)(uintptr_t)s;
	z.avail_in = (uint32_t)n;
	z.next_out = (uint8_t *)out;
	z.avail_out = (uint32_t)cap;
	if (isal_deflate(&z) != COMP_OK || z.avail_in)
		abort();
	*outlen = cap - z.avail_out;
	return out;
}

static char *b64(const char *s, size_t n)
{
	static const char t[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	char *o = xmalloc(n * 4 / 3 + 8), *p = o;
	const unsigned char *u = (const unsigned char *)s;

	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)u[i] << 16;
		if (i + 1 < n)
			v |= (unsigned)u[i + 1] << 8;
		if (i + 2 < n)
			v |= u[i + 2];
		*p++ = t[(v >> 18) & 63];
		*p++ = t[(v >> 12) & 63];
		*p++ = i + 1 < n ? t[(v >> 6) & 63] : '=';
		*p++ = i + 2 < n ? t[v & 63] : '=';
	}
	*p = '\0';
	return o;
}

static int parse(const char *text, struct ci_config *c)
{
	return ci_userdata_parse(text, strlen(text), NULL, c);
}

static const struct ci_file *file_at(const struct ci_config *c,
				     const char *path)
{
	for (size_t i = 0; i < c->n_files; i++)
		if (!strcmp(c->files[i].path, path))
			return &c->files[i];
	return NULL;
}

/* The first problem whose message holds `needle`, or NULL. */
static const struct ci_problem *problem(const struct ci_config *c,
					const char *needle)
{
	for (size_t i = 0; i < c->problems.n; i++)
		if (strstr(c->problems.v[i].msg, needle))
			return &c->problems.v[i];
	return NULL;
}

static bool content_is(const struct ci_file *f, const char *want)
{
	return f && f->len == strlen(want) && !memcmp(f->data, want, f->len);
}

/* ---- parser ---- */

static void test_kinds(void)
{
	static const struct {
		const char *text;
		enum ci_kind kind;
	} cases[] = {
	    {"#cloud-config\n", CI_KIND_CLOUD_CONFIG},
	    {"#cloud-config-archive\n", CI_KIND_UNSUPPORTED},
	    {"#cloud-config-jsonp\n", CI_KIND_UNSUPPORTED},
	    {"#!/bin/sh\n", CI_KIND_SCRIPT},
	    {"#cloud-boothook\n", CI_KIND_BOOTHOOK},
	    {"#include\nhttp://x\n", CI_KIND_UNSUPPORTED},
	    {"Content-Type: multipart/mixed; boundary=x\n", CI_KIND_MIME},
	    {"mime-version: 1.0\n", CI_KIND_MIME},
	    {"\x1f\x8b\x08", CI_KIND_GZIP},
	    {"  \n\t", CI_KIND_EMPTY},
	    {"hello", CI_KIND_UNKNOWN},
	};
	const char *what;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		ok(ci_userdata_kind(cases[i].text, strlen(cases[i].text),
				    &what) == cases[i].kind,
		   "kind of user data case %zu", i);
}

static void test_controller(void)
{
	struct ci_config c;
	const struct ci_file *f;
	int r = parse("#cloud-config\n"
		      "write_files:\n"
		      "- content: |\n"
		      "    -----BEGIN CERTIFICATE-----\n"
		      "    MIIB\n"
		      "  owner: root\n"
		      "  path: /tmp/itzo/ca.crt\n"
		      "  permissions: \"0400\"\n"
		      "- content: c2VjcmV0\n"
		      "  encoding: b64\n"
		      "  owner: root:root\n"
		      "  path: /tmp/itzo/server.key\n"
		      "  permissions: '0400'\n"
		      "runcmd:\n"
		      "- echo hi\n"
		      "- [ls, -l, /tmp/itzo]\n",
		      &c);

	ok(r == 0 && c.problems.n == 0, "controller document parses cleanly");
	f = file_at(&c, "tmp/itzo/ca.crt");
	ok(f && f->mode == 0400 && !strcmp(f->owner, "root") &&
	       content_is(f, "-----BEGIN CERTIFICATE-----\nMIIB\n"),
	   "certificate: path cleaned, mode 0400, literal block content");
	f = file_at(&c, "tmp/itzo/server.key");
	ok(f && content_is(f, "secret") && f->mode == 0400, "key: b64 decoded");
	ok(c.n_runcmd == 2 && !strcmp(c.runcmd[0].shell, "echo hi") &&
	       c.runcmd[1].argv && !strcmp(c.runcmd[1].argv[2], "/tmp/itzo") &&
	       !c.runcmd[1].argv[3] && c.runcmd[1].line == 16,
	   "runcmd: a string and a list, with lines");
	ci_config_free(&c);
}

static void test_encodings(void)
{
	static const char *const encs[] = {"gz+base64", "gzip+base64", "gz+b64",
					   "gzip+b64"};
	struct buf doc;
	struct ci_config c;
	size_t zl;
	char *z = gz("zipped\n", 7, &zl), *zb = b64(z, zl);
	bool all = true;

	buf_init(&doc, 0);
	buf_append(&doc, "#cloud-config\nwrite_files:\n", 27, NULL);
	for (size_t i = 0; i < ARRAY_SIZE(encs); i++) {
		char *e =
		    xasprintf("- path: /%s\n  encoding: %s\n  content: %s\n",
			      encs[i], encs[i], zb);
		buf_append(&doc, e, strlen(e), NULL);
		free(e);
	}
	{
		char *e =
		    xasprintf("- path: /gz\n  encoding: gz\n  content: "
			      "!!binary %s\n- path: /gzip\n  encoding: "
			      "gzip\n  content: !!binary |\n    %s\n"
			      "- path: /base64\n  encoding: base64\n"
			      "  content: |\n    aGVs\n    bG8=\n"
			      "- path: /raw\n  content: !!binary AAEC\n"
			      "- path: /odd\n  encoding: rot13\n  content: x\n",
			      zb, zb);
		buf_append(&doc, e, strlen(e), NULL);
		free(e);
	}
	ok(ci_userdata_parse(doc.data, doc.len, NULL, &c) == 0,
	   "every encoding parses");
	for (size_t i = 0; i < ARRAY_SIZE(encs); i++)
		all &= content_is(file_at(&c, encs[i]), "zipped\n");
	ok(all, "gz+base64, gzip+base64, gz+b64, gzip+b64 decode");
	ok(content_is(file_at(&c, "gz"), "zipped\n") &&
	       content_is(file_at(&c, "gzip"), "zipped\n"),
	   "gz and gzip take !!binary content");
	ok(content_is(file_at(&c, "base64"), "hello"), "base64 across lines");
	ok(file_at(&c, "raw") && file_at(&c, "raw")->len == 3 &&
	       !memcmp(file_at(&c, "raw")->data, "\0\1\2", 3),
	   "!!binary without encoding gives raw bytes");
	ok(content_is(file_at(&c, "odd"), "x") &&
	       problem(&c, "unknown encoding 'rot13'") &&
	       problem(&c, "unknown encoding")->line == 30,
	   "an unknown encoding warns (line 30) and is taken as plain");
	ci_config_free(&c);
	buf_free(&doc);
	free(z);
	free(zb);
}

static void test_modes(void)
{
	static const struct {
		const char *yaml;
		mode_t want;
		bool ok, warn;
	} cases[] = {
	    {"\"0400\"", 0400, true, false},  {"0644", 0644, true, false},
	    {"420", 0644, true, false},	      {"'644'", 0644, true, false},
	    {"\"0o755\"", 0755, true, false}, {"644", 01204, true, true},
	    {"0999", 0, false, false},	      {"\"rwx\"", 0, false, false},
	    {"0o17777", 0, false, false},     {"\"17777\"", 0, false, false},
	    {"[1]", 0, false, false},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *doc =
		    xasprintf("#cloud-config\nwrite_files:\n- path: /f\n"
			      "  permissions: %s\n",
			      cases[i].yaml);
		struct ci_config c;
		int r = parse(doc, &c);
		const struct ci_file *f = file_at(&c, "f");

		if (cases[i].ok)
			ok(r == 0 && f && f->mode == cases[i].want &&
			       !!problem(&c, "decimal number") == cases[i].warn,
			   "permissions %s → %04o%s", cases[i].yaml,
			   (unsigned)cases[i].want,
			   cases[i].warn ? " with a warning" : "");
		else
			ok(r < 0 && !f && problem(&c, "octal mode") &&
			       problem(&c, "octal mode")->line == 4,
			   "permissions %s refused on line 4", cases[i].yaml);
		ci_config_free(&c);
		free(doc);
	}
}

static void test_files_keys(void)
{
	struct ci_config c;
	int r = parse("#cloud-config\n"
		      "write_files:\n"
		      "- path: /a\n  append: true\n  content: x\n"
		      "- path: /b\n  defer: yes\n  owner: alice:staff\n"
		      "- path: ../up\n"
		      "- content: nopath\n"
		      "- path: /c\n  owner: 'bad owner'\n"
		      "- path: /d\n  frobnicate: 1\n"
		      "- just a string\n"
		      "milpa_files:\n- path: /m\n  content: legacy\n",
		      &c);

	ok(r < 0, "bad entries make the document an error");
	ok(file_at(&c, "a") && file_at(&c, "a")->append && file_at(&c, "b") &&
	       file_at(&c, "b")->defer &&
	       !strcmp(file_at(&c, "b")->owner, "alice:staff") &&
	       file_at(&c, "b")->mode == 0644 && file_at(&c, "b")->len == 0,
	   "append, defer, owner; default mode 0644 and empty content");
	ok(!file_at(&c, "up") && problem(&c, "'..'") &&
	       problem(&c, "'..'")->line == 9,
	   "'..' in a path is refused (line 9)");
	ok(problem(&c, "without a path") && !file_at(&c, "c") &&
	       problem(&c, "is not user[:group]"),
	   "entries without a path or with a bad owner are dropped");
	ok(file_at(&c, "d") && problem(&c, "unknown key 'frobnicate'") &&
	       problem(&c, "unknown key")->sev == CI_WARN,
	   "an unknown key in an entry only warns");
	ok(problem(&c, "must be mappings") &&
	       problem(&c, "must be mappings")->line == 15,
	   "a string entry is an error on its line");
	ok(c.n_milpa == 1 && content_is(&c.milpa[0], "legacy"),
	   "milpa_files parse like write_files");
	ci_config_free(&c);
}

static void test_cmds(void)
{
	struct ci_config c;
	int r = parse("#cloud-config\n"
		      "bootcmd:\n"
		      "  - echo one\n"
		      "  - [echo, two]\n"
		      "  -\n"
		      "  - [echo, {a: b}]\n"
		      "  - {x: y}\n"
		      "runcmd: echo single\n",
		      &c);

	ok(r < 0 && c.n_bootcmd == 2 && c.has_bootcmd,
	   "bootcmd keeps the good commands, skips null");
	ok(problem(&c, "arguments must be strings")->line == 6 &&
	       problem(&c, "a command is a string or a list")->line == 7,
	   "bad commands are errors on their lines");
	ok(c.n_runcmd == 1 && !strcmp(c.runcmd[0].shell, "echo single") &&
	       problem(&c, "should be a list")->sev == CI_WARN,
	   "a runcmd string is one command, with a warning");
	ci_config_free(&c);
}

/* The script runcmd becomes, byte for byte as cloud-init's shellify. */
static void test_shellify(void)
{
	struct ci_config c;
	char *sh;
	int r = parse("#cloud-config\n"
		      "runcmd:\n"
		      "  - cd /tmp && echo \"$HOME\"\n"
		      "  - [echo, \"it's\", 'a b', '$x', '']\n"
		      "  -\n"
		      "  - [\"/bin/true\"]\n"
		      "bootcmd: [echo one, false]\n",
		      &c);

	ok(r < 0 && c.has_runcmd && c.n_runcmd == 3, "runcmd parsed");
	sh = ci_shellify(c.runcmd, c.n_runcmd);
	is_str(sh,
	       "#!/bin/sh\n"
	       "cd /tmp && echo \"$HOME\"\n"
	       "'echo' 'it'\\''s' 'a b' '$x' ''\n"
	       "'/bin/true'\n",
	       "shellify: strings as written, list items single-quoted");
	free(sh);
	ok(!c.has_bootcmd && c.n_bootcmd == 0 &&
	       problem(&c, "'false' is a boolean, not a command"),
	   "a boolean item fails the whole list, as shellify's TypeError");
	ci_config_free(&c);
	r = parse("Content-Type: multipart/mixed; boundary=B\n"
		  "MIME-Version: 1.0\n\n"
		  "--B\nContent-Type: text/x-shellscript\n"
		  "Content-Disposition: attachment; filename=\"a/b c$.sh\"\n\n"
		  "#!/bin/sh\necho 1\n"
		  "--B\nContent-Type: text/x-shellscript\n\n#!/bin/sh\necho 2\n"
		  "--B\nContent-Type: text/x-shellscript\n"
		  "Content-Disposition: attachment; filename=\"a/b c$.sh\"\n\n"
		  "#!/bin/sh\necho 3\n"
		  "--B--\n",
		  &c);
	ok(r == 0 && c.n_scripts == 2 &&
	       !strcmp(c.scripts[0].name, "a_bc.sh") &&
	       str_has_prefix(c.scripts[0].body, "#!/bin/sh\necho 3") &&
	       !strcmp(c.scripts[1].name, "part-002"),
	   "part names as clean_filename; part-NNN by place; same name "
	   "replaces");
	ci_config_free(&c);
}

static void test_hostname_keys(void)
{
	struct ci_config c;

	ok(parse("#cloud-config\nhostname: cell-1\nfqdn: cell-1.example.com\n"
		 "prefer_fqdn_over_hostname: true\npreserve_hostname: false\n",
		 &c) == 0 &&
	       !strcmp(c.hostname, "cell-1") &&
	       !strcmp(c.fqdn, "cell-1.example.com") && c.prefer_fqdn &&
	       !c.preserve_hostname,
	   "hostname, fqdn and the flags");
	ci_config_free(&c);
	ok(parse("#cloud-config\nhostname: 'no spaces'\nfqdn: a..b\n"
		 "preserve_hostname: maybe\n",
		 &c) < 0 &&
	       !c.hostname && !c.fqdn && problem(&c, "valid host name") &&
	       problem(&c, "true or false"),
	   "bad host names and booleans are errors");
	ci_config_free(&c);
}

static const struct ci_user *user_named(const struct ci_config *c,
					const char *name)
{
	for (size_t i = 0; i < c->n_users; i++)
		if (!strcmp(c->users[i].name, name))
			return &c->users[i];
	return NULL;
}

static void test_users_keys(void)
{
	struct ci_config c;
	const struct ci_user *u;
	int r = parse("#cloud-config\n"
		      "users:\n"
		      "  - default\n"
		      "  - name: alice\n"
		      "    gecos: Alice\n"
		      "    homedir: /srv/alice\n"
		      "    shell: /bin/bash\n"
		      "    primary_group: staff\n"
		      "    groups: [docker, adm]\n"
		      "    passwd: $6$x$y\n"
		      "    lock_passwd: false\n"
		      "    sudo: ALL=(ALL) NOPASSWD:ALL\n"
		      "    uid: 2001\n"
		      "    ssh_authorized_keys: [ssh-ed25519 AAAA a@b]\n"
		      "  - name: svc\n"
		      "    system: true\n"
		      "    groups: wheel, video\n"
		      "    sudo: false\n"
		      "    plain_text_passwd: nope\n"
		      "  - bob\n"
		      "  - name: 'bad:name'\n"
		      "  - name: carol\n"
		      "    sudo: true\n"
		      "groups:\n"
		      "  - admins: [alice, bob]\n"
		      "  - plain\n"
		      "ssh_authorized_keys:\n"
		      "  - ssh-rsa AAAA root@x\n",
		      &c);

	ok(r < 0 && c.n_users == 3, "three good users of five");
	u = user_named(&c, "alice");
	ok(u && !strcmp(u->gecos, "Alice") &&
	       !strcmp(u->homedir, "/srv/alice") &&
	       !strcmp(u->shell, "/bin/bash") &&
	       !strcmp(u->primary_group, "staff") &&
	       !strcmp(u->groups[1], "adm") && !strcmp(u->passwd, "$6$x$y") &&
	       !u->lock_passwd &&
	       !strcmp(u->sudo[0], "ALL=(ALL) NOPASSWD:ALL") &&
	       u->uid == 2001 && !strcmp(u->keys[0], "ssh-ed25519 AAAA a@b"),
	   "alice: every field");
	u = user_named(&c, "svc");
	ok(u && u->system && u->lock_passwd && !u->sudo &&
	       !strcmp(u->groups[1], "video") && u->uid == -1,
	   "svc: system, comma groups, sudo false, locked by default");
	ok(user_named(&c, "bob") && c.default_user &&
	       !user_named(&c, "default") &&
	       problem(&c, "'plain_text_passwd' is not supported"),
	   "a bare name; 'default' marks the default user; "
	   "plain_text_passwd warns");
	ok(problem(&c, "'bad:name' is not a valid user name") &&
	       problem(&c, "sudo: true is not a rule")->line == 23,
	   "a bad name and sudo: true are errors");
	ok(c.n_groups == 2 && !strcmp(c.groups[0].name, "admins") &&
	       !strcmp(c.groups[0].members[1], "bob") && !c.groups[1].members,
	   "groups: a mapping with members and a bare name");
	ok(c.ssh_keys && !strcmp(c.ssh_keys[0], "ssh-rsa AAAA root@x"),
	   "top-level ssh_authorized_keys");
	ci_config_free(&c);
	ok(parse(
	       "#cloud-config\nusers: alice, bob\ngroups: {g1: x, g2: null}\n",
	       &c) == 0 &&
	       c.n_users == 2 && c.n_groups == 2 &&
	       !strcmp(c.groups[0].members[0], "x"),
	   "users as a string, groups as a mapping");
	ci_config_free(&c);
}

static void test_top_keys(void)
{
	struct ci_config c;
	int r = parse("#cloud-config\n"
		      "final_message: \"done $UPTIME\"\n"
		      "packages: [vim]\n"
		      "frobnicate: yes\n"
		      "runcmd: [a]\n"
		      "runcmd: [b]\n"
		      "42: x\n",
		      &c);

	ok(r == 0 && !strcmp(c.final_message, "done $UPTIME"),
	   "final_message; warnings alone are no error");
	ok(problem(&c, "'packages' is not supported")->line == 3 &&
	       problem(&c, "unknown key 'frobnicate'")->line == 4 &&
	       problem(&c, "unknown key '42'"),
	   "unsupported and unknown keys warn with their line");
	ok(problem(&c, "duplicate key 'runcmd' (also on line 5)")->line == 6 &&
	       c.n_runcmd == 1 && !strcmp(c.runcmd[0].shell, "b"),
	   "a duplicate key warns; the last wins");
	ci_config_free(&c);
}

static void test_malformed(void)
{
	struct ci_config c;
	const struct ci_problem *p;
	int r = parse("#cloud-config\n"
		      "write_files:\n"
		      "  - path: /a\n"
		      "    content: x\n"
		      "runcmd:\n"
		      "  - echo ok\n"
		      " bad: indentation\n",
		      &c);

	p = c.problems.n ? &c.problems.v[0] : NULL;
	ok(r < 0 && p && p->sev == CI_ERROR && p->line == 7 &&
	       strstr(p->msg, "YAML syntax error") &&
	       strstr(p->msg, "this cloud-config is ignored"),
	   "malformed YAML: an error on line 7");
	ok(c.n_files == 0 && c.n_runcmd == 0,
	   "nothing of a malformed document is applied");
	ci_config_free(&c);
	ok(parse("#cloud-config\n- a list\n", &c) < 0 &&
	       problem(&c, "must be a mapping"),
	   "a list is not a cloud-config");
	ci_config_free(&c);
	ok(parse("#cloud-config\na: 1\n---\nb: 2\n", &c) < 0 &&
	       problem(&c, "more than one YAML document")->line == 3,
	   "a second document is refused on its line");
	ci_config_free(&c);
	ok(parse("#cloud-config\n", &c) == 0 && c.cloud_config && !c.problems.n,
	   "an empty cloud-config is fine");
	ci_config_free(&c);
}

static void test_yaml_limits(void)
{
	struct ci_config c;
	struct buf doc;

	ok(parse("#cloud-config\nb: &b {path: /x, content: y}\n"
		 "write_files: [*b, *b]\n",
		 &c) == 0 &&
	       c.n_files == 2,
	   "aliases are expanded");
	ci_config_free(&c);
	ok(parse("#cloud-config\ns: &s [*s]\n", &c) < 0 &&
	       problem(&c, "refers to itself"),
	   "a self-referencing alias is refused");
	ci_config_free(&c);
	buf_init(&doc, 0);
	{
		const char *head =
		    "#cloud-config\na0: &a0 [x,x,x,x,x,x,x,x,x,x]\n";
		buf_append(&doc, head, strlen(head), NULL);
	}
	for (int i = 1; i < 9; i++) {
		char *l = xasprintf("a%d: &a%d [*a%d,*a%d,*a%d,*a%d,*a%d,*a%d,"
				    "*a%d,*a%d,*a%d,*a%d]\n",
				    i, i, i - 1, i - 1, i - 1, i - 1, i - 1,
				    i - 1, i - 1, i - 1, i - 1, i - 1);
		buf_append(&doc, l, strlen(l), NULL);
		free(l);
	}
	ok(ci_userdata_parse(doc.data, doc.len, NULL, &c) < 0 &&
	       problem(&c, "YAML nodes"),
	   "an alias bomb stops at the node cap");
	ci_config_free(&c);
	buf_reset(&doc);
	buf_append(&doc, "#cloud-config\nx: ", 17, NULL);
	for (int i = 0; i < 100; i++)
		buf_append(&doc, "[", 1, NULL);
	ok(ci_userdata_parse(doc.data, doc.len, NULL, &c) < 0 &&
	       problem(&c, "nesting deeper"),
	   "deep nesting is refused");
	ci_config_free(&c);
	buf_free(&doc);
}

static void test_yaml_scalars(void)
{
	struct ynode n = {.type = Y_SCALAR, .plain = true};
	long long v;
	bool b;

	n.value = (char *)"0755", n.len = 4;
	ok(ynode_int(&n, &v) == 0 && v == 0755, "0755 is octal (YAML 1.1)");
	n.value = (char *)"0x1F", n.len = 4;
	ok(ynode_int(&n, &v) == 0 && v == 31, "hex");
	n.value = (char *)"1_000", n.len = 5;
	ok(ynode_int(&n, &v) == 0 && v == 1000, "underscores");
	n.value = (char *)"99999999999999999999", n.len = 20;
	ok(ynode_int(&n, &v) < 0, "overflow refused");
	n.value = (char *)"On", n.len = 2;
	ok(ynode_bool(&n, &b) == 0 && b, "On is true");
	n.value = (char *)"NO", n.len = 2;
	ok(ynode_bool(&n, &b) == 0 && !b, "NO is false");
	n.value = (char *)"~", n.len = 1;
	ok(ynode_is_null(&n), "~ is null");
	n.plain = false;
	ok(!ynode_is_null(&n) && ynode_int(&n, &v) < 0,
	   "quoted scalars are strings");
}

static void test_codec(void)
{
	struct buf b;
	struct cerr e = {0};
	size_t l1, l2;
	char *z1 = gz("one ", 4, &l1), *z2 = gz("two", 3, &l2);
	char *both = xmalloc(l1 + l2 + 4);

	buf_init(&b, 64);
	ok(ci_b64_decode(" aGk=\n", 6, &b, &e) == 0 && !strcmp(b.data, "hi"),
	   "base64 with blanks");
	buf_free(&b);
	buf_init(&b, 64);
	ok(ci_b64_decode("a=b", 3, &b, &e) < 0 &&
	       ci_b64_decode("a", 1, &b, &e) < 0,
	   "bad base64 refused");
	buf_free(&b);
	memcpy(both, z1, l1);
	memcpy(both + l1, z2, l2);
	memset(both + l1 + l2, 0, 4);
	buf_init(&b, 64);
	ok(gunzip_buf(both, l1 + l2 + 4, &b, &e) == 0 &&
	       !strcmp(b.data, "one two"),
	   "concatenated gzip members and zero padding");
	buf_free(&b);
	buf_init(&b, 64);
	ok(gunzip_buf(both, l1 - 3, &b, &e) < 0, "truncated gzip refused");
	buf_free(&b);
	both[l1 - 5] ^= 0x55;
	buf_init(&b, 64);
	ok(gunzip_buf(both, l1, &b, &e) < 0, "corrupt gzip refused");
	buf_free(&b);
	free(z1);
	free(z2);
	free(both);
}

static void test_gzip_caps(void)
{
	struct ci_config c;
	size_t n = CI_MAX_USERDATA + 4096, zl;
	char *big = xmalloc(n + 1), *z;

	memcpy(big, "#cloud-config\nx: ", 17);
	memset(big + 17, 'a', n - 17);
	big[n] = '\0';
	z = gz("#cloud-config\nruncmd: [zipped]\n", 31, &zl);
	ok(ci_userdata_parse(z, zl, NULL, &c) == 0 && c.n_runcmd == 1,
	   "gzip'd user data");
	ci_config_free(&c);
	free(z);
	ok(ci_userdata_parse(big, n, NULL, &c) < 0 &&
	       problem(&c, "over the limit"),
	   "user data over 1 MiB is refused");
	ci_config_free(&c);
	z = gz(big, n, &zl);
	ok(zl < 65536 && ci_userdata_parse(z, zl, NULL, &c) < 0 &&
	       problem(&c, "decompressed"),
	   "a gzip bomb stops at 1 MiB decompressed (%zu bytes in)", zl);
	ci_config_free(&c);
	free(z);
	free(big);
}

static void test_multipart(void)
{
	struct ci_config c;
	size_t zl;
	char *z = gz("#cloud-config\nhostname: zipped\n", 31, &zl);
	char *zb = b64(z, zl);
	char *cc = b64("#cloud-config\nruncmd: [from-base64]\n", 36);
	char *doc = xasprintf(
	    "Content-Type: multipart/mixed; boundary=\"==BOUND==\"\n"
	    "MIME-Version: 1.0\n\n"
	    "preamble\n"
	    "--==BOUND==\n"
	    "Content-Type: text/cloud-config; charset=\"us-ascii\"\n\n"
	    "#cloud-config\nwrite_files:\n- path: /one\n  content: 1\n"
	    "--==BOUND==\r\n"
	    "Content-Type: text/x-shellscript\n"
	    "Content-Disposition: attachment; filename=\"setup.sh\"\n\n"
	    "#!/bin/sh\necho script\n"
	    "--==BOUND==\n"
	    "Content-Type: text/cloud-boothook\n\n"
	    "#cloud-boothook\necho hook\n"
	    "--==BOUND==\n"
	    "Content-Type: text/cloud-config\n"
	    "Content-Transfer-Encoding: base64\n\n%s\n"
	    "--==BOUND==\n"
	    "Content-Type: application/x-gzip\n"
	    "Content-Transfer-Encoding: base64\n\n%s\n"
	    "--==BOUND==\n"
	    "Content-Type: text/x-include-url\n\nhttp://x\n"
	    "--==BOUND==\n"
	    "Content-Type: text/cloud-config\n\n"
	    "#cloud-config\nwrite_files: [oops\n"
	    "--==BOUND==\n"
	    "Content-Type: text/plain\n\n#!/bin/bash\necho plain\n"
	    "--==BOUND==--\nepilogue\n",
	    cc, zb);
	int r = parse(doc, &c);
	const struct ci_problem *p = problem(&c, "YAML syntax error");

	ok(r < 0 && c.n_files == 1 && file_at(&c, "one") &&
	       content_is(file_at(&c, "one"), "1"),
	   "multipart: cloud-config part");
	ok(c.n_scripts == 2 && !strcmp(c.scripts[0].name, "setup.sh") &&
	       !strcmp(c.scripts[0].body, "#!/bin/sh\necho script") &&
	       !strcmp(c.scripts[1].name, "part-008"),
	   "scripts: MIME filename, a text/plain part by its content");
	ok(c.n_boothooks == 1 && !strcmp(c.boothooks[0].body, "echo hook"),
	   "boothook: the #cloud-boothook line is stripped");
	ok(c.n_runcmd == 1 && !strcmp(c.runcmd[0].shell, "from-base64") &&
	       c.hostname && !strcmp(c.hostname, "zipped"),
	   "a base64 part and a gzip'd part");
	ok(problem(&c, "text/x-include-url parts are not supported") && p &&
	       p->line == 3 && p->part &&
	       !strcmp(p->part, "part 7 (text/cloud-config)"),
	   "a malformed part: error with its part and line; others applied");
	ci_config_free(&c);
	free(doc);
	free(z);
	free(zb);
	free(cc);
}

static void test_merge(void)
{
	struct ci_config c;
	int r =
	    parse("Content-Type: multipart/mixed; boundary=b\n\n"
		  "--b\nContent-Type: text/cloud-config\n\n"
		  "#cloud-config\nwrite_files: [{path: /a}]\nruncmd: [one]\n"
		  "--b\nContent-Type: text/cloud-config\n\n"
		  "#cloud-config\nwrite_files: [{path: /b}]\nhostname: h\n"
		  "--b--\n",
		  &c);

	ok(r == 0 && c.n_files == 1 && file_at(&c, "b") && c.n_runcmd == 1 &&
	       !strcmp(c.hostname, "h"),
	   "a later part's key replaces the earlier one; other keys stay");
	ci_config_free(&c);
	ok(parse("Content-Type: multipart/mixed; boundary=b\n\n--b\n"
		 "Content-Type: text/x-shellscript\n\n#!/bin/sh\n",
		 &c) == 0 &&
	       c.n_scripts == 1 && problem(&c, "no closing boundary"),
	   "a missing closing boundary warns and keeps the part");
	ci_config_free(&c);
}

static void test_placeholders(void)
{
	struct ci_vars v = {"10.0.0.7", NULL};
	const char *doc = "#cloud-config\nruncmd:\n - echo $private_ipv4\n"
			  " - echo $public_ipv4\n";
	struct ci_config c;

	ok(ci_userdata_parse(doc, strlen(doc), &v, &c) == 0 &&
	       !strcmp(c.runcmd[0].shell, "echo 10.0.0.7") &&
	       !strcmp(c.runcmd[1].shell, "echo $public_ipv4") &&
	       problem(&c, "$public_ipv4 is used")->line == 4,
	   "placeholders: substituted, or left with a warning on their line");
	ci_config_free(&c);
}

static void test_problem_cap(void)
{
	struct buf doc;
	struct ci_config c;

	buf_init(&doc, 0);
	buf_append(&doc, "#cloud-config\nwrite_files:\n", 27, NULL);
	for (int i = 0; i < CI_MAX_PROBLEMS + 50; i++)
		buf_append(&doc, "- 1\n", 4, NULL);
	ci_userdata_parse(doc.data, doc.len, NULL, &c);
	ok(c.problems.n == CI_MAX_PROBLEMS &&
	       c.problems.errors == CI_MAX_PROBLEMS + 50 &&
	       c.problems.dropped == 50,
	   "problems are capped; errors still all count");
	ci_config_free(&c);
	buf_free(&doc);
}

/* ---- meta-data ---- */

static void test_meta(void)
{
	struct ci_meta m = {0};
	struct cerr e = {0};
	const char *nc = "instance-id: i-abc\nlocal-hostname: cell-9\n"
			 "local-ipv4: 10.0.0.9\npublic-ipv4: not-an-ip\n"
			 "public-keys:\n  k1: ssh-rsa AAA one\n"
			 "  k2: ssh-rsa AAA one\n  k3: \"ssh-ed25519 B two\\n"
			 "ssh-ed25519 C three\"\n";
	const char *az =
	    "{\"compute\":{\"vmId\":\"vm-1\",\"name\":\"az-name\","
	    "\"osProfile\":{\"computerName\":\"az-host\"},"
	    "\"publicKeys\":[{\"keyData\":\"ssh-rsa AZ\"}]},"
	    "\"network\":{\"interface\":[{\"ipv4\":{\"ipAddress\":"
	    "[{\"privateIpAddress\":\"10.1.0.4\",\"publicIpAddress\":"
	    "\"20.0.0.1\"}]}}]}}";
	const char *gk = "root:ssh-rsa R1 r@x\nalice:ssh-rsa A1 a@x\n"
			 "cloudinit:ssh-rsa C1\n"
			 "root:ecdsa E1 google-ssh {\"userName\":\"r\","
			 "\"expireOn\":\"2000-01-01T00:00:00+0000\"}\n"
			 "root:ecdsa E2 google-ssh {\"userName\":\"r\","
			 "\"expireOn\":\"2999-01-01T00:00:00+0000\"}\n";

	ok(ci_meta_parse_nocloud(nc, strlen(nc), &m, &e) == 0 &&
	       !strcmp(m.instance_id, "i-abc") &&
	       !strcmp(m.hostname, "cell-9") &&
	       !strcmp(m.local_ipv4, "10.0.0.9") && !m.public_ipv4 &&
	       strv_len(m.keys) == 3 &&
	       !strcmp(m.keys[2], "ssh-ed25519 C three"),
	   "NoCloud meta-data: ids, a bad IP dropped, keys deduplicated");
	ci_meta_free(&m);
	ok(ci_meta_parse_nocloud("[x", 2, &m, &e) < 0 &&
	       strstr(e.msg, "meta-data line"),
	   "malformed meta-data is an error");
	ok(ci_meta_parse_azure(az, strlen(az), &m, &e) == 0 &&
	       !strcmp(m.instance_id, "vm-1") &&
	       !strcmp(m.hostname, "az-host") &&
	       !strcmp(m.local_ipv4, "10.1.0.4") &&
	       !strcmp(m.public_ipv4, "20.0.0.1") &&
	       !strcmp(m.keys[0], "ssh-rsa AZ"),
	   "Azure instance meta-data");
	ci_meta_free(&m);
	ci_meta_parse_gce_keys(gk, strlen(gk), "root", time(NULL), &m);
	ok(strv_len(m.keys) == 3 && !strcmp(m.keys[0], "ssh-rsa R1 r@x") &&
	       !strcmp(m.keys[1], "ssh-rsa C1") && strstr(m.keys[2], "E2"),
	   "GCE keys: only root's and cloudinit's, expired ones dropped");
	ci_meta_free(&m);
	{
		char *a = ci_instance_dir_name("i-123/../x"),
		     *b = ci_instance_dir_name("..");
		ok(!strcmp(a, "i-123_.._x") && !strcmp(b, "_.."),
		   "instance ids become safe directory names");
		free(a);
		free(b);
	}
}

/* ---- modules against a temporary root ---- */

struct troot {
	char base[64], root[96], state[96], log[96];
	int rootfd, logfd, nullfd;
	struct ci_opts o;
};

static void put(const struct troot *t, const char *rel, const char *text)
{
	struct cerr e = {0};
	if (ci_write_file(t->rootfd, rel, text, strlen(text), 0644, NULL, &e) <
	    0)
		abort();
}

static char *slurp(const struct troot *t, const char *rel)
{
	struct buf b;
	struct cerr e = {0};

	buf_init(&b, 1u << 20);
	if (ci_read_file(t->rootfd, rel, &b, &e) < 0) {
		buf_free(&b);
		return NULL;
	}
	return buf_steal(&b, NULL);
}

static void troot_init(struct troot *t)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->base, sizeof(t->base), "/tmp/test-cloudinit.XXXXXX");
	if (!mkdtemp(t->base))
		abort();
	snprintf(t->root, sizeof(t->root), "%s/root", t->base);
	snprintf(t->state, sizeof(t->state), "%s/state", t->base);
	snprintf(t->log, sizeof(t->log), "%s/log", t->base);
	mkdir(t->root, 0755);
	t->rootfd = open(t->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	t->logfd =
	    open(t->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	t->nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
	put(t, "etc/passwd",
	    "root:x:0:0:root:/root:/bin/sh\n"
	    "alice:x:1234:1234::/home/alice:/bin/sh\n");
	put(t, "etc/group",
	    "root:x:0:\nshadow:x:42:\nalice:x:1234:\n"
	    "docker:x:999:\n");
	put(t, "etc/shadow",
	    "root:*:19000:0:99999:7:::\n"
	    "alice:!:19000:0:99999:7:::\n");
	put(t, "etc/gshadow", "root:*::\nshadow:*::\nalice:!::\ndocker:!::\n");
	put(t, "etc/hosts",
	    "127.0.0.1 localhost\n127.0.1.1 old.example old\n"
	    "10.0.0.1 other\n");
	put(t, "etc/sudoers", "root ALL=(ALL) ALL\n");
	t->o.root = t->root;
	t->o.state_dir = t->state;
	t->o.default_user = "root";
	ci_log_set_file(t->logfd);
}

static void troot_free(struct troot *t)
{
	struct cerr e = {0};

	ci_log_set_file(-1);
	close(t->rootfd);
	close(t->logfd);
	close(t->nullfd);
	fs_rm_rf(t->base, &e);
}

/* Parse doc, open the state for iid and apply; the report's failures. */
static int apply(struct troot *t, const char *doc, const char *iid,
		 const struct ci_meta *meta, struct ci_report *rep)
{
	struct ci_config cfg;
	struct ci_state st;
	struct cerr e = {0};
	struct ci_ctx c = {.o = &t->o,
			   .rootfd = t->rootfd,
			   .cfg = &cfg,
			   .meta = meta,
			   .st = &st,
			   .datasource = "test",
			   .state_dir = t->state,
			   .out_fd = t->logfd,
			   .null_fd = t->nullfd};

	ci_userdata_parse(doc, strlen(doc), NULL, &cfg);
	if (ci_state_open(t->state, iid, &st, &e) < 0)
		abort();
	ci_apply(&c, rep);
	ci_state_finish(&st, "test", &e);
	ci_state_close(&st);
	ci_config_free(&cfg);
	return rep->failed;
}

static bool stat_is(const struct troot *t, const char *rel, mode_t mode,
		    uid_t uid, gid_t gid)
{
	struct stat st;

	return fstatat(t->rootfd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
	       (st.st_mode & 07777) == mode && st.st_uid == uid &&
	       st.st_gid == gid;
}

static void test_write_files_module(void)
{
	struct troot t;
	struct ci_report rep;
	char *s;

	troot_init(&t);
	put(&t, "etc/motd", "first\n");
	if (symlinkat("/tmp", t.rootfd, "escape") < 0)
		ok(0, "symlinkat escape");
	apply(&t,
	      "#cloud-config\n"
	      "write_files:\n"
	      "- {path: /tmp/itzo/ca.crt, content: CA, permissions: '0400'}\n"
	      "- {path: /srv/a/b/c.txt, content: deep, owner: alice:docker}\n"
	      "- {path: /etc/motd, content: \"second\\n\", append: true}\n"
	      "- {path: /escape/evil, content: x}\n"
	      "- {path: /secret, content: s, owner: nobody}\n"
	      "- {path: /late, content: l, defer: true, owner: alice}\n"
	      "milpa_files:\n- {path: /milpa, content: m}\n",
	      "i-1", NULL, &rep);
	ok(rep.failed == 1, "write_files fails (2 bad entries), the rest ran");
	ok(stat_is(&t, "tmp/itzo/ca.crt", 0400, 0, 0) &&
	       stat_is(&t, "tmp/itzo", 0755, 0, 0),
	   "0400 file, parents 0755");
	ok(stat_is(&t, "srv/a/b/c.txt", 0644, 1234, 999),
	   "owner user:group from the root's passwd and group");
	s = slurp(&t, "etc/motd");
	is_str(s, "first\nsecond\n", "append: true appends");
	free(s);
	ok(faccessat(AT_FDCWD, "/tmp/evil", F_OK, AT_SYMLINK_NOFOLLOW) < 0,
	   "a symlink cannot lead a write out of the root");
	ok(faccessat(t.rootfd, "secret", F_OK, 0) < 0,
	   "an unknown owner writes nothing");
	ok(stat_is(&t, "late", 0644, 1234, 0) &&
	       stat_is(&t, "milpa", 0644, 0, 0),
	   "deferred file (owner alice, group root) and milpa_files");
	troot_free(&t);
}

static void test_users_module(void)
{
	struct troot t;
	struct ci_report rep;
	char *pw, *gr, *sh, *gs, *su, *ak;
	const char *doc =
	    "#cloud-config\n"
	    "groups: [{admins: [alice, ghost]}, cloud]\n"
	    "users:\n"
	    "- name: bob\n  gecos: Bob B\n  shell: /bin/bash\n"
	    "  groups: [docker, newgrp]\n  passwd: $6$s$h\n"
	    "  sudo: ALL=(ALL) NOPASSWD:ALL\n"
	    "  ssh_authorized_keys: [ssh-ed25519 BOB bob@x]\n"
	    "- name: svc\n  system: true\n  lock_passwd: false\n"
	    "- name: alice\n  hashed_passwd: $6$a$new\n  lock_passwd: false\n"
	    "- name: carol\n  lock_passwd: false\n"
	    "ssh_authorized_keys: [ssh-rsa ROOT root@x]\n";

	troot_init(&t);
	apply(&t, doc, "i-1", NULL, &rep);
	ok(rep.failed == 0, "users module ran cleanly");
	pw = slurp(&t, "etc/passwd");
	gr = slurp(&t, "etc/group");
	sh = slurp(&t, "etc/shadow");
	gs = slurp(&t, "etc/gshadow");
	su = slurp(&t, "etc/sudoers.d/90-cloud-init-users");
	ak = slurp(&t, "home/bob/.ssh/authorized_keys");
	ok(pw && strstr(pw, "bob:x:1235:1238:Bob B:/home/bob:/bin/bash\n") &&
	       strstr(pw, "svc:x:999:998::/home/svc:/bin/sh\n"),
	   "passwd: bob's uid after alice's, svc a system id");
	ok(gr && strstr(gr, "admins:x:1235:alice\n") &&
	       strstr(gr, "cloud:x:1236:") &&
	       strstr(gr, "docker:x:999:bob\n") &&
	       strstr(gr, "newgrp:x:1237:bob\n") && strstr(gr, "bob:x:1238:\n"),
	   "group: the user's groups made before its own (as groupadd, "
	   "then useradd), members added");
	ok(sh && strstr(sh, "bob:!$6$s$h:") &&
	       strstr(sh, "alice:$6$a$new:19000:"),
	   "shadow: locked hash; an existing user's hashed_passwd applies");
	ok(sh && strstr(sh, "carol:!:") && strstr(sh, ":0:99999:7:::\n"),
	   "shadow: lock_passwd false without a password stays locked ('!')");
	ok(sh && strstr(sh, "svc:!:") && strstr(sh, "::::::\n"),
	   "shadow: a system user has no ageing fields");
	ok(gs && strstr(gs, "docker:!::bob\n") && strstr(gs, "bob:!::\n"),
	   "gshadow kept in step");
	ok(stat_is(&t, "etc/shadow", 0644, 0, 0), "shadow keeps its mode");
	ok(su && strstr(su, "bob ALL=(ALL) NOPASSWD:ALL\n") &&
	       stat_is(&t, "etc/sudoers.d/90-cloud-init-users", 0440, 0, 0),
	   "sudo rule in 90-cloud-init-users, 0440");
	free(su);
	su = slurp(&t, "etc/sudoers");
	ok(su && strstr(su, "#includedir /etc/sudoers.d\n"),
	   "sudoers gets the includedir");
	ok(ak && !strcmp(ak, "ssh-ed25519 BOB bob@x\n") &&
	       stat_is(&t, "home/bob", 0755, 1235, 1238) &&
	       stat_is(&t, "home/bob/.ssh", 0700, 1235, 1238) &&
	       stat_is(&t, "home/bob/.ssh/authorized_keys", 0600, 1235, 1238),
	   "home 0755, .ssh 0700, authorized_keys 0600, owned by bob");
	ok(faccessat(t.rootfd, "home/svc", F_OK, 0) < 0,
	   "a system user gets no home");
	free(ak);
	ak = slurp(&t, "root/.ssh/authorized_keys");
	is_str(ak, "ssh-rsa ROOT root@x\n", "top-level keys go to root");
	free(pw);
	free(gr);
	free(sh);
	free(gs);
	free(su);
	free(ak);
	/* A new instance runs users again: nothing may be duplicated. */
	apply(&t, doc, "i-2", NULL, &rep);
	pw = slurp(&t, "etc/passwd");
	ak = slurp(&t, "root/.ssh/authorized_keys");
	ok(rep.failed == 0 && strstr(pw, "\nbob:") &&
	       !strstr(strstr(pw, "\nbob:") + 1, "\nbob:"),
	   "re-run: bob is not added twice");
	is_str(ak, "ssh-rsa ROOT root@x\n", "re-run: no duplicate key lines");
	free(pw);
	free(ak);
	troot_free(&t);
}

static void test_hostname_module(void)
{
	struct troot t;
	struct ci_report rep;
	struct ci_meta m = {.hostname = (char *)"ip-10-0-0-5.ec2.internal"};
	char *h, *hosts, *s = NULL, *f = NULL;
	struct ci_config c = {0};

	s = ci_hosts_update("", 0, NULL, "solo");
	is_str(s,
	       "127.0.0.1\tlocalhost\n127.0.1.1\tsolo\n"
	       "::1\tlocalhost ip6-localhost ip6-loopback\n",
	       "hosts made from nothing");
	free(s);
	s = ci_hosts_update("a b\n127.0.0.1 localhost", 23, "x.y", "x");
	is_str(s, "a b\n127.0.0.1 localhost\n127.0.1.1\tx.y x\n",
	       "hosts: the line goes after 127.0.0.1");
	free(s);
	ok(ci_hostname_pick(&c, &m, &s, &f) == 0 && !strcmp(s, "ip-10-0-0-5") &&
	       !strcmp(f, "ip-10-0-0-5.ec2.internal"),
	   "meta-data hostname when the config has none");
	free(s);
	free(f);
	troot_init(&t);
	apply(&t, "#cloud-config\nhostname: cell-3\nfqdn: cell-3.pods.local\n",
	      "i-1", &m, &rep);
	h = slurp(&t, "etc/hostname");
	hosts = slurp(&t, "etc/hosts");
	ok(rep.failed == 0, "hostname module ran (no sethostname with a root)");
	is_str(h, "cell-3\n", "/etc/hostname holds the short name");
	is_str(hosts,
	       "127.0.0.1 localhost\n127.0.1.1\tcell-3.pods.local cell-3\n"
	       "10.0.0.1 other\n",
	       "/etc/hosts: the 127.0.1.1 line replaced in place");
	free(h);
	free(hosts);
	troot_free(&t);
}

static void test_commands_and_state(void)
{
	struct troot t;
	struct ci_report rep;
	char *s;
	const char *doc =
	    "#cloud-config\n"
	    "bootcmd: [\"echo boot >> bootlog\"]\n"
	    "runcmd:\n"
	    " - echo \"$CLOUDINIT_ROOT $INSTANCE_ID $(pwd)\" > run\n"
	    " - [sh, -c, 'echo list >> run']\n"
	    " - exit 3\n"
	    " - [/nonexistent/binary]\n"
	    " - echo after >> run\n"
	    "write_files: [{path: /f, content: x}]\n"
	    "final_message: \"bye $INSTANCE_ID\"\n";
	char *want;

	troot_init(&t);
	apply(&t, doc, "i-1", NULL, &rep);
	s = slurp(&t, "run");
	want = xasprintf("%s i-1 %s\nlist\n", t.root, t.root);
	ok(rep.failed == 1 && rep.ran == 5,
	   "runcmd failed, 5 modules ran (ssh keys always)");
	is_str(s, want,
	       "runcmd is one script run in the root with CLOUDINIT_ROOT "
	       "and INSTANCE_ID; its first failing exit ends it");
	free(s);
	free(want);
	apply(&t, doc, "i-1", NULL, &rep);
	s = slurp(&t, "bootlog");
	ok(rep.skipped == 3 && rep.ran == 2 && rep.failed == 0,
	   "same instance: write_files and runcmd skipped");
	is_str(s, "boot\nboot\n", "bootcmd runs every boot");
	free(s);
	apply(&t, doc, "i-2", NULL, &rep);
	s = slurp(&t, "bootlog");
	ok(rep.skipped == 0 && rep.ran == 5, "a new instance runs everything");
	is_str(s, "boot\nboot\nboot\n", "and bootcmd again");
	free(s);
	s = slurp(&t, "../state/instance-id");
	ok(!s, "state lives outside the root here");
	{
		struct buf b;
		struct cerr e = {0};
		char *p = xasprintf("%s/instance-id", t.state);
		buf_init(&b, 64);
		ok(fs_read_file(p, &b, &e) == 0 && !strcmp(b.data, "i-2\n"),
		   "the state records the last instance");
		buf_free(&b);
		free(p);
		p = xasprintf("%s/log", t.base);
		buf_init(&b, 1u << 20);
		ok(fs_read_file(p, &b, &e) == 0 && strstr(b.data, "bye i-2") &&
		       strstr(b.data, "scripts/runcmd: exit status 3"),
		   "the log has commands' output, failures and the message");
		buf_free(&b);
		free(p);
	}
	troot_free(&t);
}

static void test_scripts_module(void)
{
	struct troot t;
	struct ci_report rep;
	char *s;
	const char *doc = "Content-Type: multipart/mixed; boundary=b\n\n"
			  "--b\nContent-Type: text/x-shellscript\n\n"
			  "#!/bin/sh\necho script >> out\n"
			  "--b\nContent-Type: text/x-shellscript\n\n"
			  "echo no-shebang >> out\n"
			  "--b\nContent-Type: text/cloud-boothook\n\n"
			  "#cloud-boothook\necho hook $INSTANCE_ID >> out\n"
			  "--b--\n";

	troot_init(&t);
	apply(&t, doc, "i-9", NULL, &rep);
	s = slurp(&t, "out");
	is_str(s, "hook i-9\nscript\nno-shebang\n",
	       "boothook first, then scripts (with and without #!)");
	free(s);
	apply(&t, doc, "i-9", NULL, &rep);
	s = slurp(&t, "out");
	is_str(s, "hook i-9\nscript\nno-shebang\nhook i-9\n",
	       "on the same instance only the boothook runs again");
	free(s);
	troot_free(&t);
}

static void test_final_message(void)
{
	char *s = ci_final_message("$UPTIME|${TIMESTAMP}|$INSTANCE_ID|"
				   "$DATASOURCE|$NOPE|$UPTIMEX|$",
				   "i-1", "ec2", 12.5, 0);

	is_str(s,
	       "12.50|Thu, 01 Jan 1970 00:00:00 +0000|i-1|ec2|$NOPE|"
	       "$UPTIMEX|$",
	       "final_message variables");
	free(s);
}

int main(void)
{
	umask(022);
	log_init("test-cloudinit", LOG_ERROR);
	test_kinds();
	test_controller();
	test_encodings();
	test_modes();
	test_files_keys();
	test_cmds();
	test_shellify();
	test_hostname_keys();
	test_users_keys();
	test_top_keys();
	test_malformed();
	test_yaml_limits();
	test_yaml_scalars();
	test_codec();
	test_gzip_caps();
	test_multipart();
	test_merge();
	test_placeholders();
	test_problem_cap();
	test_meta();
	test_final_message();
	if (geteuid() != 0) {
		ok(0, "the module tests need root (file owners)");
		return tap_done();
	}
	test_write_files_module();
	test_users_module();
	test_hostname_module();
	test_commands_and_state();
	test_scripts_module();
	return tap_done();
}
