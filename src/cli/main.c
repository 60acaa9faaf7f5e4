/*
 * main.c: the user commands' table, the option parser it drives, --help
 * and dispatch. Every command is one row of `commands` below: its options,
 * operands and help text live there, so `gpupool CMD --help` and the
 * global help can never drift from what the parser accepts.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/cmd.h"
#include "gp.h"
#include "http_client.h"

static const struct gp_cli_option no_options[] = {
    {NULL, 0, NULL, NULL},
};

static const struct gp_cli_option checkpoint_get_options[] = {
    {"version", 0, "N", "restore version N (default: the latest)"},
    {NULL, 0, NULL, NULL},
};
static const struct gp_cli_option json_options[] = {
    {"json", 0, NULL, "print the coordinator's JSON as is"},
    {NULL, 0, NULL, NULL},
};

static const struct gp_cli_option token_create_options[] = {
    {"role", 0, "ROLE",
        "user, provider, admin or metrics (required; metrics: may only "
        "read /metrics)"},
    {"name", 0, "NAME",
        "who the token is for: a user name, or the "
        "provider's name (required)"},
    {"token-file", 0, "FILE",
        "authenticate with the (admin) token in "
        "FILE"},
    {"group", 0, "GROUP",
        "the group (lab) of the user or provider (default: \"default\")"},
    {NULL, 0, NULL, NULL},
};

/* Accounting (acct.c). */
#define TOKEN_FILE_OPTION                                                   \
    {"token-file", 0, "FILE", "authenticate with the token in FILE"}
static const struct gp_cli_option acct_change_options[] = {
    TOKEN_FILE_OPTION,
    {NULL, 0, NULL, NULL},
};
static const struct gp_cli_option acct_list_options[] = {
    {"json", 0, NULL, "print the coordinator's JSON as is"},
    TOKEN_FILE_OPTION,
    {NULL, 0, NULL, NULL},
};
static const struct gp_cli_option group_create_options[] = {
    {"weight", 0, "W", "fair-share weight, 1 to 1000000 (default 1)"},
    TOKEN_FILE_OPTION,
    {NULL, 0, NULL, NULL},
};
static const struct gp_cli_option group_move_options[] = {
    {"user", 0, "USER", "the user leaves every group and joins GROUP"},
    {"provider", 0, "NAME",
        "the provider tokens named NAME, and their nodes, move to GROUP"},
    TOKEN_FILE_OPTION,
    {NULL, 0, NULL, NULL},
};
static const struct gp_cli_option budget_options[] = {
    {"user", 0, "USER", "a user's budget"},
    {"group", 0, "GROUP", "a group's budget"},
    {"period", 0, "PERIOD",
        "month (default), week (from Monday), day (UTC) or total"},
    TOKEN_FILE_OPTION,
    {NULL, 0, NULL, NULL},
};
static const struct gp_cli_option budget_rm_options[] = {
    {"user", 0, "USER", "a user's budget"},
    {"group", 0, "GROUP", "a group's budget"},
    TOKEN_FILE_OPTION,
    {NULL, 0, NULL, NULL},
};
static const struct gp_cli_option usage_options[] = {
    {"user", 0, "USER", "only what USER paid"},
    {"group", 0, "GROUP", "only postings with GROUP on either side"},
    {"provider", 0, "NAME", "only what provider NAME was paid"},
    {"since", 0, "TIME",
        "from TIME: 7d, 12h (ago), 2026-01-31 or 2026-01-31T12:00:00Z"},
    {"until", 0, "TIME", "up to TIME (same forms)"},
    {"json", 0, NULL, "print the coordinator's JSON as is"},
    TOKEN_FILE_OPTION,
    {NULL, 0, NULL, NULL},
};
static const struct gp_cli_option ledger_options[] = {
    {"user", 0, "USER", "only what USER paid"},
    {"group", 0, "GROUP", "only postings with GROUP on either side"},
    {"provider", 0, "NAME", "only what provider NAME was paid"},
    {"job", 0, "JOB", "only the postings of job JOB"},
    {"since", 0, "TIME",
        "from TIME: 7d, 12h (ago), 2026-01-31 or 2026-01-31T12:00:00Z"},
    {"until", 0, "TIME", "up to TIME (same forms)"},
    {"limit", 0, "N", "the newest N postings (default 100)"},
    {"json", 0, NULL, "print the coordinator's JSON as is"},
    TOKEN_FILE_OPTION,
    {NULL, 0, NULL, NULL},
};

static const struct gp_cli_option token_admin_options[] = {
    {"token-file", 0, "FILE", "authenticate with the (admin) token in FILE"},
    {"json", 0, NULL, "print the coordinator's JSON as is"},
    {NULL, 0, NULL, NULL},
};

static const struct gp_cli_option token_revoke_options[] = {
    {"token-file", 0, "FILE", "authenticate with the (admin) token in FILE"},
    {NULL, 0, NULL, NULL},
};

/*
 * The job request's options, shared by submit and shell (a gang, its
 * GPUs, fractions, constraints; then its size, time, data and image).
 */
#define JOB_REQUEST_OPTIONS_GPUS \
    {"gpus", 'g', "N", \
        "GPUs the job needs, per node (default 1; 0 for none)"}, \
    {"gpu-share", 0, "F", \
        "a fraction of one GPU: this share of it (0 < F < 1, \"0.5\")"}, \
    {"gpu-mem", 0, "MIB", \
        "a fraction of one GPU: this much of its memory " \
        "(\"8G\", \"4096\")"}, \
    {"min-gpu-mem", 0, "MIB", \
        "each GPU has at least this much memory (\"40G\")"}, \
    {"gpu-model", 0, "TEXT", "the GPU model contains TEXT (\"A100\")"}, \
    {"network", 0, "MODE", "none, internet or lan: at most this network, " \
        "and only on nodes that allow it"}, \
    {"compute-capability", 0, "X.Y", \
        "each GPU's compute capability is at least X.Y (\"8.0\")"},

