// SPDX-License-Identifier: Apache-2.0
/* The metadata service's address inside the pod, for the agent's
 * filtering proxy: 169.254.169.254/32 on the pod's lo, and a socket
 * listening there that the agent hands to its proxy child. The pod's
 * requests to the metadata service end in the pod's own namespace; the
 * proxy, in the cell's namespace, asks the real service. A listener on
 * the cell's side would need a DNAT and a local address that the VPC
 * could also reach; this one is reachable from the pod alone. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cleanup.h"
#include "net-internal.h"

/* A socket made in the namespace of nsfd (only this thread moves, and
 * only for the socket() call; bind and listen act on the socket). */
static int socket_in(int nsfd, struct cerr *e)
{
	cleanup_close int self =
	    open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	int fd;

	if (self < 0 || setns(nsfd, CLONE_NEWNET) < 0)
		return cerr_sys(e, "enter the pod's network namespace");
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		cerr_sys(e, "socket");
	if (setns(self, CLONE_NEWNET) < 0)
		abort(); /* a thread stuck in the pod's namespace is a bug */
	return fd;
}

int net_imds_listen(const char *netns_path, struct cerr *e)
{
	cleanup_close int nsfd = open(netns_path, O_RDONLY | O_CLOEXEC);
	struct nl *n = NULL;
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(NET_IMDS_PORT)};
	int lo, fd, one = 1;

	if (nsfd < 0)
		return cerr_sys(e, "open %s", netns_path);
	inet_pton(AF_INET, NET_IMDS_IP, &sa.sin_addr);
	n = nl_open(nsfd, e);
	if (!n || nl_link_find(n, "lo", &lo, NULL, e) < 0 ||
	    nl_addr_add(n, lo, sa.sin_addr.s_addr, 32, e) < 0) {
		nl_close(n);
		return cerr_prefix(e, "metadata address in the pod");
	}
	nl_close(n);
	if ((fd = socket_in(nsfd, e)) < 0)
		return -1;
	/* SO_REUSEADDR: a new agent listens again at once after a kill -9
	 * left connections in TIME_WAIT. */
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(fd, 64) < 0) {
		cerr_sys(e, "listen at %s:%d in the pod", NET_IMDS_IP,
			 NET_IMDS_PORT);
		close(fd);
		return -1;
	}
	return fd;
}
