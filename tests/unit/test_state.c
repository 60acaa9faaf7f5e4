/*
 * test_state.c: the coordinator's state machine driven in-process, without
 * HTTP or threads: ops made as the handlers make them, run a batch at a
 * time by state_batch_run (what the state thread runs), the clock passed
 * in. Covers submit, assign, start, finish, requeue on lease expiry, the
 * fencing of a stale attempt, a gang losing a node, preemption, purge,
 * a gang's overlay kept through a restart, and a seeded random walk over
 * thousands of events checking that no job ever runs on two nodes at
 * once and that every acknowledged job survives (is known, and ends
 * once).
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
#include "wg.h"

static char dir[] = "/var/tmp/gpupool-state-XXXXXX";
static struct coord_config cfg;
static struct state_batch_clock clk;
static struct token_entry admin = {.id = 1, .name = "admin",
    .role = GP_ROLE_ADMIN};
static struct token_entry user; /* made by OP_TOKEN_CREATE */
static struct token_entry provider;
static int64_t mono; /* the test's monotonic clock, ms */
static struct token_entry *reporter = &provider; /* whose agent reports */

/* Runs op alone as one batch; returns its status (the op is kept). */
static int
run(struct op *op)
{
	op->next = NULL;
	state_batch_run(op, mono, &clk);
	return op->status;
}

/* An empty batch: leases, purge, the scheduler's pass. */
static void
tick(void)
{
	state_batch_run(NULL, mono, &clk);
}

static void
make_token_in(enum gp_role role, const char *name, const char *group,
    struct token_entry *out)
{
	struct op *op = op_new(OP_TOKEN_CREATE, &admin);
	const char *text;
	char hash[GP_TOKEN_HASH_HEX];

	op->acct.role = role;
	gp_strlcpy(op->acct.name, name, sizeof(op->acct.name));
	gp_strlcpy(op->acct.group, group, sizeof(op->acct.group));
	CHECK(run(op) / 100 == 2);
	text = json_string_value(json_object_get(op->result, "token"));
	CHECK(text != NULL);
	gp_token_hash(text != NULL ? text : "", hash);
	pthread_rwlock_rdlock(&state.lock);
	if (state_token_lookup(hash) != NULL)
		*out = *state_token_lookup(hash);
	pthread_rwlock_unlock(&state.lock);
	op_free(op);
}

static void
make_token(enum gp_role role, const char *name, struct token_entry *out)
{
	make_token_in(role, name, "", out);
}

/* An accounting group, made as `gpupool group create` makes it. */
static void
make_group(const char *name)
{
	struct op *op = op_new(OP_ACCT, &admin);

	op->acct.kind = ACCT_BODY_GROUP_CREATE;
	gp_strlcpy(op->acct.name, name, sizeof(op->acct.name));
	CHECK(run(op) / 100 == 2);
	op_free(op);
}

/* Registers node name with owner's token; returns its id, 0 on failure. */
static int64_t
register_node_of(struct token_entry *owner, const char *name,
    int ngpus)
{
	struct op *op = op_new(OP_REGISTER, owner);
	json_t *gpus = json_array();
	int64_t id = 0;
	char uuid[64];

	for (int i = 0; i < ngpus; i++) {
		snprintf(uuid, sizeof(uuid), "GPU-%s-%d", name, i);
		json_array_append_new(gpus, json_pack("{s:i,s:s,s:s,s:i}",
		    "index", i, "uuid", uuid, "model", "Fake", "mem_mib",
		    1000));
	}
	op->body = json_pack("{s:i,s:s,s:i,s:i,s:o,s:[]}", "protocol", 1,
	    "name", name, "cpus", 16, "mem_mib", 64000, "gpus", gpus,
	    "running");
	gp_strlcpy(op->peer, "127.0.0.1", sizeof(op->peer));
	if (run(op) == 200)
		id = json_integer_value(json_object_get(op->result, "node_id"));
	op_free(op);
	return id;
}

static int64_t
register_node(const char *name, int ngpus)
{
	return register_node_of(&provider, name, ngpus);
}

/* Submits spec as who; returns its id (0: refused). */
static int64_t
submit_as(struct token_entry *who, const char *spec)
{
	struct op *op = op_new(OP_SUBMIT, who);
	char err[256];
	int64_t id = 0;

	gp_jobspec_fini(&op->spec); /* as submit_prepare: op_new made one */
	CHECK_EQ(gp_jobspec_decode(spec, strlen(spec), &op->spec, err,
	    sizeof(err)), 0);
	if (run(op) == 201)
		id = json_integer_value(json_object_get(op->result, "id"));
	op_free(op);
	return id;
}

static int64_t
submit_spec(const char *spec)
{
	return submit_as(&user, spec);
}

static int64_t
submit(void)
{
	return submit_spec("{\"command\":[\"true\"],\"gpus\":1}");
}

/* A finished report with a reason (an agent stopping a gang's part). */
static int
report_reason(int64_t job, int attempt, int64_t node, const char *reason)
{
	struct op *op = op_new(OP_FINISHED, reporter);
	int status;

	op->job_id = job;
	op->attempt = attempt;
	op->node_id = node;
	op->body = json_pack("{s:I,s:i,s:s}", "node_id", (json_int_t)node,
	    "exit_code", 0, "reason", reason);
	status = run(op);
	op_free(op);
	return status;
}

