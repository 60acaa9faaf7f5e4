/*
 * test_cli_args.c: the CLI's option parser and the job spec that submit
 * builds from it (sizes, durations, --env, bad input), job ids and the
 * exit code `wait` gives a finished job.
 */
#include <stdlib.h>

#include "cli/cmd.h"
#include "gp.h"
#include "unit.h"

/* Parses a NULL-terminated list of words for command name. */
static int
parse(const char *name, struct gp_cli_args *args, char **words)
{
	char err[256];
	int argc = 0;

	while (words[argc] != NULL)
		argc++;
	return gp_cli_parse(gp_cli_command_find(name), argc, words, args, err,
	    sizeof(err));
}

static int
build(char **words, struct gp_jobspec *spec, char *err, size_t len)
{
	struct gp_cli_args args;
	char perr[256];
	int argc = 0;

	while (words[argc] != NULL)
		argc++;
	if (gp_cli_parse(gp_cli_command_find("submit"), argc, words, &args,
	        perr, sizeof(perr)) != 0) {
		gp_jobspec_init(spec);
		snprintf(err, len, "parse: %.200s", perr);
		return GP_EINVAL;
	}
	return gp_cli_build_jobspec(&args, spec, err, len);
}

TEST(table_has_every_command)
{
	const char *names[] = {"submit", "ps", "show", "logs", "cancel", "wait",
	    "nodes", "whoami", "token create", "up", "down"};
	size_t i;

	for (i = 0; i < GP_ARRAY_LEN(names); i++)
		CHECK(gp_cli_command_find(names[i]) != NULL);
	CHECK(gp_cli_command_find("token") == NULL);
}

TEST(parse_flags_values_operands)
{
	char *w[] = {"ps", "--all", "--json", NULL};
	char *s[] = {"show", "--json", "42", NULL};
	char *s2[] = {"show", "42", "--json", NULL};
	char *l[] = {"logs", "-f", "7", NULL};
	struct gp_cli_args a;

	CHECK_EQ(parse("ps", &a, w), 0);
	CHECK(gp_cli_flag(&a, "all"));
	CHECK(gp_cli_flag(&a, "json"));
	CHECK_EQ(a.noperands, 0);
	CHECK_EQ(parse("show", &a, s), 0);
	CHECK_EQ(a.noperands, 1);
	CHECK_STR(a.operands[0], "42");
	CHECK(gp_cli_flag(&a, "json"));
	/* Options may follow the operand, except for submit. */
	CHECK_EQ(parse("show", &a, s2), 0);
	CHECK_STR(a.operands[0], "42");
	CHECK(gp_cli_flag(&a, "json"));
	CHECK_EQ(parse("logs", &a, l), 0);
	CHECK(gp_cli_flag(&a, "follow"));
	CHECK(!gp_cli_flag(&a, "json")); /* not an option of logs */
}

TEST(parse_errors)
{
	char *unknown[] = {"ps", "--bogus", NULL};
	char *extra[] = {"ps", "x", NULL};
	char *missing_op[] = {"show", NULL};
	char *missing_val[] = {"submit", "--gpus", NULL};
	char *flag_val[] = {"ps", "--all=1", NULL};
	char *help[] = {"show", "--help", NULL};
	struct gp_cli_args a;

	CHECK_EQ(parse("ps", &a, unknown), GP_EINVAL);
	CHECK_EQ(parse("ps", &a, extra), GP_EINVAL);
	CHECK_EQ(parse("show", &a, missing_op), GP_EINVAL);
	CHECK_EQ(parse("submit", &a, missing_val), GP_EINVAL);
	CHECK_EQ(parse("ps", &a, flag_val), GP_EINVAL);
	/* --help wins over a missing operand. */
	CHECK_EQ(parse("show", &a, help), 0);
	CHECK(a.help);
}

TEST(submit_options_and_command)
{
	char *w[] = {"submit", "--gpus", "2", "--min-gpu-mem=16G", "--mem", "512",
	    "--time", "1h30m", "--cpus", "4", "--gpu-model", "A100", "-e",
	    "EPOCHS=3", "--env", "X=a=b", "--", "python3", "-u", "train.py",
	    NULL};
	struct gp_jobspec spec;
	char err[256] = "";

	CHECK_EQ(build(w, &spec, err, sizeof(err)), 0);
	CHECK_STR(err, "");
	CHECK_EQ(spec.gpus, 2);
	CHECK_EQ(spec.min_gpu_mem_mib, 16384);
	CHECK_EQ(spec.gpu_mem_mib, 0);
	CHECK_EQ(spec.mem_mib, 512);
	CHECK_EQ(spec.time_limit_s, 5400);
	CHECK_EQ(spec.cpus, 4);
	CHECK_STR(spec.gpu_model, "A100");
	CHECK_STR(spec.name, "python3");
	CHECK_EQ(json_array_size(spec.command), 3);
	CHECK_STR(json_string_value(json_array_get(spec.command, 1)), "-u");
	CHECK_STR(json_string_value(json_object_get(spec.env, "EPOCHS")), "3");
	CHECK_STR(json_string_value(json_object_get(spec.env, "X")), "a=b");
	gp_jobspec_fini(&spec);
}

