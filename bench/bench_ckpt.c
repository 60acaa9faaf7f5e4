/*
 * bench_ckpt.c: a minimal agent for the checkpoint store, used by the
 * end-to-end test (tests/e2e/test_checkpoint_store.sh) and as the
 * checkpoint benchmark (bench/run.sh). It registers a node with fake GPUs,
 * heartbeats the attempts it was given and moves directories with the
 * agent's client (src/common/transfer.c).
 *
 *   bench_ckpt node --url U --token-file F --name N --out FILE
 *       registers, writes "JOB ATTEMPT" lines to FILE as assignments
 *       arrive, heartbeats them; runs until killed.
 *   bench_ckpt upload|download --url U --token-file F --job J
 *       --attempt A --dir D [--mark FILE] [--parallel N]
 *       one call of gp_ckpt_upload / gp_ckpt_download; prints the stats
 *       as one JSON line; exit 1 (error on stderr) on failure, 3 on a
 *       409 (stale attempt).
 *   bench_ckpt bench --url U --admin-token-file F --work DIR
 *       [--size-mib N] [--parallel N] [--coord-pid PID]
 *       makes its own tokens, node and job, then times the upload and
 *       download of N MiB (default 1024) and of a version with 10% of
 *       its chunks changed. Prints "metric value unit" lines: rates,
 *       times, the CPU time of this client and (with --coord-pid) of the
 *       coordinator in each phase. BENCH_MARKS=1 also prints each phase's
 *       start and end on stderr (see phase_mark).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "transfer.h"
#include "ckpt.h"
#include "gp.h"
#include "http_client.h"
#include "log.h"
#include "util.h"

struct options {
	const char *cmd;
	const char *url;
	char token[256];
	char admin_token[256];
	const char *name;
	const char *out;
	const char *dir;
	const char *mark;
	const char *work;
	int64_t job, attempt;
	int parallel;
	int64_t size_mib;
	long coord_pid; /* 0: unknown */
};

static int
read_token(const char *path, char *out, size_t len)
{
	char *data;
	size_t n;

	if (gp_read_file(path, 4096, &data, &n) != 0)
		return -1;
	while (n > 0 && (data[n - 1] == '\n' || data[n - 1] == '\r' ||
	    data[n - 1] == ' '))
		data[--n] = '\0';
	gp_strlcpy(out, data, len);
	free(data);
	return 0;
}

/* ---- a fake node ---- */

struct node_state {
	const char *url;
	const char *token;
	const char *out; /* or NULL */
	const char *name;
	int64_t node_id;
	pthread_mutex_t lock;
	json_t *running; /* [{job_id, attempt}] */
	_Atomic int stop;
	pthread_t hb, poll;
};

static json_t *
post_json(struct gp_http_client *http, const char *path, json_t *body,
    long *status)
{
	struct gp_http_response resp;
	char *text = json_dumps(body, JSON_COMPACT);
	json_t *reply = NULL;

	json_decref(body);
	*status = 0;
	if (text == NULL)
		return NULL;
	if (gp_http_request(http, "POST", path, text, strlen(text), NULL,
		10000, &resp) == 0) {
		*status = resp.status;
		reply = json_loadb(resp.body, resp.body_len, 0, NULL);
	}
	gp_http_response_fini(&resp);
	free(text);
	return reply;
}

static int
node_register(struct node_state *ns, struct gp_http_client *http)
{
	json_t *reply;
	long status;

	pthread_mutex_lock(&ns->lock);
	reply = post_json(http, "/v1/agent/register",
	    json_pack("{s:i,s:s,s:i,s:I,s:[{s:i,s:s,s:s,s:I}],s:O}",
		"protocol", GP_PROTOCOL_VERSION, "name", ns->name, "cpus", 4,
		"mem_mib", (json_int_t)8192, "gpus", "index", 0, "uuid",
		"GPU-bench-ckpt", "model", "FakeCkpt", "mem_mib",
		(json_int_t)16000, "running", ns->running),
	    &status);
	pthread_mutex_unlock(&ns->lock);
	if (status != 200) {
		json_decref(reply);
		return -1;
	}
	ns->node_id = json_integer_value(json_object_get(reply, "node_id"));
	json_decref(reply);
	return ns->node_id > 0 ? 0 : -1;
}