/* A started or finished report of (job, attempt) from node. */
static int
report(enum op_type type, int64_t job, int attempt, int64_t node,
    int exit_code)
{
	struct op *op = op_new(type, reporter);
	int status;

	op->job_id = job;
	op->attempt = attempt;
	op->node_id = node;
	op->body = type == OP_FINISHED
	    ? json_pack("{s:I,s:i,s:s}", "node_id", (json_int_t)node,
		"exit_code", exit_code, "reason", "exited")
	    : json_pack("{s:I}", "node_id", (json_int_t)node);
	status = run(op);
	op_free(op);
	return status;
}

/* A heartbeat: renews node's lease, as handle_heartbeat does. */
static void
beat(int64_t node_id)
{
	struct node *n;

	pthread_rwlock_wrlock(&state.lock);
	if ((n = state_node(node_id)) != NULL)
		atomic_store(&n->last_seen_mono, mono);
	pthread_rwlock_unlock(&state.lock);
}

/* The job's state, node and attempt, read under the lock. */
static enum job_state
job_where(int64_t id, int64_t *node, int *attempt)
{
	enum job_state st = JOB_FAILED;
	struct job *j;

	pthread_rwlock_rdlock(&state.lock);
	if ((j = state_job(id)) != NULL) {
		st = j->state;
		if (node != NULL)
			*node = j->state == JOB_RUNNING ? j->node_id : 0;
		if (attempt != NULL)
			*attempt = j->attempts;
	}
	pthread_rwlock_unlock(&state.lock);
	return st;
}

TEST(submit_assign_start_finish)
{
	int64_t node = register_node("n1", 1), job, on = 0;
	int attempt = 0;

	CHECK(node > 0);
	beat(node);
	CHECK((job = submit()) > 0);
	tick();
	CHECK_EQ(job_where(job, &on, &attempt), JOB_RUNNING);
	CHECK_EQ(on, node);
	CHECK_EQ(attempt, 1);
	CHECK_EQ(report(OP_STARTED, job, 1, node, 0), 200);
	CHECK_EQ(report(OP_FINISHED, job, 1, node, 0), 200);
	CHECK_EQ(job_where(job, NULL, NULL), JOB_SUCCEEDED);
	/* A second finished report changes nothing. */
	report(OP_FINISHED, job, 1, node, 3);
	CHECK_EQ(job_where(job, NULL, NULL), JOB_SUCCEEDED);
}

/* Its node's lease runs out: the job goes back and runs elsewhere. */
TEST(requeue_on_lease_expiry_and_fencing)
{
	int64_t a, b, job, on = 0;
	int attempt = 0;

	/* The earlier tests' nodes go silent first. */
	mono += state.cfg.lease_ms + 1000;
	tick();
	a = register_node("la", 1);
	beat(a);
	CHECK((job = submit()) > 0);
	tick();
	CHECK_EQ(job_where(job, &on, &attempt), JOB_RUNNING);
	CHECK_EQ(on, a);
	CHECK_EQ(report(OP_STARTED, job, attempt, a, 0), 200);
	b = register_node("lb", 1);
	beat(b);
	mono += state.cfg.lease_ms + 1000;
	beat(b); /* b beats on, a is silent */
	tick();
	tick();
	CHECK_EQ(job_where(job, &on, &attempt), JOB_RUNNING);
	CHECK_EQ(on, b);
	CHECK_EQ(attempt, 2);
	/* Fencing: the old attempt's report is refused and changes nothing. */
	CHECK(report(OP_FINISHED, job, 1, a, 0) >= 400);
	CHECK_EQ(job_where(job, &on, &attempt), JOB_RUNNING);
	CHECK_EQ(attempt, 2);
	CHECK_EQ(report(OP_STARTED, job, 2, b, 0), 200);
	CHECK_EQ(report(OP_FINISHED, job, 2, b, 0), 200);
	CHECK_EQ(job_where(job, NULL, NULL), JOB_SUCCEEDED);
}

/*
 * A stale attempt on the same node: the job's node is lost, comes back,
 * gets the job again (attempt 2); attempt 1's late report is refused.
 */
TEST(stale_attempt_on_the_same_node)
{
	int64_t c, job, on = 0;
	int attempt = 0;

	mono += state.cfg.lease_ms + 1000;
	tick();
	c = register_node("sc", 1);
	beat(c);
	CHECK((job = submit()) > 0);
	tick();
	CHECK_EQ(job_where(job, &on, &attempt), JOB_RUNNING);
	CHECK_EQ(on, c);
	CHECK_EQ(report(OP_STARTED, job, 1, c, 0), 200);
	mono += state.cfg.lease_ms + 1000;
	tick();
	CHECK_EQ(job_where(job, NULL, NULL), JOB_QUEUED);
	c = register_node("sc", 1); /* it comes back */
	beat(c);
	tick();
	CHECK_EQ(job_where(job, &on, &attempt), JOB_RUNNING);
	CHECK_EQ(on, c);
	CHECK_EQ(attempt, 2);
	CHECK_EQ(report(OP_FINISHED, job, 1, c, 7), 409);
	CHECK_EQ(job_where(job, &on, &attempt), JOB_RUNNING);
	CHECK_EQ(attempt, 2);
	CHECK_EQ(report(OP_STARTED, job, 2, c, 0), 200);
	CHECK_EQ(report(OP_FINISHED, job, 2, c, 0), 200);
	CHECK_EQ(job_where(job, NULL, NULL), JOB_SUCCEEDED);
}