TEST(submit_without_dashdash_stops_at_command)
{
	/* The command's own options are not submit's. */
	char *w[] = {"submit", "-n", "t1", "/usr/bin/env", "--gpus", "5", NULL};
	char *slurm[] = {"submit", "-t", "1-12:00:00", "true", NULL};
	struct gp_jobspec spec;
	char err[256];

	CHECK_EQ(build(w, &spec, err, sizeof(err)), 0);
	CHECK_EQ(spec.gpus, 1);
	CHECK_STR(spec.name, "t1");
	CHECK_EQ(json_array_size(spec.command), 3);
	CHECK_STR(json_string_value(json_array_get(spec.command, 1)), "--gpus");
	gp_jobspec_fini(&spec);
	CHECK_EQ(build(slurm, &spec, err, sizeof(err)), 0);
	CHECK_EQ(spec.time_limit_s, 129600);
	CHECK_STR(spec.name, "true");
	gp_jobspec_fini(&spec);
}

TEST(submit_bad_input)
{
	char *gpus[] = {"submit", "--gpus", "65", "x", NULL};
	char *gpus_text[] = {"submit", "--gpus", "two", "x", NULL};
	char *mem[] = {"submit", "--mem", "16Q", "x", NULL};
	char *neg[] = {"submit", "--mem", "-1", "x", NULL};
	char *time[] = {"submit", "--time", "1h30", "x", NULL};
	char *env_noeq[] = {"submit", "--env", "FOO", "x", NULL};
	char *env_bad[] = {"submit", "--env", "1FOO=1", "x", NULL};
	char *env_res[] = {"submit", "--env", "GPUPOOL_X=1", "x", NULL};
	char *name[] = {"submit", "--name", "a b", "x", NULL};
	char *model0[] = {"submit", "--gpus", "0", "--gpu-model", "A", "x",
	    NULL};
	char *cpus[] = {"submit", "--cpus", "0", "x", NULL};
	char *nocmd[] = {"submit", "--gpus", "1", NULL};
	struct gp_jobspec spec;
	char err[256];

	CHECK_EQ(build(gpus, &spec, err, sizeof(err)), GP_EINVAL);
	CHECK_STR(err, "gpus: must be between 0 and 64");
	gp_jobspec_fini(&spec);
	CHECK_EQ(build(gpus_text, &spec, err, sizeof(err)), GP_EINVAL);
	gp_jobspec_fini(&spec);
	CHECK_EQ(build(mem, &spec, err, sizeof(err)), GP_EINVAL);
	gp_jobspec_fini(&spec);
	CHECK_EQ(build(neg, &spec, err, sizeof(err)), GP_EINVAL);
	CHECK_STR(err, "mem_mib: must be between 0 and 16777216");
	gp_jobspec_fini(&spec);
	CHECK_EQ(build(time, &spec, err, sizeof(err)), GP_EINVAL);
	gp_jobspec_fini(&spec);
	CHECK_EQ(build(env_noeq, &spec, err, sizeof(err)), GP_EINVAL);
	gp_jobspec_fini(&spec);
	CHECK_EQ(build(env_bad, &spec, err, sizeof(err)), GP_EINVAL);
	CHECK_STR(err, "env: invalid variable name '1FOO'");
	gp_jobspec_fini(&spec);
	CHECK_EQ(build(env_res, &spec, err, sizeof(err)), GP_EINVAL);
	CHECK_STR(err, "env: GPUPOOL_X is set by gpupool and reserved");
	gp_jobspec_fini(&spec);
	CHECK_EQ(build(name, &spec, err, sizeof(err)), GP_EINVAL);
	gp_jobspec_fini(&spec);
	CHECK_EQ(build(model0, &spec, err, sizeof(err)), GP_EINVAL);
	gp_jobspec_fini(&spec);
	CHECK_EQ(build(cpus, &spec, err, sizeof(err)), GP_EINVAL);
	CHECK_STR(err, "cpus: must be between 1 and 1024");
	gp_jobspec_fini(&spec);
	CHECK_EQ(build(nocmd, &spec, err, sizeof(err)), GP_EINVAL);
	gp_jobspec_fini(&spec);
}

