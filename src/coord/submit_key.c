/*
 * submit_key.c: the idempotency keys of submissions (docs/api.md). The
 * job a user's key made is kept in the store (store.h: submit_key_find,
 * submit_key_put), written by the state thread in the transaction that
 * writes the job itself, so that a repeat of a submission whose answer
 * was lost (the coordinator killed, a connection cut) gets the same job
 * id, after a kill -9 too, and makes no second job. A job array's key is
 * kept with its first id and its count of tasks. A key is remembered for
 * a day. State thread only (inside its transaction).
 */
#include <stdint.h>

#include "gp.h"
#include "state_int.h"
#include "store.h"

#define KEEP_MS     (24LL * 3600 * 1000)
#define PRUNE_EVERY 1024 /* puts between two prunes */

static unsigned nputs;

int
submit_key_find(const char *user, const char *key, int64_t now_ms,
    int64_t *job_id, int64_t *count)
{
	return state.store->ops->submit_key_find(state.store, user, key,
	    now_ms - KEEP_MS, job_id, count);
}

int
submit_key_put(const char *user, const char *key, int64_t job_id, int64_t count,
    int64_t now_ms)
{
	/* Keys older than a day go now and then, in the same write. */
	int64_t prune = ++nputs % PRUNE_EVERY == 0 ? now_ms - KEEP_MS : 0;

	return state.store->ops->submit_key_put(state.store, user, key, job_id,
	    count, now_ms, prune);
}