/*
 * A gang loses a node: the other part is stopped, and once it has, the
 * whole job goes back to the queue; it runs again, whole, when it fits.
 */
TEST(gang_loses_a_node)
{
	int64_t g1, g2, job, on = 0, n0, n1;
	int attempt = 0;
	struct job *j;

	mono += state.cfg.lease_ms + 1000;
	tick();
	g1 = register_node("g1", 1);
	g2 = register_node("g2", 1);
	beat(g1);
	beat(g2);
	job = submit_spec("{\"command\":[\"true\"],\"gpus\":1,\"nodes\":2}");
	CHECK(job > 0);
	tick();
	CHECK_EQ(job_where(job, &on, &attempt), JOB_RUNNING);
	pthread_rwlock_rdlock(&state.lock);
	j = state_job(job);
	n0 = j != NULL && j->nparts == 2 ? j->parts[0].node_id : 0;
	n1 = j != NULL && j->nparts == 2 ? j->parts[1].node_id : 0;
	pthread_rwlock_unlock(&state.lock);
	CHECK((n0 == g1 && n1 == g2) || (n0 == g2 && n1 == g1));
	CHECK_EQ(report(OP_STARTED, job, 1, g1, 0), 200);
	CHECK_EQ(report(OP_STARTED, job, 1, g2, 0), 200);
	mono += state.cfg.lease_ms + 1000;
	beat(g2); /* g1 is silent */
	tick();
	/* Still running: g2's part must save and stop first. */
	CHECK_EQ(job_where(job, NULL, NULL), JOB_RUNNING);
	CHECK_EQ(report_reason(job, 1, g2, "gang_stopped"), 200);
	CHECK_EQ(job_where(job, NULL, &attempt), JOB_QUEUED);
	CHECK_EQ(attempt, 1);
	g1 = register_node("g1", 1); /* back: the gang fits again */
	beat(g1);
	beat(g2);
	tick();
	CHECK_EQ(job_where(job, NULL, &attempt), JOB_RUNNING);
	CHECK_EQ(attempt, 2);
}

/*
 * Provider first: lab-b's job borrows lab-a's only GPU; lab-a's own job
 * comes: the borrowed job is asked to save and stop, and only once it
 * has (its agent's "preempted") does lab-a's job start there: never two
 * jobs on the GPU. The borrowed job waits in the queue, and runs again
 * when lab-a's has ended. Runs first, while the test's clock is still
 * the real monotonic one: the scheduler's glue (live.c) reads that clock
 * itself for the preemption's reservation, so a clock run ahead (as the
 * later tests run it) would expire the reservation at once.
 */
TEST(preemption)
{
	struct token_entry prov_a, alice, bob;
	int64_t pa, jb, ja, on = 0;
	int attempt = 0;

	make_group("lab-a");
	make_group("lab-b");
	make_token_in(GP_ROLE_PROVIDER, "prov-a", "lab-a", &prov_a);
	make_token_in(GP_ROLE_USER, "alice", "lab-a", &alice);
	make_token_in(GP_ROLE_USER, "bob", "lab-b", &bob);
	pa = register_node_of(&prov_a, "pa", 1);
	CHECK(pa > 0);
	reporter = &prov_a;
	beat(pa);
	jb = submit_as(&bob, "{\"command\":[\"true\"],\"gpus\":1,\"checkpoint_every_s\":1}");
	tick();
	CHECK_EQ(job_where(jb, &on, &attempt), JOB_RUNNING);
	CHECK_EQ(on, pa);
	CHECK_EQ(report(OP_STARTED, jb, 1, pa, 0), 200);
	ja = submit_as(&alice, "{\"command\":[\"true\"],\"gpus\":1}");
	CHECK(ja > 0);
	tick();
	/* bob's job is being stopped; alice's waits for the GPU */
	CHECK_EQ(job_where(ja, NULL, NULL), JOB_QUEUED);
	CHECK_EQ(job_where(jb, &on, NULL), JOB_RUNNING);
	CHECK_EQ(report_reason(jb, 1, pa, "preempted"), 200);
	tick();
	CHECK_EQ(job_where(ja, &on, NULL), JOB_RUNNING);
	CHECK_EQ(on, pa);
	CHECK_EQ(job_where(jb, NULL, &attempt), JOB_QUEUED);
	CHECK_EQ(attempt, 1);
	/* alice's job ends: bob's runs again there, attempt 2 */
	pthread_rwlock_rdlock(&state.lock);
	attempt = state_job(ja) != NULL ? state_job(ja)->attempts : 0;
	pthread_rwlock_unlock(&state.lock);
	CHECK_EQ(report(OP_STARTED, ja, attempt, pa, 0), 200);
	CHECK_EQ(report(OP_FINISHED, ja, attempt, pa, 0), 200);
	tick();
	CHECK_EQ(job_where(jb, &on, &attempt), JOB_RUNNING);
	CHECK_EQ(attempt, 2);
	CHECK_EQ(report(OP_STARTED, jb, 2, pa, 0), 200);
	CHECK_EQ(report(OP_FINISHED, jb, 2, pa, 0), 200);
	CHECK_EQ(job_where(jb, NULL, NULL), JOB_SUCCEEDED);
	reporter = &provider;
	mono += state.cfg.lease_ms + 1000; /* pa goes: the next tests' */
	tick();
}

/*
 * A finished job leaves memory (min-job-age) and is still answered for,
 * from its row: an acknowledged job survives its purge.
 */
