/*
 * test_cli_config.c: finding the pool: config file syntax, where the file
 * is looked for, and the environment winning over the file.
 */
#include <stdlib.h>
#include <unistd.h>

#include "cli/cmd.h"
#include "gp.h"
#include "unit.h"

static char dir[] = "/tmp/gpupool-test-cli-config.XXXXXX";

static void
clear_env(void)
{
	unsetenv("GPUPOOL_URL");
	unsetenv("GPUPOOL_TOKEN");
	unsetenv("GPUPOOL_CA");
	unsetenv("GPUPOOL_CONFIG");
	unsetenv("XDG_CONFIG_HOME");
}

static void
write_config(const char *text)
{
	char path[256];

	snprintf(path, sizeof(path), "%s/config", dir);
	CHECK_EQ(gp_write_file(path, text, strlen(text), 0600), 0);
	setenv("GPUPOOL_CONFIG", path, 1);
}

TEST(parse_syntax)
{
	struct gp_cli_config cfg;
	char err[256];

	memset(&cfg, 0, sizeof(cfg));
	CHECK_EQ(gp_cli_config_parse("# a comment\n"
	                             "\n"
	                             "  url = http://h:7070   # trailing\n"
	                             "token=\"gpt_abc\"\r\n"
	                             "ca = /etc/ca.pem\n"
	                             "admin_token_file = /x/admin.token",
	             &cfg, err, sizeof(err)),
	    0);
	CHECK_STR(cfg.url, "http://h:7070");
	CHECK_STR(cfg.token, "gpt_abc");
	CHECK_STR(cfg.ca, "/etc/ca.pem");
	CHECK_STR(cfg.admin_token_file, "/x/admin.token");
	CHECK_EQ(gp_cli_config_parse("nonsense\n", &cfg, err, sizeof(err)),
	    GP_EINVAL);
	CHECK_STR(err, "line 1: expected key = value");
	CHECK_EQ(gp_cli_config_parse("url = a\ntokn = b\n", &cfg, err,
	             sizeof(err)),
	    GP_EINVAL);
	CHECK(strstr(err, "line 2: unknown key 'tokn'") != NULL);
}

TEST(path_precedence)
{
	char path[256];

	clear_env();
	setenv("HOME", "/home/h", 1);
	CHECK_EQ(gp_cli_config_path(path, sizeof(path)), 0);
	CHECK_STR(path, "/home/h/.config/gpupool/config");
	setenv("XDG_CONFIG_HOME", "/xdg", 1);
	CHECK_EQ(gp_cli_config_path(path, sizeof(path)), 0);
	CHECK_STR(path, "/xdg/gpupool/config");
	setenv("GPUPOOL_CONFIG", "/etc/my.conf", 1);
	CHECK_EQ(gp_cli_config_path(path, sizeof(path)), 0);
	CHECK_STR(path, "/etc/my.conf");
	clear_env();
}

TEST(env_overrides_file)
{
	struct gp_cli_config cfg;
	char err[512];

	clear_env();
	write_config("url = http://file:1\ntoken = gpt_file\nca = /file.pem\n");
	CHECK_EQ(gp_cli_config_load(&cfg, err, sizeof(err)), 0);
	CHECK_STR(cfg.url, "http://file:1");
	CHECK_STR(cfg.token, "gpt_file");
	CHECK_STR(cfg.ca, "/file.pem");
	setenv("GPUPOOL_URL", "http://env:2", 1);
	setenv("GPUPOOL_TOKEN", "gpt_env", 1);
	CHECK_EQ(gp_cli_config_load(&cfg, err, sizeof(err)), 0);
	CHECK_STR(cfg.url, "http://env:2");
	CHECK_STR(cfg.token, "gpt_env");
	CHECK_STR(cfg.ca, "/file.pem");
	setenv("GPUPOOL_CA", "/env.pem", 1);
	CHECK_EQ(gp_cli_config_load(&cfg, err, sizeof(err)), 0);
	CHECK_STR(cfg.ca, "/env.pem");
	/* An empty variable does not override. */
	setenv("GPUPOOL_TOKEN", "", 1);
	CHECK_EQ(gp_cli_config_load(&cfg, err, sizeof(err)), 0);
	CHECK_STR(cfg.token, "gpt_file");
	clear_env();
}

TEST(missing_url_or_token)
{
	struct gp_cli_config cfg;
	char err[512];

	clear_env();
	write_config("url = http://file:1\n");
	CHECK_EQ(gp_cli_config_load(&cfg, err, sizeof(err)), GP_ENOENT);
	CHECK(strstr(err, "GPUPOOL_URL") != NULL);
	CHECK(strstr(err, "GPUPOOL_TOKEN") != NULL);
	CHECK(strstr(err, "/config") != NULL);
	CHECK(strstr(err, "no token configured") != NULL);
	setenv("GPUPOOL_CONFIG", "/nonexistent/gpupool/config", 1);
	CHECK_EQ(gp_cli_config_load(&cfg, err, sizeof(err)), GP_ENOENT);
	CHECK(strstr(err, "no coordinator URL or token") != NULL);
	setenv("GPUPOOL_URL", "http://env:2", 1);
	setenv("GPUPOOL_TOKEN", "gpt_env", 1);
	CHECK_EQ(gp_cli_config_load(&cfg, err, sizeof(err)), 0);
	write_config("garbage\n");
	CHECK_EQ(gp_cli_config_load(&cfg, err, sizeof(err)), GP_EINVAL);
	clear_env();
}

TEST(write_then_load)
{
	struct gp_cli_config cfg;
	char path[256], err[512];

	clear_env();
	snprintf(path, sizeof(path), "%s/sub/dir/config", dir);
	CHECK_EQ(gp_cli_config_write(path, "http://127.0.0.1:7070", "gpt_u",
	             "/d/coord/admin.token", "/d/agent/agent.sock"),
	    0);
	CHECK_EQ(access(path, R_OK), 0);
	setenv("GPUPOOL_CONFIG", path, 1);
	CHECK_EQ(gp_cli_config_load(&cfg, err, sizeof(err)), 0);
	CHECK_STR(cfg.url, "http://127.0.0.1:7070");
	CHECK_STR(cfg.token, "gpt_u");
	CHECK_STR(cfg.admin_token_file, "/d/coord/admin.token");
	CHECK_STR(cfg.agent_socket, "/d/agent/agent.sock");
	clear_env();
}

int
main(void)
{
	if (mkdtemp(dir) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	RUN(parse_syntax);
	RUN(path_precedence);
	RUN(env_overrides_file);
	RUN(missing_url_or_token);
	RUN(write_then_load);
	gp_remove_tree(dir);
	return unit_report();
}
