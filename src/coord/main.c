/*
 * main.c: `gpupool coordinator`: flags, the data directory, the first
 * admin token, the HTTP(S) server and an orderly stop on SIGINT/SIGTERM.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <getopt.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "proxy.h"
#include "relay.h"
#include "gang_relay.h"
#include "relay_tls.h"
#include "coord/coord.h"
#include "api.h"
#include "blob.h"
#include "ckpt_store.h"
#include "coord_metrics.h"
#include "datasets.h"
#include "held.h"
#include "image_store.h"
#include "notify.h"
#include "state.h"
#include "store.h"
#include "gp.h"
#include "leader.h"
#include "ledger.h"
#include "log.h"
#include "pg.h"
#include "sched.h"

/* Long options without a letter. */
enum { OPT_BLOB_DIR = 1000 };

struct MHD_Daemon *coord_daemon;
volatile int coord_stopping;

/*
 * Each HTTP connection's memory pool (libmicrohttpd). libmicrohttpd zeroes
 * the whole pool after every request on a kept-alive connection, so every
 * connection that has served a request keeps this much resident, and
 * every request clears it: an agent holds two connections (its poll and
 * its heartbeats), 20,000 for 10,000 agents. 12 KiB holds any API
 * request's headers with room to spare (bodies go to the handler's own
 * buffer); larger pools read uploads in bigger pieces, though checkpoint
 * uploads measured the same with 12 KiB and 16 KiB (287 to 291 against
 * 244 to 305 MB/s) and 10,000 agents take 40 MB less (bench/RESULTS.md).
 */
#define CONN_MEMORY_DEFAULT (12 * 1024)

