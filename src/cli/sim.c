/*
 * sim.c: `gpupool sim`: replays a cluster trace through the scheduler
 * (src/sim/) on this machine and prints what it measured, as text or one
 * JSON object. No pool, no network.
 */
#include "sim/sim.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cmd.h"
#include "gp.h"

static json_t *
stats_json(const struct gp_sim_stats *s)
{
	return json_pack("{s:f,s:f,s:f,s:f,s:f}", "p50", s->p50, "p90", s->p90,
	    "p99", s->p99, "mean", s->mean, "max", s->max);
}

static int
print_json(json_t *o)
{
	int rc = 0;

	if (o == NULL ||
	    json_dumpf(o, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER) != 0)
		rc = -1;
	fputc('\n', stdout);
	json_decref(o);
	return rc;
}

static int
run_fgd(const struct gp_trace *t, const struct gp_sim_opts *o, int json)
{
	struct gp_sim_fgd_result r;
	int rc = gp_sim_fgd(t, o, &r);

	if (rc != 0) {
		gp_cli_error("sim: %s", gp_strerror(rc));
		return GP_CLI_EXIT_FAIL;
	}
	if (json)
		return print_json(json_pack("{s:s,s:s,s:I,s:I,s:I,s:I,s:f,s:f,"
		                            "s:f,s:f,s:f}",
		           "protocol", "fgd", "policy",
		           gp_sched_policy_name(o->policy), "seed",
		           (json_int_t)o->seed, "gpus", (json_int_t)r.gpus,
		           "pods", (json_int_t)r.pods, "pods_failed",
		           (json_int_t)r.pods_failed, "unallocated_pct_at_100",
		           r.unallocated_pct_at_100, "unallocated_pct_at_130",
		           r.unallocated_pct_at_130, "frag_pct_at_100",
		           r.frag_pct_at_100, "decisions_per_s",
		           r.decisions_per_s, "seconds", r.seconds)) == 0
		    ? GP_CLI_EXIT_OK
		    : GP_CLI_EXIT_FAIL;
	printf("policy %s, seed %llu: %lld GPUs, %lld pods, %lld failed\n"
	       "unallocated GPUs at 100%% arrived: %.2f%%\n"
	       "unallocated GPUs at 130%% arrived: %.2f%%\n"
	       "fragmented GPUs at 100%% arrived: %.2f%%\n"
	       "%.0f decisions/s, %.2f s\n",
	    gp_sched_policy_name(o->policy), (unsigned long long)o->seed,
	    (long long)r.gpus, (long long)r.pods, (long long)r.pods_failed,
	    r.unallocated_pct_at_100, r.unallocated_pct_at_130,
	    r.frag_pct_at_100, r.decisions_per_s, r.seconds);
	return GP_CLI_EXIT_OK;
}

static int
run_replay(const struct gp_trace *t, const struct gp_sim_opts *o, int json)
{
	struct gp_sim_replay_result r;
	int rc = gp_sim_replay(t, o, &r);

	if (rc != 0) {
		gp_cli_error("sim: %s", gp_strerror(rc));
		return GP_CLI_EXIT_FAIL;
	}
	if (json)
		return print_json(
		           json_pack("{s:s,s:s,s:f,s:s,s:I,s:I,s:I,s:I,s:I,"
		                     "s:I,s:f,s:f,s:f,s:f,s:o,s:o,s:f,"
		                     "s:{s:f,s:f,s:o},s:f,s:f}",
		               "protocol", "replay", "policy",
		               gp_sched_policy_name(o->policy), "speed",
		               o->speed > 0 ? o->speed : 1.0, "group_by",
		               o->group_by != NULL ? o->group_by : "labs:4",
		               "labs", (json_int_t)r.nlabs, "gpus",
		               (json_int_t)r.gpus, "pods", (json_int_t)r.pods,
		               "pods_gpu", (json_int_t)r.pods_gpu, "pods_never",
		               (json_int_t)r.pods_never, "makespan_s",
		               (json_int_t)r.makespan_s, "alloc_pct_mean",
		               r.alloc_pct_mean, "unalloc_gpus_mean",
		               r.unalloc_gpus_mean, "frag_gpus_mean",
		               r.frag_gpus_mean, "util_pct", r.util_pct,
		               "wait_s", stats_json(&r.wait_s), "jct_s",
		               stats_json(&r.jct_s), "jain", r.jain,
		               "static_partition", "util_pct",
		               r.static_util_pct, "makespan_s",
		               r.static_makespan_s, "wait_s",
		               stats_json(&r.static_wait_s), "decisions_per_s",
		               r.decisions_per_s, "seconds", r.seconds)) == 0
		    ? GP_CLI_EXIT_OK
		    : GP_CLI_EXIT_FAIL;
	printf("policy %s, %d labs (%s): %lld GPUs, %lld pods (%lld never "
	       "fit)\n"
	       "pooled: utilization %.2f%%, allocated %.2f%% on average, "
	       "%.1f GPUs idle, %.1f fragmented; makespan %lld s\n"
	       "  queueing delay s: p50 %.0f p90 %.0f p99 %.0f mean %.0f\n"
	       "  completion time s: p50 %.0f p90 %.0f p99 %.0f mean %.0f\n"
	       "  Jain's fairness index over labs: %.4f\n"
	       "static partition: utilization %.2f%%, makespan %.0f s, "
	       "queueing delay p50 %.0f p90 %.0f mean %.0f\n"
	       "%.0f decisions/s, %.2f s\n",
	    gp_sched_policy_name(o->policy), r.nlabs,
	    o->group_by != NULL ? o->group_by : "labs:4", (long long)r.gpus,
	    (long long)r.pods, (long long)r.pods_never, r.util_pct,
	    r.alloc_pct_mean, r.unalloc_gpus_mean, r.frag_gpus_mean,
	    (long long)r.makespan_s, r.wait_s.p50, r.wait_s.p90, r.wait_s.p99,
	    r.wait_s.mean, r.jct_s.p50, r.jct_s.p90, r.jct_s.p99, r.jct_s.mean,
	    r.jain, r.static_util_pct, r.static_makespan_s, r.static_wait_s.p50,
	    r.static_wait_s.p90, r.static_wait_s.mean, r.decisions_per_s,
	    r.seconds);
	return GP_CLI_EXIT_OK;
}

