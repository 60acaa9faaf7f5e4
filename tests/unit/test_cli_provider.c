/*
 * test_cli_provider.c: `gpupool provider ...` (src/cli/provider.c): where
 * the socket is, GPU operands, the renderings of the agent's answers
 * (full and with fields missing), policy check, and whole commands run
 * through gp_cli_main against a stub agent on a real control socket.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/control.h"
#include "cli/cli.h"
#include "cli/cmd.h"
#include "gp.h"
#include "unit.h"

static json_t *
load(const char *text)
{
	json_error_t jerr;
	json_t *j = json_loads(text, 0, &jerr);

	if (j == NULL)
		fprintf(stderr, "bad test JSON: %s\n", jerr.text);
	return j;
}

/* Renders text with fn; returns the output (static buffer). */
static const char *
render(int (*fn)(json_t *, struct gp_buf *), const char *text, int *rc)
{
	static char result[8192];
	struct gp_buf out = {0};
	json_t *j = load(text);

	*rc = fn(j, &out);
	json_decref(j);
	gp_strlcpy(result, out.data != NULL ? out.data : "", sizeof(result));
	gp_buf_free(&out);
	return result;
}

#define CONTAINS(hay, needle)                                               \
	do {                                                                \
		if (strstr((hay), (needle)) == NULL) {                      \
			fprintf(stderr, "%s:%d: no \"%s\" in:\n%s\n",       \
			    __FILE__, __LINE__, (needle), (hay));           \
			unit_failed_checks++;                               \
		}                                                           \
	} while (0)

TEST(socket_path)
{
	struct gp_cli_config cfg;
	char path[256];

	memset(&cfg, 0, sizeof(cfg));
	unsetenv("GPUPOOL_AGENT_SOCKET");
	CHECK_EQ(gp_cli_provider_socket("/a.sock", &cfg, path, sizeof(path)),
	    0);
	CHECK_STR(path, "/a.sock");
	setenv("GPUPOOL_AGENT_SOCKET", "/env.sock", 1);
	CHECK_EQ(gp_cli_provider_socket(NULL, &cfg, path, sizeof(path)), 0);
	CHECK_STR(path, "/env.sock");
	CHECK_EQ(gp_cli_provider_socket("/a.sock", &cfg, path, sizeof(path)),
	    0);
	CHECK_STR(path, "/a.sock");
	unsetenv("GPUPOOL_AGENT_SOCKET");
	gp_strlcpy(cfg.agent_socket, "/cfg.sock", sizeof(cfg.agent_socket));
	CHECK_EQ(gp_cli_provider_socket(NULL, &cfg, path, sizeof(path)), 0);
	CHECK_STR(path, "/cfg.sock");
	CHECK_EQ(gp_cli_provider_socket(NULL, NULL, path, sizeof(path)), 0);
	if (geteuid() == 0)
		CHECK_STR(path, "/var/lib/gpupool/agent/agent.sock");
	CHECK_EQ(gp_cli_provider_socket(NULL, NULL, path, 8), GP_EINVAL);
	/* The config file's key. */
	memset(&cfg, 0, sizeof(cfg));
	CHECK_EQ(gp_cli_config_parse("agent_socket = /x/agent.sock\n", &cfg,
	    path, sizeof(path)), 0);
	CHECK_STR(cfg.agent_socket, "/x/agent.sock");
}

TEST(gpu_operands)
{
	char *ok[] = {"0", "3", "3", "63"}, *bad1[] = {"1", "64"},
	     *bad2[] = {"x"}, err[128];
	json_t *g;
	char *text;

	g = gp_cli_provider_gpus(ok, 4, err, sizeof(err));
	text = json_dumps(g, JSON_COMPACT);
	CHECK_STR(text, "[0,3,63]");
	free(text);
	json_decref(g);
	CHECK(gp_cli_provider_gpus(bad1, 2, err, sizeof(err)) == NULL);
	CHECK_STR(err, "'64' is not a GPU index (0..63)");
	CHECK(gp_cli_provider_gpus(bad2, 1, err, sizeof(err)) == NULL);
}

/* Parses words for command name. */
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