static void
usage(FILE *out)
{
	fprintf(out,
	    "usage: gpupool coordinator --listen ADDR:PORT --data DIR\n"
	    "                           "
	    "[--db PATH|sqlite:PATH|postgresql://...]\n"
	    "                           [--tls-cert FILE --tls-key FILE]"
	    " [--insecure]\n"
	    "                           [--lease-ms N] [--heartbeat-ms N]\n"
	    "                           [--heartbeat-rate N]\n"
	    "                           [--log-cap BYTES] [--threads N] "
	    "[-v] [-q]\n"
	    "                           [--conn-memory BYTES]\n"
	    "                           [--checkpoint-keep N] "
	    "[--checkpoint-max SIZE]\n"
	    "                           [--checkpoint-retain DURATION]\n"
	    "                           [--quota-default SIZE] "
	    "[--data-max SIZE]\n"
	    "                           [--output-retain DURATION]\n"
	    "                           [--image-blob-max SIZE]\n"
	    "                           [--placement POLICY]\n"
	    "                           [--prices FILE] "
	    "[--accrual-interval DURATION]\n"
	    "                           [--fairshare-half-life DURATION] "
	    "[--budget-untimed DURATION]\n"
	    "                           [--min-job-age SECONDS]\n"
	    "                           [--interactive-time DURATION] "
	    "[--interactive-time-max DURATION]\n"
	    "                           [--proxy-listen ADDR:PORT] "
	    "[--proxy-domain DOMAIN]\n"
	    "                           [--proxy-tls-cert FILE "
	    "--proxy-tls-key FILE]\n"
	    "                           [--advertise-url URL] "
	    "[--leader-db CONNINFO]\n"
	    "                           [--leader-lease-ms N] "
	    "[--gang-relay PORT|off]\n"
	    "\n"
	    "The control plane: keeps the pool's state in DIR (SQLite, WAL),\n"
	    "serves the HTTP API, schedules jobs and pushes them to agents.\n"
	    "The first start creates an admin token, prints it once and\n"
	    "leaves it in DIR/admin.token (mode 0600).\n"
	    "\n"
	    "  --listen ADDR:PORT  where to listen (default 127.0.0.1:7070)\n"
	    "  --data DIR          state directory (created if missing)\n"
	    "  --blob-dir DIR      the blob files (checkpoints/, images/) and\n"
	    "                      job logs (logs/): a directory every\n"
	    "                      coordinator of the pool mounts\n"
	    "                      (docs/operations.md); default DIR\n"
	    "  --db STORE          where the pool's state is kept: a SQLite "
	    "file\n"
	    "                      (PATH or sqlite:PATH) or postgresql://... "
	    "(not\n"
	    "                      built in yet); default DIR/state.db. DIR "
	    "keeps\n"
	    "                      the store's pool id (DIR/pool_id): another\n"
	    "                      pool's store is refused\n"
	    "  --tls-cert FILE     PEM certificate: serve HTTPS\n"
	    "  --tls-key FILE      PEM private key for --tls-cert\n"
	    "                      (beyond loopback without them: its own CA\n"
	    "                      and certificate in DIR/tls, its hash in\n"
	    "                      the tokens it makes)\n"
	    "  --insecure          plain HTTP beyond loopback (tokens in clear)\n"
	    "  --lease-ms N        node lease: jobs of a node silent this long\n"
	    "                      are requeued (default 5000)\n"
	    "  --heartbeat-ms N    heartbeat period asked of agents (default "
	    "1000)\n"
	    "  --heartbeat-rate N  heartbeats a second the whole pool may "
	    "send\n"
	    "                      (default 2000; 0: no bound): a larger pool's "
	    "agents\n"
	    "                      beat less often, and their lease grows "
	    "with it\n"
	    "  --log-cap BYTES     per-job log cap (default 64M; K/M/G "
	    "suffixes)\n"
	    "  --threads N         HTTP worker threads (default 4)\n"
	    "  --conn-memory BYTES memory of each HTTP connection (default "
	    "12K; K/M\n"
	    "                      suffixes): every agent holds two, larger "
	    "reads help\n"
	    "                      checkpoint uploads\n"
	    "  --checkpoint-keep N checkpoint versions kept per job (default "
	    "3)\n"
	    "  --checkpoint-max SIZE\n"
	    "                      largest checkpoint version (default 64G)\n"
	    "  --checkpoint-retain DURATION\n"
	    "                      checkpoints of a finished job are removed "
	    "after\n"
	    "                      this long (default 7d)\n"
	    "  --quota-default SIZE\n"
	    "                      storage quota of users without one of "
	    "their own\n"
	    "                      (data sets and job outputs; default: no "
	    "limit)\n"
	    "  --data-max SIZE     largest data set version or job output "
	    "(default 1T)\n"
	    "  --output-retain DURATION\n"
	    "                      job outputs are removed this long after "
	    "the job\n"
	    "                      finished (default 30d)\n"
	    "  --image-blob-max SIZE\n"
	    "                      largest image blob (layer) accepted "
	    "(default 64G)\n"
	    "  --placement POLICY  where jobs go: frag (the default:\n"
	    "                      fragmentation-aware), bestfit, fgd, random,\n"
	    "                      dotprod, clustering, packing\n"
	    "  --prices FILE       the price table (\"CLASS CREDITS_PER_GPU_HOUR\""
	    "\n"
	    "                      lines) replaces the stored one at start\n"
	    "  --accrual-interval DURATION\n"
	    "                      running jobs are posted to the ledger this "
	    "often\n"
	    "                      (default 30s)\n"
	    "  --fairshare-half-life DURATION\n"
	    "                      half-life of decayed usage (default 7d; 0: "
	    "none)\n"
	    "  --budget-untimed DURATION\n"
	    "                      what a job without a time limit is taken to "
	    "run\n"
	    "                      for, against budgets (default 1h)\n"
	    "  --stream-idle-max DURATION  the longest idle limit an interactive\n"
	    "                           session may ask for (default 4h)\n"
	    "  --streams-per-job N, --streams-per-user N, --streams-max N\n"
	    "                           caps on open interactive streams\n"
	    "                           (default 64, 256, 4096)\n"
	    "  --relay-threads N    threads that move interactive streams'\n"
	    "                           bytes (default: one per core, at most "
	    "16)\n"
	    "  --gang-relay PORT|off\n"
	    "                      the UDP port of the relay for gang overlays "
	    "whose\n"
	    "                      parts cannot reach each other (symmetric "
	    "NATs),\n"
	    "                      on the --listen address (default: the "
	    "--listen\n"
	    "                      port; off: no relay)\n"
	    "  --min-job-age SECONDS\n"
	    "                      a finished job leaves memory this long after "
	    "it\n"
	    "                      ended, answered from DIR/state.db from then "
	    "on\n"
	    "                      (default 300; 0: kept in memory for ever)\n"
	    "  --interactive-time DURATION\n"
	    "                      time limit of an interactive job that asks "
	    "for none\n"
	    "                      (default 2h)\n"
	    "  --interactive-time-max DURATION\n"
	    "                      the longest time limit an interactive job "
	    "may ask\n"
	    "                      for (default 12h)\n"
	    "  --proxy-listen ADDR:PORT\n"
	    "                      serve jobs' declared ports (submit --expose) "
	    "to\n"
	    "                      their owners' browsers here, each at its own\n"
	    "                      origin jJOB-pPORT.DOMAIN (default: no proxy)\n"
	    "  --proxy-domain DOMAIN\n"
	    "                      the parent of those names: a wildcard DNS "
	    "name\n"
	    "                      for the proxy's address (default localhost)\n"
	    "  --proxy-tls-cert FILE, --proxy-tls-key FILE\n"
	    "                      the proxy's certificate for *.DOMAIN (default,\n"
	    "                      when the coordinator has TLS: one its own CA\n"
	    "                      signs, or --tls-cert's if it names *.DOMAIN)\n"
	    "  --advertise-url URL several coordinators, one leader: this "
	    "one's URL as\n"
	    "                      clients reach it; with --db postgresql://..."
	    " the\n"
	    "                      database's advisory lock and gp_leader elect "
	    "the\n"
	    "                      leader, a standby loads nothing and answers "
	    "503\n"
	    "                      naming it (default: http[s]://ADDR:PORT of "
	    "--listen;\n"
	    "                      required with --listen 0.0.0.0; unique "
	    "among the\n"
	    "                      live coordinators: a second one exits 78)\n"
	    "  --leader-db CONNINFO\n"
	    "                      the election's database when the state is "
	    "not in\n"
	    "                      PostgreSQL (tests; default: --db)\n"
	    "  --leader-lease-ms N a leader that cannot reach the database "
	    "this long\n"
	    "                      loses the lock to a standby (default "
	    "5000)\n"
	    "  -v, --verbose       debug logging;  -q, --quiet  warnings only\n");
}

static int
parse_listen(const char *text, struct coord_config *cfg)
{
	const char *colon = strrchr(text, ':');
	int64_t port;

	if (colon == NULL || colon == text ||
	    (size_t)(colon - text) >= sizeof(cfg->listen_addr))
		return GP_EINVAL;
	memcpy(cfg->listen_addr, text, (size_t)(colon - text));
	cfg->listen_addr[colon - text] = '\0';
	if (gp_parse_int(colon + 1, 0, 65535, &port) != 0)
		return GP_EINVAL;
	cfg->port = (int)port;
	return 0;
}

static int
parse_bytes(const char *text, int64_t *out)
{
	char *end;
	long long v = strtoll(text, &end, 10);
	int64_t mult = 1;

	if (end == text || v < 0)
		return GP_EINVAL;
	switch (*end) {
	case '\0':
		break;
	case 'k':
	case 'K':
		mult = 1024;
		end++;
		break;
	case 'm':
	case 'M':
		mult = 1024 * 1024;
		end++;
		break;
	case 'g':
	case 'G':
		mult = 1024 * 1024 * 1024;
		end++;
		break;
	default:
		return GP_EINVAL;
	}
	if (*end != '\0' || v > INT64_MAX / mult)
		return GP_EINVAL;
	*out = v * mult;
	return 0;
}