static json_t *
campus_run_json(const struct gp_campus_run *r, int labs)
{
	json_t *lw = json_array(), *ld = json_array();
	int i;

	for (i = 0; i < labs; i++) {
		json_array_append_new(lw, json_real(r->lab_wait_mean_s[i]));
		json_array_append_new(ld, json_real(r->lab_done_ratio[i]));
	}
	return json_pack("{s:f,s:f,s:f,s:I,s:I,s:f,s:f,s:f,s:o,s:o,s:I,s:I,"
	                 "s:{s:I,s:I,s:I,s:I,s:I,s:I},s:f,s:f}",
	    "util_pct", r->util_pct, "owner_pct", r->owner_pct, "pool_pct",
	    r->pool_pct, "jobs", (json_int_t)r->jobs, "jobs_done",
	    (json_int_t)r->jobs_done, "gpu_h_done", r->gpu_h_done,
	    "wait_mean_s", r->wait_mean_s, "wait_p90_s", r->wait_p90_s,
	    "lab_wait_mean_s", lw, "lab_done_ratio", ld, "sessions",
	    (json_int_t)r->sessions, "sessions_1min",
	    (json_int_t)r->sessions_1min, "migrations", "count",
	    (json_int_t)r->migrations, "saved", (json_int_t)r->saved, "partial",
	    (json_int_t)r->partial, "restarted", (json_int_t)r->restarted,
	    "by_owner", (json_int_t)r->by_owner, "by_lab",
	    (json_int_t)r->by_lab, "lost_gpu_h", r->lost_gpu_h, "jain",
	    r->jain);
}

static void
campus_run_print(const char *what, const struct gp_campus_run *r, int labs)
{
	int i;

	printf("%s: utilization %.1f%% (owners %.1f%%, pool jobs %.1f%%)\n"
	       "  jobs %lld, done %lld (%.0f GPU-h); batch wait mean %.0f s, "
	       "p90 %.0f s\n"
	       "  sessions %lld, served within a minute %lld (%.1f%%)\n"
	       "  migrations %lld (owner %lld, lab %lld): saved %lld, "
	       "partial %lld, restarted %lld; work lost %.1f GPU-h\n"
	       "  Jain's index over labs (GPU-h done / asked): %.4f\n"
	       "  by lab: wait mean s / done ratio:",
	    what, r->util_pct, r->owner_pct, r->pool_pct, (long long)r->jobs,
	    (long long)r->jobs_done, r->gpu_h_done, r->wait_mean_s,
	    r->wait_p90_s, (long long)r->sessions, (long long)r->sessions_1min,
	    r->sessions > 0 ? 100.0 * (double)r->sessions_1min /
	            (double)r->sessions
	                    : 0,
	    (long long)r->migrations, (long long)r->by_owner,
	    (long long)r->by_lab, (long long)r->saved, (long long)r->partial,
	    (long long)r->restarted, r->lost_gpu_h, r->jain);
	for (i = 0; i < labs; i++)
		printf(" %.0f/%.2f", r->lab_wait_mean_s[i],
		    r->lab_done_ratio[i]);
	printf("\n");
}