TEST(arguments)
{
	char *r[] = {"reclaim", "--now", "0", "1", "--socket", "/s", NULL};
	char *r2[] = {"reclaim", NULL};
	char *st[] = {"status", "--json", NULL};
	char *st2[] = {"status", "0", NULL};
	char *ch[] = {"check", NULL};
	char *p[] = {"pause", "--now", NULL};
	struct gp_cli_args a;
	const char *names[] = {"provider status", "provider pause",
	    "provider resume", "provider reclaim", "provider leave",
	    "provider policy show", "provider policy check"};
	size_t i;

	for (i = 0; i < GP_ARRAY_LEN(names); i++)
		CHECK(gp_cli_command_find(names[i]) != NULL);
	CHECK_EQ(parse("provider reclaim", &a, r), 0);
	CHECK(gp_cli_flag(&a, "now"));
	CHECK_STR(gp_cli_value(&a, "socket"), "/s");
	CHECK_EQ(a.noperands, 2);
	CHECK_EQ(parse("provider reclaim", &a, r2), 0);
	CHECK_EQ(a.noperands, 0);
	CHECK_EQ(parse("provider status", &a, st), 0);
	CHECK(gp_cli_flag(&a, "json"));
	CHECK_EQ(parse("provider status", &a, st2), GP_EINVAL);
	CHECK_EQ(parse("provider policy check", &a, ch), GP_EINVAL);
	CHECK_EQ(parse("provider pause", &a, p), GP_EINVAL);
}

static const char *status_json =
    "{\"ok\":true,\"node\":\"n1\",\"node_id\":3,\"connected\":true,"
    "\"paused\":false,\"leaving\":false,\"window_open\":true,"
    "\"window_next_change_s\":3600,\"policy_file\":\"/etc/gpupool/policy\","
    "\"policy_error\":null,\"policy\":{\"gpus\":[0,1],\"cpus\":8,"
    "\"memory_mib\":32768,\"max_job_time_s\":43200,"
    "\"checkpoint_grace_s\":120,\"windows\":[\"Mon-Fri 19:00-08:00\"],"
    "\"owner_presence\":\"reclaim\"},\"gpus\":[{\"index\":0,\"uuid\":\"GPU-x\","
    "\"model\":\"A100\",\"state\":\"running\",\"lent\":true,\"job\":{\"id\":4,"
    "\"attempt\":2,\"user\":\"alice\",\"name\":\"train\",\"running_s\":123,"
    "\"checkpoint_version\":3,\"checkpoint_age_s\":40},"
    "\"owner_processes\":[]},{\"index\":1,\"model\":\"A100\","
    "\"state\":\"owner_present\",\"lent\":true,\"job\":null,"
    "\"owner_processes\":[1234,5678]}]}";

TEST(render_status)
{
	const char *out;
	int rc;

	out = render(gp_cli_render_provider_status, status_json, &rc);
	CHECK_EQ(rc, 0);
	CONTAINS(out, "node:     n1 (id 3), connected to the coordinator\n");
	CONTAINS(out, "state:    lending\n");
	CONTAINS(out, "window:   open, closes in 1h0m\n");
	CONTAINS(out, "policy:   /etc/gpupool/policy\n");
	CONTAINS(out, "  gpus:             0,1\n");
	CONTAINS(out, "  windows:          Mon-Fri 19:00-08:00\n");
	CONTAINS(out, "  memory:           32G\n");
	CONTAINS(out, "  checkpoint-grace: 2m0s\n");
	CONTAINS(out, "GPU  STATE          MODEL  JOB            USER   NAME   "
	    "RUNNING  CHECKPOINT\n");
	CONTAINS(out, "  0  running        A100   4 (attempt 2)  alice  train  "
	    "   2:03  v3, 40s ago\n");
	CONTAINS(out, "  1  owner_present  A100   -");
	CONTAINS(out, "GPU 1: used by the owner's processes 1234,5678\n");
	/* Paused, disconnected, a bad policy file. */
	out = render(gp_cli_render_provider_status, "{\"node\":\"n1\","
	    "\"connected\":false,\"paused\":true,\"window_open\":false,"
	    "\"window_next_change_s\":-1,\"policy_file\":\"/p\","
	    "\"policy_error\":\"line 4: memory: '12Q' is not a size\","
	    "\"gpus\":[]}", &rc);
	CHECK_EQ(rc, 0);
	CONTAINS(out, "NOT connected");
	CONTAINS(out, "state:    paused");
	CONTAINS(out, "window:   closed\n");
	CONTAINS(out, "error: line 4: memory: '12Q' is not a size");
	CONTAINS(out, "no GPU\n");
	/* Almost nothing: still something readable. */
	out = render(gp_cli_render_provider_status, "{}", &rc);
	CHECK_EQ(rc, 0);
	CHECK_STR(out, "node:     ?\n");
	out = render(gp_cli_render_provider_status, "{\"gpus\":[{},{\"job\":"
	    "{}}],\"policy\":{\"gpus\":\"all\",\"windows\":[],\"cpus\":null}}",
	    &rc);
	CHECK_EQ(rc, 0);
	CONTAINS(out, "  gpus:             all\n");
	CONTAINS(out, "  windows:          always (no window)\n");
	CONTAINS(out, "  cpus:             the agent's\n");
	out = render(gp_cli_render_provider_status, "[]", &rc);
	CHECK_EQ(rc, GP_EPROTO);
}

