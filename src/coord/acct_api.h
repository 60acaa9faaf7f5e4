/*
 * acct_api.h: the accounting endpoints (acct_api.c).
 */
#ifndef GP_COORD_ACCT_API_H
#define GP_COORD_ACCT_API_H

#include "state.h"

/* acct_api.c: groups, prices, budgets, usage and the ledger over HTTP */
/* 1 when url is an accounting route (answered by acct_handle). */
int acct_route_match(const char *url);
enum MHD_Result acct_handle(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method);
/* Applies an OP_ACCT in the state thread. */
void acct_apply(struct op *op);

#endif
