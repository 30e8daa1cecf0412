/* A small load generator for bench/agent.sh: N concurrent clients, each on
 * one kept-alive mutual-TLS connection, GET a URL as fast as the server
 * answers for a fixed time; prints requests/s and latency percentiles.
 * (wrk and ab cannot present a client certificate.)
 *
 *   statusload URL CA CERT KEY CLIENTS SECONDS
 *
 * The server is verified by the name in URL's host (MilpaNode), which is
 * resolved to 127.0.0.1 as the controller's own resolution would do. */
#include <curl/curl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CLIENTS 256
#define MAX_SAMPLES (1u << 22)

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t discard(char *p, size_t s, size_t n, void *u)
{
	(void)p;
	(void)u;
	return s * n;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	CURLM *m;
	CURL *h[MAX_CLIENTS];
	double start[MAX_CLIENTS], *lat, t0, end;
	struct curl_slist *resolve = NULL;
	char res[128];
	int clients, secs, port = 6421;
	size_t n = 0, errors = 0;
	const char *colon;

	if (argc != 7) {
		fprintf(stderr,
			"usage: statusload URL CA CERT KEY CLIENTS SECONDS\n");
		return 2;
	}
	clients = (int)strtol(argv[5], NULL, 10);
	secs = (int)strtol(argv[6], NULL, 10);
	if (clients < 1 || clients > MAX_CLIENTS || secs < 1)
		return 2;
	colon = strrchr(argv[1], ':');
	if (colon)
		port = (int)strtol(colon + 1, NULL, 10);
	snprintf(res, sizeof(res), "MilpaNode:%d:127.0.0.1", port);
	resolve = curl_slist_append(resolve, res);
	lat = malloc(MAX_SAMPLES * sizeof(double));
	curl_global_init(CURL_GLOBAL_DEFAULT);
	m = curl_multi_init();
	for (int i = 0; i < clients; i++) {
		h[i] = curl_easy_init();
		curl_easy_setopt(h[i], CURLOPT_URL, argv[1]);
		curl_easy_setopt(h[i], CURLOPT_CAINFO, argv[2]);
		curl_easy_setopt(h[i], CURLOPT_SSLCERT, argv[3]);
		curl_easy_setopt(h[i], CURLOPT_SSLKEY, argv[4]);
		curl_easy_setopt(h[i], CURLOPT_RESOLVE, resolve);
		curl_easy_setopt(h[i], CURLOPT_WRITEFUNCTION, discard);
		curl_easy_setopt(h[i], CURLOPT_PRIVATE, (char *)(intptr_t)i);
		/* One connection per client, kept alive, as the controller's.
		 */
		curl_easy_setopt(h[i], CURLOPT_MAXCONNECTS, 1L);
		start[i] = now_s();
		curl_multi_add_handle(m, h[i]);
	}
	t0 = now_s();
	end = t0 + secs;
	while (now_s() < end) {
		int running, left;
		CURLMsg *msg;

		curl_multi_perform(m, &running);
		while ((msg = curl_multi_info_read(m, &left))) {
			char *pi;
			long code = 0;
			int i;

			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE,
					  &pi);
			curl_easy_getinfo(msg->easy_handle,
					  CURLINFO_RESPONSE_CODE, &code);
			i = (int)(intptr_t)pi;
			if (msg->data.result != CURLE_OK || code != 200)
				errors++;
			else if (n < MAX_SAMPLES)
				lat[n++] = now_s() - start[i];
			curl_multi_remove_handle(m, h[i]);
			start[i] = now_s();
			curl_multi_add_handle(m, h[i]);
		}
		curl_multi_poll(m, NULL, 0, 100, NULL);
	}
	qsort(lat, n, sizeof(double), cmp);
	printf("requests %zu errors %zu seconds %.2f rps %.0f p50_ms %.2f "
	       "p99_ms %.2f\n",
	       n, errors, now_s() - t0, (double)n / (now_s() - t0),
	       n ? lat[n / 2] * 1e3 : 0.0, n ? lat[n * 99 / 100] * 1e3 : 0.0);
	return errors ? 1 : 0;
}
