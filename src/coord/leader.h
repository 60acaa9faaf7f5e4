/*
 * leader.h: which of several coordinators sharing one PostgreSQL database
 * leads (leader.c). Exactly one holds a PostgreSQL advisory lock on a
 * connection of its own; on winning it raises the fencing epoch in
 * gp_leader, and every write transaction of the store checks that epoch
 * (SELECT epoch FROM gp_leader WHERE id = 1 FOR SHARE; GP_EFENCED when it
 * is not leader_epoch()), so a leader that was paused or cut off and comes
 * back can never commit. The others are standbys: they load no state and
 * answer every API request with "not the leader" and the leader's URL.
 */
#ifndef GP_COORD_LEADER_H
#define GP_COORD_LEADER_H

#include <stddef.h>
#include <stdint.h>

/* The exit status of a coordinator that stepped down (see leader_start). */
#define LEADER_EXIT_STEPPED_DOWN 75

/*
 * The exit status of a coordinator whose configuration cannot work with
 * its database: another live coordinator there advertises the same URL,
 * or the database belongs to another pool than its data directory
 * (EX_CONFIG: starting it again cannot help; the packaged unit does not).
 */
#define LEADER_EXIT_CONFIG 78

/* The advisory lock's key: one pool per database. */
#define LEADER_LOCK_KEY 0x67707570006c6561LL

struct leader_config {
	const char *conninfo;	   /* libpq connection string (copied) */
	const char *advertise_url; /* what clients are told (copied) */
	/*
	 * The data directory (copied; NULL: none): when it names a pool
	 * (DATA/pool_id, gp_store_check_pool) and the database another,
	 * the coordinator exits (LEADER_EXIT_CONFIG) rather than stand by
	 * for a pool that is not its own.
	 */
	const char *data_dir;
	int64_t lease_ms;	   /* a leader silent this long loses */
	int64_t poll_ms;	   /* how often a standby tries the lock */
	/*
	 * Called once, by leader_lost (on the leader thread, or on the
	 * thread whose write was fenced), when leadership is lost (the
	 * lock's connection gone, the epoch moved on, the lease missed),
	 * after leader_epoch() went to 0 and leader_url() names the new
	 * leader when it is known. It must not block: the coordinator's
	 * (main.c) starts its stop, which answers the requests it holds
	 * "not the leader" and exits LEADER_EXIT_STEPPED_DOWN; NULL:
	 * _exit(LEADER_EXIT_STEPPED_DOWN) at once.
	 */
	void (*on_lost)(const char *why);
};

/*
 * Creates gp_leader if missing and starts the leader thread, which
 * connects (retrying with back-off while the database is down) and tries
 * the lock every poll_ms. 0, or GP_EINVAL (bad config) / GP_ENOMEM.
 */
int leader_start(const struct leader_config *cfg);

/* Blocks until this process leads. 0, or GP_ECONFLICT after leader_stop. */
int leader_wait(void);

/*
 * The fencing epoch this process committed on winning the lock; 0 when
 * it does not lead (a standby, or after stepping down). Any thread.
 */
int64_t leader_epoch(void);

/*
 * 1 while this process must not serve the API: it is a standby, or it
 * leads but has not finished loading its state (leader_set_serving).
 * Always 0 when leader_start was never called (one coordinator, SQLite).
 */
int leader_standby(void);

/* The state is loaded: the leader serves the API from now on. */
void leader_set_serving(void);

/*
 * The URL of the coordinator that leads, as gp_leader last said (this
 * one's own when it leads), into out; "" when unknown (no leader yet,
 * or the database unreachable).
 */
void leader_url(char *out, size_t len);

/*
 * The pool's live coordinators as the leader last read them from the
 * database (gp_coordinators, each kept while its session holds its URL
 * lock): their advertised URLs, a JSON array of strings, allocated (the
 * caller frees). Only this one's own URL while the leader has not read
 * them yet; "[]" on a standby. NULL when leader_start was never called
 * (one coordinator, SQLite).
 */
char *leader_coordinators(void);

/*
 * This process no longer leads: why (for the log), leader (the new
 * leader's URL, NULL or "" when unknown). leader_epoch() goes to 0 (no
 * write can pass its fence from then on), leader_standby() to 1, and
 * on_lost runs, once for all callers: the leader thread, or a store
 * whose write found the epoch moved on (GP_EFENCED). Any thread.
 */
void leader_lost(const char *why, const char *leader);
/* Stops the leader thread and closes its connection (the lock goes). */
void leader_stop(void);

#endif