#define JOB_REQUEST_OPTIONS_REST \
    {"nodes", 'N', "N", \
        "a gang of N parts on N nodes, started together (default 1)"}, \
    {"gpus-per-node", 0, "G", "the same as --gpus, for gangs"}, \
    {"cpus", 'c', "N", "CPUs the job needs (default 1)"}, \
    {"mem", 'm', "MIB", \
        "memory limit (\"8G\"; default: its share of what the node lends)"}, \
    {"disk", 0, "MIB", \
        "the most its work directory may hold (\"20G\"; the node's " \
        "scratch-max caps it)"}, \
    {"time", 't', "DURATION", \
        "time limit (\"90m\", \"2:00:00\", " \
        "\"1-12:00:00\"; default none)"}, \
    {"name", 'n', "NAME", "job name (default: the command's basename)"}, \
    {"checkpoint-every", 0, "DURATION", \
    "upload the job's checkpoint at most this often (default 5m)"}, \
    {"checkpoint-signal", 0, "SIG", \
    "signal meaning \"save now and exit\" (default USR1)"}, \
    {"env", 'e', "K=V", "set an environment variable (repeatable)"}, \
    {"group", 0, "GROUP", \
        "run for GROUP, one of yours (default: your first group)"}, \
    {"max-price", 0, "CREDITS", \
        "only GPUs priced at most CREDITS per GPU-hour (\"2.5\")"}, \
    {"data", 0, "[OWNER/]NAME[@V]:/PATH", \
    "mount a data set read-only at PATH (repeatable; the version " \
    "current at submit unless @V)"}, \
    {"image", 'i', "REF", \
    "run in this container image of the pool's store (NAME[:TAG] or " \
    "NAME@sha256:...); COMMAND then replaces the image's Cmd"},

static const struct gp_cli_option submit_options[] = {
    JOB_REQUEST_OPTIONS_GPUS
    {"interactive", 0, NULL,
        "an interactive job: the pool's interactive time limits, ahead of "
        "batch work in its share, on GPUs kept for interactive work"},
    {"expose", 0, "[PART:]PORT",
        "declare a port of the job's own loopback (PART: a gang's part, as "
        "shell --part; default 0); the dashboard opens it through the "
        "coordinator's proxy (repeatable, at most 8)"},
    JOB_REQUEST_OPTIONS_REST
    {"wait", 'w', NULL,
	"print the id, wait for the job to finish, exit with its exit code"},
    {"key", 0, "KEY",
	"the submission's idempotency key (16 to 64 of A-Z a-z 0-9 _ -; "
	"default: a random one): a repeat with the same key prints the "
	"first one's id and makes no second job"},
    {"array", 'a', "INDICES",
	"a job array: one job per task index (\"0-999\", \"1-99:2\", "
	"\"1,5,7\"; at most 10000; \"0-999%10\": at most 10 running at "
	"once), made in one request; the job sees GPUPOOL_ARRAY_JOB_ID and "
	"GPUPOOL_ARRAY_TASK_ID; prints FIRST-LAST"},
    {NULL, 0, NULL, NULL},
};

static const struct gp_cli_option jupyter_options[] = {
    {"gpus", 'g', "N",
        "GPUs the job needs, per node (default 1; 0 for none)"},
    {"gpu-share", 0, "F",
        "a fraction of one GPU: this share of it (0 < F < 1, \"0.5\")"},
    {"gpu-mem", 0, "MIB",
        "a fraction of one GPU: this much of its memory "
        "(\"8G\", \"4096\")"},
    {"min-gpu-mem", 0, "MIB",
        "each GPU has at least this much memory (\"40G\")"},
    {"gpu-model", 0, "TEXT", "the GPU model contains TEXT (\"A100\")"},
    {"cpus", 'c', "N", "CPUs the job needs (default 1)"},
    {"mem", 'm', "MIB", "memory limit (\"8G\")"},
    {"time", 't', "DURATION",
        "time limit (default: the pool's for interactive jobs)"},
    {"name", 'n', "NAME", "job name (default jupyter)"},
    {"env", 'e', "K=V", "set an environment variable (repeatable)"},
    {"group", 0, "GROUP", "run for GROUP, one of yours"},
    {"data", 0, "[OWNER/]NAME[@V]:/PATH",
	"mount a data set read-only at PATH (repeatable)"},
    {"image", 'i', "REF",
	"run the image's Jupyter (default: the provider's, for a plain job)"},
    {"port", 0, "PORT", "Jupyter's port inside the job (default 8888)"},
    {"local-port", 0, "PORT",
	"this machine's port for it (default: a free one)"},
    {NULL, 0, NULL, NULL},
};

/* Streams into a gang's part, as `logs --part` reads its output. */
#define STREAM_PART_OPTION \
    {"part", 'p', "K", \
        "a gang's part K: the stream goes to that part's node " \
        "(default 0, the rank-0 part)"},

static const struct gp_cli_option shell_options[] = {
    JOB_REQUEST_OPTIONS_GPUS
    JOB_REQUEST_OPTIONS_REST
    {"idle", 0, "DURATION",
	"end the session's job after this long without input (default "
	"1h; the pool may cap it); with JOB: no idle end unless given"},
    STREAM_PART_OPTION
    {NULL, 0, NULL, NULL},
};

static const struct gp_cli_option exec_options[] = {
    {"tty", 't', NULL, "a terminal for the command (stdin must be one)"},
    STREAM_PART_OPTION
    {NULL, 0, NULL, NULL},
};

/* port-forward, connect. */
static const struct gp_cli_option stream_options[] = {
    STREAM_PART_OPTION
    {NULL, 0, NULL, NULL},
};

static const struct gp_cli_option ssh_config_options[] = {
    {"user", 0, "NAME", "the job's user name for ssh (default: yours)"},
    {"port", 0, "PORT", "the job's sshd port (default 22)"},
    STREAM_PART_OPTION
    {NULL, 0, NULL, NULL},
};


static const struct gp_cli_option data_put_options[] = {
    {"parallel", 0, "N", "concurrent chunk uploads (1 to 32, default 4)"},
    {"json", 0, NULL, "print the result as JSON"},
    {NULL, 0, NULL, NULL},
};

