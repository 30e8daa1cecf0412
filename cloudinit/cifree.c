// SPDX-License-Identifier: Apache-2.0
/* What a parsed user data owns, freed: one destructor for each type of
 * struct ci_config, below the parser files that fill it (userdata.c,
 * ccusers.c and cloudconfig.c all free through here). */
#include <stdlib.h>
#include <string.h>

#include "ci-internal.h"
#include "util.h"

void ci_user_free(struct ci_user *u)
{
	free(u->name);
	free(u->gecos);
	free(u->homedir);
	free(u->shell);
	free(u->primary_group);
	free(u->passwd);
	strv_free(u->groups);
	strv_free(u->sudo);
	strv_free(u->keys);
}

static void cmds_free(struct ci_cmd *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].shell);
		strv_free(v[i].argv);
	}
	free(v);
}

static void files_free(struct ci_file *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].path);
		free(v[i].data);
		free(v[i].owner);
	}
	free(v);
}

static void scripts_free(struct ci_script *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].body);
	}
	free(v);
}

void ci_config_free(struct ci_config *c)
{
	files_free(c->files, c->n_files);
	files_free(c->milpa, c->n_milpa);
	cmds_free(c->bootcmd, c->n_bootcmd);
	cmds_free(c->runcmd, c->n_runcmd);
	free(c->hostname);
	free(c->fqdn);
	for (size_t i = 0; i < c->n_users; i++)
		ci_user_free(&c->users[i]);
	free(c->users);
	for (size_t i = 0; i < c->n_groups; i++) {
		free(c->groups[i].name);
		strv_free(c->groups[i].members);
	}
	free(c->groups);
	strv_free(c->ssh_keys);
	free(c->final_message);
	scripts_free(c->scripts, c->n_scripts);
	scripts_free(c->boothooks, c->n_boothooks);
	ci_problems_free(&c->problems);
	memset(c, 0, sizeof(*c));
}