/*
 * Percent-decoding of the URL and its arguments: as libmicrohttpd's, but a
 * string holding "%00" is left undecoded, so that a NUL can never cut a
 * path or an argument short ("/v1/jobs/1%00" is no job, not job 1).
 */
static size_t
unescape(void *cls, struct MHD_Connection *conn, char *s)
{
	(void)cls;
	(void)conn;
	if (strstr(s, "%00") != NULL)
		return strlen(s);
	return MHD_http_unescape(s);
}

static volatile sig_atomic_t stop_requested;
static pthread_t main_thread;
static atomic_int stop_status; /* coord_stop's: the first non-zero wins */

/*
 * SIGINT/SIGTERM. A signal sent to the process may be handled by any
 * thread that does not block it; main waits in sigsuspend with the two
 * blocked outside it, so the handler passes it on to main, where it
 * stays pending until sigsuspend takes it (no window between main's
 * look at stop_requested and its wait).
 */
static void
on_signal(int sig)
{
	stop_requested = 1;
	if (!pthread_equal(pthread_self(), main_thread))
		pthread_kill(main_thread, sig);
}

void
coord_stop(int status)
{
	int none = 0;

	if (status != 0)
		atomic_compare_exchange_strong(&stop_status, &none, status);
	pg_stop_retrying();
	stop_requested = 1;
	pthread_kill(main_thread, SIGTERM); /* ends main's sigsuspend */
}

static atomic_int serving_state; /* the state thread runs: requests held */

/*
 * leader.c's on_lost (leader_lost): another coordinator leads, or may
 * by now. Nothing is committed from here on (the epoch is 0 in this
 * process, state_refuse): the requests held are answered "not the
 * leader", naming the new one when known, then the process exits
 * LEADER_EXIT_STEPPED_DOWN within COORD_STOP_BOUND_MS. Runs on the
 * thread that found the loss: it only sets flags and wakes main.
 */

static void
on_lead_lost(const char *why)
{
	if (!atomic_load(&serving_state)) {
		/* Still loading: nothing is held yet (answered "not ready"). */
		gp_warn("stepping down: no longer the leader (%s) while "
			"loading the state; exiting with status %d",
		    why, LEADER_EXIT_STEPPED_DOWN);
		_exit(LEADER_EXIT_STEPPED_DOWN);
	}
	state_refuse(STATE_REFUSE_NOT_LEADER, why);
	gp_warn("stepping down: no longer the leader (%s); answering the "
		"requests held \"not the leader\", then exiting with status "
		"%d for the supervisor to restart this coordinator as a "
		"standby",
	    why, LEADER_EXIT_STEPPED_DOWN);
	coord_stop(LEADER_EXIT_STEPPED_DOWN);
}

/*
 * How long a stop may take, from the signal (or the lead lost) to the
 * exit: the requests held are answered well before (a write failing
 * then is not retried, pg_stop_retrying); past this, whatever still
 * hangs (a database that does not answer, a request that does not end)
 * is cut and the process exits.
 */
#define COORD_STOP_BOUND_MS 10000
/* How long the answers of the last requests may take to go out. */
#define COORD_STOP_DRAIN_MS 3000

static void *
stop_watchdog(void *arg)
{
	struct timespec ts = {COORD_STOP_BOUND_MS / 1000,
	    (COORD_STOP_BOUND_MS % 1000) * 1000000L};
	int status;

	(void)arg;
	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
	status = atomic_load(&stop_status);
	gp_error("stopping took more than %d ms: exiting now with status "
		 "%d; what is still held is cut unanswered (none of it was "
		 "acknowledged)",
	    COORD_STOP_BOUND_MS, status != 0 ? status : 1);
	_exit(status != 0 ? status : 1);
}

/* Until every request in flight has its answer, at most ms. */
static void
drain_requests(int64_t ms)
{
	int64_t deadline = gp_mono_ms() + ms;

	while (api_requests_in_flight() > 0 && gp_mono_ms() < deadline)
		usleep(10 * 1000);
	if (api_requests_in_flight() > 0)
		gp_warn("stopping: requests=%d still open after %lld ms",
		    api_requests_in_flight(), (long long)ms);
}

static void
raise_fd_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static void
mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	size_t n;

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n > 0 && msg[n - 1] == '\n')
		msg[--n] = '\0';
	if (relay_tls_quiet_close()) {
		/* A TLS stream leg's normal end (relay_tls.h). */
		gp_debug("http: %s", msg);
		return;
	}
	gp_warn("http: %s", msg);
}

/*
 * Everything the coordinator keeps is a secret (job environments, token
 * hashes, users' checkpoints and data): its data directory and every
 * entry at its top (state.db and its -wal and -shm, the image and
 * checkpoint databases, admin.token, the logs, chunk and blob trees)
 * lose every permission of group and others, whatever they had before
 * (a directory made by hand, files of an older version); what lies
 * deeper is behind those directories. New files are made so by the
 * umask the coordinator sets. Fatal when a mode cannot be changed.
 */