static const struct gp_cli_option data_ls_options[] = {
    {"all", 'a', NULL, "every user's data sets (admin)"},
    {"json", 0, NULL, "print the coordinator's JSON as is"},
    {NULL, 0, NULL, NULL},
};

static const struct gp_cli_option fetch_options[] = {
    {"parallel", 0, "N", "concurrent chunk downloads (1 to 32, default 4)"},
    {NULL, 0, NULL, NULL},
};

static const struct gp_cli_option image_import_options[] = {
    {"name", 'n', "NAME[:TAG]",
	"the image's name in the store (default: the one the archive "
	"gives)"},
    {NULL, 0, NULL, NULL},
};

static const struct gp_cli_option image_pull_options[] = {
    {"name", 'n', "NAME[:TAG]",
	"the image's name in the store (default: REF without its digest)"},
    {"username", 'u', "USER",
	"log in to the registry as USER (the password comes from "
	"$GPUPOOL_REGISTRY_PASSWORD)"},
    {"registry-ca", 0, "FILE", "CA certificate(s) to verify the registry"},
    {"plain-http", 0, NULL,
	"talk to the registry over plain HTTP (a test registry)"},
    {NULL, 0, NULL, NULL},
};

static const struct gp_cli_option image_sign_options[] = {
    {"key", 'k', "KEYFILE", "the signing key (from `gpupool key create`)"},
    {NULL, 0, NULL, NULL},
};

static const struct gp_cli_option key_create_options[] = {
    {"out", 'o', "FILE", "where to write the secret key (default NAME.key)"},
    {NULL, 0, NULL, NULL},
};

static const struct gp_cli_option ps_options[] = {
    {"all", 'a', NULL, "include finished jobs"},
    {"last", 'n', "N", "with --all: only the newest N jobs"},
    {"json", 0, NULL, "print the coordinator's JSON as is"},
    {NULL, 0, NULL, NULL},
};

static const struct gp_cli_option logs_options[] = {
    {"follow", 'f', NULL, "keep following until the job finishes"},
    {"part", 'p', "K", "a gang's part K (default 0, the rank-0 part)"},
    {NULL, 0, NULL, NULL},
};

static const struct gp_cli_option top_options[] = {
    {"once", 0, NULL, "print one frame and exit (for scripts)"},
    {"interval", 'n', "SECONDS", "seconds between refreshes (default 2)"},
    {NULL, 0, NULL, NULL},
};

static const struct gp_cli_option up_options[] = {
    {"listen", 'l', "ADDR:PORT",
        "where the coordinator listens "
        "(default 127.0.0.1:7070)"},
    {"data", 'd', "DIR",
        "state and logs (default "
        "$XDG_DATA_HOME/gpupool or "
        "~/.local/share/gpupool; /var/lib/gpupool for root)"},
    {"fake-gpus", 0, "SPEC", "lend simulated GPUs: N[:MODEL[:MEM_MIB]]"},
    {"name", 'n', "NAME", "the node's name (default: the hostname)"},
    {"detach", 0, NULL,
        "start the pool in the background and return "
        "once it is ready"},
    {NULL, 0, NULL, NULL},
};

static const struct gp_cli_option down_options[] = {
    {"data", 'd', "DIR", "the pool's data directory (as given to up)"},
    {NULL, 0, NULL, NULL},
};

static const struct gp_cli_option provider_options[] = {
    {"socket", 0, "PATH",
        "the agent's control socket (default: "
        "$GPUPOOL_AGENT_SOCKET, the config's agent_socket, else the "
        "agent's default)"},
    {"json", 0, NULL, "print the agent's JSON as is"},
    {NULL, 0, NULL, NULL},
};

static const struct gp_cli_option sim_options[] = {
    {"nodes", 0, "CSV", "the trace's node list (required)"},
    {"jobs", 0, "CSV", "the trace's pod list (required)"},
    {"policy", 0, "POLICY",
        "frag (default), bestfit, fgd, random, dotprod, clustering, "
        "packing"},
    {"protocol", 0, "NAME",
        "fgd: the FGD paper's protocol; replay (default): arrivals, a "
        "queue, departures; campus: labs whose owners come and go"},
    {"seed", 0, "N", "the shuffle's and random policies' seed (default 42)"},
    {"inflate", 0, "RATIO", "fgd: requests up to RATIO x the GPUs (1.3)"},
    {"group-by", 0, "LABS",
        "replay: who is a lab: labs:N (pods by name, N labs; default "
        "labs:4) or qos"},
    {"speed", 0, "N",
        "replay: arrivals N times denser, run times unchanged (default 1)"},
    {"series", 0, "FILE", "write a time series (CSV) to FILE"},
    {"runtimes", 0, "CSV",
        "campus: job run times (default: philly_runtime.csv beside --jobs)"},
    {"pattern", 0, "NAME",
        "campus: owners' presence: office (default), deadline, semester, "
        "mixed"},
    {"labs", 0, "N", "campus: labs (default 8)"},
    {"lab-nodes", 0, "N", "campus: nodes each lab owns (default 2)"},
    {"days", 0, "N", "campus: days simulated (default 28)"},
    {"load", 0, "RATIO",
        "campus: pool demand, GPU-time over the GPUs' (default 0.5)"},
    {"interactive", 0, "SHARE",
        "campus: share of jobs that are interactive sessions (0.3)"},
    {"ckpt-share", 0, "SHARE",
        "campus: share of batch jobs that checkpoint (0.8)"},
    {"grace", 0, "SECONDS", "campus: the owners' checkpoint-grace (30)"},
    {"json", 0, NULL, "print one JSON object"},
    {NULL, 0, NULL, NULL},
};

static const struct gp_cli_option provider_reclaim_options[] = {
    {"now", 0, NULL,
        "free the GPUs at once: no checkpoint grace; jobs "
        "resume from their last uploaded checkpoint"},
    {"socket", 0, "PATH", "the agent's control socket"},
    {"json", 0, NULL, "print the agent's JSON as is"},
    {NULL, 0, NULL, NULL},
};