TEST(purge_keeps_the_row)
{
	int64_t c, job, on = 0;
	int attempt = 0, stored = 0, i;
	struct job *j;

	mono += state.cfg.lease_ms + 1000;
	tick();
	c = register_node("pc", 1);
	beat(c);
	CHECK((job = submit()) > 0);
	tick();
	CHECK_EQ(job_where(job, &on, &attempt), JOB_RUNNING);
	CHECK_EQ(report(OP_STARTED, job, attempt, on, 0), 200);
	state.cfg.min_job_age_ms = 1; /* before it ends: it joins the ring */
	CHECK_EQ(report(OP_FINISHED, job, attempt, on, 0), 200);
	/* Bounded: purge runs each batch, for jobs 1 ms past their end. */
	for (i = 0; i < 1000 && state_job(job) != NULL; i++) {
		usleep(2000);
		tick();
	}
	state.cfg.min_job_age_ms = 0;
	CHECK(state_job(job) == NULL);
	pthread_rwlock_rdlock(&state.lock);
	j = state_job_any(job, &stored);
	CHECK(j != NULL);
	CHECK_EQ(stored, 1);
	if (j != NULL)
		CHECK_EQ(j->state, JOB_SUCCEEDED);
	if (j != NULL && stored)
		state_job_stored_free(j);
	pthread_rwlock_unlock(&state.lock);
}

/*
 * A seeded random walk: nodes register, beat, go silent; jobs are
 * submitted, start and finish (the right attempt or a stale one). After
 * every step, no two nodes run one job (each GPU holds at most one job,
 * and a running job is on the node its GPU says), and every acknowledged
 * job is known; at the end every job is queued, running or ended once.
 */
#define WALK_NODES 4
#define WALK_JOBS 64
TEST(random_walk)
{
	static int64_t nodes[WALK_NODES], jobs[WALK_JOBS];
	static int alive[WALK_NODES], ended[WALK_JOBS];
	unsigned seed = 16;
	int njobs = 0, steps, violations = 0;
	const char *s = getenv("GPUPOOL_STATE_SEED");

	if (s != NULL)
		seed = (unsigned)strtoul(s, NULL, 10);
	srand(seed);
	for (int i = 0; i < WALK_NODES; i++) {
		char name[16];
		snprintf(name, sizeof(name), "w%d", i);
		nodes[i] = register_node(name, 1);
		alive[i] = 1;
		beat(nodes[i]);
	}
	for (steps = 0; steps < 3000; steps++) {
		int r = rand() % 100, i = rand() % WALK_NODES;
		int64_t on = 0;
		int attempt = 0, k;
		if (r < 15 && njobs < WALK_JOBS) {
			if ((jobs[njobs] = submit()) > 0)
				njobs++;
		} else if (r < 35 && njobs > 0) {
			k = rand() % njobs;
			if (job_where(jobs[k], &on, &attempt) == JOB_RUNNING &&
			    on != 0)
				report(OP_STARTED, jobs[k], attempt, on, 0);
		} else if (r < 50 && njobs > 0) {
			k = rand() % njobs;
			if (job_where(jobs[k], &on, &attempt) == JOB_RUNNING &&
			    on != 0) {
				/*
				 * Now and then a stale attempt's report: it
				 * is refused and changes nothing (fencing).
				 */
				int stale = attempt > 1 && rand() % 4 == 0;
				int64_t on2 = 0;
				int attempt2 = 0;
				int st = report(OP_FINISHED, jobs[k],
				    stale ? attempt - 1 : attempt, on, 0);
				if (stale && (st != 409 ||
				    job_where(jobs[k], &on2, &attempt2) !=
				        JOB_RUNNING ||
				    on2 != on || attempt2 != attempt))
					violations++;
			}
		} else if (r < 60) {
			/* goes silent, or comes back (registers again) */
			alive[i] = !alive[i];
			if (alive[i]) {
				char name[16];
				snprintf(name, sizeof(name), "w%d", i);
				nodes[i] = register_node(name, 1);
			}
		} else {
			mono += 400;
		}
		for (int n = 0; n < WALK_NODES; n++)
			if (alive[n])
				beat(nodes[n]);
		tick();
		/* The invariants, under the read lock. */
		pthread_rwlock_rdlock(&state.lock);
		for (k = 0; k < njobs; k++) {
			struct job *j = state_job(jobs[k]);
			if (j == NULL) {
				violations++; /* an acknowledged job lost */
				continue;
			}
			if (j->state == JOB_RUNNING) {
				struct node *n = state_node(j->node_id);
				int held = 0;
				for (int g = 0; n != NULL && g < n->ngpus; g++)
					held += n->gpus[g].job_id == j->id;
				if (held != 1)
					violations++;
			}
		}
		for (k = 0; k < njobs; k++) {
			/* no job of the walk (one part) on two GPUs */
			int64_t c = 0;
			int holders = 0;
			struct node *n;
			while ((n = state_node_next(&c)) != NULL)
				for (int g = 0; g < n->ngpus; g++)
					holders += n->gpus[g].job_id == jobs[k];
			if (holders > 1)
				violations++;
		}
		pthread_rwlock_unlock(&state.lock);
		if (violations > 0) {
			fprintf(stderr, "seed %u: broken at step %d\n", seed,
			    steps);
			break;
		}
	}
	CHECK_EQ(violations, 0);
	/* Every job ends once: let the nodes finish all of it. */
	for (int round = 0; round < 4 * WALK_JOBS; round++) {
		int open = 0;
		for (int n = 0; n < WALK_NODES; n++)
			if (!alive[n]) {
				char name[16];
				snprintf(name, sizeof(name), "w%d", n);
				nodes[n] = register_node(name, 1);
				alive[n] = 1;
			}
		for (int k = 0; k < njobs; k++) {
			int64_t on = 0;
			int attempt = 0;
			enum job_state st = job_where(jobs[k], &on, &attempt);
			if (st == JOB_RUNNING && on != 0) {
				report(OP_STARTED, jobs[k], attempt, on, 0);
				report(OP_FINISHED, jobs[k], attempt, on, 0);
			}
			open += !ended[k] && st < JOB_SUCCEEDED;
		}
		for (int n = 0; n < WALK_NODES; n++)
			beat(nodes[n]);
		tick();
		if (open == 0)
			break;
	}
	for (int k = 0; k < njobs; k++)
		CHECK_EQ(job_where(jobs[k], NULL, NULL), JOB_SUCCEEDED);
}