static void
secure_data_dir(const char *dir)
{
	char path[PATH_MAX];
	struct dirent *de;
	int old;
	DIR *d;

	if (gp_secret_tighten(dir, &old) != 0)
		gp_fatal("cannot make %s the coordinator's alone (chmod 700)",
		    dir);
	if (old >= 0)
		gp_warn("data directory was open to other users, now 0700 "
		    "path=%s was=%04o", dir, old);
	if ((d = opendir(dir)) == NULL)
		gp_fatal("cannot read data directory %s", dir);
	while ((de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 ||
		    strcmp(de->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (gp_secret_tighten(path, &old) != 0)
			gp_fatal("cannot make %s the coordinator's alone",
			    path);
		if (old >= 0)
			gp_warn("secret file was open to other users, now "
			    "the coordinator's alone path=%s was=%04o", path,
			    old);
	}
	closedir(d);
}

/*
 * Once the coordinator is stopping, a new connection is closed as soon as
 * it is accepted; the ones already open are answered as before. (This and
 * not MHD_quiesce_daemon: on an epoll daemon with a thread pool, quiescing
 * races the workers, which take the listening socket out of their epoll
 * sets themselves when they see the daemon quiesced, and libmicrohttpd
 * 0.9.75 aborts the process, "Failed to remove listen FD from epoll set",
 * when a worker wakes in between: about one stop in 400 with requests in
 * flight.)
 */
static enum MHD_Result
accept_unless_stopping(void *cls, const struct sockaddr *addr,
    socklen_t addrlen)
{
	(void)cls;
	(void)addr;
	(void)addrlen;
	return coord_stopping ? MHD_NO : MHD_YES;
}

/*
 * Starts libmicrohttpd on addr with api_handle (coord_daemon); fatal
 * when it cannot listen.
 */
static void
start_http(const struct coord_config *cfg, const struct sockaddr_in *addr,
    char *cert, char *key)
{
	unsigned int flags;

	/* MHD_ALLOW_UPGRADE: the interactive streams' legs (relay.c). */
	flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
	    MHD_ALLOW_SUSPEND_RESUME | MHD_ALLOW_UPGRADE | MHD_USE_ERROR_LOG;
	if (cert != NULL)
		flags |= MHD_USE_TLS;
	coord_daemon = MHD_start_daemon(flags, 0, accept_unless_stopping, NULL,
	    api_handle, NULL,
	    MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
	    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)addr,
	    MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)cfg->threads,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned int)60000,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, cfg->conn_memory,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)120,
	    MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned int)4096,
	    MHD_OPTION_NOTIFY_COMPLETED, api_completed, NULL,
	    MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
	    cert != NULL ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END, cert,
	    MHD_OPTION_HTTPS_MEM_KEY, key, MHD_OPTION_END);
	if (coord_daemon == NULL)
		gp_fatalx("cannot listen on %s:%d (in use, or bad TLS files?)",
		    cfg->listen_addr, cfg->port);
	gp_info("listening addr=%s:%d tls=%s data=%s lease_ms=%lld "
		"placement=%s",
	    cfg->listen_addr, cfg->port, cert != NULL ? "yes" : "no",
	    cfg->data_dir, (long long)cfg->lease_ms,
	    gp_sched_policy_name(cfg->placement));
}

