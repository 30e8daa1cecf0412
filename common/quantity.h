// SPDX-License-Identifier: Apache-2.0
/* Kubernetes quantities (resource.Quantity), one parser for the project. */
#ifndef CELL_QUANTITY_H
#define CELL_QUANTITY_H

#include <stdint.h>

#include "err.h"

/* A quantity ("1Gi", "500M", "1e3", "1500m") in whole units, rounded up
 * like Quantity.Value(); EINVAL when malformed or negative, ERANGE above
 * INT64_MAX. */
int quantity_value(const char *s, int64_t *out, struct cerr *e);
/* The same in thousandths, rounded up like Quantity.MilliValue() ("500m" →
 * 500, "1.5" → 1500): CPU. */
int quantity_milli(const char *s, int64_t *out, struct cerr *e);

#endif
