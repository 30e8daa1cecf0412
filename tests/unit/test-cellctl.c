// SPDX-License-Identifier: Apache-2.0
/* Unit tests of cellctl's pure parts: websocket frames and stream messages,
 * quantities as cellctl uses them, $(VAR) expansion, Go's float formatting of
 * resources, YAML scalars, and Kip's instance selection against a table with
 * known answers (cheapest fit, GPU count and kind, burstable baseline with the
 * unlimited surcharge, glob, default, dedicated, sustainedCPU=false). */
#include <stdlib.h>
#include <string.h>

#include "../lib/tap.h"
#include "ctl-internal.h"
#include "util.h"

static void frames(void)
{
	const uint8_t mask[4] = {1, 2, 3, 4};
	struct ws_frame f;
	struct cerr e = {0};
	struct buf b;
	char big[70000];

	memset(big, 'x', sizeof(big));
	buf_init(&b, 0);
	for (size_t n = 0; n < 3; n++) {
		size_t len = n == 0 ? 5 : n == 1 ? 300 : sizeof(big);
		buf_reset(&b);
		ws_frame_build(1, big, len, mask, &b, &e);
		ok(ws_frame_parse((uint8_t *)b.data, b.len, &f, &e) == 1 &&
		       f.len == len && f.masked && f.fin && f.opcode == 1 &&
		       f.hdr_len + len == b.len,
		   "frame of %zu bytes round-trips", len);
		ok(ws_frame_parse((uint8_t *)b.data, b.len - 1, &f, &e) == 0,
		   "a short frame asks for more");
		for (size_t i = 0; i < len; i++)
			if ((b.data[f.hdr_len + i] ^ mask[i & 3]) != 'x') {
				ok(0, "payload masked");
				break;
			}
	}
	buf_free(&b);
	const uint8_t rsv[] = {0xc1, 0x00};
	const uint8_t ping_long[] = {0x89, 126, 0, 200};
	const uint8_t frag_ping[] = {0x09, 0};
	const uint8_t huge[] = {0x82, 127, 0, 0, 0, 0, 0x7f, 0, 0, 0};
	const uint8_t bad_op[] = {0x83, 0};
	ok(ws_frame_parse(rsv, 2, &f, &e) < 0, "reserved bits refused");
	ok(ws_frame_parse(ping_long, 4, &f, &e) < 0, "long ping refused");
	ok(ws_frame_parse(frag_ping, 2, &f, &e) < 0, "fragmented ping refused");
	ok(ws_frame_parse(huge, 10, &f, &e) < 0, "huge frame refused");
	ok(ws_frame_parse(bad_op, 2, &f, &e) < 0, "opcode 3 refused");

	int ch = -1;
	buf_init(&b, 0);
	ok(ws_msg_decode("1aGk=", 5, &ch, &b, &e) == 0 && ch == 1 &&
	       b.len == 2 && !memcmp(b.data, "hi", 2),
	   "channel message decoded");
	ok(ws_msg_decode("3", 1, &ch, &b, &e) == 0 && ch == 3 && b.len == 0,
	   "empty payload");
	ok(ws_msg_decode("x", 1, &ch, &b, &e) < 0, "no channel digit refused");
	ok(ws_msg_decode("1a!", 3, &ch, &b, &e) < 0, "bad base64 refused");
	buf_free(&b);
}

static void quantities(void)
{
	static const struct {
		const char *s;
		int64_t v, m;
	} cases[] = {
	    {"1", 1, 1000},
	    {"0.1", 1, 100},
	    {"500m", 1, 500},
	    {"1.5", 2, 1500},
	    {"128Mi", 134217728, 134217728000},
	    {"1Gi", 1073741824, 0},
	    {"2G", 2000000000, 0},
	    {"1e3", 1000, 1000000},
	    {"100n", 1, 1},
	    {"0", 0, 0},
	    {"1.0001", 2, 1001},
	    {"+3", 3, 3000},
	};
	struct cerr e = {0};
	int64_t v, m;

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		ok(quantity_value(cases[i].s, &v, &e) == 0 && v == cases[i].v,
		   "value(%s) = %lld", cases[i].s, (long long)v);
		if (cases[i].m)
			ok(quantity_milli(cases[i].s, &m, &e) == 0 &&
			       m == cases[i].m,
			   "milli(%s) = %lld", cases[i].s, (long long)m);
	}
	/* (the agent's parser reads "Gi" and "." as 0; Go refuses them) */
	static const char *const bad[] = {"",	   "x",	 "1x",
					  "1.2.3", "1e", "1e99999"};
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++)
		ok(quantity_value(bad[i], &v, &e) < 0, "\"%s\" refused",
		   bad[i]);
	ok(quantity_value("99999999999999Ei", &v, &e) < 0, "overflow refused");
}

