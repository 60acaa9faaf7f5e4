/*
 * ledger.h: the coordinator's books (docs/accounting.md): groups and who
 * belongs to them, the price table, budgets, the double-entry ledger, the
 * decayed usage per group and per user that is kept up to
 * date as postings are made (for fair share), and the running totals per
 * account and group (for /metrics).
 *
 * The ledger lives in the coordinator's store (store.h: state.db, or
 * PostgreSQL) and is written through the storage interface, inside the
 * state thread's transaction: a posting and the change that caused it
 * commit together or not at all. The in-memory tables below are part of
 * the model: the state thread changes them under state.lock (write),
 * HTTP handlers read them under state.lock (read). Usage and ledger
 * queries are the store's any-thread reads (ledger_usage,
 * ledger_postings), so a long report never holds the state thread up.
 */
#ifndef GP_LEDGER_H
#define GP_LEDGER_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

#include "acct.h"

struct gp_store;

enum ledger_kind { LEDGER_USER, LEDGER_GROUP };

struct ledger_group {
	int64_t id;
	char name[GP_NAME_MAX + 1];
	int64_t weight; /* fair-share weight */
	int64_t created_ms;
	struct acct_decay usage; /* of its users' jobs */
	/* Since the books began (for /metrics): micro-credits and GPU-ms. */
	int64_t spent, used_gpu_ms;  /* debited for its users' jobs */
	int64_t earned, lent_gpu_ms; /* credited for its nodes' work */
};

struct ledger_member {
	char user[GP_NAME_MAX + 1];
	int64_t group_id;
	int64_t pos; /* order of joining: the user's first is the default */
};

struct ledger_budget {
	enum ledger_kind kind;
	char name[GP_NAME_MAX + 1]; /* the user, or the group's name */
	int64_t group_id;	    /* LEDGER_GROUP */
	int64_t amount;		    /* micro-credits per period */
	enum acct_period period;
	int64_t period_start; /* of the period `spent` counts */
	int64_t spent;	      /* micro-credits debited in it */
	int64_t reserved;     /* scratch of a scheduling pass */
};

struct ledger_user {
	char name[GP_NAME_MAX + 1];
	struct acct_decay usage;
};

/*
 * What one account (a user, or a provider) was posted in one group since
 * the books began: the user's debits for jobs of that group, or the
 * provider's credits for nodes of that group (positive amounts). Kept in
 * the table account_totals too, in each posting's transaction, so that
 * opening the books reads one row per account, never the whole ledger.
 */
struct ledger_total {
	char name[GP_NAME_MAX + 1];
	int64_t group_id;
	int64_t amount; /* micro-credits */
	int64_t gpu_ms;
	int64_t postings;
};

/* Totals sorted by (name, group_id). */
struct ledger_totals {
	struct ledger_total *v;
	size_t n, cap;
};

struct ledger {
	struct gp_store *store; /* where the books are kept (store.h) */
	int64_t half_life_ms; /* of decayed usage; 0: no decay */
	struct ledger_group *groups; /* in id order */
	size_t ngroups, capgroups;
	struct ledger_member *members;
	size_t nmembers, capmembers;
	int64_t next_member_pos;
	struct acct_price prices[ACCT_PRICES_MAX];
	size_t nprices;
	uint64_t prices_gen; /* changes with every change of a price */
	struct ledger_budget *budgets;
	size_t nbudgets, capbudgets;
	struct ledger_user *users; /* sorted by name */
	size_t nusers, capusers;
	/* Running totals of the ledger (loaded at open, kept by posts). */
	int64_t postings;
	struct ledger_totals debited;  /* users' accounts */
	struct ledger_totals credited; /* providers' accounts */
};

/* The coordinator's books. */
extern struct ledger ledger;

/*
 * Loads groups, members, prices, budgets (with what was spent in their
 * current period) and decayed usage from store (which l borrows until
 * ledger_close). A new store gets the group "default" and the price
 * "default 1" (one credit per GPU-hour), in a transaction of their own.
 * Returns 0 or GP_EIO.
 */
int ledger_open(struct ledger *l, struct gp_store *store,
    int64_t half_life_ms, int64_t now_ms);
void ledger_close(struct ledger *l);

/*
 * Writes a posting and its two entries (in the caller's transaction) and
 * brings budgets and decayed usage up to date. Returns 0 or GP_EIO (a
 * posting of that attempt and seq exists already: never twice).
 */
int ledger_post(struct ledger *l, const struct acct_posting *p);