/* What the relay sends: (job, attempt)'s idle clock for the store. */
static void
note_idle(int64_t job, int attempt, int64_t limit_ms, int64_t seen_ms)
{
	struct op *op = op_new(OP_IDLE, NULL);

	op->job_id = job;
	op->attempt = attempt;
	op->idle_limit_ms = limit_ms;
	op->idle_seen_ms = seen_ms;
	run(op);
	op_free(op);
}

/*
 * An attempt's interactive idle clock (relay.c) is kept in its record
 * through the store: a restart (state_fini, state_init) loads it; an
 * older time, another attempt's, changes nothing.
 */
TEST(idle_clock_kept)
{
	const struct attempt_record *a;
	int64_t n, job;
	struct job *j;
	int attempt = 0;

	mono += state.cfg.lease_ms + 1000;
	tick();
	n = register_node("idle", 1);
	beat(n);
	CHECK((job = submit()) > 0);
	tick();
	CHECK_EQ(job_where(job, NULL, &attempt), JOB_RUNNING);
	note_idle(job, attempt, 60000, 1000000);
	note_idle(job, attempt, 60000, 900000);
	note_idle(job, attempt + 1, 5000, 2000000);
	state_fini();
	CHECK_EQ(state_init(&cfg), 0);
	pthread_rwlock_rdlock(&state.lock);
	j = state_job(job);
	CHECK(j != NULL && j->nhistory > 0);
	if (j != NULL && j->nhistory > 0) {
		a = &j->history[j->nhistory - 1];
		CHECK_EQ(a->attempt, attempt);
		CHECK_EQ(a->idle_limit_ms, 60000);
		CHECK_EQ(a->idle_seen_ms, 1000000);
	}
	pthread_rwlock_unlock(&state.lock);
}

/*
 * Registers an agent with a gang overlay (ports 1..4 from port, no
 * --advertise-addr: its gangs need the overlay) that runs running (a
 * JSON array of {job_id, attempt}, consumed). Returns its node id.
 */
static int64_t
register_overlay_node(const char *name, int port, json_t *running)
{
	struct op *op = op_new(OP_REGISTER, &provider);
	json_t *gpus = json_array();
	int64_t id = 0;
	char uuid[64];

	for (int i = 0; i < 4; i++) {
		snprintf(uuid, sizeof(uuid), "GPU-%s-%d", name, i);
		json_array_append_new(gpus, json_pack("{s:i,s:s,s:s,s:i}",
		    "index", i, "uuid", uuid, "model", "Fake", "mem_mib",
		    1000));
	}
	op->body = json_pack("{s:i,s:s,s:i,s:i,s:o,s:o,s:{s:i,s:i}}",
	    "protocol", 1, "name", name, "cpus", 16, "mem_mib", 64000,
	    "gpus", gpus, "running", running, "overlay", "port", port,
	    "ports", 4);
	gp_strlcpy(op->peer, "198.51.100.7", sizeof(op->peer));
	if (run(op) == 200)
		id = json_integer_value(json_object_get(op->result, "node_id"));
	op_free(op);
	return id;
}

/* Part k of job's overlay: its public key, slot and private key. */
static void
overlay_of(int64_t job, int k, char pub[48], int *slot, char priv[48])
{
	struct job *j;

	pub[0] = priv[0] = '\0';
	*slot = -1;
	pthread_rwlock_rdlock(&state.lock);
	if ((j = state_job(job)) != NULL && k < j->nparts) {
		gp_strlcpy(pub, j->parts[k].ov_pub, 48);
		gp_strlcpy(priv, j->parts[k].ov_priv, 48);
		*slot = j->parts[k].ov_slot;
	}
	pthread_rwlock_unlock(&state.lock);
}

/* The node of part k of job (0: none). */
static int64_t
part_node(int64_t job, int k)
{
	struct job *j;
	int64_t id = 0;

	pthread_rwlock_rdlock(&state.lock);
	if ((j = state_job(job)) != NULL && k < j->nparts)
		id = j->parts[k].node_id;
	pthread_rwlock_unlock(&state.lock);
	return id;
}

/*
 * A running gang's overlay survives a coordinator restart (issue 14): its
 * parts' public keys and port slots come back from the store, so a gang
 * assigned after the restart takes other slots than the running one's
 * (the same slot would be the same UDP port, which the running part's
 * wireguard-go holds); no private key is kept once a part started, nor
 * loaded; and the gang's end takes its overlay out of the store.
 */