static void *
heartbeat_main(void *arg)
{
	struct node_state *ns = arg;
	struct gp_http_client *http;
	json_t *reply, *k;
	long status;
	size_t i, j;

	http = gp_http_client_new(ns->url, ns->token, NULL);
	while (http != NULL && !atomic_load(&ns->stop)) {
		pthread_mutex_lock(&ns->lock);
		reply = post_json(http, "/v1/agent/heartbeat",
		    json_pack("{s:I,s:O,s:[]}", "node_id",
			(json_int_t)ns->node_id, "running", ns->running,
			"gpus"),
		    &status);
		/* Forget what the coordinator says is not ours any more. */
		json_array_foreach(json_object_get(reply, "kill"), i, k)
		{
			for (j = 0; j < json_array_size(ns->running); j++) {
				json_t *r = json_array_get(ns->running, j);
				if (json_equal(json_object_get(r, "job_id"),
					json_object_get(k, "job_id")) &&
				    json_equal(json_object_get(r, "attempt"),
					json_object_get(k, "attempt"))) {
					json_array_remove(ns->running, j);
					break;
				}
			}
		}
		pthread_mutex_unlock(&ns->lock);
		json_decref(reply);
		if (status == 404)
			node_register(ns, http);
		usleep(200 * 1000);
	}
	gp_http_client_free(http);
	return NULL;
}

static void *
poll_main(void *arg)
{
	struct node_state *ns = arg;
	struct gp_http_client *http;
	struct gp_http_response resp;
	json_t *reply, *a;
	char path[128];
	size_t i;
	FILE *f;

	http = gp_http_client_new(ns->url, ns->token, NULL);
	while (http != NULL && !atomic_load(&ns->stop)) {
		snprintf(path, sizeof(path),
		    "/v1/agent/poll?node_id=%lld&wait_ms=500",
		    (long long)ns->node_id);
		if (gp_http_request(http, "GET", path, NULL, 0, NULL, 10000,
			&resp) != 0 || resp.status != 200) {
			gp_http_response_fini(&resp);
			usleep(200 * 1000);
			continue;
		}
		reply = json_loadb(resp.body, resp.body_len, 0, NULL);
		gp_http_response_fini(&resp);
		json_array_foreach(json_object_get(reply, "assignments"), i, a)
		{
			json_int_t job = json_integer_value(
			    json_object_get(a, "job_id"));
			json_int_t att = json_integer_value(
			    json_object_get(a, "attempt"));
			pthread_mutex_lock(&ns->lock);
			json_array_append_new(ns->running, json_pack(
			    "{s:I,s:I}", "job_id", job, "attempt", att));
			pthread_mutex_unlock(&ns->lock);
			if (ns->out != NULL &&
			    (f = fopen(ns->out, "a")) != NULL) {
				fprintf(f, "%lld %lld\n", (long long)job,
				    (long long)att);
				fclose(f);
			}
		}
		/* A cancelled attempt "exits" at once. */
		json_array_foreach(json_object_get(reply, "cancels"), i, a)
		{
			json_int_t job = json_integer_value(
			    json_object_get(a, "job_id"));
			json_int_t att = json_integer_value(
			    json_object_get(a, "attempt"));
			json_t *r, *done;
			size_t j;
			long status;

			snprintf(path, sizeof(path),
			    "/v1/agent/jobs/%lld/%lld/finished", (long long)job,
			    (long long)att);
			done = post_json(http, path, json_pack("{s:I,s:s}",
			    "node_id", (json_int_t)ns->node_id, "reason",
			    "cancelled"), &status);
			json_decref(done);
			pthread_mutex_lock(&ns->lock);
			json_array_foreach(ns->running, j, r)
			{
				if (json_integer_value(json_object_get(r,
					"job_id")) == job) {
					json_array_remove(ns->running, j);
					break;
				}
			}
			pthread_mutex_unlock(&ns->lock);
		}
		json_decref(reply);
	}
	gp_http_client_free(http);
	return NULL;
}

