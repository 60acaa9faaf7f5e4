/*
 * cmd.h: the CLI's insides, shared by its files and by the unit tests
 * (tests/unit/test_cli_*.c). Prototypes are grouped by the file that
 * defines them. Pure parts (parsing, formatting) take no network and no
 * global state beyond the environment, so they can be tested alone.
 */
#ifndef GP_CLI_CMD_H
#define GP_CLI_CMD_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "http_client.h"
#include "jobspec.h"
#include "util.h"

/* Exit codes. */
#define GP_CLI_EXIT_OK    0
#define GP_CLI_EXIT_FAIL  1
#define GP_CLI_EXIT_USAGE 2

/* One option of a command; a NULL name ends a table. */
struct gp_cli_option {
	const char *name;    /* long name, without the dashes */
	char short_name;     /* 0 when none */
	const char *metavar; /* NULL for a flag, else its argument */
	const char *help;
};

struct gp_cli_args;

/* One command; the table in main.c drives dispatch and --help. */
struct gp_cli_command {
	const char *name;     /* "submit", or "token create" */
	const char *operands; /* usage after the options: "JOB" */
	const char *summary;  /* one line for the global help */
	const struct gp_cli_option *options;
	int min_operands, max_operands; /* max -1: any number */
	/* 1: options end at the first operand (submit's command). */
	int stop_at_operand;
	const char *details; /* more text for --help, or NULL */
	int (*run)(const struct gp_cli_args *args);
};

#define GP_CLI_SEEN_MAX 64

/* What the parser found on the command line. Points into argv. */
struct gp_cli_args {
	const struct gp_cli_command *cmd;
	struct {
		int option;        /* index in cmd->options */
		const char *value; /* NULL for a flag */
	} seen[GP_CLI_SEEN_MAX];
	int nseen;
	char **operands;
	int noperands;
	int help; /* --help or -h was given */
};

/* main.c */
/* The command table (for shell completion). OUT: *n entries. */
const struct gp_cli_command *gp_cli_commands(size_t *n);
/* The command named name ("submit", "token create"), or NULL. */
const struct gp_cli_command *gp_cli_command_find(const char *name);
/*
 * Parses argv (argv[0] is the command's last word) for cmd. OUT: *args
 * (operands point into argv, which this call may reorder: operands are
 * moved after the options), err. Returns 0 or GP_EINVAL (a usage error,
 * err says why).
 */
int gp_cli_parse(const struct gp_cli_command *cmd, int argc, char **argv,
    struct gp_cli_args *args, char *err, size_t errlen);