TEST(gang_overlay_kept)
{
	static const char gang[] =
	    "{\"command\":[\"true\"],\"gpus\":1,\"nodes\":2}";
	char pub[2][48], priv[48], pub2[48];
	int64_t oa, ob, g1, g2, node[2];
	int slot[2], slot2, g2slot[2], k, attempt = 0;

	mono += state.cfg.lease_ms + 1000;
	tick();
	oa = register_overlay_node("ova", 52000, json_array());
	ob = register_overlay_node("ovb", 52100, json_array());
	CHECK(oa > 0 && ob > 0);
	beat(oa);
	beat(ob);
	CHECK((g1 = submit_spec(gang)) > 0);
	tick();
	CHECK_EQ(job_where(g1, NULL, &attempt), JOB_RUNNING);
	for (k = 0; k < 2; k++) {
		overlay_of(g1, k, pub[k], &slot[k], priv);
		CHECK(gp_wg_key_valid(pub[k]));
		CHECK(priv[0] != '\0'); /* until its agent has it */
		CHECK(slot[k] >= 1 && slot[k] <= 2);
		node[k] = part_node(g1, k);
		CHECK(node[k] == oa || node[k] == ob);
	}
	/* (both parts may be on one node: then on two slots of its) */
	CHECK(node[0] != node[1] || slot[0] != slot[1]);
	for (k = 0; k < 2; k++) {
		if (k == 0 || node[1] != node[0])
			CHECK_EQ(report(OP_STARTED, g1, attempt, node[k], 0),
			    200);
		overlay_of(g1, k, pub2, &slot2, priv);
		CHECK_STR(priv, ""); /* started: wiped */
	}

	/* kill -9 and start: the same keys and slots, no private key */
	state_fini();
	CHECK_EQ(state_init(&cfg), 0);
	for (k = 0; k < 2; k++) {
		overlay_of(g1, k, pub2, &slot2, priv);
		CHECK_STR(pub2, pub[k]);
		CHECK_EQ(slot2, slot[k]);
		CHECK_STR(priv, "");
	}
	/* the agents come back, still running it; a second gang comes */
	CHECK_EQ(register_overlay_node("ova", 52000, json_pack("[{s:I,s:i}]",
	    "job_id", (json_int_t)g1, "attempt", attempt)), oa);
	CHECK_EQ(register_overlay_node("ovb", 52100, json_pack("[{s:I,s:i}]",
	    "job_id", (json_int_t)g1, "attempt", attempt)), ob);
	beat(oa);
	beat(ob);
	CHECK((g2 = submit_spec(gang)) > 0);
	tick();
	CHECK_EQ(job_where(g1, NULL, NULL), JOB_RUNNING);
	CHECK_EQ(job_where(g2, NULL, NULL), JOB_RUNNING);
	for (k = 0; k < 2; k++) {
		int64_t on = part_node(g2, k);

		overlay_of(g2, k, pub2, &slot2, priv);
		CHECK(gp_wg_key_valid(pub2));
		CHECK(strcmp(pub2, pub[0]) != 0 && strcmp(pub2, pub[1]) != 0);
		/* not a slot (a UDP port) of the running gang's on its node */
		CHECK(slot2 > 0);
		CHECK(!(on == node[0] && slot2 == slot[0]));
		CHECK(!(on == node[1] && slot2 == slot[1]));
		g2slot[k] = slot2;
	}

	/* the first gang ends: no overlay left for it, after a restart too */
	CHECK_EQ(report(OP_FINISHED, g1, attempt, node[0], 0), 200);
	if (node[1] != node[0])
		CHECK_EQ(report(OP_FINISHED, g1, attempt, node[1], 0), 200);
	CHECK_EQ(job_where(g1, NULL, NULL), JOB_SUCCEEDED);
	state_fini();
	CHECK_EQ(state_init(&cfg), 0);
	for (k = 0; k < 2; k++) {
		overlay_of(g1, k, pub2, &slot2, priv);
		CHECK_STR(pub2, "");
		CHECK(slot2 <= 0);
		overlay_of(g2, k, pub2, &slot2, priv);
		CHECK_EQ(slot2, g2slot[k]);
	}
}

/* ---- the requeue back-off after failed starts (state_retry.c) ---- */

/* The job's back-off, read under the lock: failures (-1: none). */
static int
retry_of(int64_t id, int64_t *not_before, int *wait_reason, char *why,
    size_t whylen)
{
	struct job *j;
	int failures = -1;

	pthread_rwlock_rdlock(&state.lock);
	if ((j = state_job(id)) != NULL) {
		if (j->retry != NULL) {
			failures = j->retry->failures;
			if (not_before != NULL)
				*not_before = j->retry->not_before_ms;
		}
		if (wait_reason != NULL)
			*wait_reason = j->wait_reason;
		if (why != NULL)
			gp_strlcpy(why, j->wait != NULL ? j->wait->wait_why
			                                : "", whylen);
	}
	pthread_rwlock_unlock(&state.lock);
	return failures;
}

/*
 * Cancels every job left by the tests before (the gang of
 * gang_loses_a_node runs on), and lets the nodes they hold go silent:
 * a test that follows has the pool to itself.
 */