TEST(render_reclaim_and_leave)
{
	const char *out;
	int rc;

	out = render(gp_cli_render_provider_reclaim, "{\"elapsed_ms\":230,"
	    "\"gpus\":[{\"index\":0,\"freed_ms\":210,\"job\":{\"id\":4,"
	    "\"attempt\":2,\"outcome\":\"checkpointed\","
	    "\"checkpoint_version\":3}},{\"index\":1,\"freed_ms\":0,\"job\":"
	    "null},{\"index\":2,\"freed_ms\":5,\"job\":{\"id\":5,\"outcome\":"
	    "\"killed\",\"checkpoint_version\":2}},{\"index\":3,\"freed_ms\":"
	    "1500,\"job\":{\"id\":6,\"outcome\":\"exited\"}},{\"index\":4,"
	    "\"job\":{\"id\":7,\"outcome\":\"killed\"}}]}", &rc);
	CHECK_EQ(rc, 0);
	CHECK_STR(out,
	    "GPU 0: free after 0.21 s (job 4 checkpointed, version 3)\n"
	    "GPU 1: free after 0.00 s (no job)\n"
	    "GPU 2: free after 0.01 s (job 5 killed; it resumes from its last "
	    "uploaded checkpoint)\n"
	    "GPU 3: free after 1.50 s (job 6 exited)\n"
	    "GPU 4: free (job 7 killed; no checkpoint: it restarts from the "
	    "beginning)\n"
	    "done in 0.23 s\n");
	out = render(gp_cli_render_provider_reclaim, "{\"gpus\":[]}", &rc);
	CHECK_STR(out, "no GPU to reclaim\n");
	out = render(gp_cli_render_provider_leave, "{\"elapsed_ms\":1000,"
	    "\"jobs\":[{\"index\":0,\"freed_ms\":900,\"job\":{\"id\":4,"
	    "\"outcome\":\"none\"}}],\"unregistered\":true}", &rc);
	CHECK_EQ(rc, 0);
	CHECK_STR(out, "GPU 0: free after 0.90 s (no job)\n"
	    "left the pool: the node is unregistered\ndone in 1.00 s\n");
	out = render(gp_cli_render_provider_leave, "{\"unregistered\":false}",
	    &rc);
	CONTAINS(out, "not told");
}

TEST(render_pause_and_policy)
{
	const char *out;
	int rc;

	out = render(gp_cli_render_provider_pause,
	    "{\"paused\":true,\"lent\":[0,1]}", &rc);
	CHECK_STR(out, "paused: no new jobs; lent GPUs: 0,1\n");
	out = render(gp_cli_render_provider_pause,
	    "{\"paused\":false,\"lent\":[]}", &rc);
	CHECK_STR(out, "lending; lent GPUs: none\n");
	out = render(gp_cli_render_provider_pause, "{}", &rc);
	CHECK_STR(out, "done\n");
	out = render(gp_cli_render_provider_policy, "{\"file\":null,"
	    "\"error\":null,\"policy\":{\"gpus\":\"all\",\"windows\":[\"daily "
	    "22:00-06:00\",\"Sat,Sun 00:00-24:00\"],\"max_job_time_s\":null},"
	    "\"window_open\":false,\"window_next_change_s\":90}", &rc);
	CHECK_EQ(rc, 0);
	CONTAINS(out, "policy:   none (defaults: every GPU, always)\n");
	CONTAINS(out, "  windows:          daily 22:00-06:00; Sat,Sun "
	    "00:00-24:00\n");
	CONTAINS(out, "  max-job-time:     any\n");
	CONTAINS(out, "window:   closed, opens in 1m30s\n");
}

/* Runs gpupool with words; OUT: stdout and stderr text. */
static int
run_cli(char **words, char *out, size_t outlen, char *err, size_t errlen)
{
	char opath[] = "/var/tmp/gpupool-cli-out.XXXXXX";
	char epath[] = "/var/tmp/gpupool-cli-err.XXXXXX";
	int ofd = mkstemp(opath), efd = mkstemp(epath), so, se, rc, argc = 0;
	ssize_t n;

	while (words[argc] != NULL)
		argc++;
	fflush(stdout);
	fflush(stderr);
	so = dup(1);
	se = dup(2);
	dup2(ofd, 1);
	dup2(efd, 2);
	rc = gp_cli_main(argc, words);
	fflush(stdout);
	fflush(stderr);
	dup2(so, 1);
	dup2(se, 2);
	close(so);
	close(se);
	n = pread(ofd, out, outlen - 1, 0);
	out[n > 0 ? n : 0] = '\0';
	n = pread(efd, err, errlen - 1, 0);
	err[n > 0 ? n : 0] = '\0';
	close(ofd);
	close(efd);
	unlink(opath);
	unlink(epath);
	return rc;
}

