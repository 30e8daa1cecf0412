// SPDX-License-Identifier: Apache-2.0
/* The socket under a connection, for the websocket streams (connsock.c). */
#ifndef CELL_CONNSOCK_H
#define CELL_CONNSOCK_H

#include <stdbool.h>

/* The fd of the connected TCP socket whose peer is remote_ip (as civetweb
 * prints it) port remote_port and whose local port is local_port, or -1.
 * The caller must use it only while the connection is known to be open
 * (else the number may have been reused). */
int connsock_find(const char *remote_ip, int remote_port, int local_port);

#endif
