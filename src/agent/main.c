/*
 * main.c: `gpupool agent`: flags, start-up checks, and the lifecycle of
 * the provider agent's threads (executor, report senders, heartbeat,
 * poll). The main thread only waits for SIGINT/SIGTERM.
 */
#include <errno.h>
#include <pthread.h>
#include <getopt.h>
#include <pwd.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/agentd.h"
#include "agent/ctxprobe.h"
#include "agent/gpushare.h"
#include "agent/datacache.h"
#include "agent/container.h"
#include "agent/image.h"
#include "agent/metrics.h"
#include "agent/overlay.h"
#include "agent/spawner.h"
#include "coord_urls.h"
#include "gp.h"
#include "http_client.h"
#include "log.h"
#include "token.h"
#include "util.h"

#define REPORT_THREADS 4
#define SHUTDOWN_GRACE_MS 5000
#define STREAMS_STOP_MS 5000 /* for the streams into jobs to end */

static const char usage_text[] =
"usage: gpupool agent --coordinator URL --token TOKEN [--token-file F]\n"
"           [--name NAME] [--work DIR]\n"
"           [--fake-gpus N[:MODEL[:MEM_MIB[:CAPABILITY]]]]\n"
"           [--advertise-addr HOST] [--gang-overlay off|auto|always]\n"
"           [--gang-overlay-port PORT]\n"
"           [--run-as USER] [--ca FILE] [--cpus N] [--mem MIB]\n"
"           [--policy FILE] [--control PATH] [--owner USER]\n"
"           [--metrics-listen [ADDR:]PORT [--metrics-token-file F]]\n"
"           [--runtime auto|crun|runc|none|PATH] [--userns-base UID]\n"
"           [--scratch-size SIZE] [--container-init PATH]\n"
"           [--data-cache-max SIZE] [--image-cache-max SIZE] [-v]\n"
"\n"
"Lends this machine's GPUs to a gpupool coordinator and runs the jobs it\n"
"assigns, each in a sandbox (namespaces, read-only root, own cgroup), or\n"
"for a job with an image in an OCI container (crun or runc).\n"
"\n"
"  --coordinator URL  coordinator base URL (or $GPUPOOL_URL); given again\n"
"                     (or URLs separated by commas): several coordinators,\n"
"                     the agent follows the one that leads\n"
"  --token TOKEN      provider token (or $GPUPOOL_TOKEN, or --token-file)\n"
"  --token-file F     read the token from file F\n"
"  --name NAME        node name (default: the hostname)\n"
"  --work DIR         job directories go to DIR/jobs (default:\n"
"                     /var/lib/gpupool/agent as root, else\n"
"                     $XDG_STATE_HOME/gpupool/agent); not under /tmp\n"
"  --fake-gpus SPEC   lend N fake GPUs (tests): \"2\", \"4:A100:40960\",\n"
"                     \"2:H100:80G:9.0\" (compute capability 9.0)\n"
"  --advertise-addr HOST\n"
"                     where other nodes reach this one: other nodes\n"
"                     route to the gang parts here through it (default:\n"
"                     the address the coordinator sees)\n"
"  --gang-overlay MODE gangs across NATs through WireGuard (wireguard-go):\n"
"                     auto (the default) when a part's node gave no\n"
"                     --advertise-addr; always; off (docs/agent.md)\n"
"  --gang-overlay-port PORT\n"
"                     the first of the overlay's 16 UDP ports, one per\n"
"                     overlay gang part (default 51820 + 16 x the\n"
"                     agent's address block)\n"
"  --fake-gpu-procs F with --fake-gpus: FILE lists \"GPU PID\" lines, the\n"
"                     owner's processes on fake GPUs (tests)\n"
"  --run-as USER      run jobs as USER (root only; default nobody); jobs\n"
"                     never run as root\n"
"  --ca FILE          CA certificate to verify an HTTPS coordinator\n"
"  --cpus N           CPUs to offer (default: all online)\n"
"  --mem MIB          memory to offer, e.g. 64G (default: all)\n"
"  --policy FILE      the owner's lending policy (docs/provider.md);\n"
"                     re-read when it changes and on SIGHUP\n"
"  --control PATH     the owner's control socket (default:\n"
"                     WORK/agent.sock; \"none\" for no socket)\n"
"  --owner USER       who may use the control socket besides root\n"
"                     (default: $SUDO_USER, else the agent's user)\n"
"  --data-cache-max SIZE\n"
"                     data set versions kept for jobs, in WORK/data\n"
"                     (default 100G; least recently used evicted)\n"
"  --image-cache-max SIZE\n"
"                     unpacked image layers kept in WORK/images, e.g.\n"
"                     20G (default 20G); least recently used go first\n"
"  --metrics-listen [ADDR:]PORT\n"
"                     serve Prometheus metrics on GET /metrics (ADDR\n"
"                     defaults to 127.0.0.1; off unless given)\n"
"  --metrics-token-file F\n"
"                     scrapers must send this token as a bearer token\n"
"  --runtime RT       OCI runtime for container jobs: auto (crun, else\n"
"                     runc; the default), crun, runc, a path, or none\n"
"  --userns-base UID  container jobs map to host ids UID..UID+65535\n"
"                     (default 2147418112); never 0 or a host user's\n"
"  --scratch-size SZ  a container's /tmp and /dev/shm, each (default 1G)\n"
"  --container-init P gpupool-init (default: next to this binary)\n"
"  --fake-gpu-root D  with --fake-gpus: NVIDIA device nodes, ld cache and\n"
"                     CDI specs under D instead of / (tests)\n"
"  -v, --verbose      debug logging\n";