/* 1 when the flag option name was given. */
int gp_cli_flag(const struct gp_cli_args *args, const char *name);
/* The value of the last option name given, or NULL. */
const char *gp_cli_value(const struct gp_cli_args *args, const char *name);
/* Writes the --help text of cmd. */
void gp_cli_usage(const struct gp_cli_command *cmd, FILE *out);
/* Prints "gpupool: <message>" on stderr. */
void gp_cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints a usage error and the usage line; returns GP_CLI_EXIT_USAGE. */
int gp_cli_usage_error(const struct gp_cli_args *args, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* config.c */
struct gp_cli_config {
	char url[1024];
	char token[256];
	char ca[1024];
	char admin_token_file[1024]; /* written by `gpupool up` */
	char agent_socket[1024];     /* `gpupool provider`'s agent */
	char path[1024];             /* the config file looked at */
};
/* The config file's path: $GPUPOOL_CONFIG, $XDG_CONFIG_HOME/..., ~/... */
int gp_cli_config_path(char *out, size_t len);
/*
 * Parses config text ("key = value" lines, # comments) into cfg, keeping
 * what cfg already holds for keys absent from text. Returns 0 or
 * GP_EINVAL with err naming the line.
 */
int gp_cli_config_parse(const char *text, struct gp_cli_config *cfg, char *err,
    size_t errlen);
/*
 * Finds the pool: the config file, then GPUPOOL_URL, GPUPOOL_TOKEN and
 * GPUPOOL_CA over it. Returns 0, or GP_ENOENT (no URL or token) or
 * GP_EINVAL (a bad file) with err saying what to do.
 */
int gp_cli_config_load(struct gp_cli_config *cfg, char *err, size_t errlen);
/*
 * Writes a config file (mode 0600) with url, token, and admin_token_file
 * and agent_socket when not NULL.
 */
int gp_cli_config_write(const char *path, const char *url, const char *token,
    const char *admin_token_file, const char *agent_socket);

/* A connection to the coordinator. */
struct gp_cli_conn {
	struct gp_cli_config cfg;
	struct gp_http_client *http;
};
/*
 * Loads the config and opens a client. token overrides the configured
 * token when not NULL. Prints the error and returns non-zero (an exit
 * code) on failure.
 */
int gp_cli_connect(struct gp_cli_conn *conn, const char *token);
void gp_cli_disconnect(struct gp_cli_conn *conn);
/*
 * One JSON call. body may be NULL. OUT: *reply (caller decrefs) on
 * success. Prints the error ("cannot reach", or the server's text) and
 * returns an exit code on failure. OUT: *status, when not NULL, the HTTP
 * status (0 when none came).
 */
int gp_cli_call(struct gp_cli_conn *conn, const char *method, const char *path,
    json_t *body, long timeout_ms, json_t **reply, long *status);
/* Prints the error for a failed request (transport or HTTP). */
void gp_cli_report_http(const struct gp_cli_conn *conn, int rc,
    const struct gp_http_response *resp);

/* output.c */
/* An aligned text table. */
struct gp_table {
	int ncols;
	int nrows;    /* rows, including the header */
	char **cells; /* nrows * ncols, malloc'd strings */
	int *right;   /* per column: 1 to align right */
};
int gp_table_init(struct gp_table *t, int ncols, const char *const *header);
/* Adds a row of ncols cells (NULL is shown as "-"). */
int gp_table_add(struct gp_table *t, const char *const *cells);
/* Renders: columns separated by two spaces, no trailing blanks. */
int gp_table_render(const struct gp_table *t, struct gp_buf *out);
void gp_table_fini(struct gp_table *t);
/* "42s", "5:03", "1:02:03", "2-03:04:05": elapsed time, as ps shows it. */
void gp_cli_format_elapsed(int64_t ms, char *out, size_t len);
/* MiB as "512M", "16G", "1.5T". */
void gp_cli_format_mib(int64_t mib, char *out, size_t len);
/* Prints JSON (pretty, sorted as received) and a newline on stdout. */
int gp_cli_print_json(json_t *value);
/*
 * A listing command's answer: printed as JSON with --json, else rendered
 * by render as a table on stdout. Takes reply (released). Returns 0, or
 * GP_CLI_EXIT_FAIL when render finds the answer malformed (said).
 */
int gp_cli_show_list(const struct gp_cli_args *args, json_t *reply,
    int (*render)(json_t *reply, struct gp_buf *out));
/*
 * A listing command whole: GET path from the coordinator, its answer
 * shown by gp_cli_show_list. Returns as that, or the call's error.
 */
int gp_cli_get_list(const struct gp_cli_args *args, const char *path,
    int (*render)(json_t *reply, struct gp_buf *out));
/* A string field, or NULL when absent or null. */
const char *gp_cli_json_str(json_t *obj, const char *key);

/* jobs.c */
/* A job id: a positive decimal integer. Returns 0 or GP_EINVAL. */
int gp_cli_parse_job_id(const char *text, int64_t *id);
/*
 * Fills spec from submit's parsed args (options and the command).
 * OUT: spec (initialised here; release with gp_jobspec_fini whatever the
 * result), err. Returns 0 or GP_EINVAL.
 */
int gp_cli_build_jobspec(const struct gp_cli_args *args,
    struct gp_jobspec *spec, char *err, size_t errlen);
/*
 * The exit code for a finished job: its exit code, 128+signal, or 1.
 * OUT: note (empty when nothing to say): why it ended, for stderr.
 */
int gp_cli_job_exit_code(json_t *job, char *note, size_t len);
/*
 * Long-polls until job id has finished (`gpupool wait`'s loop, through a
 * coordinator restart). OUT: *job, the finished job (the caller's
 * json_decref). Returns 0, or GP_CLI_EXIT_FAIL with the error printed.
 */
int gp_cli_job_await(struct gp_cli_conn *conn, int64_t id, json_t **job);
/* A job's elapsed time in ms at now_ms (-1 when it has not started). */
int64_t gp_cli_job_elapsed(json_t *job, int64_t now_ms);
/* Renders the `ps` table for a {"jobs": [...]} reply. */
int gp_cli_render_jobs(json_t *reply, int64_t now_ms, struct gp_buf *out);
/*
 * Renders `gpupool queue` for a GET /v1/queue reply: the queued jobs in
 * the scheduler's order with why each waits, then the head's expected
 * start. Returns 0, GP_EPROTO (not such a reply) or GP_ENOMEM.
 */
int gp_cli_render_queue(json_t *reply, struct gp_buf *out);
int gp_cli_cmd_queue(const struct gp_cli_args *args);
int gp_cli_cmd_submit(const struct gp_cli_args *args);
int gp_cli_cmd_ps(const struct gp_cli_args *args);
int gp_cli_cmd_show(const struct gp_cli_args *args);
int gp_cli_cmd_logs(const struct gp_cli_args *args);
int gp_cli_cmd_cancel(const struct gp_cli_args *args);
int gp_cli_cmd_checkpoint_now(const struct gp_cli_args *args);
int gp_cli_cmd_wait(const struct gp_cli_args *args);

/* interactive.c: streams into running jobs (docs/interactive.md) */
int gp_cli_cmd_shell(const struct gp_cli_args *args);
int gp_cli_cmd_exec(const struct gp_cli_args *args);
int gp_cli_cmd_port_forward(const struct gp_cli_args *args);
/* jupyter.c */
int gp_cli_cmd_jupyter(const struct gp_cli_args *args);
int gp_cli_cmd_connect(const struct gp_cli_args *args);
int gp_cli_cmd_ssh_config(const struct gp_cli_args *args);

/* nodes.c */
/* Renders the `nodes` table for a {"nodes": [...]} reply. */
int gp_cli_render_nodes(json_t *reply, struct gp_buf *out);
int gp_cli_cmd_nodes(const struct gp_cli_args *args);
int gp_cli_cmd_whoami(const struct gp_cli_args *args);

/* token.c */
int gp_cli_cmd_token_create(const struct gp_cli_args *args);
/*
 * gp_cli_connect with the token in file (--token-file) when given; for
 * admin calls (admin 1) then GPUPOOL_TOKEN, else the config's
 * admin_token_file, else its token. Returns 0 or an exit code (printed).
 */
int gp_cli_connect_token_file(struct gp_cli_conn *conn, const char *file,
    int admin);

/* acct.c: groups, prices, budgets, usage and the ledger */
/*
 * --since/--until: a duration back from now_ms ("7d", "12h"), a date
 * ("2026-01-31", midnight UTC) or a time ("2026-01-31T12:00:00Z", with or
 * without milliseconds). OUT: *ms. Returns 0 or GP_EINVAL.
 */
int gp_cli_parse_since(const char *text, int64_t now_ms, int64_t *ms);
/* GPU time (share-weighted ms) as "1:02:03" (hours may exceed 24). */
void gp_cli_format_gpu_time(int64_t gpu_ms, char *out, size_t len);
/* Renderings of the coordinator's answers (docs/accounting.md). */
int gp_cli_render_usage(json_t *reply, struct gp_buf *out);
int gp_cli_render_ledger(json_t *reply, struct gp_buf *out);
int gp_cli_render_groups(json_t *reply, struct gp_buf *out);
int gp_cli_render_prices(json_t *reply, struct gp_buf *out);
int gp_cli_render_budgets(json_t *reply, struct gp_buf *out);
int gp_cli_cmd_group_create(const struct gp_cli_args *args);
int gp_cli_cmd_group_ls(const struct gp_cli_args *args);
int gp_cli_cmd_group_set(const struct gp_cli_args *args);
int gp_cli_cmd_group_add(const struct gp_cli_args *args);
int gp_cli_cmd_group_remove(const struct gp_cli_args *args);
int gp_cli_cmd_group_move(const struct gp_cli_args *args);
int gp_cli_cmd_price_set(const struct gp_cli_args *args);
int gp_cli_cmd_price_rm(const struct gp_cli_args *args);
int gp_cli_cmd_price_ls(const struct gp_cli_args *args);
int gp_cli_cmd_budget_set(const struct gp_cli_args *args);
int gp_cli_cmd_budget_rm(const struct gp_cli_args *args);
int gp_cli_cmd_budget_ls(const struct gp_cli_args *args);
int gp_cli_cmd_usage(const struct gp_cli_args *args);
int gp_cli_cmd_ledger(const struct gp_cli_args *args);
int gp_cli_cmd_token_ls(const struct gp_cli_args *args);
int gp_cli_cmd_token_revoke(const struct gp_cli_args *args);
/* Renders the `token ls` table for a {"tokens": [...]} reply. */
int gp_cli_render_tokens(json_t *reply, struct gp_buf *out);

/* provider.c */
/*
 * The agent's control socket: opt (--socket) when not NULL, else
 * $GPUPOOL_AGENT_SOCKET, else the config's agent_socket (cfg may be
 * NULL), else the agent's default (/var/lib/gpupool/agent/agent.sock for
 * root, $XDG_STATE_HOME/gpupool/agent/agent.sock or
 * ~/.local/state/gpupool/agent/agent.sock). Returns 0 or GP_EINVAL.
 */
int gp_cli_provider_socket(const char *opt, const struct gp_cli_config *cfg,
    char *out, size_t len);
/* GPU operands ("0", "3") as a JSON array. NULL with err on a bad one. */
json_t *gp_cli_provider_gpus(char **operands, int n, char *err,
    size_t errlen);
/* Human renderings of the agent's answers (docs/provider.md). */
int gp_cli_render_provider_status(json_t *answer, struct gp_buf *out);
int gp_cli_render_provider_reclaim(json_t *answer, struct gp_buf *out);
int gp_cli_render_provider_leave(json_t *answer, struct gp_buf *out);
int gp_cli_render_provider_pause(json_t *answer, struct gp_buf *out);
int gp_cli_render_provider_policy(json_t *answer, struct gp_buf *out);
int gp_cli_cmd_provider_status(const struct gp_cli_args *args);
int gp_cli_cmd_provider_pause(const struct gp_cli_args *args);
int gp_cli_cmd_provider_resume(const struct gp_cli_args *args);
int gp_cli_cmd_provider_reclaim(const struct gp_cli_args *args);
int gp_cli_cmd_provider_leave(const struct gp_cli_args *args);
int gp_cli_cmd_provider_policy_show(const struct gp_cli_args *args);
int gp_cli_cmd_provider_policy_check(const struct gp_cli_args *args);

/* up.c */
int gp_cli_cmd_up(const struct gp_cli_args *args);
int gp_cli_cmd_down(const struct gp_cli_args *args);
/* The default data directory: $XDG_DATA_HOME/gpupool or ~/.local/... */
int gp_cli_default_data_dir(char *out, size_t len);

/* completion.c */
/* The completion script for shell ("bash", "zsh"). 0 or GP_EINVAL. */
int gp_cli_completion_script(const char *shell, struct gp_buf *out);
int gp_cli_cmd_completion(const struct gp_cli_args *args);

/* top.c */
/*
 * The `top` frame for the answers to GET /v1/nodes and GET /v1/jobs:
 * lines cut at width columns; height 0: no limit, else the GPU and job
 * lists are cut to fit ("... N more"). Pure (for tests).
 */
int gp_cli_render_top(json_t *nodes, json_t *jobs, const char *url,
    int64_t now_ms, int width, int height, struct gp_buf *out);
int gp_cli_cmd_top(const struct gp_cli_args *args);

/* progress.c: a progress line for long transfers, on a tty only. */
struct gp_progress {
	pthread_mutex_t lock;
	FILE *out;
	char label[64];
	int64_t total, done; /* bytes; total 0: unknown */
	int64_t start_ms, last_ms;
	int enabled, drawn;
};
/* Starts a line for label (total 0: unknown yet). */
void gp_progress_begin(struct gp_progress *p, const char *label,
    int64_t total);
/* done bytes of total (0: keep the known total); any thread. */
void gp_progress_update(struct gp_progress *p, int64_t done, int64_t total);
/* The same, as a transfer callback: arg is the struct gp_progress. */
void gp_progress_callback(void *arg, int64_t done, int64_t total);
/* Erases the line (the caller prints its summary after). */
void gp_progress_end(struct gp_progress *p);
/*
 * The line's text, at most width columns when it can: label, percent, a
 * bar, done/total, rate and ETA. Pure (for tests).
 */
void gp_progress_format(char *out, size_t len, const char *label,
    int64_t done, int64_t total, int64_t elapsed_ms, int width);

/* checkpoint.c */
/* Renders the `checkpoints` table for a {"checkpoints": [...]} reply. */
int gp_cli_render_checkpoints(json_t *reply, struct gp_buf *out);
int gp_cli_cmd_checkpoints(const struct gp_cli_args *args);
int gp_cli_cmd_checkpoint_get(const struct gp_cli_args *args);

/* image.c */
/* Renders the `image ls` table for a {"images": [...]} reply. */
int gp_cli_render_images(json_t *reply, struct gp_buf *out);
int gp_cli_cmd_image_import(const struct gp_cli_args *args);
int gp_cli_cmd_image_ls(const struct gp_cli_args *args);
int gp_cli_cmd_image_rm(const struct gp_cli_args *args);
int gp_cli_cmd_image_pull(const struct gp_cli_args *args);
int gp_cli_cmd_image_sign(const struct gp_cli_args *args);
int gp_cli_cmd_key_create(const struct gp_cli_args *args);

/* data.c */
/*
 * Parses "[OWNER/]NAME[@VERSION]" (OWNER defaults to self when not NULL).
 * OUT: owner, name (GP_NAME_MAX + 1 bytes each), *version (0: none).
 * Returns 0 or GP_EINVAL.
 */
int gp_cli_parse_data_ref(const char *text, const char *self, char *owner,
    char *name, int64_t *version);
/* Renders the `data ls` table for a {"data_sets": [...]} reply. */
int gp_cli_render_data_sets(json_t *reply, struct gp_buf *out);
/* Renders `quota show` for a quota object. */
int gp_cli_render_quota(json_t *quota, struct gp_buf *out);
int gp_cli_cmd_data_put(const struct gp_cli_args *args);
int gp_cli_cmd_data_ls(const struct gp_cli_args *args);
int gp_cli_cmd_data_rm(const struct gp_cli_args *args);
int gp_cli_cmd_data_share(const struct gp_cli_args *args);
int gp_cli_cmd_data_unshare(const struct gp_cli_args *args);
int gp_cli_cmd_fetch(const struct gp_cli_args *args);
int gp_cli_cmd_output_rm(const struct gp_cli_args *args);
int gp_cli_cmd_quota_show(const struct gp_cli_args *args);
int gp_cli_cmd_quota_set(const struct gp_cli_args *args);
/* sim.c */
int gp_cli_cmd_sim(const struct gp_cli_args *args);

#endif