TEST(submit_fractions_gangs_capability)
{
	char *half[] = {"submit", "--gpu-share", "0.5", "--gpu-mem", "8G", "x",
	    NULL};
	char *memonly[] = {"submit", "--gpu-mem", "4096", "x", NULL};
	char *gang[] = {"submit", "--nodes", "3", "--gpus-per-node", "2",
	    "--compute-capability", "8.0", "x", NULL};
	char *share2[] = {"submit", "--gpus", "2", "--gpu-share", "0.5", "x",
	    NULL};
	char *share1[] = {"submit", "--gpu-share", "1", "x", NULL};
	char *differ[] = {"submit", "--gpus", "1", "--gpus-per-node", "2", "x",
	    NULL};
	char *cap[] = {"submit", "--compute-capability", "eight", "x", NULL};
	struct gp_jobspec spec;
	char err[256];

	CHECK_EQ(build(half, &spec, err, sizeof(err)), 0);
	CHECK_EQ(spec.gpus, 1);
	CHECK_EQ(spec.gpu_milli, 500);
	CHECK_EQ(spec.gpu_mem_mib, 8192);
	CHECK(gp_jobspec_is_fraction(&spec));
	gp_jobspec_fini(&spec);
	CHECK_EQ(build(memonly, &spec, err, sizeof(err)), 0);
	CHECK_EQ(spec.gpu_milli, 0);
	CHECK_EQ(spec.gpu_mem_mib, 4096);
	CHECK(gp_jobspec_is_fraction(&spec));
	gp_jobspec_fini(&spec);
	CHECK_EQ(build(gang, &spec, err, sizeof(err)), 0);
	CHECK_EQ(spec.nodes, 3);
	CHECK_EQ(spec.gpus, 2);
	CHECK_EQ(spec.min_capability, 80);
	gp_jobspec_fini(&spec);
	CHECK_EQ(build(share2, &spec, err, sizeof(err)), GP_EINVAL);
	CHECK(strstr(err, "--gpus must be 1") != NULL);
	gp_jobspec_fini(&spec);
	CHECK_EQ(build(share1, &spec, err, sizeof(err)), GP_EINVAL);
	CHECK(strstr(err, "--gpu-share") != NULL);
	gp_jobspec_fini(&spec);
	CHECK_EQ(build(differ, &spec, err, sizeof(err)), GP_EINVAL);
	gp_jobspec_fini(&spec);
	CHECK_EQ(build(cap, &spec, err, sizeof(err)), GP_EINVAL);
	CHECK(strstr(err, "--compute-capability") != NULL);
	gp_jobspec_fini(&spec);
}

TEST(submit_interactive_expose)
{
	char *ok[] = {"submit", "--interactive", "--expose", "8888",
	    "--expose", "22", "sleep", "60", NULL};
	char *twice[] = {"submit", "--expose", "80", "--expose", "80", "x",
	    NULL};
	char *bad[] = {"submit", "--expose", "0", "x", NULL};
	char *word[] = {"submit", "--expose", "http", "x", NULL};
	struct gp_jobspec spec;
	char err[256];

	CHECK_EQ(build(ok, &spec, err, sizeof(err)), 0);
	CHECK_EQ(spec.interactive, 1);
	CHECK_EQ(spec.n_expose, 2);
	CHECK_EQ(spec.expose[0], 8888);
	CHECK_EQ(spec.expose[1], 22);
	gp_jobspec_fini(&spec);
	CHECK_EQ(build(twice, &spec, err, sizeof(err)), GP_EINVAL);
	CHECK(strstr(err, "twice") != NULL);
	gp_jobspec_fini(&spec);
	CHECK_EQ(build(bad, &spec, err, sizeof(err)), GP_EINVAL);
	CHECK(strstr(err, "--expose") != NULL);
	gp_jobspec_fini(&spec);
	CHECK_EQ(build(word, &spec, err, sizeof(err)), GP_EINVAL);
	gp_jobspec_fini(&spec);
	/* Without them: a batch job declaring nothing. */
	CHECK_EQ(build(bad + 3, &spec, err, sizeof(err)), GP_EINVAL);
	gp_jobspec_fini(&spec);
}

TEST(submit_expose_part)
{
	char *ok[] = {"submit", "--nodes", "2", "--expose", "8888",
	    "--expose", "1:8888", "x", NULL};
	char *twice[] = {"submit", "--nodes", "2", "--expose", "1:80",
	    "--expose", "1:80", "x", NULL};
	char *bad[] = {"submit", "--nodes", "2", "--expose", "1:80:2", "x",
	    NULL};
	struct gp_jobspec spec;
	char err[256];

	CHECK_EQ(build(ok, &spec, err, sizeof(err)), 0);
	CHECK_EQ(spec.n_expose, 2);
	CHECK_EQ(spec.expose_part[0], 0);
	CHECK_EQ(spec.expose_part[1], 1);
	CHECK_EQ(spec.expose[1], 8888);
	gp_jobspec_fini(&spec);
	CHECK_EQ(build(twice, &spec, err, sizeof(err)), GP_EINVAL);
	CHECK(strstr(err, "twice") != NULL);
	gp_jobspec_fini(&spec);
	CHECK_EQ(build(bad, &spec, err, sizeof(err)), GP_EINVAL);
	CHECK(strstr(err, "PART:PORT") != NULL);
	gp_jobspec_fini(&spec);
}