static void
cancel_all(void)
{
	struct op *op;
	int64_t id;

	for (id = 1; id < state.next_job_id; id++) {
		op = op_new(OP_CANCEL, &admin);
		op->job_id = id;
		run(op);
		op_free(op);
	}
	mono += state.cfg.lease_ms + 1000;
	tick();
}

/* Its back-off is over (the test does not wait for the clock). */
static void
backoff_over(int64_t id)
{
	struct job *j;

	pthread_rwlock_wrlock(&state.lock);
	if ((j = state_job(id)) != NULL && j->retry != NULL)
		j->retry->not_before_ms = gp_now_ms() - 1;
	state.sched_dirty = 1; /* (the clock would have woken it) */
	pthread_rwlock_unlock(&state.lock);
}

TEST(backoff_delays)
{
	CHECK_EQ(retry_delay_ms(0), 0);
	CHECK_EQ(retry_delay_ms(1), 1000);
	CHECK_EQ(retry_delay_ms(2), 2000);
	CHECK_EQ(retry_delay_ms(3), 4000);
	CHECK_EQ(retry_delay_ms(6), 32000);
	CHECK_EQ(retry_delay_ms(7), 60000);
	CHECK_EQ(retry_delay_ms(200), 60000);
	CHECK(reason_start_failed("image_unavailable"));
	CHECK(reason_start_failed("restore_failed"));
	CHECK(reason_start_failed("refused"));
	CHECK(!reason_start_failed("reclaimed"));
	CHECK(!reason_start_failed("node_lost"));
	CHECK(!reason_start_failed("preempted"));
}

/*
 * A job whose attempts fail to start (image_unavailable): it waits out
 * its back-off (not placed again at once), then goes to another node
 * that fits before the one where it failed, back to a failed one only
 * when no other can take it; the back-off survives a restart; a run
 * that started and was reclaimed forgets it and requeues at once.
 */
TEST(backoff_after_failed_start)
{
	int64_t a, b, job, on = 0, nb = 0, t0;
	int attempt = 0, reason = 0, i;
	char why[160];

	cancel_all();
	a = register_node("bfa", 1);
	beat(a);
	CHECK((job = submit()) > 0);
	tick();
	CHECK_EQ(job_where(job, &on, &attempt), JOB_RUNNING);
	CHECK_EQ(on, a);
	CHECK_EQ(retry_of(job, NULL, NULL, NULL, 0), -1);
	t0 = gp_now_ms();
	CHECK_EQ(report_reason(job, attempt, a, "image_unavailable"), 200);
	CHECK_EQ(job_where(job, NULL, NULL), JOB_QUEUED);
	CHECK_EQ(retry_of(job, &nb, NULL, NULL, 0), 1);
	CHECK(nb >= t0 + 1000);
	/* Not placed again before its back-off, though its node is free. */
	for (i = 0; i < 3; i++) {
		tick();
		if (gp_now_ms() >= nb)
			break; /* (a machine slower than 1 s a tick) */
		CHECK_EQ(job_where(job, NULL, &attempt), JOB_QUEUED);
		CHECK_EQ(attempt, 1);
		retry_of(job, NULL, &reason, why, sizeof(why));
		CHECK_EQ(reason, GP_SCHED_WAIT_BACKOFF);
		CHECK(strstr(why, "retrying after image_unavailable on node "
		                  "bfa") != NULL);
	}
	/* Another node fits: it goes there, not back to bfa (lower id). */
	b = register_node("bfb", 1);
	beat(a);
	beat(b);
	backoff_over(job);
	tick();
	CHECK_EQ(job_where(job, &on, &attempt), JOB_RUNNING);
	CHECK_EQ(on, b);
	CHECK_EQ(attempt, 2);
	/* It fails there too: twice as long, and both are kept off. */
	t0 = gp_now_ms();
	CHECK_EQ(report_reason(job, attempt, b, "image_unavailable"), 200);
	CHECK_EQ(retry_of(job, &nb, NULL, NULL, 0), 2);
	CHECK(nb >= t0 + 2000);
	/* Kept through a restart (rebuilt from the attempts' history). */
	state_fini();
	CHECK_EQ(state_init(&cfg), 0);
	CHECK_EQ(job_where(job, NULL, NULL), JOB_QUEUED);
	CHECK_EQ(retry_of(job, &nb, NULL, NULL, 0), 2);
	CHECK(nb >= t0 + 2000);
	tick();
	if (gp_now_ms() < nb)
		CHECK_EQ(job_where(job, NULL, NULL), JOB_QUEUED);
	/* Every node failed it: it may go back to one of them. */
	CHECK_EQ(register_node("bfa", 1), a); /* back after the restart */
	CHECK_EQ(register_node("bfb", 1), b);
	beat(a);
	beat(b);
	backoff_over(job);
	tick();
	CHECK_EQ(job_where(job, &on, &attempt), JOB_RUNNING);
	CHECK(on == a || on == b);
	CHECK_EQ(attempt, 3);
	/* It starts and runs; its owner reclaims the GPU: back at once. */
	CHECK_EQ(report(OP_STARTED, job, attempt, on, 0), 200);
	CHECK_EQ(report_reason(job, attempt, on, "reclaimed"), 200);
	CHECK_EQ(retry_of(job, NULL, NULL, NULL, 0), -1);
	tick();
	CHECK_EQ(job_where(job, &on, &attempt), JOB_RUNNING);
	CHECK_EQ(attempt, 4);
	CHECK_EQ(report(OP_FINISHED, job, attempt, on, 0), 200);
	CHECK_EQ(job_where(job, NULL, NULL), JOB_SUCCEEDED);
}

