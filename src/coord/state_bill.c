/*
 * state_bill.c: billing in the state thread: meters of attempts and gang
 * parts, postings to the ledger (ledger.c), price classes, budget
 * estimates and holds, the accounting fields of the JSON views.
 * Part of the state module (state_int.h; docs/accounting.md).
 */
#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "state.h"
#include "state_int.h"
#include "gp.h"
#include "ledger.h"
#include "log.h"
#include "sched.h"

/* ---- accounting (ledger.c, docs/accounting.md) ---- */

/* The group of a token, by id (a scan: only used at start-up). */
int64_t
token_group(int64_t token_id)
{
	size_t i;

	for (i = 0; i < state.tokens_cap; i++)
		if (state.tokens[i] != NULL && state.tokens[i]->id == token_id)
			return state.tokens[i]->group_id > 0
			    ? state.tokens[i]->group_id
			    : 1;
	return 1;
}

/* A GPU's price per GPU-hour, looked up again after a price change. */
int64_t
state_gpu_price(struct node_gpu *g)
{
	/* +1: a new GPU (price_gen 0) is never taken as up to date. */
	if (g->price_gen != ledger.prices_gen + 1) {
		g->price = ledger_price_of(&ledger, g->model);
		g->price_gen = ledger.prices_gen + 1;
	}
	return g->price;
}

int
state_job_group(const struct token_entry *caller, const char *group,
    int64_t *group_id)
{
	const struct ledger_group *g;
	int64_t first;

	if (group == NULL || group[0] == '\0') {
		if (ledger_user_groups(&ledger, caller->name, &first, 1) != 1)
			return GP_ENOENT;
		*group_id = first;
		return 0;
	}
	if ((g = ledger_group_by_name(&ledger, group)) == NULL)
		return GP_ENOENT;
	if (caller->role != GP_ROLE_ADMIN &&
	    !ledger_is_member(&ledger, caller->name, g->id))
		return GP_EPERM;
	*group_id = g->id;
	return 0;
}

struct attempt_record *
current_attempt(struct job *job)
{
	struct attempt_record *a;

	if (job->nhistory == 0)
		return NULL;
	a = &job->history[job->nhistory - 1];
	return a->attempt == job->attempts && a->finished_ms == 0 ? a : NULL;
}

/* The meter of part k of attempt a, and the group its provider had. */
static struct acct_meter *
part_meter(struct attempt_record *a, int k, int64_t **pgroup)
{
	if (k == 0) {
		*pgroup = &a->provider_group;
		return &a->meter;
	}
	if (k - 1 >= a->nmore)
		return NULL;
	*pgroup = &a->more[k - 1].provider_group;
	return &a->more[k - 1].meter;
}

/*
 * Billing of a part starts when its agent reports its start, at the
 * prices of its GPUs then (a later price change applies to later
 * attempts); a fraction of a GPU pays its fraction. Each part of a gang
 * is billed on its own, to its own provider.
 */
void
bill_part_start(struct job *job, int k, int64_t now)
{
	struct attempt_record *a = current_attempt(job);
	struct job_part *p = &job->parts[k];
	struct node *node = state_node(p->node_id);
	struct acct_meter *m;
	int64_t rate = 0, share = 0, *pgroup;
	int i;

	if (a == NULL || node == NULL ||
	    (m = part_meter(a, k, &pgroup)) == NULL || m->from_ms > 0)
		return;
	for (i = 0; i < p->ngpus; i++) {
		int64_t sh = p->gpu_milli > 0 && p->gpu_milli < 1000
		    ? p->gpu_milli * ACCT_SHARE_WHOLE / 1000
		    : ACCT_SHARE_WHOLE;
		if (p->gpus[i] >= node->ngpus)
			continue;
		rate += state_gpu_price(&node->gpus[p->gpus[i]]) * sh;
		share += sh;
	}
	acct_meter_start(m, now, rate, share);
	*pgroup = node->group_id;
}

