// SPDX-License-Identifier: Apache-2.0
/* A listening TCP socket on 127.0.0.1 and an ephemeral port, for unit
 * tests of probes (it never accepts: a TCP probe connects through the
 * backlog, an HTTP probe gets no answer unless the test serves it). */
#ifndef CELL_TESTS_LISTEN_H
#define CELL_TESTS_LISTEN_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

static inline int listen_any(int *port)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
				.sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    listen(fd, 16) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0)
		return -1;
	*port = ntohs(a.sin_port);
	return fd;
}

#endif