/*
 * A reclaim before the job ever started is not its doing: it requeues
 * at once, with no back-off, as before.
 */
TEST(backoff_not_for_reclaim)
{
	int64_t a, job, on = 0;
	int attempt = 0;

	cancel_all();
	a = register_node("brc", 1);
	beat(a);
	CHECK((job = submit()) > 0);
	tick();
	CHECK_EQ(job_where(job, &on, &attempt), JOB_RUNNING);
	CHECK_EQ(report_reason(job, attempt, a, "reclaimed"), 200);
	CHECK_EQ(retry_of(job, NULL, NULL, NULL, 0), -1);
	tick();
	CHECK_EQ(job_where(job, &on, &attempt), JOB_RUNNING);
	CHECK_EQ(on, a);
	CHECK_EQ(attempt, 2);
	CHECK_EQ(report(OP_FINISHED, job, attempt, on, 0), 200);
}

/*
 * A gang whose second part cannot fetch its image: the gang stops with
 * image_unavailable and backs off (it was placed again at once, 200
 * times in a few seconds); then it keeps off that part's node while
 * other nodes can take both parts.
 */
TEST(backoff_gang_part)
{
	int64_t n[3], job, bad = 0, parts[2] = {0, 0};
	int attempt = 0, k, reason = 0;
	struct job *j;

	cancel_all();
	n[0] = register_node("bg0", 1);
	n[1] = register_node("bg1", 1);
	n[2] = register_node("bg2", 1);
	for (k = 0; k < 3; k++)
		beat(n[k]);
	job = submit_spec("{\"command\":[\"true\"],\"gpus\":1,\"nodes\":2}");
	CHECK(job > 0);
	tick();
	CHECK_EQ(job_where(job, NULL, &attempt), JOB_RUNNING);
	pthread_rwlock_rdlock(&state.lock);
	if ((j = state_job(job)) != NULL && j->nparts == 2) {
		parts[0] = j->parts[0].node_id;
		parts[1] = j->parts[1].node_id;
	}
	pthread_rwlock_unlock(&state.lock);
	CHECK(parts[0] > 0 && parts[1] > 0);
	bad = parts[1];
	CHECK_EQ(report_reason(job, attempt, bad, "image_unavailable"), 200);
	/* Rank 0 is asked to stop; it reports, and the gang requeues. */
	CHECK_EQ(report_reason(job, attempt, parts[0], "gang_stopped"), 200);
	CHECK_EQ(job_where(job, NULL, NULL), JOB_QUEUED);
	CHECK_EQ(retry_of(job, NULL, NULL, NULL, 0), 1);
	tick();
	retry_of(job, NULL, &reason, NULL, 0);
	CHECK(reason == GP_SCHED_WAIT_BACKOFF ||
	    job_where(job, NULL, NULL) == JOB_RUNNING);
	for (k = 0; k < 3; k++)
		beat(n[k]);
	backoff_over(job);
	tick();
	CHECK_EQ(job_where(job, NULL, &attempt), JOB_RUNNING);
	CHECK_EQ(attempt, 2);
	pthread_rwlock_rdlock(&state.lock);
	if ((j = state_job(job)) != NULL && j->nparts == 2) {
		parts[0] = j->parts[0].node_id;
		parts[1] = j->parts[1].node_id;
	}
	pthread_rwlock_unlock(&state.lock);
	CHECK(parts[0] != bad && parts[1] != bad);
	for (k = 0; k < 2; k++)
		CHECK_EQ(report(OP_FINISHED, job, attempt, parts[k], 0), 200);
	CHECK_EQ(job_where(job, NULL, NULL), JOB_SUCCEEDED);
}

int
main(void)
{
	gp_log_init("test", GP_LOG_WARN);
	if (gp_token_init() != 0 || mkdtemp(dir) == NULL) {
		perror("init");
		return 1;
	}
	memset(&cfg, 0, sizeof(cfg));
	gp_strlcpy(cfg.data_dir, dir, sizeof(cfg.data_dir));
	cfg.lease_ms = 5000;
	cfg.heartbeat_ms = 1000;
	cfg.log_cap = 1 << 20;
	cfg.accrual_ms = 30 * 1000;
	cfg.half_life_ms = 7 * 86400 * 1000LL;
	cfg.budget_untimed_s = 3600;
	cfg.min_job_age_ms = 0;
	if (metrics_init() != 0 || state_init(&cfg) != 0) {
		fprintf(stderr, "state_init failed in %s\n", dir);
		return 1;
	}
	mono = gp_mono_ms();
	make_token(GP_ROLE_USER, "alice", &user);
	make_token(GP_ROLE_PROVIDER, "lab", &provider);
	RUN(preemption);
	RUN(submit_assign_start_finish);
	RUN(requeue_on_lease_expiry_and_fencing);
	RUN(stale_attempt_on_the_same_node);
	RUN(gang_loses_a_node);
	/* (before random_walk, whose queued jobs would take their nodes) */
	RUN(backoff_delays);
	RUN(backoff_after_failed_start);
	RUN(backoff_not_for_reclaim);
	RUN(backoff_gang_part);
	RUN(purge_keeps_the_row);
	RUN(random_walk);
	RUN(idle_clock_kept);
	RUN(gang_overlay_kept);
	gp_remove_tree(dir);
	return unit_report();
}