/* Posts what part k ran since its last posting, in this batch. */
static void
bill_part_post(struct job *job, struct attempt_record *a, int k, int64_t now,
    int final)
{
	const struct node *node;
	struct acct_posting p;
	struct acct_delta d;
	struct acct_meter *m;
	int64_t *pgroup, node_id;

	if ((m = part_meter(a, k, &pgroup)) == NULL)
		return;
	node_id = k == 0 ? a->node_id : a->more[k - 1].node_id;
	node = state_node(node_id);
	/* A gang's parts share the attempt's posting numbers. */
	if (job->nparts > 1)
		m->seq = a->next_seq;
	if (!acct_meter_advance(m, now, &d))
		return;
	if (job->nparts > 1)
		a->next_seq = m->seq;
	acct_posting_fill(&p, job->id, a->attempt, &d, final, now, node_id,
	    job->user, job->group_id, node != NULL ? node->owner_name : "?",
	    *pgroup);
	p.part = k;
	/* As for the job rows: memory ahead of disk must not go on. */
	if (ledger_post(&ledger, &p) != 0)
		gp_fatalx("cannot write the ledger");
}

/* Part k ended (part_release): its last posting. */
void
bill_part_end(struct job *job, int k)
{
	struct attempt_record *a = current_attempt(job);

	if (a != NULL)
		bill_part_post(job, a, k, gp_now_ms(), 1);
}

/* The attempt ended (history_close): the parts not yet posted. */
void
bill_attempt_end(struct job *job, struct attempt_record *a)
{
	int k;

	for (k = 0; k < job->nparts && k <= a->nmore; k++)
		if (!job->parts[k].ended)
			bill_part_post(job, a, k, a->finished_ms, 1);
}

/*
 * The periodic accrual: a running attempt posts what it ran once its last
 * posting is --accrual-interval old. Attempts started at different times
 * come due at different ticks, so the work is spread, not one large
 * batch every interval.
 */
static void
accrue(int64_t now)
{
	int64_t id, *pgroup;
	int k, part;

	for (id = 1; id < state.nnodes; id++) {
		struct node *n = state.nodes[id];
		for (k = 0; n != NULL && k < n->njobs; k++) {
			struct job *j = state_job(n->jobs[k]);
			struct attempt_record *a;
			struct acct_meter *m;
			if (j == NULL || (a = current_attempt(j)) == NULL ||
			    (part = job_part_on(j, n->id)) < 0 ||
			    (m = part_meter(a, part, &pgroup)) == NULL)
				continue;
			if (m->from_ms == 0) {
				/* Started before a restart, never reported. */
				if (!j->parts[part].started_ack)
					continue;
				bill_part_start(j, part, now);
				persist_job(j);
			}
			if (now - (m->from_ms + m->billed_ms) <
			    state.cfg.accrual_ms)
				continue;
			bill_part_post(j, a, part, now, 0);
		}
	}
}

/* Called by the state thread each round (mono: its monotonic clock). */
void
acct_tick(int64_t mono)
{
	static int64_t last_accrual, last_period;
	int64_t now = gp_now_ms();

	if (mono - last_accrual >= 250) {
		accrue(now);
		last_accrual = mono;
	}
	if (mono - last_period >= 1000) {
		if (ledger_tick(&ledger, now))
			state.sched_dirty = 1;
		last_period = mono;
	}
}

/*
 * Budgets. A queued job is held when what its user or group spent this
 * period, plus what running jobs may still cost, plus the most the job
 * may cost, is more than the budget. The most a job may cost: its GPUs
 * for its time limit (or --budget-untimed when it has none) at the
 * highest price of a GPU in the pool that it could run on.
 */
struct price_class {
	const char *model;
	int64_t mem_mib;
	int64_t price;
};
static struct price_class *classes;
static size_t nclasses, capclasses;
static int classes_ready;

/* The distinct (model, memory, price) of the pool's GPUs, once a pass. */
static void
collect_classes(void)
{
	int64_t id;
	size_t c;
	int g;

	nclasses = 0;
	for (id = 1; id < state.nnodes; id++) {
		struct node *n = state.nodes[id];
		for (g = 0; n != NULL && g < n->ngpus; g++) {
			int64_t price = state_gpu_price(&n->gpus[g]);
			for (c = 0; c < nclasses; c++)
				if (classes[c].price == price &&
				    classes[c].mem_mib == n->gpus[g].mem_mib &&
				    strcmp(classes[c].model,
					n->gpus[g].model) == 0)
					break;
			if (c < nclasses)
				continue;
			if (nclasses == capclasses) {
				size_t cap = capclasses ? capclasses * 2 : 16;
				struct price_class *p = realloc(classes,
				    cap * sizeof(*p));
				if (p == NULL)
					gp_fatalx("out of memory");
				classes = p;
				capclasses = cap;
			}
			classes[nclasses].model = n->gpus[g].model;
			classes[nclasses].mem_mib = n->gpus[g].mem_mib;
			classes[nclasses++].price = price;
		}
	}
	classes_ready = 1;
}

