// SPDX-License-Identifier: Apache-2.0
/* The socket under a civetweb connection, found by its addresses among
 * this process's open fds (/proc/self/fd).
 *
 * civetweb 1.15 cannot close a websocket from another thread, and its read
 * loop never gives up on a silent peer. Shutting the socket down does
 * both, so a stream's pump needs the fd: it is the one whose two ends
 * match the connection's addresses. */
#include "connsock.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <limits.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "cleanup.h"
#include "util.h"

static bool addr_is(const struct sockaddr_storage *ss, const char *ip, int port)
{
	char buf[INET6_ADDRSTRLEN];
	const void *a;
	int p;

	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *in = (const void *)ss;
		a = &in->sin_addr;
		p = ntohs(in->sin_port);
	} else if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const void *)ss;
		a = &in6->sin6_addr;
		p = ntohs(in6->sin6_port);
	} else {
		return false;
	}
	if (p != port || !inet_ntop(ss->ss_family, a, buf, sizeof(buf)))
		return false;
	/* civetweb prints v4-mapped peers of a v6 socket without "::ffff:". */
	return !strcmp(buf, ip) ||
	       (!strncmp(buf, "::ffff:", 7) && !strcmp(buf + 7, ip));
}

int connsock_find(const char *remote_ip, int remote_port, int local_port)
{
	cleanup_dir DIR *d = opendir("/proc/self/fd");
	struct dirent *de;

	while (d && (de = readdir(d))) {
		struct sockaddr_storage peer, local;
		socklen_t pl = sizeof(peer), ll = sizeof(local);
		int64_t fd;
		struct cerr e = {0};

		if (parse_int64(de->d_name, 0, INT_MAX, &fd, &e) < 0)
			continue;
		if (getpeername((int)fd, (struct sockaddr *)&peer, &pl) < 0 ||
		    getsockname((int)fd, (struct sockaddr *)&local, &ll) < 0)
			continue;
		if (addr_is(&peer, remote_ip, remote_port) &&
		    (local.ss_family == AF_INET
			 ? ntohs(((struct sockaddr_in *)&local)->sin_port)
			 : ntohs(((struct sockaddr_in6 *)&local)->sin6_port)) ==
			local_port)
			return (int)fd;
	}
	return -1;
}