/* What the coordinator accepts as a node's address (state.c addr_valid). */
static int
addr_valid(const char *s)
{
	size_t i;

	for (i = 0; s[i] != '\0'; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		        (s[i] >= 'A' && s[i] <= 'Z') ||
		        (s[i] >= '0' && s[i] <= '9') || s[i] == '.' ||
		        s[i] == ':' || s[i] == '-' || s[i] == '_'))
			return 0;
	return i > 0 && i <= 253;
}

static int64_t
machine_mem_mib(void)
{
	char *data = NULL, *p;
	size_t len;
	int64_t kib = 0;

	if (gp_read_file("/proc/meminfo", 1 << 16, &data, &len) == 0 &&
	    (p = strstr(data, "MemTotal:")) != NULL)
		kib = strtoll(p + 9, NULL, 10);
	free(data);
	return kib / 1024;
}

static int
default_work(char *out, size_t len)
{
	const char *state = getenv("XDG_STATE_HOME"), *home = getenv("HOME");

	if (geteuid() == 0)
		snprintf(out, len, "/var/lib/gpupool/agent");
	else if (state != NULL && state[0] == '/')
		snprintf(out, len, "%s/gpupool/agent", state);
	else if (home != NULL && home[0] == '/')
		snprintf(out, len, "%s/.local/state/gpupool/agent", home);
	else
		return GP_EINVAL;
	return 0;
}

static int
read_token(const char *path, char **token)
{
	char *data;
	size_t len;

	if (gp_read_file(path, 4096, &data, &len) != 0)
		return GP_EIO;
	while (len > 0 && (data[len - 1] == '\n' || data[len - 1] == '\r' ||
	    data[len - 1] == ' '))
		data[--len] = '\0';
	*token = data;
	return 0;
}

/* Checks and completes the work directory: absolute, real, not tmpfs. */
static int
setup_work(struct gp_agent *ag, const char *work)
{
	char real[PATH_MAX];

	if (work[0] != '/') {
		fprintf(stderr, "gpupool agent: --work must be an absolute "
		    "path\n");
		return GP_EINVAL;
	}
	if (gp_mkdir_p(work, 0711) != 0 || realpath(work, real) == NULL) {
		fprintf(stderr, "gpupool agent: cannot create %s: %s\n", work,
		    strerror(errno));
		return GP_EIO;
	}
	/* The sandbox mounts a fresh /tmp and /dev/shm over these. */
	if (strcmp(real, "/tmp") == 0 || strncmp(real, "/tmp/", 5) == 0 ||
	    strncmp(real, "/dev/shm", 8) == 0) {
		fprintf(stderr, "gpupool agent: --work %s: must not be under "
		    "/tmp or /dev/shm (jobs get a private /tmp)\n", real);
		return GP_EINVAL;
	}
	gp_strlcpy(ag->work, real, sizeof(ag->work));
	/*
	 * The checkpoints restored for jobs: the agent's alone whatever an
	 * older version left (the data and image caches make theirs 0700).
	 */
	{
		char restore[PATH_MAX + 16];
		int old;

		snprintf(restore, sizeof(restore), "%s/restore", real);
		if (gp_secret_tighten(restore, &old) != 0) {
			fprintf(stderr, "gpupool agent: cannot chmod 700 %s: "
			    "%s\n", restore, strerror(errno));
			return GP_EIO;
		}
		if (old >= 0)
			gp_warn("restore directory was open to other users, "
			    "now 0700 path=%s was=%04o", restore, old);
	}
	return 0;
}

/*
 * Container jobs: the runtime, checked with a probe container. Asked for
 * by name (--runtime crun) it must work; "auto" that finds none leaves
 * the agent running plain jobs only, saying why. Returns 0 or GP_E*.
 */
