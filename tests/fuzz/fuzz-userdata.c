// SPDX-License-Identifier: Apache-2.0
/* Fuzz the user-data parser: any bytes as user data (cloud-config, scripts,
 * gzip, MIME multipart), with and without placeholder values, and as
 * NoCloud meta-data. Whatever comes out must keep the parser's promises:
 * every entry it keeps is whole and safe to apply. */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ci-internal.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_files(const struct ci_file *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct ci_file *f = &v[i];
		/* Clean and relative: never "", never absolute, never "..". */
		if (!f->path || !*f->path || f->path[0] == '/' ||
		    strstr(f->path, "//") || !strcmp(f->path, "..") ||
		    !strncmp(f->path, "../", 3) || strstr(f->path, "/../") ||
		    (strlen(f->path) >= 3 &&
		     !strcmp(f->path + strlen(f->path) - 3, "/..")))
			abort();
		if (f->mode > 07777 || (f->len && !f->data) ||
		    f->len > CI_MAX_CONTENT_FILE)
			abort();
	}
}

static void check_cmds(const struct ci_cmd *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!v[i].shell == !v[i].argv || (v[i].argv && !v[i].argv[0]))
			abort();
}

static void check_users(const struct ci_config *c)
{
	for (size_t i = 0; i < c->n_users; i++) {
		const struct ci_user *u = &c->users[i];
		/* These strings become /etc/passwd fields. */
		if (!u->name || strpbrk(u->name, ":\n") ||
		    (u->gecos && strpbrk(u->gecos, ":\n")) ||
		    (u->homedir &&
		     (u->homedir[0] != '/' || strpbrk(u->homedir, ":\n"))) ||
		    (u->shell && strpbrk(u->shell, ":\n")) ||
		    (u->passwd && strpbrk(u->passwd, ":\n")))
			abort();
		for (char **k = u->keys; k && *k; k++)
			if (strchr(*k, '\n'))
				abort();
	}
	for (size_t i = 0; i < c->n_groups; i++)
		if (!c->groups[i].name || strpbrk(c->groups[i].name, ":\n,"))
			abort();
}

/* Script names become file names in the state dir: one clean component,
 * unique. And the runcmd script can always be made. */
static void check_scripts(const struct ci_script *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (!v[i].name || !v[i].name[0] || strchr(v[i].name, '/') ||
		    !strcmp(v[i].name, ".") || !strcmp(v[i].name, ".."))
			abort();
		for (size_t k = 0; k < i; k++)
			if (!strcmp(v[i].name, v[k].name))
				abort();
	}
}

static void check(const struct ci_config *c, int r)
{
	if ((r < 0) != (c->problems.errors > 0))
		abort();
	if (c->problems.n > CI_MAX_PROBLEMS ||
	    c->content_total > CI_MAX_CONTENT_TOTAL)
		abort();
	check_files(c->files, c->n_files);
	check_files(c->milpa, c->n_milpa);
	check_cmds(c->bootcmd, c->n_bootcmd);
	check_cmds(c->runcmd, c->n_runcmd);
	check_users(c);
	check_scripts(c->scripts, c->n_scripts);
	check_scripts(c->boothooks, c->n_boothooks);
	free(ci_shellify(c->runcmd, c->n_runcmd));
	if ((c->hostname && !ci_hostname_ok(c->hostname)) ||
	    (c->fqdn && !ci_hostname_ok(c->fqdn)))
		abort();
	for (char **k = c->ssh_keys; k && *k; k++)
		if (strchr(*k, '\n'))
			abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct ci_vars vars = {"10.0.0.5", "203.0.113.9"};
	struct ci_config c;
	struct ci_meta m = {0};
	struct cerr e = {0};
	int r;

	r = ci_userdata_parse(data, size, NULL, &c);
	check(&c, r);
	ci_config_free(&c);
	r = ci_userdata_parse(data, size, &vars, &c);
	check(&c, r);
	ci_config_free(&c);
	if (ci_meta_parse_nocloud((const char *)data, size, &m, &e) == 0)
		for (char **k = m.keys; k && *k; k++)
			if (strchr(*k, '\n'))
				abort();
	ci_meta_free(&m);
	{
		/* The image's cloud.cfg is outside input too. */
		struct ci_user u = {0};
		if (ci_cc_default_user((const char *)data, size, &u) == 0 &&
		    (!u.name || strpbrk(u.name, ":\n") ||
		     (u.gecos && strpbrk(u.gecos, ":\n"))))
			abort();
		ci_user_free(&u);
	}
	/* Azure's instance document, as cell-net reads it: addresses only. */
	{
		char *pri = NULL, *sec = NULL;
		struct in_addr ia;
		if (ci_meta_parse_azure_ips((const char *)data, size, &pri,
					    &sec, &e) == 0 &&
		    (!pri || inet_pton(AF_INET, pri, &ia) != 1 ||
		     (sec && inet_pton(AF_INET, sec, &ia) != 1)))
			abort();
		free(pri);
		free(sec);
	}
	return 0;
}