/*
 * Budget periods that ended by now_ms start again at 0. Returns 1 when
 * one did (jobs held for it may start), else 0.
 */
int ledger_tick(struct ledger *l, int64_t now_ms);

/*
 * Brings m (whose from_ms, rate and share are set) in line with what the
 * ledger holds for (job_id, attempt) and a gang's part (-1: the whole
 * attempt, a job of one part): postings made, amount, GPU time and the
 * time billed. Used at start-up: the ledger is the truth. Returns 0 or
 * GP_EIO.
 */
int ledger_restore_meter(struct ledger *l, int64_t job_id, int attempt,
    int part, struct acct_meter *m);
/* The next posting number of (job_id, attempt): a gang's parts share. */
int ledger_next_seq(struct ledger *l, int64_t job_id, int attempt);

/* Groups. */
const struct ledger_group *ledger_group_by_id(const struct ledger *l,
    int64_t id);
const struct ledger_group *ledger_group_by_name(const struct ledger *l,
    const char *name);
/* The name of group id, or "?" */
const char *ledger_group_name(const struct ledger *l, int64_t id);
/* OUT: *id. GP_ECONFLICT when the name is taken. */
int ledger_group_create(struct ledger *l, const char *name, int64_t weight,
    int64_t now_ms, int64_t *id);
int ledger_group_set_weight(struct ledger *l, int64_t id, int64_t weight);

/*
 * Members. A user who belongs to no group is in "default". add: GP_OK
 * also when already a member; remove: GP_ENOENT when not one; move: the
 * user leaves every group and joins group_id.
 */
int ledger_member_add(struct ledger *l, const char *user, int64_t group_id);
int ledger_member_remove(struct ledger *l, const char *user,
    int64_t group_id);
int ledger_member_move(struct ledger *l, const char *user, int64_t group_id);
int ledger_is_member(const struct ledger *l, const char *user,
    int64_t group_id);
/* The user's groups, first (the default) first. Returns how many. */
size_t ledger_user_groups(const struct ledger *l, const char *user,
    int64_t *out, size_t max);
/* Members of a group (explicit ones). */
size_t ledger_group_members(const struct ledger *l, int64_t group_id);

/* Prices (micro-credits per GPU-hour). */
int ledger_price_set(struct ledger *l, const char *cls, int64_t micro);
/* GP_ENOENT when there was no such class. */
int ledger_price_remove(struct ledger *l, const char *cls);
/* Replaces the whole table (the coordinator's --prices file). */
int ledger_prices_replace(struct ledger *l, const struct acct_price *table,
    size_t n);
int64_t ledger_price_of(const struct ledger *l, const char *model);

/*
 * Budgets: kind and name (a user, or a group's name with its id).
 * Setting one computes what was spent in its current period.
 */
int ledger_budget_set(struct ledger *l, enum ledger_kind kind,
    const char *name, int64_t group_id, int64_t amount,
    enum acct_period period, int64_t now_ms);
int ledger_budget_remove(struct ledger *l, enum ledger_kind kind,
    const char *name);
struct ledger_budget *ledger_budget_find(struct ledger *l,
    enum ledger_kind kind, const char *name);

/*
 * Decayed usage at now_ms, for fair share: O(log users) and O(groups),
 * never a scan of the ledger. Unknown: zero.
 */
void ledger_user_usage(const struct ledger *l, const char *user,
    int64_t now_ms, struct acct_decay *out);
void ledger_group_usage(const struct ledger *l, int64_t group_id,
    int64_t now_ms, struct acct_decay *out);

/* What a usage or ledger query selects: postings matching all of these. */
struct ledger_filter {
	char user[GP_NAME_MAX + 1];	/* the paying user, "" any */
	int64_t group_id;		/* either side's group, 0 any */
	char group[GP_NAME_MAX + 1];	/* its name, for the answer */
	char provider[GP_NAME_MAX + 1]; /* the paid provider, "" any */
	int64_t job_id;			/* 0 any */
	int64_t since_ms, until_ms;	/* at_ms in [since, until) */
	int limit;			/* ledger: the newest this many */
};

/*
 * Usage (GET /v1/usage) and the postings (GET /v1/ledger) matching f, as
 * JSON (docs/api.md), from the read connection. NULL on a database error
 * (err says why).
 */
json_t *ledger_usage_json(struct ledger *l, const struct ledger_filter *f,
    char *err, size_t errlen);
json_t *ledger_postings_json(struct ledger *l, const struct ledger_filter *f,
    char *err, size_t errlen);

#endif