static int
setup_containers(struct gp_agent *ag, const struct gp_container_options *o)
{
	int ret;

	if (strcmp(o->runtime, "none") == 0) {
		gp_strlcpy(ag->containers_why, "disabled with --runtime none",
		    sizeof(ag->containers_why));
		gp_info("container jobs disabled (--runtime none)");
		return 0;
	}
	ret = gp_containers_new(ag->work, o, &ag->cgroups, ag->gpus.gpus,
	    ag->gpus.n < 64 ? ag->gpus.n : 64, ag->gpu_minors, &ag->containers,
	    ag->containers_why, sizeof(ag->containers_why));
	if (ret == 0)
		return 0;
	if (strcmp(o->runtime, "auto") != 0) {
		fprintf(stderr, "gpupool agent: --runtime %s: %s\n",
		    o->runtime, ag->containers_why);
		return ret;
	}
	gp_warn("container jobs disabled: %s", ag->containers_why);
	return 0;
}

/*
 * The agent outlives gp_agent_main's return on purpose (a poll thread may
 * still be blocked in a long poll and read it); kept reachable here.
 */
static struct gp_agent *volatile live_agent;

static void *
bloat_thread(void *arg)
{
	struct timespec ts = {0, 20 * 1000 * 1000};

	(void)arg;
	for (;;)
		nanosleep(&ts, NULL);
	return NULL;
}

/*
 * Benchmarks only (bench/spawn_cost.sh): GPUPOOL_AGENT_BLOAT="THREADS,MIB"
 * makes the agent as big as a long-lived one, THREADS more threads and
 * MIB of touched heap, so that a job start's dependence on the agent's
 * size shows. Never freed; NULL or malformed does nothing.
 */
static void
bench_bloat(const char *spec)
{
	long threads = 0, mib = 0, i;
	pthread_attr_t attr;
	pthread_t t;
	char *heap;

	if (spec == NULL || sscanf(spec, "%ld,%ld", &threads, &mib) != 2 ||
	    threads < 0 || threads > 256 || mib < 0 || mib > 65536)
		return;
	if (mib > 0 && (heap = malloc((size_t)mib << 20)) != NULL)
		for (i = 0; i < mib << 20; i += 4096)
			heap[i] = 1;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, 64 << 10);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (i = 0; i < threads; i++)
		if (pthread_create(&t, &attr, bloat_thread, NULL) != 0)
			break;
	pthread_attr_destroy(&attr);
	gp_info("bench bloat threads=%ld heap_mib=%ld", i, mib);
}