/* a + b for amounts that may be INT64_MAX (an estimate saturates). */
static int64_t
add_saturated(int64_t a, int64_t b)
{
	return b > 0 && a > INT64_MAX - b ? INT64_MAX : a + b;
}

/* The most the job may cost (micro-credits). */
static int64_t
job_estimate(const struct job *j)
{
	struct gp_sched_job sj;
	int64_t best = 0, seconds;
	size_t c;

	if (!classes_ready)
		collect_classes();
	live_sched_job(j, &j->spec, &sj);
	for (c = 0; c < nclasses; c++) {
		struct gp_sched_gpu g;
		memset(&g, 0, sizeof(g));
		g.model = classes[c].model;
		g.mem_mib = classes[c].mem_mib;
		g.price = classes[c].price;
		if (g.price > best && gp_sched_gpu_matches(&g, &sj))
			best = g.price;
	}
	seconds = j->spec.time_limit_s > 0 ? j->spec.time_limit_s
					   : state.cfg.budget_untimed_s;
	if (gp_jobspec_is_fraction(&j->spec)) {
		/* A fraction pays its fraction: its share of one GPU. */
		int64_t one = acct_estimate(j->nparts, best, seconds);
		int milli = j->spec.gpu_milli > 0 ? j->spec.gpu_milli : 1000;
		return one == INT64_MAX ? one : one / 1000 * milli +
		    one % 1000 * milli / 1000;
	}
	return acct_estimate(j->spec.gpus * j->nparts, best, seconds);
}

/* What a running job may still cost. */
static int64_t
job_remaining(struct job *j)
{
	struct attempt_record *a = current_attempt(j);
	int64_t seconds, total, sum = 0, *pgroup;
	int k;

	if (a == NULL || a->meter.from_ms == 0)
		return job_estimate(j);
	seconds = j->spec.time_limit_s > 0 ? j->spec.time_limit_s
					   : state.cfg.budget_untimed_s;
	for (k = 0; k < j->nparts; k++) {
		struct acct_meter *m = part_meter(a, k, &pgroup);
		if (m == NULL)
			continue;
		total = acct_cost(m->rate, seconds * 1000);
		if (total > m->amount)
			sum = add_saturated(sum, total - m->amount);
	}
	return sum;
}

/* The user's and the group's budgets, either may be NULL. */
static void
job_budgets(const struct job *j, struct ledger_budget **user,
    struct ledger_budget **group)
{
	*user = ledger_budget_find(&ledger, LEDGER_USER, j->user);
	*group = ledger_budget_find(&ledger, LEDGER_GROUP,
	    ledger_group_name(&ledger, j->group_id));
}

/* 1 when est fits in b; else sets the job's hold reason. */
static int
budget_fits(struct job *j, const struct ledger_budget *b, int64_t est)
{
	char left[32], amount[32], cost[32];
	int64_t rest;

	/* amount and reserved are >= 0: amount - reserved cannot overflow */
	if (b == NULL || est <= 0 || est <= b->amount - b->reserved)
		return 1;
	rest = b->amount - b->reserved;
	gp_credits_format(rest > 0 ? rest : 0, left, sizeof(left));
	gp_credits_format(b->amount, amount, sizeof(amount));
	gp_credits_format(est, cost, sizeof(cost));
	if (j->wait == NULL)
		return 1; /* not queued: nothing to hold */
	if (j->wait->hold_reason == NULL &&
	    (j->wait->hold_reason = malloc(HOLD_REASON_MAX)) == NULL)
		return 1; /* out of memory: the budget is checked at start */
	snprintf(j->wait->hold_reason, HOLD_REASON_MAX,
	    "budget: %s %s has %s of %s credits left %s; the job may cost %s",
	    b->kind == LEDGER_USER ? "user" : "group", b->name, left, amount,
	    b->period == ACCT_PERIOD_TOTAL ? "in total"
	    : b->period == ACCT_PERIOD_DAY ? "today"
	    : b->period == ACCT_PERIOD_WEEK ? "this week"
					   : "this month",
	    cost);
	return 0;
}

/* Sets or clears every queued job's hold, before a scheduling pass. */
/* Some queued job may still carry a budget hold from a pass. */
static int holds_left;