static json_t *
stub(void *arg, const struct gp_control_request *req, char *err,
    size_t errlen)
{
	(void)arg;
	if (req->cmd == GP_CONTROL_STATUS)
		return load(status_json);
	if (req->cmd == GP_CONTROL_RECLAIM && req->now && req->gpus == 2)
		return load("{\"elapsed_ms\":5,\"gpus\":[{\"index\":1,"
		    "\"freed_ms\":4,\"job\":null}]}");
	snprintf(err, errlen, "not in this test");
	return NULL;
}

TEST(commands_through_a_socket)
{
	struct gp_control_ops ops = {NULL, stub};
	struct gp_control *c;
	char dir[] = "/var/tmp/gpupool-clip.XXXXXX", path[128], out[8192],
	     err[1024];
	char *status[] = {"gpupool", "provider", "status", "--socket", path,
	    NULL};
	char *json[] = {"gpupool", "provider", "status", "--json", NULL};
	char *reclaim[] = {"gpupool", "provider", "reclaim", "--now", "1",
	    NULL};
	char *pause[] = {"gpupool", "provider", "pause", NULL};
	char *badgpu[] = {"gpupool", "provider", "resume", "x", NULL};

	CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof(path), "%s/agent.sock", dir);
	setenv("GPUPOOL_CONFIG", "/nonexistent/gpupool/config", 1);
	unsetenv("GPUPOOL_AGENT_SOCKET");
	/* No agent yet. */
	CHECK_EQ(run_cli(status, out, sizeof(out), err, sizeof(err)), 1);
	CONTAINS(err, "no agent listening on ");
	c = gp_control_start(path, getuid(), &ops, err, sizeof(err));
	CHECK(c != NULL);
	CHECK_EQ(run_cli(status, out, sizeof(out), err, sizeof(err)), 0);
	CONTAINS(out, "node:     n1 (id 3)");
	setenv("GPUPOOL_AGENT_SOCKET", path, 1);
	CHECK_EQ(run_cli(json, out, sizeof(out), err, sizeof(err)), 0);
	CONTAINS(out, "\"node\": \"n1\"");
	CHECK_EQ(run_cli(reclaim, out, sizeof(out), err, sizeof(err)), 0);
	CHECK_STR(out, "GPU 1: free after 0.00 s (no job)\ndone in 0.01 s\n");
	CHECK_EQ(run_cli(pause, out, sizeof(out), err, sizeof(err)), 1);
	CONTAINS(err, "gpupool: not in this test\n");
	CHECK_EQ(run_cli(badgpu, out, sizeof(out), err, sizeof(err)), 2);
	CONTAINS(err, "'x' is not a GPU index");
	gp_control_stop(c);
	unsetenv("GPUPOOL_AGENT_SOCKET");
	rmdir(dir);
}

TEST(policy_check)
{
	char path[] = "/var/tmp/gpupool-policy.XXXXXX", out[1024], err[1024];
	char want[256];
	char *words[] = {"gpupool", "provider", "policy", "check", path, NULL};
	int fd;

	fd = mkstemp(path);
	CHECK(write(fd, "gpus = 0\nwindow = daily 20:00-06:00\n", 36) == 36);
	close(fd);
	CHECK_EQ(run_cli(words, out, sizeof(out), err, sizeof(err)), 0);
	snprintf(want, sizeof(want), "%s: ok\ngpus 0, 1 window, "
	    "checkpoint-grace 30s, owner-presence reclaim\n", path);
	CHECK_STR(out, want);
	fd = open(path, O_WRONLY | O_TRUNC);
	CHECK(write(fd, "cpus = 2\n\n\nmemory = 12Q\n", 24) == 24);
	close(fd);
	CHECK_EQ(run_cli(words, out, sizeof(out), err, sizeof(err)), 1);
	snprintf(want, sizeof(want), "%s:4: memory: '12Q' is not a size "
	    "(\"32G\", \"512M\")\n", path);
	CHECK_STR(err, want);
	unlink(path);
	CHECK_EQ(run_cli(words, out, sizeof(out), err, sizeof(err)), 1);
	snprintf(want, sizeof(want), "%s: cannot read it: no such file\n",
	    path);
	CHECK_STR(err, want);
}

int
main(void)
{
	RUN(socket_path);
	RUN(gpu_operands);
	RUN(arguments);
	RUN(render_status);
	RUN(render_reclaim_and_leave);
	RUN(render_pause_and_policy);
	RUN(commands_through_a_socket);
	RUN(policy_check);
	return unit_report();
}