static int
run_campus(const struct gp_trace *t, const struct gp_campus_opts *o, int json)
{
	struct gp_campus_result r;
	int rc = gp_sim_campus(t, o, &r);

	if (rc != 0) {
		gp_cli_error("sim: %s", gp_strerror(rc));
		return GP_CLI_EXIT_FAIL;
	}
	if (json)
		return print_json(json_pack("{s:s,s:s,s:s,s:I,s:i,s:i,s:i,s:f,"
		                            "s:f,s:I,s:I,s:o,s:o,s:f}",
		           "protocol", "campus", "policy",
		           gp_sched_policy_name(o->policy), "pattern",
		           gp_campus_pattern_name(o->pattern), "seed",
		           (json_int_t)o->seed, "labs", o->labs, "lab_nodes",
		           o->lab_nodes, "days", o->days, "load", o->load,
		           "interactive", o->interactive, "nodes",
		           (json_int_t)r.nodes, "gpus", (json_int_t)r.gpus,
		           "pooled", campus_run_json(&r.pooled, r.labs),
		           "alone", campus_run_json(&r.alone, r.labs),
		           "seconds", r.seconds)) == 0
		    ? GP_CLI_EXIT_OK
		    : GP_CLI_EXIT_FAIL;
	printf("campus, pattern %s, seed %llu: %d labs, %lld nodes, %lld "
	       "GPUs, %d days, load %.2f\n",
	    gp_campus_pattern_name(o->pattern), (unsigned long long)o->seed,
	    r.labs, (long long)r.nodes, (long long)r.gpus, o->days, o->load);
	campus_run_print("pooled", &r.pooled, r.labs);
	campus_run_print("each lab alone", &r.alone, r.labs);
	printf("%.2f s\n", r.seconds);
	return GP_CLI_EXIT_OK;
}

/* A number option in [lo, hi]; 0 when absent (out unchanged). */
static int
real_option(const struct gp_cli_args *args, const char *name, double lo,
    double hi, double *out)
{
	const char *v = gp_cli_value(args, name);
	char *end;
	double x;

	if (v == NULL)
		return 0;
	x = strtod(v, &end);
	if (end == v || *end != '\0' || !(x >= lo) || x > hi)
		return -1;
	*out = x;
	return 0;
}

/* The campus protocol's options. Returns 0 or a usage error's code. */
static int
campus_options(const struct gp_cli_args *args, struct gp_sim_opts *so,
    struct gp_campus_opts *o)
{
	const char *pattern = gp_cli_value(args, "pattern");
	double labs = 8, lab_nodes = 2, days = 28;

	memset(o, 0, sizeof(*o));
	o->policy = so->policy;
	o->seed = so->seed;
	o->series = so->series;
	o->load = 0.5;
	o->interactive = 0.3;
	o->ckpt_share = 0.8;
	gp_campus_costs_default(&o->costs);
	if (pattern != NULL &&
	    (o->pattern = gp_campus_pattern_parse(pattern)) < 0)
		return gp_cli_usage_error(args,
		    "--pattern: office, deadline, semester or mixed");
	if (real_option(args, "labs", 1, GP_CAMPUS_LABS_MAX, &labs) != 0 ||
	    labs != floor(labs))
		return gp_cli_usage_error(args, "--labs: 1 to 64");
	if (real_option(args, "lab-nodes", 1, 64, &lab_nodes) != 0 ||
	    lab_nodes != floor(lab_nodes))
		return gp_cli_usage_error(args, "--lab-nodes: 1 to 64");
	if (real_option(args, "days", 1, 366, &days) != 0 ||
	    days != floor(days))
		return gp_cli_usage_error(args, "--days: 1 to 366");
	if (real_option(args, "load", 0.01, 10, &o->load) != 0)
		return gp_cli_usage_error(args, "--load: 0.01 to 10");
	if (real_option(args, "interactive", 0, 1, &o->interactive) != 0)
		return gp_cli_usage_error(args, "--interactive: 0 to 1");
	if (real_option(args, "ckpt-share", 0, 1, &o->ckpt_share) != 0)
		return gp_cli_usage_error(args, "--ckpt-share: 0 to 1");
	if (real_option(args, "grace", 0, 3600, &o->costs.grace_s) != 0)
		return gp_cli_usage_error(args, "--grace: 0 to 3600 seconds");
	o->labs = (int)labs;
	o->lab_nodes = (int)lab_nodes;
	o->days = (int)days;
	return 0;
}

