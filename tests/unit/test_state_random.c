/*
 * test_state_random.c: the coordinator's state machine under thousands of
 * seeded random sequences of events, driven in-process as test_state.c
 * drives it (ops through state_batch_run, no HTTP, no threads, the clock
 * passed in). Each sequence starts from an empty store of its own and
 * mixes: submissions (single jobs, job arrays, two-node gangs, jobs that
 * checkpoint), placement, started and finished reports of the right
 * attempt and of a stale one (fencing), agents going silent (lease
 * expiry: requeue; a gang losing a node) and coming back, provider-first
 * preemption (a borrowed GPU's job asked to stop for the lender's own
 * job), cancels, purge of finished jobs (min-job-age 1 ms), and restarts
 * in the middle of a sequence: the model freed and loaded again from the
 * store through the storage interface (state_fini, state_init), the
 * agents registering again with what they still run, or with nothing.
 *
 * After every step:
 *   - no job runs twice: a GPU held by a job is held for one of that
 *     job's live parts (its current attempt) on that node, every live
 *     part holds its GPUs, and no job holds more GPUs than its live
 *     parts take: never two live attempts of a job;
 *   - a job that ended stays ended as it ended;
 * at every restart, every acknowledged job comes back (from memory or
 * the store) in the state and attempt it had; at the end, once the
 * agents run everything to completion, every acknowledged job has ended.
 *
 * A failing sequence prints its seed; GPUPOOL_STATE_SEED=N runs that one
 * alone, GPUPOOL_STATE_SEQUENCES=N sets how many run (default 2000,
 * 1000 under ASan).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coord/coordd.h"
#include "coord/state_int.h"
#include "gp.h"
#include "jobspec.h"
#include "log.h"
#include "unit.h"
#include "util.h"

#define NODES 3
#define JOBS_MAX 48
#define STEPS 24
/*
 * How many sequences by default: a sanitizer build runs half (each of
 * its sequences costs about twice; measured in bench/RESULTS.md's
 * section on the storage interface).
 */
#ifdef __SANITIZE_ADDRESS__
#define SEQUENCES 1000
#else
#define SEQUENCES 2000
#endif

static char base[] = "/dev/shm/gpupool-random-XXXXXX";
static char dir[256];
static struct coord_config cfg;
static struct state_batch_clock clk;
static struct token_entry admin = {.id = 1, .name = "admin",
    .role = GP_ROLE_ADMIN};
static struct token_entry prov, alice, bob;
static int64_t mono;
static uint64_t rng;

/* The sequence's world. */
static int64_t node_id[NODES];
static int alive[NODES];
static int64_t jobs[JOBS_MAX];
static int ended_as[JOBS_MAX]; /* its end state once seen, else -1 */
static int njobs;
static const char *broken; /* the first property broken, for the log */

static unsigned
rnd(unsigned n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (unsigned)(rng % n);
}

static unsigned batches; /* run so far */

static int
run(struct op *op)
{
	batches++;
	op->next = NULL;
	state_batch_run(op, mono, &clk);
	return op->status;
}

static void
tick(void)
{
	batches++;
	state_batch_run(NULL, mono, &clk);
}

static void
fail(const char *what)
{
	if (broken == NULL)
		broken = what;
}

static int
make_group(const char *name)
{
	struct op *op = op_new(OP_ACCT, &admin);
	int st;

	op->acct.kind = ACCT_BODY_GROUP_CREATE;
	gp_strlcpy(op->acct.name, name, sizeof(op->acct.name));
	st = run(op);
	op_free(op);
	return st / 100 == 2 ? 0 : -1;
}

static int
make_token(enum gp_role role, const char *name, const char *group,
    struct token_entry *out)
{
	struct op *op = op_new(OP_TOKEN_CREATE, &admin);
	const char *text;
	char hash[GP_TOKEN_HASH_HEX];
	int rc = -1;

	op->acct.role = role;
	gp_strlcpy(op->acct.name, name, sizeof(op->acct.name));
	gp_strlcpy(op->acct.group, group, sizeof(op->acct.group));
	if (run(op) / 100 == 2 &&
	    (text = json_string_value(json_object_get(op->result, "token"))) !=
		NULL) {
		gp_token_hash(text, hash);
		pthread_rwlock_rdlock(&state.lock);
		if (state_token_lookup(hash) != NULL) {
			*out = *state_token_lookup(hash);
			rc = 0;
		}
		pthread_rwlock_unlock(&state.lock);
	}
	op_free(op);
	return rc;
}

