// SPDX-License-Identifier: Apache-2.0
/* cellctl: drive cells the way the Kip controller does. Each verb lives in
 * controller/cmd-*.c; this file only picks one. */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-internal.h"

static const struct {
	const char *name;
	int (*fn)(int, char **, struct ctl_global *);
	const char *what;
} verbs[] = {
    {"pki", cmd_pki, "init DIR | cell DIR: the controller's PKI"},
    {"run", cmd_run, "POD.yaml: convert, deploy packages, updatepod, follow"},
    {"convert", cmd_convert, "POD.yaml: print the PodParameters Kip sends"},
    {"delete", cmd_delete, "stop the pod's units (updatepod with none)"},
    {"status", cmd_status, "the pod's units (-o json|yaml|wide)"},
    {"logs", cmd_logs, "[UNIT] [-f] [--tail N]: a unit's log"},
    {"exec", cmd_exec, "[-i] [-t] [-c UNIT] -- CMD…: run in a unit"},
    {"attach", cmd_attach, "[-i] [-t] [-c UNIT]: a unit's stdio"},
    {"port-forward", cmd_port_forward, "LOCAL:REMOTE: a local port to the pod"},
    {"file", cmd_file, "PATH [--tail N]: the end of a file on the cell"},
    {"ping", cmd_ping, "is the cell's agent up (3 s)"},
    {"version", cmd_version, "the cell agent's version"},
    {"metrics", cmd_metrics, "the agent's metrics (Prometheus text)"},
    {"watch", cmd_watch, "--cell A --cell B…: one line per cell"},
    {"select", cmd_select, "--cpu N --memory Q: Kip's instance choice"},
    {"platforms", cmd_platforms, "IMAGE: the platforms its registry lists"},
    {"userdata", cmd_userdata, "--pki DIR: #cloud-config with the boot files"},
    {"ssm-payload", cmd_ssm_payload, "--pki DIR: the SSM config parameter(s)"},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: cellctl VERB [options]   (cellctl VERB --help)\n");
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++)
		fprintf(f, "  %-13s %s\n", verbs[i].name, verbs[i].what);
	fprintf(f, "common options: --cell ADDR[:PORT] (CELLCTL_CELL), "
		   "--pki DIR (CELLCTL_PKI), -o json|yaml|wide\n"
		   "exit codes: 0 done, 1 the cell (or a file) failed, with "
		   "the reason; 2 usage\n");
}

int main(int argc, char **argv)
{
	struct ctl_global g = {0};
	int r;

	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : EXIT_OK;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("cellctl %s\n", CELL_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
		if (strcmp(argv[1], verbs[i].name) != 0)
			continue;
		curl_global_init(CURL_GLOBAL_DEFAULT);
		r = verbs[i].fn(argc - 1, argv + 1, &g);
		free(g.cells);
		curl_global_cleanup();
		return r;
	}
	fprintf(stderr, "cellctl: unknown verb \"%s\"\n", argv[1]);
	usage(stderr);
	return EXIT_USAGE;
}