static void expansion(void)
{
	json_t *env = json_pack("{s:s,s:s}", "A", "1", "B", "two words");
	static const char *const cases[][2] = {
	    {"$(A)", "1"},     {"x$(A)y$(B)", "x1ytwo words"},
	    {"$$(A)", "$(A)"}, {"$(C)", "$(C)"},
	    {"$(", "$("},      {"$", "$"},
	    {"$x", "$x"},      {"$((i+1))", "$((i+1))"},
	    {"a$$b", "a$b"},   {"", ""},
	};

	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		char *got = k8s_expand(cases[i][0], env);
		is_str(got, cases[i][1], "expand \"%s\"", cases[i][0]);
		free(got);
	}
	json_decref(env);
}

static void formatting(void)
{
	char *s;

	is_str((s = fmt_cpu(3500)), "3.50", "cpu 3500m");
	free(s);
	is_str((s = fmt_cpu(125)), "0.12", "cpu 125m rounds half to even");
	free(s);
	is_str((s = fmt_mem(134217728)), "0.12Gi", "128Mi");
	free(s);
	is_str((s = fmt_mem(6979321856)), "6.50Gi", "6.5Gi");
	free(s);
}

static void yaml_scalars(void)
{
	const char *y =
	    "a: 0444\nb: '0444'\nc: yes\nd: 1.5\ne: ~\nf: 08\n"
	    "g: [1, x]\nh: \"true\"\n"; /* f: go-yaml v2 reads 08 as a float */
	struct cerr e = {0};
	json_t *j = kdoc_parse(y, strlen(y), &e);
	char *s = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;

	is_str(s ? s : e.msg,
	       "{\"a\":292,\"b\":\"0444\",\"c\":true,\"d\":1.5,\"e\":null,"
	       "\"f\":8.0,\"g\":[1,\"x\"],\"h\":\"true\"}",
	       "YAML 1.1 scalars as sigs.k8s.io/yaml reads them");
	free(s);
	json_decref(j);
	ok(!kdoc_parse("a: [", 4, &e) && strstr(e.msg, "YAML line"),
	   "syntax error with its line: %s", e.msg);
	ok(!kdoc_parse("{\"a\":1,\"a\":2}", 13, &e), "duplicate JSON keys");
}

static const char table[] =
    "{\"r\": ["
    "{\"instanceType\":\"t3.nano\",\"price\":0.0052,\"cpu\":2,\"memory\":0.5,"
    "\"burstable\":true,\"baseline\":0.1,\"gpu\":0},"
    "{\"instanceType\":\"t3.small\",\"price\":0.0208,\"cpu\":2,\"memory\":2,"
    "\"burstable\":true,\"baseline\":0.4,\"gpu\":0},"
    "{\"instanceType\":\"t1.micro\",\"price\":0.001,\"cpu\":1,\"memory\":8,"
    "\"burstable\":true,\"baseline\":1,\"gpu\":0},"
    "{\"instanceType\":\"c5.large\",\"price\":0.085,\"cpu\":2,\"memory\":4,"
    "\"burstable\":false,\"baseline\":2,\"gpu\":0},"
    "{\"instanceType\":\"m5.large\",\"price\":0.096,\"cpu\":2,\"memory\":8,"
    "\"burstable\":false,\"baseline\":2,\"gpu\":0},"
    "{\"instanceType\":\"g4dn.xlarge\",\"price\":0.526,\"cpu\":4,\"memory\":16,"
    "\"burstable\":false,\"baseline\":4,\"gpu\":1,"
    "\"supportedGPUTypes\":{\"nvidia-tesla-t4\":1}},"
    "{\"instanceType\":\"p3.8xlarge\",\"price\":12.24,\"cpu\":32,\"memory\":"
    "244,"
    "\"burstable\":false,\"baseline\":32,\"gpu\":4,"
    "\"supportedGPUTypes\":{\"nvidia-tesla-v100\":4}}"
    "]}";