int
gp_coord_main(int argc, char **argv)
{
	static const struct option options[] = {
	    {"listen", required_argument, NULL, 'l'},
	    {"data", required_argument, NULL, 'd'},
	    {"blob-dir", required_argument, NULL, OPT_BLOB_DIR},
	    {"db", required_argument, NULL, 'E'},
	    {"tls-cert", required_argument, NULL, 'c'},
	    {"tls-key", required_argument, NULL, 'k'},
	    {"insecure", no_argument, NULL, 'X'},
	    {"lease-ms", required_argument, NULL, 'L'},
	    {"heartbeat-ms", required_argument, NULL, 'H'},
	    {"heartbeat-rate", required_argument, NULL, 'B'},
	    {"log-cap", required_argument, NULL, 'C'},
	    {"threads", required_argument, NULL, 't'},
	    {"conn-memory", required_argument, NULL, 'm'},
	    {"checkpoint-keep", required_argument, NULL, 'K'},
	    {"checkpoint-max", required_argument, NULL, 'M'},
	    {"checkpoint-retain", required_argument, NULL, 'R'},
	    {"quota-default", required_argument, NULL, 'Q'},
	    {"data-max", required_argument, NULL, 'D'},
	    {"output-retain", required_argument, NULL, 'O'},
	    {"image-blob-max", required_argument, NULL, 'I'},
	    {"placement", required_argument, NULL, 'P'},
	    {"prices", required_argument, NULL, 'p'},
	    {"accrual-interval", required_argument, NULL, 'A'},
	    {"fairshare-half-life", required_argument, NULL, 'F'},
	    {"budget-untimed", required_argument, NULL, 'U'},
	    {"min-job-age", required_argument, NULL, 'j'},
	    {"interactive-time", required_argument, NULL, 'i'},
	    {"interactive-time-max", required_argument, NULL, 'J'},
	    {"proxy-listen", required_argument, NULL, 1101},
	    {"proxy-domain", required_argument, NULL, 1102},
	    {"proxy-tls-cert", required_argument, NULL, 1103},
	    {"proxy-tls-key", required_argument, NULL, 1104},
	    {"stream-idle-max", required_argument, NULL, 1001},
	    {"streams-per-job", required_argument, NULL, 1002},
	    {"streams-per-user", required_argument, NULL, 1003},
	    {"streams-max", required_argument, NULL, 1004},
	    {"relay-threads", required_argument, NULL, 1005},
	    {"gang-relay", required_argument, NULL, 1201},
	    {"leader-db", required_argument, NULL, 'G'},
	    {"advertise-url", required_argument, NULL, 'a'},
	    {"leader-lease-ms", required_argument, NULL, 'e'},
	    {"verbose", no_argument, NULL, 'v'},
	    {"quiet", no_argument, NULL, 'q'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	struct leader_config lcfg = {NULL, NULL, NULL, 5000, 250, NULL};
	char advertised[160]; /* http[s]:// listen_addr (128) :port */
	struct coord_config cfg;
	struct relay_config relay_cfg;
	struct proxy_config proxy_cfg;
	int own_ca = 0; /* tls_auto_setup made the coordinator's own CA */
	struct sockaddr_in addr;
	char *cert = NULL, *key = NULL;
	int64_t v;
	int c, gang_relay = -1; /* -1: the --listen port */

	if (argc > 1 && strcmp(argv[1], "migrate") == 0)
		return gp_coord_migrate_main(argc - 1, argv + 1);
	memset(&cfg, 0, sizeof(cfg));
	gp_strlcpy(cfg.listen_addr, "127.0.0.1", sizeof(cfg.listen_addr));
	cfg.port = 7070;
	cfg.lease_ms = 5000;
	cfg.heartbeat_ms = 1000;
	cfg.heartbeat_rate = 2000;
	cfg.log_cap = 64LL << 20;
	cfg.threads = 4;
	cfg.conn_memory = CONN_MEMORY_DEFAULT;
	cfg.ckpt_keep = 3;
	cfg.ckpt_max = 64LL << 30;
	cfg.ckpt_retain_ms = 7 * 86400 * 1000LL;
	cfg.data_max = 1LL << 40;
	cfg.output_retain_ms = 30 * 86400 * 1000LL;
	cfg.image_blob_max = 64LL << 30;
	cfg.placement = gp_sched_policy_default();
	cfg.accrual_ms = 30 * 1000;
	cfg.half_life_ms = 7 * 86400 * 1000LL;
	cfg.budget_untimed_s = 3600;
	cfg.min_job_age_ms = 300 * 1000; /* as Slurm's MinJobAge */
	cfg.interactive_time_s = 2 * 3600;
	cfg.interactive_time_max_s = 12 * 3600;
	memset(&proxy_cfg, 0, sizeof(proxy_cfg));
	gp_strlcpy(proxy_cfg.domain, "localhost", sizeof(proxy_cfg.domain));
	relay_config_default(&relay_cfg);
	gp_log_init("coordinator", GP_LOG_INFO);
	optind = 1;
	while ((c = getopt_long(argc, argv, "vqh", options, NULL)) != -1) {
		switch (c) {
		case 'l':
			if (parse_listen(optarg, &cfg) != 0)
				gp_fatalx("--listen: expected ADDR:PORT, got "
					  "'%s'",
				    optarg);
			break;
		case OPT_BLOB_DIR:
			if (gp_strlcpy(cfg.blob_dir, optarg,
				sizeof(cfg.blob_dir)) >= sizeof(cfg.blob_dir))
				gp_fatalx("--blob-dir: path too long");
			break;
		case 'd':
			if (gp_strlcpy(cfg.data_dir, optarg,
				sizeof(cfg.data_dir)) >= sizeof(cfg.data_dir))
				gp_fatalx("--data: path too long");
			break;
		case 'E':
			if (gp_strlcpy(cfg.db, optarg, sizeof(cfg.db)) >=
			    sizeof(cfg.db))
				gp_fatalx("--db: too long");
			break;
		case 'c':
			gp_strlcpy(cfg.tls_cert, optarg, sizeof(cfg.tls_cert));
			break;
		case 'k':
			gp_strlcpy(cfg.tls_key, optarg, sizeof(cfg.tls_key));
			break;
		case 'L':
			if (gp_parse_int(optarg, 100, 3600000, &v) != 0)
				gp_fatalx("--lease-ms: 100 to 3600000");
			cfg.lease_ms = v;
			break;
		case 'H':
			if (gp_parse_int(optarg, 10, 600000, &v) != 0)
				gp_fatalx("--heartbeat-ms: 10 to 600000");
			cfg.heartbeat_ms = v;
			break;
		case 'B':
			if (gp_parse_int(optarg, 0, 1000000, &v) != 0)
				gp_fatalx("--heartbeat-rate: 0 (no bound) to "
					  "1000000 heartbeats a second");
			cfg.heartbeat_rate = v;
			break;
		case 'C':
			if (parse_bytes(optarg, &cfg.log_cap) != 0)
				gp_fatalx("--log-cap: a size like 65536, 64K "
					  "or 64M");
			break;
		case 't':
			if (gp_parse_int(optarg, 1, 64, &v) != 0)
				gp_fatalx("--threads: 1 to 64");
			cfg.threads = (int)v;
			break;
		case 'm':
			if (parse_bytes(optarg, &v) != 0 || v < 8 * 1024 ||
			    v > 16 * 1024 * 1024)
				gp_fatalx("--conn-memory: 8K to 16M");
			cfg.conn_memory = (size_t)v;
			break;
		case 'K':
			if (gp_parse_int(optarg, 1, 1000, &v) != 0)
				gp_fatalx("--checkpoint-keep: 1 to 1000");
			cfg.ckpt_keep = (int)v;
			break;
		case 'M':
			if (parse_bytes(optarg, &cfg.ckpt_max) != 0 ||
			    cfg.ckpt_max < 1)
				gp_fatalx("--checkpoint-max: a size like 64G");
			break;
		case 'R':
			if (gp_parse_duration(optarg, &v) != 0 ||
			    v > INT64_MAX / 1000)
				gp_fatalx("--checkpoint-retain: a duration like "
					  "7d or 12h");
			cfg.ckpt_retain_ms = v * 1000;
			break;
		case 'Q':
			if (gp_parse_bytes(optarg, &cfg.quota_default) != 0 ||
			    cfg.quota_default < 1)
				gp_fatalx("--quota-default: a size like 100G");
			break;
		case 'D':
			if (gp_parse_bytes(optarg, &cfg.data_max) != 0 ||
			    cfg.data_max < 1)
				gp_fatalx("--data-max: a size like 1T");
			break;
		case 'O':
			if (gp_parse_duration(optarg, &v) != 0 || v < 1 ||
			    v > INT64_MAX / 1000)
				gp_fatalx("--output-retain: a duration like "
				    "30d");
			cfg.output_retain_ms = v * 1000;
			break;
		case 'I':
			if (parse_bytes(optarg, &cfg.image_blob_max) != 0 ||
			    cfg.image_blob_max < 1)
				gp_fatalx("--image-blob-max: a size like 64G");
			break;
		case 'P':
			cfg.placement = gp_sched_policy_find(optarg);
			if (cfg.placement == NULL)
				gp_fatalx("--placement: one of %s",
				    gp_sched_policy_names());
			break;
		case 'p':
			if (gp_strlcpy(cfg.prices_file, optarg,
				sizeof(cfg.prices_file)) >=
			    sizeof(cfg.prices_file))
				gp_fatalx("--prices: path too long");
			break;
		case 'A':
			if (gp_parse_duration(optarg, &v) != 0 || v < 1 ||
			    v > 3600)
				gp_fatalx("--accrual-interval: a duration from "
					  "1s to 1h");
			cfg.accrual_ms = v * 1000;
			break;
		case 'F':
			if (gp_parse_duration(optarg, &v) != 0 ||
			    v > 3650LL * 86400)
				gp_fatalx("--fairshare-half-life: a duration "
					  "like 7d (0: no decay)");
			cfg.half_life_ms = v * 1000;
			break;
		case 'U':
			if (gp_parse_duration(optarg, &v) != 0 || v < 1 ||
			    v > GP_TIME_LIMIT_MAX)
				gp_fatalx("--budget-untimed: a duration like "
					  "1h");
			cfg.budget_untimed_s = v;
			break;
		case 'j':
			if (gp_parse_duration(optarg, &v) != 0 ||
			    v > 3650LL * 86400)
				gp_fatalx("--min-job-age: seconds (or a "
					  "duration like 5m; 0: for ever)");
			cfg.min_job_age_ms = v * 1000;
			break;
		case 'i':
		case 'J':
			if (gp_parse_duration(optarg, &v) != 0 || v < 1 ||
			    v > GP_TIME_LIMIT_MAX)
				gp_fatalx("--%s: a duration like 2h",
				    c == 'i' ? "interactive-time"
				             : "interactive-time-max");
			*(c == 'i' ? &cfg.interactive_time_s
			           : &cfg.interactive_time_max_s) = v;
			break;
		case 1201:
			/* The gang relay's UDP port: "off", or 1..65535. */
			if (strcmp(optarg, "off") == 0)
				gang_relay = 0;
			else if (gp_parse_int(optarg, 1, 65535, &v) == 0)
				gang_relay = (int)v;
			else
				gp_fatalx("--gang-relay: a UDP port, or off");
			break;
		case 1101: {
			struct coord_config tmp;
			if (parse_listen(optarg, &tmp) != 0)
				gp_fatalx("--proxy-listen: expected ADDR:PORT, "
				    "got '%s'", optarg);
			gp_strlcpy(proxy_cfg.addr, tmp.listen_addr,
			    sizeof(proxy_cfg.addr));
			proxy_cfg.port = tmp.port;
			break;
		}
		case 1102:
			if (optarg[0] == '\0' || optarg[0] == '.' ||
			    strlen(optarg) >= sizeof(proxy_cfg.domain) ||
			    strspn(optarg, "abcdefghijklmnopqrstuvwxyz"
			    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") !=
			    strlen(optarg))
				gp_fatalx("--proxy-domain: a DNS name like "
				    "jobs.example.org");
			gp_strlcpy(proxy_cfg.domain, optarg,
			    sizeof(proxy_cfg.domain));
			break;
		case 1103:
			gp_strlcpy(proxy_cfg.tls_cert, optarg,
			    sizeof(proxy_cfg.tls_cert));
			break;
		case 1104:
			gp_strlcpy(proxy_cfg.tls_key, optarg,
			    sizeof(proxy_cfg.tls_key));
			break;
		case 1001:
			if (gp_parse_duration(optarg, &v) != 0 || v < 1 ||
			    v > 366LL * 86400)
				gp_fatalx("--stream-idle-max: seconds (or a "
					  "duration like 1h)");
			relay_cfg.idle_max_ms = v * 1000;
			break;
		case 1002:
		case 1003:
		case 1004:
			if (gp_parse_int(optarg, 1, 1000000, &v) != 0)
				gp_fatalx("--streams-*: 1 to 1000000");
			if (c == 1002)
				relay_cfg.per_job_max = (int)v;
			else if (c == 1003)
				relay_cfg.per_user_max = (int)v;
			else
				relay_cfg.total_max = (int)v;
			break;
		case 1005:
			if (gp_parse_int(optarg, 1, 16, &v) != 0)
				gp_fatalx("--relay-threads: 1 to 16");
			relay_cfg.threads = (int)v;
			break;
		case 'G':
			lcfg.conninfo = optarg;
			break;
		case 'a':
			if (strncmp(optarg, "http://", 7) != 0 &&
			    strncmp(optarg, "https://", 8) != 0)
				gp_fatalx("--advertise-url: an http:// or "
				    "https:// URL");
			lcfg.advertise_url = optarg;
			break;
		case 'e':
			if (gp_parse_int(optarg, 500, 600000, &v) != 0)
				gp_fatalx("--leader-lease-ms: 500 to 600000");
			lcfg.lease_ms = v;
			break;
		case 'X':
			cfg.insecure = 1;
			break;
		case 'v':
			gp_log_set_level(GP_LOG_DEBUG);
			break;
		case 'q':
			gp_log_set_level(GP_LOG_WARN);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "gpupool coordinator: unexpected argument "
				"'%s'\n",
		    argv[optind]);
		usage(stderr);
		return 2;
	}
	if (cfg.data_dir[0] == '\0') {
		fprintf(stderr, "gpupool coordinator: --data DIR is required\n");
		usage(stderr);
		return 2;
	}
	/*
	 * Several coordinators: an --advertise-url with the state in
	 * PostgreSQL elects the leader in that database. The store's
	 * fence reads gp_leader in its own database: an election held in
	 * another could never pass it.
	 */
	if ((strncmp(cfg.db, "postgresql://", 13) == 0 ||
		strncmp(cfg.db, "postgres://", 11) == 0) &&
	    lcfg.conninfo != NULL && strcmp(lcfg.conninfo, cfg.db) != 0)
		gp_fatalx("--leader-db: with the state in PostgreSQL the "
		    "leader is elected in --db's database");
	/*
	 * Every coordinator on PostgreSQL takes part in the election, so
	 * that a second one on the same database stands by instead of
	 * fencing the first off in turn; its advertised URL is derived
	 * below when --listen names one address.
	 */
	if (lcfg.conninfo == NULL &&
	    (strncmp(cfg.db, "postgresql://", 13) == 0 ||
	    strncmp(cfg.db, "postgres://", 11) == 0))
		lcfg.conninfo = cfg.db;
	if (lcfg.advertise_url != NULL && lcfg.conninfo == NULL)
		gp_fatalx("--advertise-url is for several coordinators over "
		    "one PostgreSQL database (--db postgresql://...)");
	if ((cfg.tls_cert[0] != '\0') != (cfg.tls_key[0] != '\0'))
		gp_fatalx("--tls-cert and --tls-key go together");
	if ((proxy_cfg.tls_cert[0] != '\0') != (proxy_cfg.tls_key[0] != '\0'))
		gp_fatalx("--proxy-tls-cert and --proxy-tls-key go together");
	if (proxy_cfg.tls_cert[0] != '\0' && proxy_cfg.addr[0] == '\0')
		gp_fatalx("--proxy-tls-cert is for --proxy-listen");
	if (cfg.interactive_time_s > cfg.interactive_time_max_s)
		gp_fatalx("--interactive-time is longer than "
		    "--interactive-time-max");
	if (cfg.heartbeat_ms * 2 > cfg.lease_ms)
		gp_warn("heartbeat period is more than half the lease: nodes "
			"may be declared lost while alive heartbeat_ms=%lld "
			"lease_ms=%lld",
		    (long long)cfg.heartbeat_ms, (long long)cfg.lease_ms);
	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_port = htons((uint16_t)cfg.port);
	if (inet_pton(AF_INET, cfg.listen_addr, &addr.sin_addr) != 1)
		gp_fatalx("--listen: '%s' is not an IPv4 address",
		    cfg.listen_addr);
	if (lcfg.conninfo != NULL && lcfg.advertise_url == NULL &&
	    addr.sin_addr.s_addr == htonl(INADDR_ANY))
		gp_fatalx("--db postgresql://... with --listen %s:%d needs "
		    "--advertise-url URL: the URL clients reach this "
		    "coordinator by, where standbys send them while it leads "
		    "(a wildcard address does not say which)",
		    cfg.listen_addr, cfg.port);
	/* Every file and directory it makes: the coordinator's alone. */
	umask(077);
	if (cfg.blob_dir[0] == '\0')
		memcpy(cfg.blob_dir, cfg.data_dir, sizeof(cfg.blob_dir));
	else if (gp_mkdir_p(cfg.blob_dir, 0700) != 0)
		gp_fatal("cannot create --blob-dir %s", cfg.blob_dir);
	if (gp_mkdir_p(cfg.data_dir, 0700) != 0)
		gp_fatal("cannot create data directory %s", cfg.data_dir);
	secure_data_dir(cfg.data_dir);
	/*
	 * Beyond loopback tokens would cross the network: HTTPS, with a
	 * certificate of the owner's or one of its own; plain HTTP only when
	 * asked for by name.
	 */
	if ((ntohl(addr.sin_addr.s_addr) >> 24) != 127 &&
	    cfg.tls_cert[0] == '\0') {
		if (cfg.insecure)
			gp_warn("INSECURE: serving plain HTTP beyond loopback "
			    "(--insecure): tokens and jobs cross the network "
			    "in clear addr=%s", cfg.listen_addr);
		else if (tls_auto_setup(&cfg) != 0)
			gp_fatalx("cannot make the coordinator's own "
			    "certificate (give --tls-cert and --tls-key, or "
			    "--insecure)");
		else
			own_ca = 1;
	} else
		cfg.insecure = 0;
	/* The proxy has TLS when the coordinator has (proxy_tls.c). */
	if (proxy_cfg.addr[0] != '\0' &&
	    proxy_tls_choose(&proxy_cfg, &cfg, own_ca) != 0)
		gp_fatalx("cannot make the job port proxy's certificate (give "
		    "--proxy-tls-cert and --proxy-tls-key)");
	if (proxy_cfg.tls_key[0] != '\0' &&
	    strcmp(proxy_cfg.tls_key, cfg.tls_key) != 0) {
		char why[PATH_MAX + 160];

		if (gp_secret_check("--proxy-tls-key", proxy_cfg.tls_key, why,
		    sizeof(why)) != 0) {
			fprintf(stderr, "gpupool coordinator: %s\n", why);
			return 1;
		}
	}
	if (lcfg.conninfo != NULL && lcfg.advertise_url == NULL) {
		/* The one address it answers on, by the scheme it serves. */
		snprintf(advertised, sizeof(advertised), "%s://%s:%d",
		    cfg.tls_cert[0] != '\0' ? "https" : "http",
		    cfg.listen_addr, cfg.port);
		lcfg.advertise_url = advertised;
		gp_info("advertise url=%s (from --listen; --advertise-url "
			"gives another)",
		    advertised);
	}
	if (cfg.tls_key[0] != '\0') {
		char why[PATH_MAX + 160];

		if (gp_secret_check("--tls-key", cfg.tls_key, why,
		    sizeof(why)) != 0) {
			fprintf(stderr, "gpupool coordinator: %s\n", why);
			return 1;
		}
	}
	if (cfg.tls_cert[0] != '\0') {
		if (gp_read_file(cfg.tls_cert, 1 << 20, &cert, NULL) != 0)
			gp_fatal("cannot read --tls-cert %s", cfg.tls_cert);
		if (gp_read_file(cfg.tls_key, 1 << 20, &key, NULL) != 0)
			gp_fatal("cannot read --tls-key %s", cfg.tls_key);
	}
	if (gp_token_init() != 0)
		gp_fatalx("libsodium failed to initialise");
	raise_fd_limit();
	signal(SIGPIPE, SIG_IGN);
	if (metrics_init() != 0)
		gp_fatalx("cannot set up the metrics");
	main_thread = pthread_self();
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	if (lcfg.conninfo != NULL) {
		/*
		 * Several coordinators: serve at once, as a standby (503
		 * naming the leader), and load the state only once this one
		 * has won the lock and raised the epoch.
		 */
		/* Standby before the first request can arrive. */
		/* The pool to check: only where the state is, this database. */
		if (strcmp(lcfg.conninfo, cfg.db) == 0)
			lcfg.data_dir = cfg.data_dir;
		/*
		 * Every session of this coordinator: a transaction left open
		 * by a pause ends with its lease (pg.h).
		 */
		pg_set_session_lease(lcfg.lease_ms);
		lcfg.on_lost = on_lead_lost;
		if (leader_start(&lcfg) != 0)
			gp_fatalx("cannot start the leader election");
		start_http(&cfg, &addr, cert, key);
		gp_info("standby: waiting for the leader's lock url=%s",
		    lcfg.advertise_url);
		while (!stop_requested && leader_epoch() == 0)
			usleep(20 * 1000);
		if (stop_requested) {
			gp_info("stopping (standby)");
			MHD_stop_daemon(coord_daemon);
			leader_stop();
			return 0;
		}
		gp_info("loading the state to lead epoch=%lld",
		    (long long)leader_epoch());
	}
	if (state_init(&cfg) != 0)
		gp_fatalx("cannot load state from %s", cfg.data_dir);
	{
		char why[1600];

		if (gp_coord_records_stranded(state.store, cfg.data_dir, why,
			sizeof(why)) != 0)
			gp_fatalx("%s", why);
	}
	if (blob_init(&cfg) != 0)
		gp_fatalx("cannot open the blob store in %s", cfg.data_dir);
	if (ckpt_init(&cfg) != 0)
		gp_fatalx("cannot open the checkpoint store in %s",
		    cfg.data_dir);
	if (data_init(&cfg) != 0)
		gp_fatalx("cannot open the data store in %s", cfg.data_dir);
	if (image_init(&cfg) != 0)
		gp_fatalx("cannot open the image store in %s", cfg.data_dir);
	if (blob_start() != 0)
		gp_fatalx("cannot start the blob store's threads");
	image_attach_jobs();
	if (state_create_admin_token_if_none() != 0)
		gp_fatalx("cannot create the admin token");
	{
		char why[1200];

		/*
		 * The gang relay (UDP): on the --listen port unless told
		 * otherwise, before the state thread assigns a gang (whose
		 * parts get its key); given, it must start; by default a
		 * coordinator that cannot bind it runs without (said).
		 */
		if (gang_relay_start(cfg.listen_addr, gang_relay < 0 ?
		    cfg.port : gang_relay, cfg.blob_dir, why,
		    sizeof(why)) != 0) {
			if (gang_relay > 0)
				gp_fatalx("--gang-relay: %s", why);
			gp_warn("no gang relay: %s (gangs behind NATs that "
			    "change ports need it)", why);
		}
	}
	if (state_start_thread() != 0)
		gp_fatalx("cannot start the state thread");
	if (held_start() != 0)
		gp_fatalx("cannot start the threads of held requests");

	if (relay_start(&relay_cfg) != 0)
		gp_fatalx("cannot start the stream relay");
	{
		char why[2600];

		if (proxy_start(&proxy_cfg, why, sizeof(why)) != 0)
			gp_fatalx("--proxy-listen: %s", why);
	}

	atomic_store(&serving_state, 1);
	if (lcfg.conninfo != NULL)
		leader_set_serving();
	else
		start_http(&cfg, &addr, cert, key);
	{
		sigset_t stop_set, old_set;

		sigemptyset(&stop_set);
		sigaddset(&stop_set, SIGINT);
		sigaddset(&stop_set, SIGTERM);
		pthread_sigmask(SIG_BLOCK, &stop_set, &old_set);
		while (!stop_requested)
			sigsuspend(&old_set);
		pthread_sigmask(SIG_SETMASK, &old_set, NULL);
	}
	{
		pthread_t watchdog;

		/*
		 * A write failing from now on is answered "not committed"
		 * rather than retried for PG_STORE_RETRY_MS, and the whole
		 * stop is bounded (stop_watchdog).
		 */
		pg_stop_retrying();
		if (pthread_create(&watchdog, NULL, stop_watchdog, NULL) == 0)
			pthread_detach(watchdog);
	}
	gp_info("stopping");
	/* Answer every held long poll, finish queued changes, then stop. */
	coord_stopping = 1; /* and no new connection: accept_unless_stopping */
	proxy_stop();
	relay_stop();
	gang_relay_stop();
	terminal_stop(5000);
	state_stop_thread();
	notify_expire(INT64_MAX);
	held_stop(); /* none suspended when the daemon stops */
	drain_requests(COORD_STOP_DRAIN_MS);
	MHD_stop_daemon(coord_daemon);
	blob_stop();
	ckpt_stop();
	data_stop();
	image_stop();
	ledger_close(&ledger);
	gp_store_close(state.store);
	state.store = NULL;
	leader_stop(); /* the lock last: after the last commit */
	free(cert);
	free(key);
	if (atomic_load(&stop_status) != 0)
		gp_info("stopped status=%d", atomic_load(&stop_status));
	return atomic_load(&stop_status);
}