static const struct gp_cli_command commands[] = {
    {"submit", "[--] COMMAND [ARG...]", "submit a job; prints its id",
        submit_options, 0, -1, 1,
        "Options must come before the command; `--` is needed only when "
        "the\ncommand starts with '-'. Prints just the job id. With "
        "--image the command\nmay be left out: the image's Entrypoint and "
        "Cmd run. With --wait, it then waits\nfor the job and exits as "
        "`gpupool wait` does: with its exit code.",
        gp_cli_cmd_submit},
    {"shell", "[JOB]",
        "a shell on new GPUs (an interactive job), or in a running job",
        shell_options, 0, 1, 0,
        "Without JOB: submits an interactive job with the submit options "
        "given\n(--gpus, --gpu-share, --image, --data, --time ...), says "
        "where it waits\nin the queue, then opens a terminal in it; "
        "leaving the shell ends the\njob, and so does --idle without "
        "input. With JOB: a new shell in that\nrunning job of yours. "
        "Exits with the shell's exit code; 255 when the\nconnection "
        "broke.",
        gp_cli_cmd_shell},
    {"exec", "JOB -- COMMAND [ARG...]",
        "run a command in a running job; its exit code is ours",
        exec_options, 2, -1, 1,
        "As `kubectl exec`: the job's namespaces (or container), its user, "
        "its\nGPUs. stdin, stdout and stderr pass through; -t gives it a "
        "terminal.",
        gp_cli_cmd_exec},
    {"jupyter", "",
        "Jupyter on new GPUs (an interactive job), forwarded here",
        jupyter_options, 0, 0, 0,
        "Submits an interactive job running Jupyter (the image's, or the "
        "provider's\nfor a plain job) on the job's own loopback with a "
        "token of its own,\ndeclares its port (the dashboard's Open link "
        "reaches it too), waits\nuntil it runs, forwards it to "
        "127.0.0.1 here and prints the URL.\nCtrl-C ends the job.",
        gp_cli_cmd_jupyter},
    {"port-forward", "JOB [LOCAL:]PORT...",
        "forward local ports to a running job's own loopback ports",
        stream_options, 2, 33, 0,
        "Listens on 127.0.0.1:LOCAL (default: PORT) and carries each "
        "connection,\nthrough the coordinator, to 127.0.0.1:PORT inside "
        "the job. Runs until\ninterrupted.",
        gp_cli_cmd_port_forward},
    {"connect", "JOB PORT",
        "stdin/stdout to a job's loopback port (an ssh ProxyCommand)",
        stream_options, 2, 2, 0,
        "ssh -o ProxyCommand='gpupool connect JOB 22' host, or see "
        "`gpupool ssh-config`.",
        gp_cli_cmd_connect},
    {"ssh-config", "JOB", "print an ssh_config Host block for a job's sshd",
        ssh_config_options, 1, 1, 0,
        "Append it to ~/.ssh/config; then `ssh gpupool-JOB` (and VS Code "
        "Remote-SSH)\nreach the sshd the job runs, through `gpupool "
        "connect`.",
        gp_cli_cmd_ssh_config},
    {"ps", "", "list your queued and running jobs (--all: every job)",
        ps_options, 0, 0, 0, NULL, gp_cli_cmd_ps},
    {"show", "JOB", "show one job, with its attempts", json_options, 1, 1, 0,
        NULL, gp_cli_cmd_show},
    {"queue", "", "the queue in the scheduler's order, with why each waits",
        json_options, 0, 0, 0,
        "POS is the job's place in the order the scheduler tries jobs "
        "(fair share\nbetween groups, then users; held jobs last). WAIT "
        "is why it has not\nstarted: resources, never, share, priority, "
        "reservation, gang, held,\npreempting (see docs/scheduling.md). "
        "The job that holds the backfill\nreservation is shown with its "
        "expected start.",
        gp_cli_cmd_queue},
    {"logs", "JOB", "print a job's output (-f: follow it)", logs_options, 1, 1,
        0, NULL, gp_cli_cmd_logs},
    {"cancel", "JOB", "cancel a job", no_options, 1, 1, 0, NULL,
        gp_cli_cmd_cancel},
    {"checkpoint now", "JOB",
        "ask a running job's agent to upload its checkpoint now", no_options,
        1, 1, 0,
        "Uploads the job's latest complete version (see "
        "docs/checkpoints.md)\nwithout stopping it; `gpupool show JOB` "
        "lists what was saved.",
        gp_cli_cmd_checkpoint_now},
    {"wait", "JOB", "wait for a job; exit with its exit code", no_options, 1, 1,
        0,
        "Exits with the job's exit code, 128+N when a signal N killed "
        "it, and 1\nwhen it was cancelled, timed out or could not start "
        "(with a note on stderr).",
        gp_cli_cmd_wait},
    {"nodes", "", "list the nodes and their GPUs", json_options, 0, 0, 0, NULL,
        gp_cli_cmd_nodes},
    {"whoami", "", "show who your token is", no_options, 0, 0, 0, NULL,
        gp_cli_cmd_whoami},
    {"top", "", "a live view of the pool: nodes, GPUs, jobs, queue",
        top_options, 0, 0, 0,
        "Refreshes every --interval seconds, and at once on any key; q "
        "or Ctrl-C\nquits. Without a terminal, or with --once, prints "
        "plain frames.",
        gp_cli_cmd_top},
    {"token create", "", "create a token (admin); prints just the token",
        token_create_options, 0, 0, 0,
        "Needs an admin token: --token-file, else GPUPOOL_TOKEN, else the "
        "config's\nadmin_token_file (written by `gpupool up`), else its "
        "token.",
        gp_cli_cmd_token_create},
    {"token ls", "", "list the tokens (admin): id, role, name, created",
        token_admin_options, 0, 0, 0,
        "Tokens are never shown again after their creation; this lists "
        "what they\nare for, with the ids `token revoke` takes.",
        gp_cli_cmd_token_ls},
    {"token revoke", "ID...", "revoke tokens (admin); they stop working at once",
        token_revoke_options, 1, -1, 0,
        "The last admin token cannot be revoked. A provider's nodes pass "
        "to the\nnext provider token of the same name that registers "
        "them (rotation).",
        gp_cli_cmd_token_revoke},
    {"up", "",
        "run a whole local pool (coordinator + agent) in one "
        "command",
        up_options, 0, 0, 0,
        "Starts a coordinator and one agent (simulated GPUs when no "
        "NVIDIA GPU is\nfound), writes the config file so the other "
        "commands work, and stays in\nthe foreground until "
        "interrupted. With --detach it returns once the pool\nis ready; "
        "`gpupool down` stops it.",
        gp_cli_cmd_up},
    {"down", "", "stop a pool started with `gpupool up --detach`", down_options,
        0, 0, 0, NULL, gp_cli_cmd_down},
    {"completion", "bash|zsh", "print the shell completion script",
        no_options, 1, 1, 0,
        "bash: `source <(gpupool completion bash)`, or save it as\n"
        "/usr/share/bash-completion/completions/gpupool. zsh: save it "
        "as _gpupool\nin a directory of $fpath (the packages install "
        "both).",
        gp_cli_cmd_completion},
    {"checkpoints", "JOB", "list the stored checkpoint versions of a job",
        json_options, 1, 1, 0, NULL, gp_cli_cmd_checkpoints},
    {"checkpoint get", "JOB DIR",
        "restore a job's checkpoint (the latest version) into DIR",
        checkpoint_get_options, 2, 2, 0,
        "DIR must exist and be empty. Every chunk is verified against its\n"
        "BLAKE2b-256 name; on any failure DIR is left empty.",
        gp_cli_cmd_checkpoint_get},
    {"data put", "NAME PATH",
        "upload a file or directory as a new version of data set NAME",
        data_put_options, 2, 2, 0,
        "Chunked (4 MiB, named by BLAKE2b-256) and deduplicated: only "
        "chunks the\ncoordinator lacks are sent, so a rerun after a "
        "broken upload sends only\nwhat is missing, and a new version "
        "sends only what changed. Symbolic\nlinks and special files "
        "beneath PATH are skipped. Refused (nothing is\nsent) when it "
        "would exceed your storage quota. Prints OWNER/NAME@VERSION.",
        gp_cli_cmd_data_put},
    {"data ls", "[[OWNER/]NAME]",
        "list your data sets and those shared with you (or one's versions)",
        data_ls_options, 0, 1, 0, NULL, gp_cli_cmd_data_ls},
    {"data rm", "[OWNER/]NAME[@VERSION]",
        "remove a data set (every version) or one version", no_options, 1,
        1, 0,
        "Refused while a queued or running job mounts it. Storage is "
        "freed once no\nother data set, output or checkpoint of yours "
        "uses the same chunks.",
        gp_cli_cmd_data_rm},
    {"data share", "[OWNER/]NAME USER",
        "let USER read a data set and mount it in jobs", no_options, 2, 2,
        0, "USER names it OWNER/NAME (`gpupool data ls` lists it).",
        gp_cli_cmd_data_share},
    {"data unshare", "[OWNER/]NAME USER", "stop sharing a data set with USER",
        no_options, 2, 2, 0,
        "Queued jobs of USER that mount it then fail to start.",
        gp_cli_cmd_data_unshare},
    {"fetch", "JOB [DEST]",
        "download what a job wrote to $GPUPOOL_OUTPUT_DIR",
        fetch_options, 1, 2, 0,
        "DEST (default job-JOB-output) is created, or must be empty. Every "
        "chunk is\nverified against its BLAKE2b-256 name; on any failure "
        "DEST is left empty.",
        gp_cli_cmd_fetch},
    {"output rm", "JOB", "remove a job's stored output", no_options, 1, 1, 0,
        NULL, gp_cli_cmd_output_rm},
    {"quota show", "[USER]",
        "show a storage quota and what counts against it", json_options, 0,
        1, 0,
        "Data sets and job outputs count, each distinct chunk once; "
        "checkpoints\ndo not. Users see their own; admins anyone's.",
        gp_cli_cmd_quota_show},
    {"quota set", "USER SIZE",
        "set a user's storage quota (admin): SIZE, none or default",
        no_options, 2, 2, 0,
        "SIZE like 500M, 20G or 1T; none: no limit; default: the "
        "coordinator's\n--quota-default.",
        gp_cli_cmd_quota_set},
    {"image import", "FILE",
        "import an image archive (OCI layout or docker save, .tar[.gz])",
        image_import_options, 1, 1, 0,
        "Sends only the blobs the coordinator lacks; each is verified "
        "against its\nsha256 digest. Prints the image's name and "
        "manifest digest.",
        gp_cli_cmd_image_import},
    {"image ls", "", "list the pool's images", json_options, 0, 0, 0, NULL,
        gp_cli_cmd_image_ls},
    {"image rm", "REF", "remove an image name (yours; an admin: any)",
        no_options, 1, 1, 0,
        "REF is NAME[:TAG], or sha256:... for every name of that image. "
        "Queued\njobs keep the image they were pinned to; blobs no image "
        "uses are\nremoved later.",
        gp_cli_cmd_image_rm},
    {"image pull", "REF",
        "pull an image from a registry into the pool's store",
        image_pull_options, 1, 1, 0,
        "REF is [REGISTRY/]REPOSITORY[:TAG][@sha256:...]. The tag is "
        "resolved to a\nmanifest digest (a multi-platform index to its "
        "linux/amd64 image),\nwhich is printed: the image is pinned by it.",
        gp_cli_cmd_image_pull},
    {"image sign", "REF", "sign an image's manifest digest (admin)",
        image_sign_options, 1, 1, 0,
        "Signs \"gpupool-image-signature-v1\\n\" + the manifest digest "
        "with the ed25519\nkey; providers whose policy trusts the key "
        "run the image.",
        gp_cli_cmd_image_sign},
    {"key create", "NAME",
        "create an ed25519 signing key; prints its public key",
        key_create_options, 1, 1, 0,
        "Writes the secret key to NAME.key (mode 0600; never overwrites "
        "a file).",
        gp_cli_cmd_key_create},
    {"provider status", "", "show what the local agent lends and runs",
        provider_options, 0, 0, 0,
        "Talks to the agent on this machine over its control socket; "
        "only the\nowner the agent was started for, and root, may.",
        gp_cli_cmd_provider_status},
    {"provider pause", "", "stop accepting new jobs (running ones go on)",
        provider_options, 0, 0, 0, NULL, gp_cli_cmd_provider_pause},
    {"provider resume", "[GPU...]",
        "accept jobs again (on the GPUs given, else on all)",
        provider_options, 0, -1, 0, NULL, gp_cli_cmd_provider_resume},
    {"provider reclaim", "[GPU...]",
        "take GPUs back (all without GPU operands)",
        provider_reclaim_options, 0, -1, 0,
        "Gracefully: each job is asked to checkpoint, gets the policy's "
        "grace\nperiod, its checkpoint is uploaded, then the GPU is free. "
        "With --now the\njobs are stopped at once and resume elsewhere "
        "from their last uploaded\ncheckpoint. Waits until the GPUs are "
        "free. `gpupool provider resume`\nlends them again.",
        gp_cli_cmd_provider_reclaim},
    {"provider leave", "", "reclaim every GPU and leave the pool",
        provider_options, 0, 0, 0, NULL, gp_cli_cmd_provider_leave},
    {"provider policy show", "", "show the agent's lending policy",
        provider_options, 0, 0, 0, NULL, gp_cli_cmd_provider_policy_show},
    {"provider policy check", "FILE",
        "check a policy file (errors: FILE:LINE: reason)",
        no_options, 1, 1, 0, "See docs/provider.md for the file's format.",
        gp_cli_cmd_provider_policy_check},
    {"sim", "", "replay a cluster trace through the scheduler", sim_options,
        0, 0, 0,
        "Reads the Alibaba GPU-sharing 2023 CSV files as published; no pool\n"
        "is needed. See docs/scheduling.md for the protocols and figures.",
        gp_cli_cmd_sim},
    {"group create", "NAME", "create a group (a lab) (admin)",
        group_create_options, 1, 1, 0, NULL, gp_cli_cmd_group_create},
    {"group ls", "", "list the groups, members, providers and usage",
        acct_list_options, 0, 0, 0, NULL, gp_cli_cmd_group_ls},
    {"group set", "NAME", "set a group's fair-share weight (admin)",
        group_create_options, 1, 1, 0, NULL, gp_cli_cmd_group_set},
    {"group add", "GROUP USER...", "add users to a group (admin)",
        acct_change_options, 2, -1, 0, NULL, gp_cli_cmd_group_add},
    {"group remove", "GROUP USER...", "remove users from a group (admin)",
        acct_change_options, 2, -1, 0,
        "A user in no group is in the group \"default\".",
        gp_cli_cmd_group_remove},
    {"group move", "GROUP", "move a user or a provider to GROUP (admin)",
        group_move_options, 1, 1, 0,
        "Jobs already submitted keep their group; running attempts keep "
        "their\nprovider's group until they end.",
        gp_cli_cmd_group_move},
    {"price set", "CLASS CREDITS",
        "price GPUs whose model contains CLASS, per GPU-hour (admin)",
        acct_change_options, 2, 2, 0,
        "The longest class found in a GPU's model sets its price; the "
        "class\n\"default\" prices the rest. New attempts pay the new "
        "price.",
        gp_cli_cmd_price_set},
    {"price rm", "CLASS", "remove a price class (admin)", acct_change_options,
        1, 1, 0, NULL, gp_cli_cmd_price_rm},
    {"price ls", "", "list the price table", acct_list_options, 0, 0, 0, NULL,
        gp_cli_cmd_price_ls},
    {"budget set", "CREDITS", "set a user's or a group's budget (admin)",
        budget_options, 1, 1, 0,
        "A job that may cost more than is left of a budget (its GPUs "
        "for its time\nlimit at the highest price it could pay) is held "
        "until the budget is\nraised or a new period starts. Running "
        "jobs are never stopped.",
        gp_cli_cmd_budget_set},
    {"budget rm", "", "remove a budget (admin)", budget_rm_options, 0, 0, 0,
        NULL, gp_cli_cmd_budget_rm},
    {"budget ls", "", "list the budgets you may see", acct_list_options, 0,
        0, 0, NULL, gp_cli_cmd_budget_ls},
    {"usage", "", "GPU time and credits per user, provider and group",
        usage_options, 0, 0, 0,
        "Users see their own usage (or a group's they belong to), "
        "providers\nwhat they were paid, admins everything.",
        gp_cli_cmd_usage},
    {"ledger", "", "the ledger's postings (two entries each)",
        ledger_options, 0, 0, 0, NULL, gp_cli_cmd_ledger},
};