int
gp_cli_cmd_sim(const struct gp_cli_args *args)
{
	const char *nodes = gp_cli_value(args, "nodes");
	const char *jobs = gp_cli_value(args, "jobs");
	const char *policy = gp_cli_value(args, "policy");
	const char *protocol = gp_cli_value(args, "protocol");
	const char *seed = gp_cli_value(args, "seed");
	const char *inflate = gp_cli_value(args, "inflate");
	const char *series = gp_cli_value(args, "series");
	const char *speed = gp_cli_value(args, "speed");
	struct gp_sim_opts o;
	struct gp_trace t;
	char err[512], *end;
	int64_t v;
	struct gp_campus_opts co;
	const char *runtimes = gp_cli_value(args, "runtimes");
	char rpath[4096];
	int rc, fgd, campus;

	memset(&o, 0, sizeof(o));
	o.seed = 42;
	o.inflate = 1.3;
	o.group_by = gp_cli_value(args, "group-by");
	if (nodes == NULL || jobs == NULL)
		return gp_cli_usage_error(args,
		    "--nodes and --jobs are "
		    "required");
	o.policy = gp_sched_policy_default();
	if (policy != NULL && (o.policy = gp_sched_policy_find(policy)) == NULL)
		return gp_cli_usage_error(args, "--policy: one of %s",
		    gp_sched_policy_names());
	if (protocol != NULL && strcmp(protocol, "fgd") != 0 &&
	    strcmp(protocol, "replay") != 0 && strcmp(protocol, "campus") != 0)
		return gp_cli_usage_error(args,
		    "--protocol: fgd, replay or campus");
	fgd = protocol != NULL && strcmp(protocol, "fgd") == 0;
	campus = protocol != NULL && strcmp(protocol, "campus") == 0;
	if (seed != NULL) {
		if (gp_parse_int(seed, 0, INT64_MAX, &v) != 0)
			return gp_cli_usage_error(args, "--seed: a number");
		o.seed = (uint64_t)v;
	}
	if (inflate != NULL) {
		o.inflate = strtod(inflate, &end);
		if (end == inflate || *end != '\0' || !(o.inflate >= 0.1) ||
		    o.inflate > 10)
			return gp_cli_usage_error(args,
			    "--inflate: a ratio "
			    "from 0.1 to 10");
	}
	if (speed != NULL) {
		o.speed = strtod(speed, &end);
		if (end == speed || *end != '\0' || !(o.speed >= 1) ||
		    o.speed > 1e6)
			return gp_cli_usage_error(args,
			    "--speed: a factor from "
			    "1 to 1000000");
	}
	if (o.group_by != NULL && strcmp(o.group_by, "qos") != 0 &&
	    (strncmp(o.group_by, "labs:", 5) != 0 ||
	        gp_parse_int(o.group_by + 5, 1, 64, &v) != 0))
		return gp_cli_usage_error(args,
		    "--group-by: labs:N (1 to 64) "
		    "or qos");
	if (campus && (rc = campus_options(args, &o, &co)) != 0)
		return rc;
	if ((rc = gp_trace_load(nodes, jobs, &t, err, sizeof(err))) != 0) {
		gp_cli_error("sim: %s", err);
		return GP_CLI_EXIT_FAIL;
	}
	if (campus) {
		/* Run times: --runtimes, else philly_runtime.csv beside the
		 * pod list. */
		if (runtimes == NULL) {
			const char *slash = strrchr(jobs, '/');
			int dir = slash != NULL ? (int)(slash - jobs) : 0;
			snprintf(rpath, sizeof(rpath),
			    "%.*s%sphilly_runtime.csv", dir, jobs,
			    slash != NULL ? "/" : "");
			runtimes = rpath;
		}
		if ((rc = gp_trace_load_runtimes(runtimes, &t, err,
		         sizeof(err))) != 0) {
			gp_cli_error("sim: %s (--runtimes FILE)", err);
			gp_trace_free(&t);
			return GP_CLI_EXIT_FAIL;
		}
	}
	if (series != NULL && (o.series = fopen(series, "w")) == NULL) {
		gp_cli_error("sim: cannot write %s", series);
		gp_trace_free(&t);
		return GP_CLI_EXIT_FAIL;
	}
	o.static_partition = 1;
	co.series = o.series;
	rc = fgd      ? run_fgd(&t, &o, gp_cli_flag(args, "json"))
	    : campus ? run_campus(&t, &co, gp_cli_flag(args, "json"))
	             : run_replay(&t, &o, gp_cli_flag(args, "json"));
	if (o.series != NULL && fclose(o.series) != 0) {
		gp_cli_error("sim: cannot write %s", series);
		rc = GP_CLI_EXIT_FAIL;
	}
	gp_trace_free(&t);
	return rc;
}