TEST(submit_body_decodes_on_the_server_side)
{
	/* What the CLI encodes, the coordinator's decoder accepts. */
	char *w[] = {"submit", "--time", "2:00:00", "--env", "A=1", "./run.sh",
	    "arg", NULL};
	struct gp_jobspec spec, back;
	char err[256], *text;
	json_t *body;

	CHECK_EQ(build(w, &spec, err, sizeof(err)), 0);
	CHECK_STR(spec.name, "run.sh");
	body = gp_jobspec_encode(&spec);
	text = json_dumps(body, JSON_COMPACT);
	CHECK_EQ(gp_jobspec_decode(text, strlen(text), &back, err, sizeof(err)),
	    0);
	CHECK_EQ(back.time_limit_s, 7200);
	CHECK_STR(back.name, "run.sh");
	free(text);
	json_decref(body);
	gp_jobspec_fini(&back);
	gp_jobspec_fini(&spec);
}

TEST(job_ids)
{
	int64_t id = 0;

	CHECK_EQ(gp_cli_parse_job_id("42", &id), 0);
	CHECK_EQ(id, 42);
	CHECK_EQ(gp_cli_parse_job_id("0", &id), GP_EINVAL);
	CHECK_EQ(gp_cli_parse_job_id("-3", &id), GP_EINVAL);
	CHECK_EQ(gp_cli_parse_job_id("+3", &id), GP_EINVAL);
	CHECK_EQ(gp_cli_parse_job_id("4x", &id), GP_EINVAL);
	CHECK_EQ(gp_cli_parse_job_id("", &id), GP_EINVAL);
	CHECK_EQ(gp_cli_parse_job_id("99999999999999999999999", &id),
	    GP_EINVAL);
	CHECK_EQ(id, 42);
}

static int
exit_code_of(const char *json, char *note, size_t len)
{
	json_t *job = json_loads(json, 0, NULL);
	int code = gp_cli_job_exit_code(job, note, len);

	json_decref(job);
	return code;
}

TEST(wait_exit_codes)
{
	char note[256];

	CHECK_EQ(exit_code_of("{\"id\":1,\"state\":\"succeeded\","
	                      "\"exit_code\":0,\"reason\":\"exited\"}",
	             note, sizeof(note)),
	    0);
	CHECK_STR(note, "");
	CHECK_EQ(exit_code_of("{\"id\":1,\"state\":\"failed\","
	                      "\"exit_code\":3,\"reason\":\"exited\"}",
	             note, sizeof(note)),
	    3);
	CHECK_EQ(exit_code_of("{\"id\":2,\"state\":\"failed\","
	                      "\"exit_code\":null,\"signal\":9,"
	                      "\"reason\":\"killed\"}",
	             note, sizeof(note)),
	    137);
	CHECK_STR(note, "job 2 was killed by signal 9");
	CHECK_EQ(exit_code_of("{\"id\":3,\"state\":\"cancelled\","
	                      "\"exit_code\":null,\"signal\":15,"
	                      "\"reason\":\"cancelled\"}",
	             note, sizeof(note)),
	    1);
	CHECK_STR(note, "job 3 was cancelled");
	CHECK_EQ(exit_code_of("{\"id\":4,\"state\":\"timeout\","
	                      "\"exit_code\":null,\"signal\":9}",
	             note, sizeof(note)),
	    1);
	CHECK_STR(note, "job 4 reached its time limit");
	CHECK_EQ(exit_code_of("{\"id\":5,\"state\":\"failed\","
	                      "\"exit_code\":null,\"reason\":\"start_failed\","
	                      "\"message\":\"no such file\"}",
	             note, sizeof(note)),
	    1);
	CHECK_STR(note, "job 5 could not start: no such file");
}

int
main(void)
{
	RUN(table_has_every_command);
	RUN(parse_flags_values_operands);
	RUN(parse_errors);
	RUN(submit_options_and_command);
	RUN(submit_without_dashdash_stops_at_command);
	RUN(submit_bad_input);
	RUN(submit_fractions_gangs_capability);
	RUN(submit_interactive_expose);
	RUN(submit_expose_part);
	RUN(submit_body_decodes_on_the_server_side);
	RUN(job_ids);
	RUN(wait_exit_codes);
	return unit_report();
}