static void selection(void)
{
	struct inst_table t;
	struct cerr e = {0};
	static const struct {
		struct select_req r;
		const char *want;
		int sustained;
	} cases[] = {
	    {{.default_type = "t3.nano", .sustained_cpu = -1}, "t3.nano", -1},
	    {{.instance_type = "m5.large", .sustained_cpu = -1},
	     "m5.large",
	     -1},
	    /* memory 1.5Gi: t3.small, no surcharge under its baseline */
	    {{.memory = "1.5Gi", .cpu = "0.2", .sustained_cpu = -1},
	     "t3.small",
	     0},
	    /* 2 CPUs sustained: t3.small 0.0208 + 1.6*0.05 = 0.1008 > c5.large
	     */
	    {{.cpu = "2", .sustained_cpu = -1}, "c5.large", 0},
	    /* 0.5 CPU: t3.nano + 0.4*0.05 = 0.0252 beats t3.small + 0.005 */
	    {{.cpu = "0.5", .sustained_cpu = -1}, "t3.nano", 1},
	    /* 0.9 CPU: t3.small + 0.5*0.05 = 0.0458 beats t3.nano's 0.0452?
	     * no: t3.nano 0.0052 + 0.8*0.05 = 0.0452 is cheaper still */
	    {{.cpu = "0.9", .sustained_cpu = -1}, "t3.nano", 1},
	    /* 1 CPU and 1Gi: t3.small (0.0508) over c5.large (0.085) */
	    {{.cpu = "1", .memory = "1Gi", .sustained_cpu = -1}, "t3.small", 1},
	    {{.cpu = "0.3", .sustained_cpu = -1}, "t3.nano", 1},
	    /* sustainedCPU false: burstable only up to its baseline */
	    {{.cpu = "0.5", .sustained_cpu = 0}, "c5.large", 0},
	    {{.cpu = "0.1", .dedicated_cpu = true, .sustained_cpu = -1},
	     "c5.large",
	     0},
	    {{.gpu = "1", .sustained_cpu = -1}, "g4dn.xlarge", 0},
	    {{.gpu = "2", .sustained_cpu = -1}, "p3.8xlarge", 0},
	    {{.gpu = "1 nvidia-tesla-v100", .sustained_cpu = -1},
	     "p3.8xlarge",
	     0},
	    {{.gpu = "1 NVIDIA-Tesla-T4", .sustained_cpu = -1},
	     "g4dn.xlarge",
	     0},
	    {{.instance_type = "m5*", .sustained_cpu = -1}, "m5.large", 0},
	    {{.instance_type = "*.large", .memory = "5Gi", .sustained_cpu = -1},
	     "m5.large",
	     0},
	};
	const char *out;
	int sus;

	ok(inst_table_parse(table, strlen(table), "r", &t, &e) == 0,
	   "table parses");
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
		int r = inst_select(&t, &cases[i].r, &out, &sus, &e);
		ok(r == 0 && !strcmp(out, cases[i].want) &&
		       sus == cases[i].sustained,
		   "case %zu: %s sustained=%d (want %s %d) %s", i,
		   r == 0 ? out : "-", sus, cases[i].want, cases[i].sustained,
		   r ? e.msg : "");
	}
	struct select_req none = {.memory = "1Ti", .sustained_cpu = -1};
	ok(inst_select(&t, &none, &out, &sus, &e) < 0, "nothing fits: %s",
	   e.msg);
	struct select_req t1 = {.instance_type = "t1*", .sustained_cpu = -1};
	ok(inst_select(&t, &t1, &out, &sus, &e) < 0, "t1 is never chosen");
	inst_table_free(&t);
	ok(inst_table_parse(table, strlen(table), "nowhere", &t, &e) < 0,
	   "unknown region");
}

int main(void)
{
	frames();
	quantities();
	expansion();
	formatting();
	yaml_scalars();
	selection();
	return tap_done();
}
