/*
 * coordd.h: the coordinator's internal model, shared by its files.
 *
 * Reading order: main.c (start-up), state*.c (the model and the state
 * thread: every change goes through it, in batches, one SQLite transaction
 * per batch; state_int.h lists its files), store.c (SQLite), api.c (HTTP: the
 * route table of route.c, auth; handlers in api_jobs.c, api_agent.c),
 * notify.c (long polls: suspended connections and who wakes them),
 * joblog.c (job output files), sched.c (pure scheduling), blob.c (the
 * blob store: content-addressed files, uploads, GC), ckpt.c (checkpoint
 * versions over its chunks), data*.c (data sets, job outputs and quotas,
 * over the same chunks), image.c (images over its image blobs).
 *
 * Locking: `state.lock` (rwlock) guards the model. The state thread takes
 * it for writing while it applies a batch; HTTP handlers take it for
 * reading. `notify_lock` (notify.c) guards node outboxes and the lists of
 * suspended connections; it is taken after state.lock when both are held.
 */
#ifndef GP_COORDD_H
#define GP_COORDD_H

/*
 * One header per module, and each .c file includes those it uses; this
 * one includes them all, for the tests and benches that reach into
 * several.
 */
#include "model.h"
#include "state.h"
#include "store.h"
#include "notify.h"
#include "joblog.h"
#include "blob.h"
#include "ckpt_store.h"
#include "datasets.h"
#include "image_store.h"
#include "acct_api.h"
#include "coord_metrics.h"
#include "web.h"
#include "api.h"
#include "route.h"

#endif
