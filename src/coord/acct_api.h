/*
 * acct_api.h: the accounting endpoints (acct_api.c).
 */
#ifndef GP_COORD_ACCT_API_H
#define GP_COORD_ACCT_API_H

#include "state.h"

/* acct_api.c: groups, prices, budgets, usage and the ledger over HTTP */
/* The routes (acct_routes, route.h) are answered by acct_handle. */
enum MHD_Result acct_handle(struct MHD_Connection *conn, struct request *req,
    const char *url, const char *method);
/* Applies an OP_ACCT in the state thread. */
void acct_apply(struct op *op);

#endif
