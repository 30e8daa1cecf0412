// SPDX-License-Identifier: Apache-2.0
/* netsetup's pure parts: the nat rule plan, the port and CIDR parsers, the
 * state file round trip; and the network agent's command line. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../lib/tap.h"
#include "net-internal.h"
#include "sup-internal.h"
#include "util.h"

static void test_cidr(void)
{
	struct cerr e = {0};
	uint32_t a;
	int plen;

	ok(net_parse_cidr("10.1.2.3/8", &a, &plen, &e) == 0 && plen == 8 &&
	       a == inet_addr("10.0.0.0"),
	   "a CIDR is masked to its network");
	ok(net_parse_cidr("192.0.2.7", &a, &plen, &e) == 0 && plen == 32,
	   "a bare address is a /32");
	ok(net_parse_cidr("0.0.0.0/0", &a, &plen, &e) == 0 && plen == 0 &&
	       a == 0,
	   "/0 works");
	const char *bad[] = {
	    "",		"/8",	       "10.0.0.0/33", "10.0.0.0/-1",
	    "10.0.0/8", "10.0.0.0/8x", "::1/128",     "10.0.0.0/"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		cerr_clear(&e);
		ok(net_parse_cidr(bad[i], &a, &plen, &e) < 0 &&
		       e.code == EINVAL,
		   "'%s' refused", bad[i]);
	}
}

static void test_port(void)
{
	struct cerr e = {0};
	struct net_port p;

	ok(net_parse_port("8080:80", &p, &e) == 0 && p.host_port == 8080 &&
	       p.container_port == 80 && !p.udp && !p.host_ip[0],
	   "H:C is TCP on the primary IP");
	ok(net_parse_port("53:5353/udp@10.0.0.9", &p, &e) == 0 && p.udp &&
	       p.host_port == 53 && p.container_port == 5353 &&
	       !strcmp(p.host_ip, "10.0.0.9"),
	   "udp and a hostIP");
	ok(net_parse_port("1:65535/tcp", &p, &e) == 0, "the port range ends");
	const char *bad[] = {
	    "80",	  ":80",     "80:",    "0:80", "80:65536",
	    "80:80/icmp", "80:80@x", "80:80/", "a:b",  "80:80@1.2.3.4.5"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		cerr_clear(&e);
		ok(net_parse_port(bad[i], &p, &e) < 0 && e.code == EINVAL,
		   "'%s' refused", bad[i]);
	}
}

static struct net_state sample(void)
{
	struct net_state st = {0};
	static struct net_port ports[2] = {
	    {.host_port = 8080, .container_port = 80},
	    {.host_port = 53,
	     .container_port = 53,
	     .udp = true,
	     .host_ip = "10.0.0.9"}};

	st.name = xstrdup("pod");
	st.netns_path = xstrdup("/var/run/netns/pod");
	st.pod_ip = xstrdup("10.0.0.50");
	st.primary_if = xstrdup("ens5");
	st.primary_ip = xstrdup("10.0.0.10");
	st.host_veth = xstrdup("veth-pod");
	st.made_netns = st.made_veth = st.made_rules = true;
	st.private_cidrs = xcalloc(2, sizeof(char *));
	st.private_cidrs[0] = xstrdup("100.64.0.0/10");
	st.ports = xcalloc(2, sizeof(*st.ports));
	memcpy(st.ports, ports, sizeof(ports));
	st.n_ports = 2;
	st.sysctls = xcalloc(1, sizeof(*st.sysctls));
	st.sysctls[0].path = xstrdup("net/ipv4/ip_forward");
	st.sysctls[0].old = xstrdup("0");
	st.sysctls[0].set = xstrdup("1");
	st.n_sysctls = 1;
	return st;
}

static void test_plan(void)
{
	struct net_state st = sample();
	struct net_plan p;
	struct cerr e = {0};
	const char *want[] = {
	    "-A CELL-HOSTPORT -d 10.0.0.10 -p tcp -m tcp --dport 8080 -j DNAT "
	    "--to-destination 10.0.0.50:80",
	    "-A CELL-HOSTPORT -d 10.0.0.10 -p udp -m udp --dport 53 -j DNAT "
	    "--to-destination 10.0.0.50:53",
	    "-A CELL-HOSTPORT -d 10.0.0.9 -p udp -m udp --dport 53 -j DNAT "
	    "--to-destination 10.0.0.50:53",
	    "-A CELL-MASQ -s 10.0.0.50 -d 10.0.0.50 -j MASQUERADE",
	    "-A CELL-MASQ ! -s 10.0.0.50 -j RETURN",
	    "-A CELL-MASQ ! -o ens5 -j RETURN",
	    "-A CELL-MASQ -d 10.0.0.0/8 -j RETURN",
	    "-A CELL-MASQ -d 172.16.0.0/12 -j RETURN",
	    "-A CELL-MASQ -d 192.168.0.0/16 -j RETURN",
	    "-A CELL-MASQ -d 100.64.0.0/10 -j RETURN",
	    "-A CELL-MASQ -j MASQUERADE",
	};
	size_t n = sizeof(want) / sizeof(*want);

	ok(net_plan_rules(&st, &p, &e) == 0, "plan: %s", e.msg);
	ok(p.n == n, "%zu rules (got %zu)", n, p.n);
	for (size_t i = 0; i < n && i < p.n; i++) {
		char *t = net_rule_text(&p.v[i]);
		is_str(t, want[i], "rule %zu", i);
		free(t);
	}
	net_plan_free(&p);
	/* A hostIP equal to the primary IP gives one rule, not two. */
	snprintf(st.ports[1].host_ip, sizeof(st.ports[1].host_ip), "10.0.0.10");
	ok(net_plan_rules(&st, &p, &e) == 0 && p.n == n - 1,
	   "hostIP = primary IP is not doubled");
	net_plan_free(&p);
	free(st.pod_ip);
	st.pod_ip = xstrdup("10.0.0.500");
	ok(net_plan_rules(&st, &p, &e) < 0 && e.code == EINVAL,
	   "a bad pod IP in the state is refused");
	net_state_free(&st);
}