void
gp_cli_error(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("gpupool: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static void
usage_line(const struct gp_cli_command *cmd, FILE *out)
{
	fprintf(out, "usage: gpupool %s%s%s%s\n", cmd->name,
	    cmd->options[0].name != NULL ? " [OPTIONS]" : "",
	    cmd->operands[0] != '\0' ? " " : "", cmd->operands);
}

int
gp_cli_usage_error(const struct gp_cli_args *args, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs("gpupool: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (args != NULL && args->cmd != NULL)
		usage_line(args->cmd, stderr);
	return GP_CLI_EXIT_USAGE;
}

/* Prints "  LEFT  help..." with help wrapped to 80 columns. */
static void
wrap(FILE *out, const char *left, const char *help)
{
	const int indent = 27, width = 80;
	const char *p = help, *end;
	int col, len;

	fprintf(out, "  %-24s ", left);
	col = indent;
	while (*p != '\0') {
		end = strchr(p, ' ');
		len = end != NULL ? (int)(end - p) : (int)strlen(p);
		if (col > indent && col + 1 + len > width) {
			fprintf(out, "\n%*s", indent, "");
			col = indent;
		} else if (col > indent) {
			fputc(' ', out);
			col++;
		}
		fprintf(out, "%.*s", len, p);
		col += len;
		p += len;
		while (*p == ' ')
			p++;
	}
	fputc('\n', out);
}

void
gp_cli_usage(const struct gp_cli_command *cmd, FILE *out)
{
	const struct gp_cli_option *o;
	char left[64];

	usage_line(cmd, out);
	fprintf(out, "\n%s.\n", cmd->summary);
	if (cmd->details != NULL)
		fprintf(out, "\n%s\n", cmd->details);
	fprintf(out, "\nOptions:\n");
	for (o = cmd->options; o->name != NULL; o++) {
		if (o->short_name != 0)
			snprintf(left, sizeof(left), "-%c, --%s%s%s",
			    o->short_name, o->name, o->metavar ? " " : "",
			    o->metavar ? o->metavar : "");
		else
			snprintf(left, sizeof(left), "    --%s%s%s", o->name,
			    o->metavar ? " " : "",
			    o->metavar ? o->metavar : "");
		wrap(out, left, o->help);
	}
	fprintf(out, "  %-24s %s\n", "-h, --help", "show this help");
}

const struct gp_cli_command *
gp_cli_commands(size_t *n)
{
	*n = GP_ARRAY_LEN(commands);
	return commands;
}

const struct gp_cli_command *
gp_cli_command_find(const char *name)
{
	size_t i;

	for (i = 0; i < GP_ARRAY_LEN(commands); i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

static int
find_long(const struct gp_cli_command *cmd, const char *name, size_t len)
{
	int i;

	for (i = 0; cmd->options[i].name != NULL; i++)
		if (strlen(cmd->options[i].name) == len &&
		    strncmp(cmd->options[i].name, name, len) == 0)
			return i;
	return -1;
}

static int
find_short(const struct gp_cli_command *cmd, char c)
{
	int i;

	for (i = 0; cmd->options[i].name != NULL; i++)
		if (cmd->options[i].short_name == c)
			return i;
	return -1;
}

static int
add_seen(struct gp_cli_args *args, int option, const char *value, char *err,
    size_t errlen)
{
	if (args->nseen == GP_CLI_SEEN_MAX) {
		snprintf(err, errlen, "too many options (at most %d)",
		    GP_CLI_SEEN_MAX);
		return GP_EINVAL;
	}
	args->seen[args->nseen].option = option;
	args->seen[args->nseen].value = value;
	args->nseen++;
	return 0;
}

int
gp_cli_parse(const struct gp_cli_command *cmd, int argc, char **argv,
    struct gp_cli_args *args, char *err, size_t errlen)
{
	int i, opt, nops = 0, options_done = 0;
	const char *a, *eq, *value;
	size_t len;

	memset(args, 0, sizeof(*args));
	args->cmd = cmd;
	err[0] = '\0';
	for (i = 1; i < argc; i++) {
		a = argv[i];
		if (!options_done && strcmp(a, "--") == 0) {
			options_done = 1;
			continue;
		}
		if (options_done || a[0] != '-' || a[1] == '\0') {
			/* An operand: compact operands at the front of argv. */
			argv[1 + nops++] = (char *)a;
			if (cmd->stop_at_operand)
				options_done = 1;
			continue;
		}
		if (a[1] == '-') {
			eq = strchr(a + 2, '=');
			len =
			    eq != NULL ? (size_t)(eq - (a + 2)) : strlen(a + 2);
			if (len == 4 && strncmp(a + 2, "help", 4) == 0) {
				args->help = 1;
				continue;
			}
			opt = find_long(cmd, a + 2, len);
			if (opt < 0) {
				snprintf(err, errlen,
				    "%s: unknown option '%.*s'", cmd->name,
				    (int)len + 2, a);
				return GP_EINVAL;
			}
			value = NULL;
			if (cmd->options[opt].metavar == NULL && eq != NULL) {
				snprintf(err, errlen,
				    "%s: option --%s takes no value", cmd->name,
				    cmd->options[opt].name);
				return GP_EINVAL;
			}
			if (cmd->options[opt].metavar != NULL) {
				if (eq != NULL)
					value = eq + 1;
				else if (i + 1 < argc)
					value = argv[++i];
				else {
					snprintf(err, errlen,
					    "%s: option --%s needs a value "
					    "(%s)",
					    cmd->name, cmd->options[opt].name,
					    cmd->options[opt].metavar);
					return GP_EINVAL;
				}
			}
			if (add_seen(args, opt, value, err, errlen) != 0)
				return GP_EINVAL;
			continue;
		}
		/* Short options, possibly grouped: -af, -g2, -g 2. */
		for (a++; *a != '\0'; a++) {
			if (*a == 'h') {
				args->help = 1;
				continue;
			}
			opt = find_short(cmd, *a);
			if (opt < 0) {
				snprintf(err, errlen,
				    "%s: unknown option '-%c'", cmd->name, *a);
				return GP_EINVAL;
			}
			value = NULL;
			if (cmd->options[opt].metavar != NULL) {
				if (a[1] != '\0')
					value = a + 1;
				else if (i + 1 < argc)
					value = argv[++i];
				else {
					snprintf(err, errlen,
					    "%s: option -%c needs a value (%s)",
					    cmd->name, *a,
					    cmd->options[opt].metavar);
					return GP_EINVAL;
				}
			}
			if (add_seen(args, opt, value, err, errlen) != 0)
				return GP_EINVAL;
			if (value != NULL)
				break;
		}
	}
	args->operands = argv + 1;
	args->noperands = nops;
	if (args->help)
		return 0;
	if (nops < cmd->min_operands) {
		snprintf(err, errlen, "%s: missing %s", cmd->name,
		    cmd->operands[0] == '[' ? "COMMAND" : cmd->operands);
		return GP_EINVAL;
	}
	if (cmd->max_operands >= 0 && nops > cmd->max_operands) {
		snprintf(err, errlen, "%s: unexpected argument '%s'", cmd->name,
		    argv[1 + cmd->max_operands]);
		return GP_EINVAL;
	}
	return 0;
}

static int
option_index(const struct gp_cli_args *args, const char *name)
{
	return find_long(args->cmd, name, strlen(name));
}

int
gp_cli_flag(const struct gp_cli_args *args, const char *name)
{
	int i, opt = option_index(args, name);

	for (i = 0; opt >= 0 && i < args->nseen; i++)
		if (args->seen[i].option == opt)
			return 1;
	return 0;
}

const char *
gp_cli_value(const struct gp_cli_args *args, const char *name)
{
	int i, opt = option_index(args, name);
	const char *v = NULL;

	for (i = 0; opt >= 0 && i < args->nseen; i++)
		if (args->seen[i].option == opt)
			v = args->seen[i].value;
	return v;
}

/* The group usage's first column: the longest command name. */
static int
name_width(void)
{
	size_t i, w = 14;

	for (i = 0; i < GP_ARRAY_LEN(commands); i++)
		if (strlen(commands[i].name) > w)
			w = strlen(commands[i].name);
	return (int)w;
}

/* Groups shown as one line in the global help. */
static const struct {
	const char *name, *summary;
} groups[] = {
    {"provider", "lend this machine: status, pause, reclaim, leave, policy"},
    {"data", "data sets: put, ls, rm, share, unshare"},
    {"quota", "storage quotas: show, set"},
    {"image", "container images: import, ls, rm, pull, sign"},
    {"token", "API tokens (admin): create, ls, revoke"},
    {"group", "groups (labs): create, ls, set, add, remove, move"},
    {"price", "the price table: set, rm, ls"},
    {"budget", "budgets of users and groups: set, rm, ls"},
};

/* The group summary when name's first word is such a group, else NULL. */
static const char *
group_summary(const char *name, size_t *len)
{
	size_t i;

	*len = strcspn(name, " ");
	for (i = 0; i < GP_ARRAY_LEN(groups); i++)
		if (strlen(groups[i].name) == *len &&
		    strncmp(name, groups[i].name, *len) == 0 &&
		    name[*len] == ' ')
			return groups[i].summary;
	return NULL;
}

static void
global_help(FILE *out)
{
	const char *group;
	size_t i, n;

	fprintf(out,
	    "usage: gpupool COMMAND [OPTIONS] [ARGS]\n"
	    "\n"
	    "gpupool pools GPUs that their owners lend and runs researchers' "
	    "jobs on them.\n"
	    "\n"
	    "Commands:\n");
	for (i = 0; i < GP_ARRAY_LEN(commands); i++) {
		if ((group = group_summary(commands[i].name, &n)) == NULL)
			fprintf(out, "  %-14s %s\n", commands[i].name,
			    commands[i].summary);
		else if (i == 0 || strncmp(commands[i - 1].name,
		    commands[i].name, n + 1) != 0)
			fprintf(out, "  %-14.*s %s\n", (int)n, commands[i].name,
			    group);
	}
	fprintf(out, "  %-14s %s\n  %-14s %s\n  %-14s %s\n", "coordinator",
	    "run the coordinator (see gpupool-coordinator(8))", "agent",
	    "run a provider agent (see gpupool-agent(8))", "version",
	    "print the version");
	fprintf(out,
	    "\n"
	    "`gpupool COMMAND --help` shows a command's options.\n"
	    "\n"
	    "Finding the pool: GPUPOOL_URL, GPUPOOL_TOKEN and GPUPOOL_CA "
	    "override the\n"
	    "config file ($GPUPOOL_CONFIG, else "
	    "$XDG_CONFIG_HOME/gpupool/config, else\n"
	    "~/.config/gpupool/config) with lines `url = ...`, "
	    "`token = ...`, `ca = ...`.\n"
	    "\n"
	    "Exit status: 0 on success, 1 on failure, 2 on a usage error; "
	    "`wait` exits\n"
	    "with the job's exit code.\n");
}

static const struct gp_cli_command *
find_command(int argc, char **argv, int *words)
{
	size_t i, n;
	const char *name;
	int w;

	/* Names have one or more words: "ps", "provider policy show". */
	for (i = 0; i < GP_ARRAY_LEN(commands); i++) {
		name = commands[i].name;
		for (w = 1; w < argc; w++) {
			n = strcspn(name, " ");
			if (strncmp(argv[w], name, n) != 0 ||
			    argv[w][n] != '\0')
				break;
			if (name[n] == '\0') {
				*words = w;
				return &commands[i];
			}
			name += n + 1;
		}
	}
	return NULL;
}

/* Commands with subcommands ("token"): lists them. Returns 1 if known. */
static int
group_usage(const char *group, FILE *out)
{
	size_t i, n = strlen(group);
	int found = 0;

	for (i = 0; i < GP_ARRAY_LEN(commands); i++) {
		if (strncmp(commands[i].name, group, n) != 0 ||
		    commands[i].name[n] != ' ')
			continue;
		if (!found)
			fprintf(out, "usage:\n");
		fprintf(out, "  gpupool %-*s %s\n", name_width() + 1,
		    commands[i].name, commands[i].summary);
		found = 1;
	}
	return found;
}

int
gp_cli_main(int argc, char **argv)
{
	const struct gp_cli_command *cmd;
	struct gp_cli_args args;
	char err[512];
	int words;

	if (argc < 2) {
		global_help(stderr);
		return GP_CLI_EXIT_USAGE;
	}
	if (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 ||
	    strcmp(argv[1], "-h") == 0) {
		if (argc >= 3 && strcmp(argv[1], "help") == 0) {
			cmd = find_command(argc - 1, argv + 1, &words);
			if (cmd != NULL) {
				gp_cli_usage(cmd, stdout);
				return 0;
			}
			if (group_usage(argv[2], stdout))
				return 0;
			gp_cli_error("unknown command '%s' (see gpupool help)",
			    argv[2]);
			return GP_CLI_EXIT_USAGE;
		}
		global_help(stdout);
		return 0;
	}
	cmd = find_command(argc, argv, &words);
	if (cmd == NULL) {
		if (group_usage(argv[1], stderr))
			return GP_CLI_EXIT_USAGE;
		gp_cli_error("unknown command '%s' (see gpupool help)",
		    argv[1]);
		return GP_CLI_EXIT_USAGE;
	}
	argc -= words;
	argv += words;
	if (gp_cli_parse(cmd, argc, argv, &args, err, sizeof(err)) != 0)
		return gp_cli_usage_error(&args, "%s", err);
	if (args.help) {
		gp_cli_usage(cmd, stdout);
		return 0;
	}
	gp_http_global_init();
	return cmd->run(&args);
}