/*
 * Node i registers (again), saying what it still runs: with keep, the
 * live parts the coordinator placed there (an agent that kept its jobs
 * across a coordinator restart); else nothing (one that lost them).
 */
static void
register_node(int i, int keep)
{
	struct op *op = op_new(OP_REGISTER, &prov);
	json_t *gpus = json_array(), *running = json_array();
	char name[16], uuid[64];
	int g, ngpus = i == NODES - 1 ? 2 : 1;
	int64_t c = 0;
	struct job *j;

	snprintf(name, sizeof(name), "n%d", i);
	for (g = 0; g < ngpus; g++) {
		snprintf(uuid, sizeof(uuid), "GPU-%s-%d", name, g);
		json_array_append_new(gpus,
		    json_pack("{s:i,s:s,s:s,s:i}", "index", g, "uuid", uuid,
			"model", "Fake", "mem_mib", 1000));
	}
	pthread_rwlock_rdlock(&state.lock);
	while (keep && node_id[i] > 0 && (j = state_job_next(&c)) != NULL) {
		if (j->state != JOB_RUNNING)
			continue;
		for (g = 0; g < j->nparts; g++)
			if (!j->parts[g].ended &&
			    j->parts[g].node_id == node_id[i])
				json_array_append_new(running,
				    json_pack("{s:I,s:i}", "job_id",
					(json_int_t)j->id, "attempt",
					j->attempts));
	}
	pthread_rwlock_unlock(&state.lock);
	op->body = json_pack("{s:i,s:s,s:i,s:i,s:o,s:o}", "protocol", 1,
	    "name", name, "cpus", 16, "mem_mib", 64000, "gpus", gpus,
	    "running", running);
	gp_strlcpy(op->peer, "127.0.0.1", sizeof(op->peer));
	if (run(op) == 200)
		node_id[i] = json_integer_value(
		    json_object_get(op->result, "node_id"));
	else
		fail("a node's registration was refused");
	op_free(op);
}

static void
beat_alive(void)
{
	struct node *n;
	int i;

	pthread_rwlock_wrlock(&state.lock);
	for (i = 0; i < NODES; i++)
		if (alive[i] && (n = state_node(node_id[i])) != NULL)
			atomic_store(&n->last_seen_mono, mono);
	pthread_rwlock_unlock(&state.lock);
}

static void
acked(int64_t id)
{
	if (njobs < JOBS_MAX) {
		ended_as[njobs] = -1;
		jobs[njobs++] = id;
	}
}

static void
submit(struct token_entry *who, const char *spec)
{
	struct op *op = op_new(OP_SUBMIT, who);
	char err[256];

	gp_jobspec_fini(&op->spec);
	if (gp_jobspec_decode(spec, strlen(spec), &op->spec, err,
		sizeof(err)) != 0)
		fail("a spec of the test did not decode");
	else if (run(op) == 201)
		acked(json_integer_value(json_object_get(op->result, "id")));
	op_free(op);
}

static void
submit_array(struct token_entry *who, int n)
{
	static const char spec[] = "{\"command\":[\"true\"],\"gpus\":1}";
	struct op *op = op_new(OP_SUBMIT_ARRAY, who);
	char err[256];
	int64_t first;
	int i;

	gp_jobspec_fini(&op->spec);
	if (gp_jobspec_decode(spec, strlen(spec), &op->spec, err,
		sizeof(err)) != 0 ||
	    (op->tasks = calloc((size_t)n, sizeof(int))) == NULL) {
		fail("an array of the test could not be made");
		op_free(op);
		return;
	}
	for (i = 0; i < n; i++)
		op->tasks[i] = i;
	op->ntasks = n;
	if (run(op) == 201) {
		first = json_integer_value(
		    json_object_get(op->result, "first_id"));
		for (i = 0; i < n; i++)
			acked(first + i);
	}
	op_free(op);
}

/* A report of (job, attempt) from node: started, or finished (reason). */
static int
report(enum op_type type, int64_t job, int attempt, int64_t node,
    const char *reason)
{
	struct op *op = op_new(type, &prov);
	int status;

	op->job_id = job;
	op->attempt = attempt;
	op->node_id = node;
	op->body = type == OP_FINISHED
	    ? json_pack("{s:I,s:i,s:s}", "node_id", (json_int_t)node,
		  "exit_code", 0, "reason", reason)
	    : json_pack("{s:I}", "node_id", (json_int_t)node);
	status = run(op);
	op_free(op);
	return status;
}

/* What the agent of a live part would say next: started, or its end. */
struct live_part {
	int64_t job, node;
	int attempt;
	int started;
	char reason[32];
};