static int
node_start(struct node_state *ns)
{
	struct gp_http_client *http;
	int tries;

	pthread_mutex_init(&ns->lock, NULL);
	ns->running = json_array();
	http = gp_http_client_new(ns->url, ns->token, NULL);
	if (http == NULL)
		return -1;
	for (tries = 0; node_register(ns, http) != 0; tries++) {
		if (tries > 100) {
			gp_http_client_free(http);
			fprintf(stderr, "bench_ckpt: cannot register\n");
			return -1;
		}
		usleep(100 * 1000);
	}
	gp_http_client_free(http);
	pthread_create(&ns->hb, NULL, heartbeat_main, ns);
	pthread_create(&ns->poll, NULL, poll_main, ns);
	return 0;
}

static void
node_stop(struct node_state *ns)
{
	atomic_store(&ns->stop, 1);
	pthread_join(ns->hb, NULL);
	pthread_join(ns->poll, NULL);
	json_decref(ns->running);
}

/* ---- one transfer ---- */

static void
print_stats(const char *what, const struct gp_ckpt_stats *st)
{
	json_t *o = json_pack("{s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:s,s:s}",
	    "op", what, "version", (json_int_t)st->version, "files",
	    (json_int_t)st->files, "bytes", (json_int_t)st->bytes,
	    "bytes_sent", (json_int_t)st->bytes_sent, "chunks",
	    (json_int_t)st->chunks, "chunks_sent",
	    (json_int_t)st->chunks_sent, "elapsed_ms",
	    (json_int_t)st->elapsed_ms, "label", st->label, "skipped",
	    st->skipped);
	char *text = json_dumps(o, JSON_COMPACT);

	printf("%s\n", text != NULL ? text : "{}");
	free(text);
	json_decref(o);
}

static int
load_mark(const char *path, struct gp_ckpt_mark *m)
{
	char *data;
	size_t n;
	long long a, b, c, d;

	memset(m, 0, sizeof(*m));
	if (path == NULL || gp_read_file(path, 4096, &data, &n) != 0)
		return 0;
	if (sscanf(data, "%lld %lld %lld %lld", &a, &b, &c, &d) == 4) {
		m->marker_mtime_ns = a;
		m->marker_ino = b;
		m->marker_size = c;
		m->version = d;
	}
	free(data);
	return 0;
}

static void
save_mark(const char *path, const struct gp_ckpt_mark *m)
{
	char text[128];

	if (path == NULL)
		return;
	snprintf(text, sizeof(text), "%lld %lld %lld %lld\n",
	    (long long)m->marker_mtime_ns, (long long)m->marker_ino,
	    (long long)m->marker_size, (long long)m->version);
	gp_write_file(path, text, strlen(text), 0600);
}

static int
transfer(const struct options *o)
{
	struct gp_ckpt_target t;
	struct gp_ckpt_mark mark;
	struct gp_ckpt_stats st;
	char err[512];
	int ret, up = strcmp(o->cmd, "upload") == 0;

	memset(&t, 0, sizeof(t));
	t.url = o->url;
	t.token = o->token;
	t.job_id = o->job;
	t.attempt = o->attempt;
	t.parallel = o->parallel;
	load_mark(o->mark, &mark);
	if (up)
		ret = gp_ckpt_upload(&t, o->dir, &mark, &st, err, sizeof(err));
	else
		ret = gp_ckpt_download(&t, o->dir, getuid(), getgid(), &mark,
		    &st, err, sizeof(err));
	if (ret != 0) {
		fprintf(stderr, "bench_ckpt: %s: %s (%s)\n", o->cmd, err,
		    gp_strerror(ret));
		return ret == GP_ECONFLICT ? 3 : 1;
	}
	save_mark(o->mark, &mark);
	print_stats(o->cmd, &st);
	return 0;
}