static void test_state_round_trip(void)
{
	struct net_state st = sample(), back;
	struct cerr e = {0};
	char *text = net_state_to_json(&st), *again;

	ok(net_state_parse(text, strlen(text), &back, &e) == 0, "parse: %s",
	   e.msg);
	again = net_state_to_json(&back);
	is_str(again, text, "round trip");
	ok(back.n_ports == 2 && back.ports[1].udp &&
	       !strcmp(back.ports[1].host_ip, "10.0.0.9"),
	   "ports kept");
	free(text);
	free(again);
	net_state_free(&back);
	net_state_free(&st);
	const char *bad[] = {
	    "",
	    "[]",
	    "{}",
	    "{\"name\":\"x\",\"primaryInterface\":\"e\",\"sysctls\":[],"
	    "\"ports\":[]}",
	    "{\"name\":\"x\",\"primaryInterface\":\"e\",\"hostNetwork\":true,"
	    "\"sysctls\":[{\"path\":\"../x\",\"old\":\"0\",\"set\":\"1\"}],"
	    "\"ports\":[]}",
	    "{\"name\":\"x\",\"primaryInterface\":\"e\",\"hostNetwork\":true,"
	    "\"sysctls\":[],\"ports\":[{\"hostPort\":0,\"containerPort\":1,"
	    "\"protocol\":\"tcp\",\"hostIP\":\"\"}]}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		cerr_clear(&e);
		ok(net_state_parse(bad[i], strlen(bad[i]), &back, &e) < 0 &&
		       e.code,
		   "bad state %zu refused (%s)", i, e.msg);
	}
}

static void test_netagent_argv(void)
{
	char **v = netagent_argv("/usr/bin/kube-router", "/p/kubeconfig",
				 "node-1", "10.0.0.10");
	const char *want[] = {"/usr/bin/kube-router",
			      "--kubeconfig=/p/kubeconfig",
			      "--hostname-override=node-1",
			      "--ip-address-override=10.0.0.10",
			      "--hairpin-mode=true",
			      "--disable-source-dest-check=false",
			      "--enable-pod-egress=false",
			      "--enable-cni=false",
			      "--run-router=false",
			      "--v=2",
			      NULL};
	for (size_t i = 0; want[i]; i++)
		is_str(v[i], want[i], "kube-router argv[%zu]", i);
	ok(v[10] == NULL, "argv ends");
	strv_free(v);
}

int main(void)
{
	test_cidr();
	test_port();
	test_plan();
	test_state_round_trip();
	test_netagent_argv();
	return tap_done();
}