/* A random live part of a random running job; 0 when there is none. */
static int
pick_live_part(struct live_part *out)
{
	int k, tries, p;
	struct job *j;

	pthread_rwlock_rdlock(&state.lock);
	for (tries = 0; tries < 8 && njobs > 0; tries++) {
		k = (int)rnd((unsigned)njobs);
		j = state_job(jobs[k]);
		if (j == NULL || j->state != JOB_RUNNING || j->nparts < 1)
			continue;
		p = (int)rnd((unsigned)j->nparts);
		if (j->parts[p].ended || j->parts[p].node_id == 0)
			continue;
		out->job = j->id;
		out->node = j->parts[p].node_id;
		out->attempt = j->attempts;
		out->started = j->parts[p].started_ack;
		gp_strlcpy(out->reason,
		    j->stopping[0] != '\0' ? j->stopping
		    : j->cancel_requested  ? "cancelled"
					   : "exited",
		    sizeof(out->reason));
		pthread_rwlock_unlock(&state.lock);
		return 1;
	}
	pthread_rwlock_unlock(&state.lock);
	return 0;
}

/* The job's state and attempt, from memory or the store. */
static int
job_state(int64_t id, int *attempt)
{
	int stored = 0, st = -1;
	struct job *j;

	pthread_rwlock_rdlock(&state.lock);
	if ((j = state_job_any(id, &stored)) != NULL) {
		st = (int)j->state;
		if (attempt != NULL)
			*attempt = j->attempts;
		if (stored)
			state_job_stored_free(j);
	}
	pthread_rwlock_unlock(&state.lock);
	return st;
}

/* The properties of every step (see the top), under the read lock. */
static void
check_step(void)
{
	struct node *n;
	struct job *j;
	int64_t c = 0;
	int k, p, g, held, want;

	pthread_rwlock_rdlock(&state.lock);
	while ((n = state_node_next(&c)) != NULL)
		for (g = 0; g < n->ngpus; g++) {
			int64_t id = n->gpus[g].job_id;
			int ok = 0;
			if (id == 0)
				continue;
			j = state_job(id);
			for (p = 0; j != NULL && j->state == JOB_RUNNING &&
			     p < j->nparts;
			     p++)
				for (k = 0; k < j->parts[p].ngpus; k++)
					ok |= !j->parts[p].ended &&
					    j->parts[p].node_id == n->id &&
					    j->parts[p].gpus[k] == g;
			if (!ok)
				fail("a GPU held for a job that does not run "
				     "there (a second or stale attempt)");
		}
	for (k = 0; k < njobs; k++) {
		if ((j = state_job(jobs[k])) == NULL)
			continue; /* purged: it had ended */
		if (ended_as[k] >= 0 && (int)j->state != ended_as[k])
			fail("an ended job changed its state");
		if (job_finished(j) && ended_as[k] < 0)
			ended_as[k] = (int)j->state;
		if (j->state != JOB_RUNNING)
			continue;
		held = want = 0;
		for (p = 0; p < j->nparts; p++) {
			struct node *pn = state_node(j->parts[p].node_id);
			if (j->parts[p].ended || pn == NULL)
				continue;
			want += j->parts[p].ngpus;
			for (g = 0; g < j->parts[p].ngpus; g++)
				if (j->parts[p].gpus[g] >= pn->ngpus ||
				    pn->gpus[j->parts[p].gpus[g]].job_id !=
					j->id)
					fail("a live part without its GPU");
		}
		c = 0;
		while ((n = state_node_next(&c)) != NULL)
			for (g = 0; g < n->ngpus; g++)
				held += n->gpus[g].job_id == j->id;
		if (held > want)
			fail("a job holds more GPUs than its live parts");
	}
	pthread_rwlock_unlock(&state.lock);
}

/*
 * The world every sequence starts from, made once: groups lab-a and
 * lab-b, the provider's token (lab-a), alice (lab-a) and bob (lab-b),
 * the nodes registered once; its store is copied for each sequence.
 */
static char *template_db, *template_pool;
static size_t template_db_len, template_pool_len;