/* ---- the benchmark ---- */

static json_t *
admin_call(const char *url, const char *token, const char *method,
    const char *path, json_t *body, long *status)
{
	struct gp_http_client *http = gp_http_client_new(url, token, NULL);
	struct gp_http_response resp;
	char *text = body != NULL ? json_dumps(body, JSON_COMPACT) : NULL;
	json_t *reply = NULL;

	json_decref(body);
	*status = 0;
	if (http != NULL && gp_http_request(http, method, path, text,
	    text != NULL ? strlen(text) : 0, NULL, 10000, &resp) == 0) {
		*status = resp.status;
		reply = json_loadb(resp.body, resp.body_len, 0, NULL);
	}
	if (http != NULL)
		gp_http_response_fini(&resp);
	gp_http_client_free(http);
	free(text);
	return reply;
}

static int
make_token(const struct options *o, const char *role, const char *name,
    char *out, size_t len)
{
	long status;
	json_t *r = admin_call(o->url, o->admin_token, "POST", "/v1/tokens",
	    json_pack("{s:s,s:s}", "role", role, "name", name), &status);
	const char *tok = json_string_value(json_object_get(r, "token"));

	if (status != 201 || tok == NULL) {
		json_decref(r);
		return -1;
	}
	gp_strlcpy(out, tok, len);
	json_decref(r);
	return 0;
}

/* Writes n bytes of random data at off in path. */
static int
write_random(const char *path, int64_t off, int64_t n, char *buf,
    size_t buflen)
{
	int fd = open(path, O_WRONLY | O_CREAT, 0644);
	int64_t done = 0;
	size_t k;

	if (fd < 0)
		return -1;
	while (done < n) {
		k = (size_t)(n - done < (int64_t)buflen ? n - done
							: (int64_t)buflen);
		randombytes_buf(buf, k);
		if (pwrite(fd, buf, k, off + done) != (ssize_t)k) {
			close(fd);
			return -1;
		}
		done += (int64_t)k;
	}
	close(fd);
	return 0;
}

static int
write_marker(const char *dir, const char *label)
{
	char path[1200], tmp[1200];

	snprintf(path, sizeof(path), "%s/COMPLETE", dir);
	snprintf(tmp, sizeof(tmp), "%s/COMPLETE.tmp", dir);
	if (gp_write_file(tmp, label, strlen(label), 0644) != 0)
		return -1;
	return rename(tmp, path);
}