int
gp_agent_main(int argc, char **argv)
{
	static const struct option options[] = {
		{"coordinator", required_argument, NULL, 'c'},
		{"token", required_argument, NULL, 't'},
		{"token-file", required_argument, NULL, 'T'},
		{"name", required_argument, NULL, 'n'},
		{"work", required_argument, NULL, 'w'},
		{"fake-gpus", required_argument, NULL, 'f'},
		{"fake-gpu-procs", required_argument, NULL, 'F'},
		{"run-as", required_argument, NULL, 'u'},
		{"ca", required_argument, NULL, 'a'},
		{"cpus", required_argument, NULL, 'C'},
		{"mem", required_argument, NULL, 'm'},
		{"policy", required_argument, NULL, 'P'},
		{"control", required_argument, NULL, 'S'},
		{"owner", required_argument, NULL, 'O'},
		{"data-cache-max", required_argument, NULL, 'D'},
		{"metrics-listen", required_argument, NULL, 'M'},
		{"metrics-token-file", required_argument, NULL, 'K'},
		{"runtime", required_argument, NULL, 'R'},
		{"userns-base", required_argument, NULL, 'B'},
		{"scratch-size", required_argument, NULL, 'Z'},
		{"container-init", required_argument, NULL, 'I'},
		{"fake-gpu-root", required_argument, NULL, 'G'},
		{"advertise-addr", required_argument, NULL, 'A'},
		{"image-cache-max", required_argument, NULL, 'X'},
		{"gang-overlay", required_argument, NULL, 1001},
		{"gang-overlay-port", required_argument, NULL, 1002},
		{"verbose", no_argument, NULL, 'v'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *url = getenv("GPUPOOL_URL"), *fake = NULL, *run_as = NULL;
	const char *work = NULL, *name = NULL, *token_file = NULL, *ca = NULL;
	const char *policy = NULL, *control = NULL, *owner = NULL;
	const char *fake_procs = NULL, *fake_gpu_root = NULL;
	const char *metrics_listen = NULL, *metrics_token_file = NULL;
	const char *advertise = NULL;
	enum gp_overlay_mode overlay_mode = GP_OVERLAY_AUTO;
	int64_t overlay_port = 0;
	struct gp_container_options copts;
	char *token = NULL, *file_token = NULL, err[512], prefix[16];
	char *metrics_token = NULL, urls[GP_COORD_URLS_MAX *
	    GP_COORD_URLS_LEN];
	struct gp_agent_metrics *metrics = NULL;
	struct sockaddr_in metrics_addr;
	char work_default[PATH_MAX], cache_dir[PATH_MAX];
	struct gp_agent *ag = NULL;
	pthread_condattr_t cattr;
	int64_t cpus = 0, mem = 0, cache_max = 100LL << 30;
	int64_t cache_mib = 20 * 1024;
	sigset_t sigs;
	const char *spawn_mode;
	int probe;

	/* A child of gp_ctxprobe_measure, not an agent. */
	if ((probe = gp_ctxprobe_child()) >= 0)
		return probe;
	/*
	 * An agent that is not root runs its jobs under its own uid (in
	 * user namespaces of their own): not dumpable, no process of that
	 * uid outside them may ptrace it, read its memory or its
	 * /proc/PID/environ (its token), and it dumps no core. The
	 * children that write their own uid_map make themselves dumpable
	 * again (sandbox.c, netns_pasta.c); exec resets it for the rest.
	 * Its jobs cannot even name it: each has a PID namespace.
	 */
	if (geteuid() != 0 && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)
		fprintf(stderr, "gpupool agent: PR_SET_DUMPABLE: %s\n",
		    strerror(errno));
	int c, sig, ret = 1, verbose = 0;

	memset(&copts, 0, sizeof(copts));
	copts.runtime = "auto";
	optind = 1;
	while ((c = getopt_long(argc, argv, "vh", options, NULL)) != -1) {
		switch (c) {
		case 'c':
			/* Repeated: several coordinators, one list. */
			if (url == urls) {
				size_t used = strlen(urls);

				if ((size_t)snprintf(urls + used,
				    sizeof(urls) - used, ",%s", optarg) >=
				    sizeof(urls) - used) {
					fprintf(stderr, "gpupool agent: too "
					    "many --coordinator URLs\n");
					return 2;
				}
			} else
				gp_strlcpy(urls, optarg, sizeof(urls));
			url = urls;
			break;
		case 't': token = optarg; break;
		case 'T': token_file = optarg; break;
		case 'n': name = optarg; break;
		case 'w': work = optarg; break;
		case 'f': fake = optarg; break;
		case 'F': fake_procs = optarg; break;
		case 'u': run_as = optarg; break;
		case 'a': ca = optarg; break;
		case 'C':
			if (gp_parse_int(optarg, 1, GP_CPUS_MAX, &cpus) != 0) {
				fprintf(stderr, "gpupool agent: bad --cpus %s\n",
				    optarg);
				return 2;
			}
			break;
		case 'm':
			if (gp_parse_mib(optarg, &mem) != 0 || mem <= 0) {
				fprintf(stderr, "gpupool agent: bad --mem %s\n",
				    optarg);
				return 2;
			}
			break;
		case 'P': policy = optarg; break;
		case 'S': control = optarg; break;
		case 'O': owner = optarg; break;
		case 'D':
			if (gp_parse_bytes(optarg, &cache_max) != 0 ||
			    cache_max < 1) {
				fprintf(stderr, "gpupool agent: bad "
				    "--data-cache-max %s\n", optarg);
				return 2;
			}
			break;
		case 'M':
			if (gp_agent_metrics_parse_listen(optarg,
			    &metrics_addr) != 0) {
				fprintf(stderr, "gpupool agent: "
				    "--metrics-listen: expected PORT or "
				    "ADDR:PORT (IPv4), got '%s'\n", optarg);
				return 2;
			}
			metrics_listen = optarg;
			break;
		case 'K': metrics_token_file = optarg; break;
		case 'R': copts.runtime = optarg; break;
		case 'I': copts.init_path = optarg; break;
		case 'G': fake_gpu_root = optarg; break;
		case 1001:
			if (gp_overlay_mode_parse(optarg, &overlay_mode) != 0) {
				fprintf(stderr, "gpupool agent: bad "
				    "--gang-overlay %s: off, auto or always\n",
				    optarg);
				return 2;
			}
			break;
		case 1002:
			if (gp_parse_int(optarg, 1, 65535,
			    &overlay_port) != 0) {
				fprintf(stderr, "gpupool agent: bad "
				    "--gang-overlay-port %s: 1 to 65535\n",
				    optarg);
				return 2;
			}
			break;
		case 'A':
			if (!addr_valid(optarg)) {
				fprintf(stderr, "gpupool agent: bad "
				    "--advertise-addr %s: a host name or IP "
				    "address (1 to 253 of A-Z a-z 0-9 . : - _)\n",
				    optarg);
				return 2;
			}
			advertise = optarg;
			break;
		case 'B': {
			int64_t v;
			if (gp_parse_int(optarg, 1, 4294967295LL - 65536,
			    &v) != 0) {
				fprintf(stderr, "gpupool agent: bad "
				    "--userns-base %s\n", optarg);
				return 2;
			}
			copts.userns_base = (uint32_t)v;
			break;
		}
		case 'Z': {
			int64_t mib;
			if (gp_parse_mib(optarg, &mib) != 0 || mib <= 0) {
				fprintf(stderr, "gpupool agent: bad "
				    "--scratch-size %s\n", optarg);
				return 2;
			}
			copts.scratch_bytes = mib << 20;
			break;
		}
		case 'X':
			if (gp_parse_mib(optarg, &cache_mib) != 0 ||
			    cache_mib <= 0) {
				fprintf(stderr, "gpupool agent: bad "
				    "--image-cache-max %s (a size: 512M, 20G)\n",
				    optarg);
				return 2;
			}
			break;
		case 'v': verbose = 1; break;
		case 'h':
			fputs(usage_text, stdout);
			return 0;
		default:
			fputs(usage_text, stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "gpupool agent: unexpected argument %s\n",
		    argv[optind]);
		return 2;
	}
	gp_log_init("agent", verbose ? GP_LOG_DEBUG : GP_LOG_INFO);
	/* Secrets the owner made: theirs alone, or the agent will not start. */
	{
		const char *what[] = {"--token-file", "--metrics-token-file"};
		const char *path[] = {token_file, metrics_token_file};
		char why[PATH_MAX + 160];

		for (int k = 0; k < 2; k++)
			if (path[k] != NULL && gp_secret_check(what[k],
			    path[k], why, sizeof(why)) == GP_EPERM) {
				fprintf(stderr, "gpupool agent: %s\n", why);
				return 2;
			}
	}
	if (token == NULL && token_file != NULL) {
		if (read_token(token_file, &file_token) != 0) {
			fprintf(stderr, "gpupool agent: cannot read "
			    "--token-file %s\n", token_file);
			return 2;
		}
		token = file_token;
	}
	if (metrics_token_file != NULL) {
		if (metrics_listen == NULL) {
			fprintf(stderr, "gpupool agent: --metrics-token-file "
			    "needs --metrics-listen\n");
			return 2;
		}
		if (read_token(metrics_token_file, &metrics_token) != 0 ||
		    metrics_token[0] == '\0') {
			fprintf(stderr, "gpupool agent: cannot read a token "
			    "from --metrics-token-file %s\n",
			    metrics_token_file);
			free(metrics_token);
			return 2;
		}
	}
	if (token == NULL)
		token = getenv("GPUPOOL_TOKEN");
	if (url == NULL || token == NULL || token[0] == '\0') {
		fprintf(stderr, "gpupool agent: need --coordinator URL and a "
		    "token (--token, --token-file or $GPUPOOL_TOKEN)\n\n%s",
		    usage_text);
		goto out;
	}
	if ((ag = calloc(1, sizeof(*ag))) == NULL)
		goto out;
	live_agent = ag;
	pthread_mutex_init(&ag->lock, NULL);
	pthread_mutex_init(&ag->apply_lock, NULL);
	pthread_condattr_init(&cattr);
	pthread_condattr_setclock(&cattr, CLOCK_MONOTONIC);
	pthread_cond_init(&ag->cond, &cattr);
	pthread_condattr_destroy(&cattr);
	ag->url = url;
	ag->token = token;
	ag->heartbeat_ms = 1000;
	ag->ca_file = ca;
	if (name == NULL) {
		if (gethostname(ag->name, sizeof(ag->name)) != 0)
			gp_strlcpy(ag->name, "node", sizeof(ag->name));
		ag->name[sizeof(ag->name) - 1] = '\0';
	} else
		gp_strlcpy(ag->name, name, sizeof(ag->name));
	if (advertise != NULL)
		gp_strlcpy(ag->advertise_addr, advertise,
		    sizeof(ag->advertise_addr));
	if (!gp_name_valid(ag->name)) {
		fprintf(stderr, "gpupool agent: node name \"%s\" must be 1..64 "
		    "of [A-Za-z0-9._-]\n", ag->name);
		goto out;
	}
	ag->cpus = cpus > 0 ? (int)cpus : (int)sysconf(_SC_NPROCESSORS_ONLN);
	ag->mem_mib = mem > 0 ? mem : machine_mem_mib();
	if (work == NULL) {
		if (default_work(work_default, sizeof(work_default)) != 0) {
			fprintf(stderr, "gpupool agent: give --work DIR\n");
			goto out;
		}
		work = work_default;
	}
	if (setup_work(ag, work) != 0)
		goto out;
	if (gp_gpu_open(fake, ag->name, &ag->gpus, err, sizeof(err)) != 0) {
		fprintf(stderr, "gpupool agent: %s\n", err);
		goto out;
	}
	if (fake_procs != NULL &&
	    gp_gpu_set_fake_procs(&ag->gpus, fake_procs) != 0) {
		fprintf(stderr, "gpupool agent: --fake-gpu-procs needs "
		    "--fake-gpus\n");
		goto out;
	}
	if (fake_gpu_root != NULL && fake == NULL) {
		fprintf(stderr, "gpupool agent: --fake-gpu-root needs "
		    "--fake-gpus\n");
		goto out;
	}
	copts.fake_gpu_root = fake_gpu_root;
	if (fake == NULL && ag->gpus.state == NULL)
		gp_warn("%s: lending 0 GPUs; use --fake-gpus for tests", err);
	for (c = 0; c < ag->gpus.n; c++)
		gp_info("gpu index=%d uuid=%s model=\"%s\" mem_mib=%lld",
		    ag->gpus.gpus[c].index, ag->gpus.gpus[c].uuid,
		    ag->gpus.gpus[c].model,
		    (long long)ag->gpus.gpus[c].mem_mib);
	if (gp_sandbox_user_init(run_as, &ag->user, err, sizeof(err)) != 0) {
		fprintf(stderr, "gpupool agent: %s\n", err);
		goto out;
	}
	gp_cgroup_set_scope(ag->name);
	gp_cgroup_init(&ag->cgroups);
	gp_cgroup_sweep_stale(&ag->cgroups);
	for (c = 0; c < ag->gpus.n && c < 64; c++)
		ag->gpu_minors[c] = gp_gpu_minor(&ag->gpus, c);
	if (setup_containers(ag, &copts) != 0)
		goto out;
	ag->exec_cfg.user = &ag->user;
	ag->exec_cfg.cgroups = &ag->cgroups;
	ag->exec_cfg.work_dir = ag->work;
	ag->exec_cfg.gpus = ag->gpus.gpus;
	ag->exec_cfg.ngpus = ag->gpus.n < 64 ? ag->gpus.n : 64;
	ag->exec_cfg.gpu_minors = ag->gpu_minors;
	ag->exec_cfg.gpu_uuids = fake == NULL;
	/* Fractions of a GPU are enforced when the library is installed. */
	if (gp_gpushare_find_lib(ag->gpu_shim, sizeof(ag->gpu_shim)) == 0) {
		ag->exec_cfg.gpu_shim = ag->gpu_shim;
		gp_info("gpu sharing enforced lib=%s", ag->gpu_shim);
		/* Real GPUs: what each process's context takes of one. */
		if (fake == NULL && ag->gpus.n > 0)
			gp_ctxprobe_measure(ag->gpus.gpus, ag->gpus.n);
	} else
		gp_warn("gpu sharing not enforced: libgpupool-cuda.so not "
		    "found beside the executable");
	ag->exec_cfg.keep_workdir = 1;
	ag->exec_cfg.containers = ag->containers;
	ag->exec_cfg.containers_why = ag->containers_why;
	/* Plain jobs run as a user that might read the token files. */
	{
		int nhidden = 0;

		if (token_file != NULL &&
		    (ag->hidden[nhidden] = realpath(token_file, NULL)) != NULL)
			nhidden++;
		if (metrics_token_file != NULL && (ag->hidden[nhidden] =
		    realpath(metrics_token_file, NULL)) != NULL)
			nhidden++;
		if (nhidden > 0)
			ag->exec_cfg.hidden_paths = ag->hidden;
	}
	if (policy != NULL && realpath(policy, ag->policy_path) == NULL) {
		fprintf(stderr, "gpupool agent: --policy %s: %s\n", policy,
		    strerror(errno));
		goto out;
	}
	if (control == NULL)
		snprintf(ag->control_path, sizeof(ag->control_path),
		    "%.4000s/agent.sock", ag->work);
	else if (strcmp(control, "none") != 0)
		gp_strlcpy(ag->control_path, control,
		    sizeof(ag->control_path));
	if (owner == NULL && geteuid() == 0)
		owner = getenv("SUDO_USER");
	ag->owner_uid = geteuid();
	if (owner != NULL) {
		struct passwd *pw = getpwnam(owner);
		if (pw == NULL) {
			fprintf(stderr, "gpupool agent: --owner %s: no such "
			    "user\n", owner);
			goto out;
		}
		ag->owner_uid = pw->pw_uid;
	}

	/* Signals: SIGPIPE ignored; SIGINT/SIGTERM for this thread only. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&sigs);
	sigaddset(&sigs, SIGINT);
	sigaddset(&sigs, SIGTERM);
	sigaddset(&sigs, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &sigs, NULL);
	/*
	 * The spawn helper, forked while the agent is one small thread:
	 * jobs' init processes are cloned from it, never from the agent
	 * (agent/spawner.h). GPUPOOL_AGENT_SPAWN=direct (benches) clones
	 * them from the agent as before.
	 */
	spawn_mode = getenv("GPUPOOL_AGENT_SPAWN");
	if (spawn_mode == NULL || strcmp(spawn_mode, "direct") != 0) {
		if ((ag->spawner = gp_spawner_start(err, sizeof(err))) == NULL)
			gp_warn("no spawn helper why=\"%s\": jobs are cloned "
			    "from the agent", err);
		ag->exec_cfg.spawner = ag->spawner;
	}
	/*
	 * Plain jobs' minimal root, bound once for many jobs (sandbox.h);
	 * GPUPOOL_AGENT_ROOT_TEMPLATE=off (benches): each job binds its own.
	 */
	spawn_mode = getenv("GPUPOOL_AGENT_ROOT_TEMPLATE");
	if (!ag->user.userns && (spawn_mode == NULL ||
	    strcmp(spawn_mode, "off") != 0) &&
	    gp_sandbox_template_new(&ag->exec_cfg.root_template, ag->work,
	    err, sizeof(err)) != 0)
		gp_warn("no root template why=\"%s\": each job binds its "
		    "root path by path", err);
	bench_bloat(getenv("GPUPOOL_AGENT_BLOAT"));
	gp_http_global_init();

	snprintf(cache_dir, sizeof(cache_dir), "%.4000s/data", ag->work);
	if ((ag->datacache = gp_datacache_new(cache_dir, cache_max, err,
	    sizeof(err))) == NULL) {
		fprintf(stderr, "gpupool agent: %s\n", err);
		goto out;
	}
	{
		char dir[PATH_MAX + 16];
		snprintf(dir, sizeof(dir), "%.4000s/images", ag->work);
		if ((ag->images = gp_image_cache_new(dir, cache_mib << 20,
		    NULL, err, sizeof(err))) == NULL) {
			fprintf(stderr, "gpupool agent: image cache: %s\n",
			    err);
			goto out;
		}
	}
	if ((ag->reports = gp_reports_new(ag, REPORT_THREADS)) == NULL)
		goto out;
	if ((ag->provider = gp_provider_new(ag, err, sizeof(err))) == NULL) {
		fprintf(stderr, "gpupool agent: %s\n", err);
		goto out;
	}
	/* The owner's reclaim of an interactive job: its terminals hear. */
	gp_provider_set_reclaim_hook(ag->provider, gp_attach_reclaim_notice,
	    NULL);
	{
		enum gp_net_policy net;
		int64_t rate;

		gp_provider_net_policy(ag->provider, &net, &rate);
		if (gp_net_new(&ag->net, net, rate, ag->work, err,
		    sizeof(err)) != 0) {
			fprintf(stderr, "gpupool agent: job networks: %s\n",
			    err);
			goto out;
		}
		ag->exec_cfg.net = ag->net;
		/*
		 * The gang overlay: its ports go with the registration,
		 * and its helper starts a spare wireguard-go now. "auto"
		 * does without when it cannot run here; "always" was asked
		 * for: no start without it.
		 */
		if (overlay_mode != GP_OVERLAY_OFF && gp_net_gangs(ag->net)) {
			if (gp_overlay_new(&ag->overlay, overlay_mode,
			    gp_net_block(ag->net), (int)overlay_port, err,
			    sizeof(err)) == 0 &&
			    gp_overlay_start(ag->overlay, err,
			    sizeof(err)) == 0) {
				gp_overlay_set_coordinator(ag->overlay, ag->url,
				    &ag->coord_at);
				gp_net_set_overlay(ag->net, ag->overlay);
			}
			else if (ag->overlay != NULL) {
				gp_overlay_free(ag->overlay);
				ag->overlay = NULL;
				fprintf(stderr, "gpupool agent: gang overlay: "
				    "%s\n", err);
				goto out;
			} else if (overlay_mode == GP_OVERLAY_ALWAYS) {
				fprintf(stderr, "gpupool agent: "
				    "--gang-overlay always: %s\n", err);
				goto out;
			} else
				gp_info("no gang overlay (%s): gangs are "
				    "linked directly", err);
		} else if (overlay_mode == GP_OVERLAY_ALWAYS) {
			fprintf(stderr, "gpupool agent: --gang-overlay always: "
			    "gangs need a root agent and a network other "
			    "than none\n");
			goto out;
		}
	}
	/* Its offer says so too ("gangs": false, provider.c). */
	if (!gp_net_gangs(ag->net))
		gp_info("no gang parts here: this agent cannot link a gang's "
		    "parts across nodes (it is not root, or its network is "
		    "none); the coordinator places none of a gang of several "
		    "nodes here");
	ag->exec_events.arg = ag->provider;
	ag->exec_events.started = gp_provider_on_started;
	ag->exec_events.output = gp_provider_on_output;
	ag->exec_events.finished = gp_provider_on_finished;
	if ((ag->executor = gp_executor_new(&ag->exec_cfg,
	    &ag->exec_events)) == NULL)
		goto out;
	gp_token_prefix(token, prefix, sizeof(prefix));
	gp_info("agent starting node=%s coordinator=%s token=%s cpus=%d "
	    "mem_mib=%lld gpus=%d run_as=%s work=%s", ag->name, ag->url,
	    prefix, ag->cpus, (long long)ag->mem_mib, ag->gpus.n,
	    ag->user.name, ag->work);
	if (metrics_listen != NULL &&
	    (metrics = gp_agent_metrics_start(ag, &metrics_addr,
	    metrics_token, err, sizeof(err))) == NULL) {
		fprintf(stderr, "gpupool agent: %s\n", err);
		goto out;
	}
	if (gp_link_start(ag) != 0) {
		gp_error("cannot start threads");
		goto out;
	}
	for (;;) {
		sigwait(&sigs, &sig);
		if (sig != SIGHUP)
			break;
		gp_info("SIGHUP: re-reading the policy");
		gp_provider_reload(ag->provider);
	}
	ret = atomic_load(&ag->fatal) ? 1 : 0;
	gp_info("agent stopping signal=%d", sig);
	/* Sessions hear it first: their jobs' processes end now. */
	gp_attach_notice_all("\r\ngpupool: the agent on the job's machine "
	    "is stopping: this session ends\r\n");
	/* Jobs checkpoint and are requeued, as when the owner leaves. */
	if (ret == 0)
		gp_provider_drain(ag->provider, "agent_stopped");
	gp_link_stop(ag);
	/* Streams end before the jobs and the executor they enter go. */
	gp_attach_stop(STREAMS_STOP_MS);
	gp_agent_metrics_stop(metrics);
	metrics = NULL;
	/* Kill every job, then give the reports a moment to go out. */
	gp_executor_free(ag->executor);
	ag->executor = NULL;
	gp_spawner_free(ag->spawner);
	ag->spawner = NULL;
	gp_sandbox_template_free(ag->exec_cfg.root_template);
	ag->exec_cfg.root_template = NULL;
	gp_net_free(ag->net);
	ag->net = NULL;
	gp_overlay_free(ag->overlay);
	ag->overlay = NULL;
	gp_provider_free(ag->provider);
	ag->provider = NULL;
	gp_reports_free(ag->reports, ret == 0 ? SHUTDOWN_GRACE_MS : 0);
	ag->reports = NULL;
	gp_image_cache_free(ag->images);
	ag->images = NULL;
	gp_containers_free(ag->containers);
	ag->containers = NULL;
	gp_cgroup_fini(&ag->cgroups);
out:
	gp_agent_metrics_stop(metrics);
	if (metrics_token != NULL) {
		memset(metrics_token, 0, strlen(metrics_token));
		free(metrics_token);
	}
	if (ag != NULL) {
		if (ag->executor != NULL)
			gp_executor_free(ag->executor);
		gp_spawner_free(ag->spawner);
		ag->spawner = NULL;
		gp_sandbox_template_free(ag->exec_cfg.root_template);
		ag->exec_cfg.root_template = NULL;
		gp_net_free(ag->net);
		ag->net = NULL;
		gp_overlay_free(ag->overlay);
		ag->overlay = NULL;
		if (ag->provider != NULL)
			gp_provider_free(ag->provider);
		if (ag->reports != NULL)
			gp_reports_free(ag->reports, 0);
		gp_image_cache_free(ag->images);
		ag->images = NULL;
		gp_containers_free(ag->containers);
		ag->containers = NULL;
		gp_gpu_close(&ag->gpus);
		gp_datacache_free(ag->datacache);
		ag->datacache = NULL;
		/* The poll thread may still read ag: leave it allocated. */
	}
	if (file_token != NULL)
		memset(file_token, 0, strlen(file_token));
	return ret;
}