void
state_budget_holds(void)
{
	struct ledger_budget *ub, *gb;
	int64_t id, est;
	size_t b;
	int i, k;

	classes_ready = 0;
	/* With no budget there is no hold to clear but last pass's. */
	if (ledger.nbudgets == 0 && !holds_left)
		return;
	for (i = 0; i < state.nqueue; i++)
		if (state.queue[i] != NULL && state.queue[i]->wait != NULL &&
		    state.queue[i]->wait->hold_reason != NULL)
			state.queue[i]->wait->hold_reason[0] = '\0';
	holds_left = 0;
	if (ledger.nbudgets == 0)
		return;
	holds_left = 1;
	for (b = 0; b < ledger.nbudgets; b++)
		ledger.budgets[b].reserved = ledger.budgets[b].spent;
	for (id = 1; id < state.nnodes; id++) {
		struct node *n = state.nodes[id];
		for (k = 0; n != NULL && k < n->njobs; k++) {
			struct job *j = state_job(n->jobs[k]);
			if (j == NULL)
				continue;
			job_budgets(j, &ub, &gb);
			if (ub == NULL && gb == NULL)
				continue;
			est = job_remaining(j);
			if (ub != NULL)
				ub->reserved = add_saturated(ub->reserved, est);
			if (gb != NULL)
				gb->reserved = add_saturated(gb->reserved, est);
		}
	}
	for (i = 0; i < state.nqueue; i++) {
		struct job *j = state.queue[i];
		job_budgets(j, &ub, &gb);
		if (ub == NULL && gb == NULL)
			continue;
		est = job_estimate(j);
		if (budget_fits(j, ub, est))
			budget_fits(j, gb, est);
	}
}

/*
 * A job the plan starts: 1 when its budgets still have room once the
 * jobs started before it in this pass are counted (they are reserved
 * here), else 0 and held: it waits for the next pass.
 */
int
state_budget_admit(struct job *j)
{
	struct ledger_budget *ub, *gb;
	int64_t est;

	if (ledger.nbudgets == 0)
		return 1;
	job_budgets(j, &ub, &gb);
	if (ub == NULL && gb == NULL)
		return 1;
	est = job_estimate(j);
	if (!budget_fits(j, ub, est) || !budget_fits(j, gb, est)) {
		state.sched_dirty = 1;
		return 0;
	}
	if (ub != NULL)
		ub->reserved = add_saturated(ub->reserved, est);
	if (gb != NULL)
		gb->reserved = add_saturated(gb->reserved, est);
	return 1;
}

/* The accounting fields of a job's JSON (docs/api.md). */
void
acct_job_json(const struct job *job, json_t *o)
{
	json_t *hist = json_object_get(o, "history");
	int64_t cost = 0, gpu_ms = 0;
	int i;

	if (o == NULL)
		return;
	for (i = 0; i < job->nhistory; i++) {
		const struct attempt_record *a = &job->history[i];
		cost += a->meter.amount;
		gpu_ms += a->meter.gpu_ms;
		if (json_is_array(hist) && (size_t)i < json_array_size(hist))
			json_object_update_new(json_array_get(hist, i),
			    json_pack("{s:I,s:I,s:I}", "cost_micro",
				(json_int_t)a->meter.amount, "gpu_ms",
				(json_int_t)a->meter.gpu_ms, "rate_micro",
				(json_int_t)(a->meter.rate / ACCT_SHARE_WHOLE)));
	}
	json_object_set_new(o, "group",
	    json_string(ledger_group_name(&ledger, job->group_id)));
	json_object_set_new(o, "hold_reason",
	    job->state == JOB_QUEUED && job->wait != NULL &&
		    job->wait->hold_reason != NULL && job->wait->hold_reason[0]
		? json_string(job->wait->hold_reason)
		: json_null());
	json_object_set_new(o, "cost_micro", json_integer(cost));
	json_object_set_new(o, "gpu_ms", json_integer(gpu_ms));
	json_object_set_new(json_object_get(o, "request"), "max_price_micro",
	    json_integer(job->spec.max_price_micro));
}

/* The accounting fields of a node's JSON: its group, its GPUs' prices. */
void
acct_node_json(const struct node *node, json_t *o)
{
	json_t *gpus = json_object_get(o, "gpus");
	int i;

	if (o == NULL)
		return;
	json_object_set_new(o, "group",
	    json_string(ledger_group_name(&ledger, node->group_id)));
	for (i = 0; i < node->ngpus && (size_t)i < json_array_size(gpus); i++)
		json_object_set_new(json_array_get(gpus, i), "price_micro",
		    json_integer(ledger_price_of(&ledger,
			node->gpus[i].model)));
}