/* CPU time (user + system) this process has used, in ms. */
static int64_t
cpu_ms(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (int64_t)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
	    (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

/*
 * With BENCH_MARKS set, prints "mark NAME SECONDS" (CLOCK_MONOTONIC) on
 * stderr: a phase's bounds for `perf record -k CLOCK_MONOTONIC` and
 * `perf report --time A,B`.
 */
static void
phase_mark(const char *name)
{
	struct timespec ts;

	if (getenv("BENCH_MARKS") == NULL)
		return;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	fprintf(stderr, "mark %s %lld.%06ld\n", name, (long long)ts.tv_sec,
	    ts.tv_nsec / 1000);
}

/* CPU time (user + system) process pid has used, in ms; -1 unknown. */
static int64_t
proc_cpu_ms(long pid)
{
	char path[64], *data, *p;
	unsigned long long ut, stime;
	size_t n;

	if (pid <= 0)
		return -1;
	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	if (gp_read_file(path, 4096, &data, &n) != 0)
		return -1;
	/* After "(comm)": state is field 3, utime and stime 14 and 15. */
	p = strrchr(data, ')');
	if (p == NULL || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u "
	    "%*u %*u %llu %llu", &ut, &stime) != 2) {
		free(data);
		return -1;
	}
	free(data);
	return (int64_t)((ut + stime) * 1000 / (unsigned long long)sysconf(
	    _SC_CLK_TCK));
}

/* Prints "NAME_coord_cpu N ms" when the coordinator's pid is known. */
static void
print_coord_cpu(const struct options *o, const char *name, int64_t before)
{
	int64_t now = proc_cpu_ms(o->coord_pid);

	if (before >= 0 && now >= 0)
		printf("%s_coord_cpu %lld ms\n", name, (long long)(now - before));
}

static double
mb_per_s(int64_t bytes, int64_t ms)
{
	return ms > 0 ? (double)bytes / 1e6 / ((double)ms / 1000.0) : 0.0;
}

static int
bench(struct options *o)
{
	char user_tok[256], prov_tok[256], src[1100], dst[1100], path[1200];
	char err[512], name[64];
	struct node_state ns;
	struct gp_ckpt_target t;
	struct gp_ckpt_mark mark;
	struct gp_ckpt_stats st;
	int64_t per_file, nfiles = 4, chunks, k, changed = 0, deadline, cpu;
	int64_t ccpu;
	long status;
	json_t *r;
	char *buf;
	int i, ret;

	snprintf(name, sizeof(name), "bench-ckpt-%d", (int)getpid());
	if (make_token(o, "user", name, user_tok, sizeof(user_tok)) != 0 ||
	    make_token(o, "provider", name, prov_tok, sizeof(prov_tok)) != 0) {
		fprintf(stderr, "bench_ckpt: cannot create tokens\n");
		return 1;
	}
	memset(&ns, 0, sizeof(ns));
	ns.url = o->url;
	ns.token = prov_tok;
	ns.name = name;
	if (node_start(&ns) != 0)
		return 1;
	r = admin_call(o->url, user_tok, "POST", "/v1/jobs",
	    json_pack("{s:[s,s],s:i}", "command", "sleep", "3600", "gpus", 1),
	    &status);
	if (status != 201) {
		fprintf(stderr, "bench_ckpt: submit: HTTP %ld\n", status);
		json_decref(r);
		node_stop(&ns);
		return 1;
	}
	o->job = json_integer_value(json_object_get(r, "id"));
	json_decref(r);
	/* Wait for the assignment. */
	deadline = gp_mono_ms() + 30000;
	o->attempt = 0;
	while (o->attempt == 0 && gp_mono_ms() < deadline) {
		size_t j;
		json_t *a;
		pthread_mutex_lock(&ns.lock);
		json_array_foreach(ns.running, j, a)
		{
			if (json_integer_value(json_object_get(a, "job_id")) ==
			    o->job)
				o->attempt = json_integer_value(
				    json_object_get(a, "attempt"));
		}
		pthread_mutex_unlock(&ns.lock);
		usleep(50 * 1000);
	}
	if (o->attempt == 0) {
		fprintf(stderr, "bench_ckpt: job %lld never assigned\n",
		    (long long)o->job);
		node_stop(&ns);
		return 1;
	}
	snprintf(src, sizeof(src), "%s/src", o->work);
	snprintf(dst, sizeof(dst), "%s/dst", o->work);
	gp_remove_tree(src);
	gp_remove_tree(dst);
	mkdir(o->work, 0755);
	mkdir(src, 0755);
	mkdir(dst, 0755);
	buf = malloc(GP_CKPT_CHUNK_SIZE);
	per_file = o->size_mib * (1 << 20) / nfiles;
	for (i = 0; i < nfiles; i++) {
		snprintf(path, sizeof(path), "%s/shard-%d.bin", src, i);
		if (write_random(path, 0, per_file, buf, GP_CKPT_CHUNK_SIZE) !=
		    0) {
			fprintf(stderr, "bench_ckpt: cannot write %s\n", path);
			return 1;
		}
	}
	write_marker(src, "step=1\n");
	memset(&t, 0, sizeof(t));
	t.url = o->url;
	t.token = prov_tok;
	t.job_id = o->job;
	t.attempt = o->attempt;
	t.parallel = o->parallel;
	memset(&mark, 0, sizeof(mark));
	printf("ckpt_size %lld MiB\n", (long long)o->size_mib);
	printf("ckpt_parallel %d transfers\n", o->parallel ? o->parallel : 4);
	cpu = cpu_ms();
	ccpu = proc_cpu_ms(o->coord_pid);
	phase_mark("upload");
	ret = gp_ckpt_upload(&t, src, &mark, &st, err, sizeof(err));
	phase_mark("upload_end");
	if (ret != 0 || st.version == 0) {
		fprintf(stderr, "bench_ckpt: upload: %s %s\n", err, st.skipped);
		return 1;
	}
	printf("ckpt_upload_full_client_cpu %lld ms\n",
	    (long long)(cpu_ms() - cpu));
	print_coord_cpu(o, "ckpt_upload_full", ccpu);
	printf("ckpt_upload_full %.1f MB/s\n", mb_per_s(st.bytes_sent,
	    st.elapsed_ms));
	printf("ckpt_upload_full_time %lld ms\n", (long long)st.elapsed_ms);
	cpu = cpu_ms();
	ccpu = proc_cpu_ms(o->coord_pid);
	phase_mark("download");
	ret = gp_ckpt_download(&t, dst, getuid(), getgid(), &mark, &st, err,
	    sizeof(err));
	phase_mark("download_end");
	if (ret != 0 || st.version == 0) {
		fprintf(stderr, "bench_ckpt: download: %s\n", err);
		return 1;
	}
	printf("ckpt_download_full_client_cpu %lld ms\n",
	    (long long)(cpu_ms() - cpu));
	print_coord_cpu(o, "ckpt_download_full", ccpu);
	printf("ckpt_download_full %.1f MB/s\n", mb_per_s(st.bytes,
	    st.elapsed_ms));
	printf("ckpt_download_full_time %lld ms\n", (long long)st.elapsed_ms);
	/* A new version: one chunk in ten rewritten. */
	sleep(1); /* a later mtime than the first version's marker */
	chunks = per_file / GP_CKPT_CHUNK_SIZE;
	for (i = 0; i < nfiles; i++) {
		snprintf(path, sizeof(path), "%s/shard-%d.bin", src, i);
		for (k = i % 10; k < chunks; k += 10) {
			write_random(path, k * GP_CKPT_CHUNK_SIZE,
			    GP_CKPT_CHUNK_SIZE, buf, GP_CKPT_CHUNK_SIZE);
			changed++;
		}
	}
	write_marker(src, "step=2\n");
	cpu = cpu_ms();
	ccpu = proc_cpu_ms(o->coord_pid);
	phase_mark("delta");
	ret = gp_ckpt_upload(&t, src, &mark, &st, err, sizeof(err));
	phase_mark("delta_end");
	if (ret != 0 || st.version == 0) {
		fprintf(stderr, "bench_ckpt: upload 2: %s %s\n", err,
		    st.skipped);
		return 1;
	}
	printf("ckpt_delta_changed_chunks %lld chunks\n", (long long)changed);
	printf("ckpt_delta_chunks_sent %lld chunks\n",
	    (long long)st.chunks_sent);
	printf("ckpt_delta_bytes_sent %lld bytes\n", (long long)st.bytes_sent);
	printf("ckpt_delta_upload_time %lld ms\n", (long long)st.elapsed_ms);
	printf("ckpt_delta_client_cpu %lld ms\n", (long long)(cpu_ms() - cpu));
	print_coord_cpu(o, "ckpt_delta", ccpu);
	free(buf);
	gp_remove_tree(src);
	gp_remove_tree(dst);
	node_stop(&ns);
	return 0;
}

static void
usage(void)
{
	fprintf(stderr,
	    "usage: bench_ckpt node --url U --token-file F --name N --out FILE\n"
	    "       bench_ckpt upload|download --url U --token-file F --job J "
	    "--attempt A --dir D\n"
	    "                  [--mark FILE] [--parallel N]\n"
	    "       bench_ckpt bench --url U --admin-token-file F --work DIR "
	    "[--size-mib N]\n"
	    "                  [--parallel N] [--coord-pid PID]\n");
}

int
main(int argc, char **argv)
{
	static const struct option options[] = {
	    {"url", required_argument, NULL, 'u'},
	    {"token-file", required_argument, NULL, 't'},
	    {"admin-token-file", required_argument, NULL, 'T'},
	    {"name", required_argument, NULL, 'n'},
	    {"out", required_argument, NULL, 'o'},
	    {"dir", required_argument, NULL, 'd'},
	    {"mark", required_argument, NULL, 'm'},
	    {"work", required_argument, NULL, 'w'},
	    {"job", required_argument, NULL, 'j'},
	    {"attempt", required_argument, NULL, 'a'},
	    {"parallel", required_argument, NULL, 'p'},
	    {"size-mib", required_argument, NULL, 's'},
	    {"coord-pid", required_argument, NULL, 'P'},
	    {NULL, 0, NULL, 0},
	};
	struct options o;
	struct node_state ns;
	int c;

	memset(&o, 0, sizeof(o));
	o.size_mib = 1024;
	if (argc < 2) {
		usage();
		return 2;
	}
	o.cmd = argv[1];
	optind = 2;
	while ((c = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (c) {
		case 'u':
			o.url = optarg;
			break;
		case 't':
			if (read_token(optarg, o.token, sizeof(o.token)) != 0)
				return 2;
			break;
		case 'T':
			if (read_token(optarg, o.admin_token,
				sizeof(o.admin_token)) != 0)
				return 2;
			break;
		case 'n':
			o.name = optarg;
			break;
		case 'o':
			o.out = optarg;
			break;
		case 'd':
			o.dir = optarg;
			break;
		case 'm':
			o.mark = optarg;
			break;
		case 'w':
			o.work = optarg;
			break;
		case 'j':
			o.job = atoll(optarg);
			break;
		case 'a':
			o.attempt = atoll(optarg);
			break;
		case 'p':
			o.parallel = atoi(optarg);
			break;
		case 's':
			o.size_mib = atoll(optarg);
			break;
		case 'P':
			o.coord_pid = atol(optarg);
			break;
		default:
			usage();
			return 2;
		}
	}
	if (sodium_init() < 0 || o.url == NULL) {
		usage();
		return 2;
	}
	gp_http_global_init();
	gp_log_init("bench_ckpt", getenv("BENCH_DEBUG") != NULL ? GP_LOG_DEBUG
							      : GP_LOG_INFO);
	if (strcmp(o.cmd, "node") == 0 && o.name != NULL) {
		memset(&ns, 0, sizeof(ns));
		ns.url = o.url;
		ns.token = o.token;
		ns.name = o.name;
		ns.out = o.out;
		if (node_start(&ns) != 0)
			return 1;
		fprintf(stderr, "bench_ckpt: node %lld registered\n",
		    (long long)ns.node_id);
		for (;;)
			pause();
	}
	if ((strcmp(o.cmd, "upload") == 0 || strcmp(o.cmd, "download") == 0) &&
	    o.dir != NULL && o.job > 0 && o.attempt > 0)
		return transfer(&o);
	if (strcmp(o.cmd, "bench") == 0 && o.work != NULL &&
	    o.size_mib >= 16)
		return bench(&o);
	usage();
	return 2;
}