static int
world_make(void)
{
	char path[400];
	int i;

	snprintf(dir, sizeof(dir), "%s/template", base);
	if (gp_mkdir_p(dir, 0700) != 0)
		return -1;
	gp_strlcpy(cfg.data_dir, dir, sizeof(cfg.data_dir));
	if (state_init(&cfg) != 0)
		return -1;
	if (make_group("lab-a") != 0 || make_group("lab-b") != 0 ||
	    make_token(GP_ROLE_PROVIDER, "prov", "lab-a", &prov) != 0 ||
	    make_token(GP_ROLE_USER, "alice", "lab-a", &alice) != 0 ||
	    make_token(GP_ROLE_USER, "bob", "lab-b", &bob) != 0)
		return -1;
	for (i = 0; i < NODES; i++)
		register_node(i, 0);
	state_fini(); /* closed: the WAL is in the file */
	snprintf(path, sizeof(path), "%s/state.db", dir);
	if (gp_read_file(path, 64 << 20, &template_db, &template_db_len) != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/pool_id", dir);
	return gp_read_file(path, 4096, &template_pool, &template_pool_len);
}

/* A sequence's world: the template's store, loaded; the nodes back. */
static int
world_open(void)
{
	char path[400];
	int i;

	snprintf(dir, sizeof(dir), "%s/seq", base);
	gp_remove_tree(dir);
	if (gp_mkdir_p(dir, 0700) != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/state.db", dir);
	if (gp_write_file(path, template_db, template_db_len, 0600) != 0)
		return -1;
	snprintf(path, sizeof(path), "%s/pool_id", dir);
	if (gp_write_file(path, template_pool, template_pool_len, 0600) != 0)
		return -1;
	gp_strlcpy(cfg.data_dir, dir, sizeof(cfg.data_dir));
	if (state_init(&cfg) != 0)
		return -1;
	memset(&clk, 0, sizeof(clk));
	for (i = 0; i < NODES; i++) {
		alive[i] = 1;
		register_node(i, 0);
	}
	njobs = 0;
	return 0;
}

/*
 * A coordinator restart in the middle: every acknowledged job's state
 * and attempt before, the model freed, loaded again from the store; the
 * same after. Then the agents that are alive register again.
 */
static void
restart(void)
{
	int before[JOBS_MAX], att_before[JOBS_MAX], att, k, i;
	int keep = (int)rnd(2);

	for (k = 0; k < njobs; k++)
		before[k] = job_state(jobs[k], &att_before[k]);
	state_fini();
	if (state_init(&cfg) != 0) {
		fail("the state did not load again from the store");
		return;
	}
	memset(&clk, 0, sizeof(clk));
	for (k = 0; k < njobs; k++) {
		att = -1;
		if (job_state(jobs[k], &att) != before[k] ||
		    att != att_before[k])
			fail("an acknowledged job came back changed (or not "
			     "at all) from the store");
	}
	for (i = 0; i < NODES; i++)
		if (alive[i])
			register_node(i, keep);
}

/* One event, chosen at random. */
static void
step(void)
{
	static const char *const specs[] = {
	    "{\"command\":[\"true\"],\"gpus\":1}",
	    "{\"command\":[\"true\"],\"gpus\":1,\"checkpoint_every_s\":1}",
	    "{\"command\":[\"true\"],\"gpus\":1,\"nodes\":2}",
	};
	struct live_part lp;
	int r = (int)rnd(100), i, st, att, k;
	struct token_entry *who = rnd(2) ? &alice : &bob;
	unsigned ran = batches;

	beat_alive();
	if (r < 14 && njobs < JOBS_MAX - 4) {
		submit(who, specs[rnd(2)]);
	} else if (r < 18 && njobs < JOBS_MAX - 4) {
		submit_array(who, 2 + (int)rnd(2));
	} else if (r < 21 && njobs < JOBS_MAX - 4) {
		submit(who, specs[2]);
	} else if (r < 38) {
		if (pick_live_part(&lp))
			report(OP_STARTED, lp.job, lp.attempt, lp.node, NULL);
	} else if (r < 54) {
		if (pick_live_part(&lp))
			report(OP_FINISHED, lp.job, lp.attempt, lp.node,
			    lp.reason);
	} else if (r < 60) {
		/* A stale attempt's report: refused, changes nothing. */
		if (pick_live_part(&lp) && lp.attempt > 1) {
			int64_t before = lp.job;
			int st0 = job_state(before, &att);
			st = report(OP_FINISHED, lp.job, lp.attempt - 1,
			    lp.node, "exited");
			k = job_state(before, &i);
			if (st < 400 || k != st0 || i != att)
				fail("a stale attempt's report was taken");
		}
	} else if (r < 68) {
		/* an agent goes silent, or comes back */
		i = (int)rnd(NODES);
		alive[i] = !alive[i];
		if (alive[i])
			register_node(i, (int)rnd(2));
	} else if (r < 84) {
		mono += 200 + (int64_t)rnd(3000);
	} else if (r < 90) {
		if (njobs > 0) {
			struct op *op = op_new(OP_CANCEL, rnd(2) ? &alice
								 : &bob);
			op->job_id = jobs[rnd((unsigned)njobs)];
			st = run(op);
			op_free(op);
			if (st != 200 && st != 404 && st != 409)
				fail("a cancel answered something unexpected");
		}
	} else if (r < 92) {
		restart();
	}
	/* A batch, if the event made none: leases, purge, placement. */
	if (batches == ran)
		tick();
	check_step();
}

/* Everything runs to its end: every acknowledged job ends. */
static void
drain(void)
{
	struct live_part lp;
	int round, k, open = 1, i;

	for (i = 0; i < NODES; i++)
		if (!alive[i]) {
			alive[i] = 1;
			register_node(i, 0);
		}
	for (round = 0; round < 40 * JOBS_MAX && open; round++) {
		for (k = 0; k < 4 && pick_live_part(&lp); k++) {
			if (!lp.started)
				report(OP_STARTED, lp.job, lp.attempt, lp.node,
				    NULL);
			report(OP_FINISHED, lp.job, lp.attempt, lp.node,
			    lp.reason);
		}
		mono += 50;
		beat_alive();
		tick();
		check_step();
		/* Open: not seen ended (in memory, or the store's row). */
		open = 0;
		for (k = 0; k < njobs && !open; k++) {
			int st;
			if (ended_as[k] >= 0)
				continue;
			st = job_state(jobs[k], NULL);
			if (st < 0)
				fail("an acknowledged job was lost");
			else if (st >= JOB_SUCCEEDED)
				ended_as[k] = st;
			else
				open = 1;
		}
	}
	if (open)
		fail("a job never ended");
}

static int
sequence(unsigned seed)
{
	int s;

	broken = NULL;
	rng = 0x9e3779b97f4a7c15ULL ^ ((uint64_t)seed * 0x2545f4914f6cdd1dULL);
	if (rng == 0)
		rng = 1;
	if (world_open() != 0) {
		fprintf(stderr, "seed %u: the world did not open\n", seed);
		return -1;
	}
	for (s = 0; s < STEPS && broken == NULL; s++)
		step();
	if (broken == NULL)
		drain();
	state_fini();
	if (broken != NULL) {
		fprintf(stderr,
		    "seed %u: %s (at step %d; GPUPOOL_STATE_SEED=%u runs "
		    "it alone)\n",
		    seed, broken, s, seed);
		return -1;
	}
	return 0;
}

TEST(random_sequences)
{
	const char *one = getenv("GPUPOOL_STATE_SEED");
	const char *count = getenv("GPUPOOL_STATE_SEQUENCES");
	unsigned n = count != NULL ? (unsigned)strtoul(count, NULL, 10) : SEQUENCES;
	unsigned seed, failed = 0;
	int64_t t0 = gp_mono_ms();

	if (one != NULL) {
		CHECK_EQ(sequence((unsigned)strtoul(one, NULL, 10)), 0);
		return;
	}
	for (seed = 1; seed <= n && failed < 3; seed++)
		failed += sequence(seed) != 0;
	CHECK_EQ(failed, 0);
	fprintf(stderr, "%u sequences of %d steps in %lld ms\n", seed - 1,
	    STEPS, (long long)(gp_mono_ms() - t0));
}

int
main(void)
{
	gp_log_init("test", GP_LOG_ERROR);
	if (gp_token_init() != 0) {
		perror("init");
		return 1;
	}
	/* tmpfs where there is one: thousands of small commits. */
	if (mkdtemp(base) == NULL) {
		snprintf(base, sizeof(base), "/var/tmp/gpupool-random-XXXXXX");
		if (mkdtemp(base) == NULL) {
			perror("mkdtemp");
			return 1;
		}
	}
	memset(&cfg, 0, sizeof(cfg));
	cfg.lease_ms = 5000;
	cfg.heartbeat_ms = 1000;
	cfg.log_cap = 1 << 20;
	cfg.accrual_ms = 30 * 1000;
	cfg.half_life_ms = 7 * 86400 * 1000LL;
	cfg.budget_untimed_s = 3600;
	cfg.min_job_age_ms = 1; /* finished jobs leave memory: purge */
	if (metrics_init() != 0) {
		fprintf(stderr, "metrics_init failed\n");
		return 1;
	}
	mono = gp_mono_ms();
	if (world_make() != 0) {
		fprintf(stderr, "the template world could not be made\n");
		return 1;
	}
	RUN(random_sequences);
	free(template_db);
	free(template_pool);
	gp_remove_tree(base);
	return unit_report();
}
