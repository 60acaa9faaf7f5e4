/*
 * metrics.c: the agent's Prometheus metrics (`gpupool agent
 * --metrics-listen ADDR:PORT`): each GPU's readings (NVML, or the fake
 * backend's made-up ones) with the job and user on it, what the owner
 * lends, and the checkpoint traffic. Served on a small libmicrohttpd
 * daemon of its own, since the control socket is not scrapeable. GET
 * /metrics only; with --metrics-token-file, a bearer token is required.
 * Everything is read at scrape time: nothing on the job paths changes.
 */
#include "agent/metrics.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <microhttpd.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent/agentd.h"
#include "gp.h"
#include "log.h"
#include "prom.h"
#include "util.h"

struct gp_agent_metrics {
	struct MHD_Daemon *daemon;
	struct gp_agent *ag;
	char token[256]; /* "": none needed */
};

static const char *const gpu_states[] = {"running", "idle", "paused",
    "not_lent", "owner_present", "reclaimed", "window_closed", "leaving"};

int
gp_agent_metrics_parse_listen(const char *text, struct sockaddr_in *addr)
{
	char host[64];
	const char *colon = strrchr(text, ':'), *port_text = text;
	int64_t port;

	memset(addr, 0, sizeof(*addr));
	addr->sin_family = AF_INET;
	gp_strlcpy(host, "127.0.0.1", sizeof(host));
	if (colon != NULL) {
		if (colon == text || (size_t)(colon - text) >= sizeof(host))
			return GP_EINVAL;
		memcpy(host, text, (size_t)(colon - text));
		host[colon - text] = '\0';
		port_text = colon + 1;
	}
	if (gp_parse_int(port_text, 1, 65535, &port) != 0 ||
	    inet_pton(AF_INET, host, &addr->sin_addr) != 1)
		return GP_EINVAL;
	addr->sin_port = htons((uint16_t)port);
	return 0;
}

static int
counter(struct gp_buf *out, const char *name, const char *help,
    const char *const *labels, double v)
{
	return gp_prom_family(out, name, "counter", help) |
	    gp_prom_sample(out, name, labels, v);
}

static int
gauge(struct gp_buf *out, const char *name, const char *help,
    const char *const *labels, double v)
{
	return gp_prom_family(out, name, "gauge", help) |
	    gp_prom_sample(out, name, labels, v);
}

/* The per-GPU readings, each family over every GPU. */
static int
gpu_readings(struct gp_agent *ag, const struct gp_provider_snapshot *snap,
    struct gp_buf *out)
{
	static const struct {
		const char *name, *help;
	} fam[] = {
	    {"gpupool_agent_gpu_utilization_ratio",
	        "GPU utilization (0 to 1); job_id and user name the job on "
	        "the GPU"},
	    {"gpupool_agent_gpu_memory_used_bytes", "GPU memory in use"},
	    {"gpupool_agent_gpu_temperature_celsius", "GPU temperature"},
	    {"gpupool_agent_gpu_power_watts", "GPU power draw"},
	};
	struct gp_gpu_usage *u;
	char gpu[16], job[24];
	const char *l[] = {"node", ag->name, "gpu", gpu, "job_id", job, "user",
	    NULL, NULL};
	size_t f;
	int i, rc = 0;
	double v;

	u = calloc((size_t)ag->gpus.n + 1, sizeof(*u));
	if (u == NULL)
		return GP_ENOMEM;
	for (i = 0; i < ag->gpus.n; i++)
		gp_gpu_usage(&ag->gpus, i, i < 64 && ((snap->busy >> i) & 1),
		    &u[i]);
	for (f = 0; f < GP_ARRAY_LEN(fam); f++) {
		rc |= gp_prom_family(out, fam[f].name, "gauge", fam[f].help);
		for (i = 0; i < ag->gpus.n; i++) {
			const struct gp_provider_gpu *g =
			    i < snap->ngpus ? &snap->gpus[i] : NULL;
			snprintf(gpu, sizeof(gpu), "%d",
			    ag->gpus.gpus[i].index);
			job[0] = '\0';
			l[7] = "";
			if (g != NULL && g->job_id > 0) {
				snprintf(job, sizeof(job), "%lld",
				    (long long)g->job_id);
				l[7] = g->user;
			}
			if (f == 0)
				v = u[i].util / 100.0;
			else if (f == 1)
				v = (double)u[i].mem_used_mib * 1048576.0;
			else if (f == 2 && u[i].temp_c >= 0)
				v = u[i].temp_c;
			else if (f == 3 && u[i].power_mw >= 0)
				v = u[i].power_mw / 1000.0;
			else
				continue;
			rc |= gp_prom_sample(out, fam[f].name, l, v);
		}
	}
	free(u);
	return rc;
}

static int
gpu_inventory(struct gp_agent *ag, const struct gp_provider_snapshot *snap,
    struct gp_buf *out)
{
	const char *backend = ag->gpus.ops != NULL && ag->gpus.state != NULL
	    ? ag->gpus.ops->name
	    : "none";
	char gpu[16];
	const char *info[] = {"node", ag->name, "gpu", gpu, "uuid", NULL,
	    "model", NULL, "backend", backend, NULL};
	const char *l[] = {"node", ag->name, "gpu", gpu, NULL, NULL, NULL};
	size_t k;
	int i, rc = 0;

	rc |= gp_prom_family(out, "gpupool_agent_gpu_info", "gauge",
	    "Each GPU this agent lends (1): UUID, model, and where its "
	    "readings come from (nvml, or fake: made up for tests)");
	for (i = 0; i < ag->gpus.n; i++) {
		snprintf(gpu, sizeof(gpu), "%d", ag->gpus.gpus[i].index);
		info[5] = ag->gpus.gpus[i].uuid;
		info[7] = ag->gpus.gpus[i].model;
		rc |= gp_prom_sample(out, "gpupool_agent_gpu_info", info, 1);
	}
	rc |= gp_prom_family(out, "gpupool_agent_gpu_memory_total_bytes",
	    "gauge", "Each GPU's memory");
	for (i = 0; i < ag->gpus.n; i++) {
		snprintf(gpu, sizeof(gpu), "%d", ag->gpus.gpus[i].index);
		rc |=
		    gp_prom_sample(out, "gpupool_agent_gpu_memory_total_bytes",
		        l, (double)ag->gpus.gpus[i].mem_mib * 1048576.0);
	}
	rc |= gp_prom_family(out, "gpupool_agent_gpu_lent", "gauge",
	    "1 when the owner lends the GPU now (the offer the coordinator "
	    "knows)");
	for (i = 0; i < snap->ngpus; i++) {
		snprintf(gpu, sizeof(gpu), "%d", ag->gpus.gpus[i].index);
		rc |= gp_prom_sample(out, "gpupool_agent_gpu_lent", l,
		    snap->gpus[i].lent);
	}
	rc |= gp_prom_family(out, "gpupool_agent_gpu_state", "gauge",
	    "Each GPU's state as `gpupool provider status` shows it (1 for "
	    "the current one)");
	l[4] = "state";
	for (i = 0; i < snap->ngpus; i++) {
		snprintf(gpu, sizeof(gpu), "%d", ag->gpus.gpus[i].index);
		for (k = 0; k < GP_ARRAY_LEN(gpu_states); k++) {
			l[5] = gpu_states[k];
			rc |= gp_prom_sample(out, "gpupool_agent_gpu_state", l,
			    strcmp(snap->gpus[i].state, gpu_states[k]) == 0);
		}
	}
	return rc;
}

/*
 * Bytes each running job sent and received over its network, with the
 * job's id, attempt and user (the user of its first GPU; "" for a job
 * without GPUs).
 */
static int
job_networks(struct gp_agent *ag, const struct gp_provider_snapshot *snap,
    struct gp_buf *out)
{
	static const char *fam[] = {"gpupool_agent_job_network_sent_bytes_total",
	    "gpupool_agent_job_network_received_bytes_total"};
	struct gp_exec_network *nets;
	char job[24], attempt[24];
	const char *l[] = {"node", ag->name, "job_id", job, "attempt",
	    attempt, "user", "", NULL};
	int64_t sent[256], received[256];
	int n, i, k, f, rc = 0;

	if (ag->executor == NULL)
		return 0;
	if ((nets = calloc(256, sizeof(*nets))) == NULL)
		return GP_ENOMEM;
	n = gp_executor_networks(ag->executor, nets, 256);
	if (n > 256)
		n = 256;
	for (i = 0; i < n; i++)
		gp_net_job_bytes(&nets[i].net, &sent[i], &received[i]);
	for (f = 0; f < 2; f++) {
		rc |= gp_prom_family(out, fam[f], "counter", f == 0 ?
		    "Bytes a running job sent over its network (veth pair)" :
		    "Bytes a running job received over its network");
		for (i = 0; i < n; i++) {
			snprintf(job, sizeof(job), "%lld",
			    (long long)nets[i].id.job_id);
			snprintf(attempt, sizeof(attempt), "%lld",
			    (long long)nets[i].id.attempt);
			l[7] = "";
			for (k = 0; k < snap->ngpus; k++)
				if (snap->gpus[k].job_id == nets[i].id.job_id &&
				    snap->gpus[k].attempt ==
				    nets[i].id.attempt) {
					l[7] = snap->gpus[k].user;
					break;
				}
			rc |= gp_prom_sample(out, fam[f], l,
			    (double)(f == 0 ? sent[i] : received[i]));
		}
	}
	free(nets);
	return rc;
}

int
gp_agent_metrics_render(struct gp_agent *ag, struct gp_buf *out)
{
	struct gp_provider_snapshot *snap;
	const char *node[] = {"node", ag->name, NULL};
	const char *build[] = {"node", ag->name, "version", GP_VERSION, NULL};
	const char *reason[] = {"node", ag->name, "reason", NULL, NULL};
	int64_t node_id, contact;
	int i, rc = 0;

	if ((snap = calloc(1, sizeof(*snap))) == NULL)
		return GP_ENOMEM;
	if (ag->provider != NULL)
		gp_provider_snapshot(ag->provider, snap);
	pthread_mutex_lock(&ag->lock);
	node_id = ag->node_id;
	pthread_mutex_unlock(&ag->lock);
	contact = atomic_load(&ag->last_contact_mono);
	rc |= gauge(out, "gpupool_agent_build_info", "The agent's version (1)",
	    build, 1);
	rc |= gauge(out, "gpupool_agent_connected",
	    "1 while the agent is registered with the coordinator and not "
	    "fenced",
	    node, node_id != 0 && !snap->fenced);
	if (contact > 0)
		rc |=
		    gauge(out, "gpupool_agent_coordinator_contact_age_seconds",
		        "Time since the coordinator last answered a heartbeat",
		        node, (double)(gp_mono_ms() - contact) / 1000.0);
	rc |= gauge(out, "gpupool_agent_jobs",
	    "Attempts the agent holds (restoring, running or reporting)", node,
	    snap->jobs);
	rc |= gauge(out, "gpupool_agent_paused",
	    "1 while the owner has paused lending", node, snap->paused);
	rc |= gauge(out, "gpupool_agent_leaving",
	    "1 while the owner is taking the node out of the pool", node,
	    snap->leaving);
	rc |= gauge(out, "gpupool_agent_fenced",
	    "1 while the agent has killed its jobs for lack of contact with "
	    "the coordinator",
	    node, snap->fenced);
	rc |= gauge(out, "gpupool_agent_window_open",
	    "1 while the owner's policy allows lending now", node,
	    snap->window_open);
	rc |= gpu_inventory(ag, snap, out);
	rc |= gpu_readings(ag, snap, out);
	rc |= job_networks(ag, snap, out);
	rc |= counter(out, "gpupool_agent_checkpoint_uploads_total",
	    "Checkpoint versions this agent uploaded", node,
	    (double)snap->uploads);
	rc |= counter(out, "gpupool_agent_checkpoint_upload_failures_total",
	    "Checkpoint uploads that failed", node,
	    (double)snap->upload_failures);
	rc |= counter(out, "gpupool_agent_checkpoint_uploaded_bytes_total",
	    "Bytes of checkpoint chunks sent (after deduplication)", node,
	    (double)snap->upload_bytes);
	rc |= counter(out, "gpupool_agent_checkpoint_restores_total",
	    "Attempts started from a downloaded checkpoint", node,
	    (double)snap->restores);
	rc |= counter(out, "gpupool_agent_checkpoint_restore_failures_total",
	    "Attempts whose checkpoint could not be restored", node,
	    (double)snap->restore_failures);
	rc |= gp_prom_family(out, "gpupool_agent_jobs_ended_by_owner_total",
	    "counter",
	    "Jobs this agent ended on its owner's behalf (each is "
	    "requeued), by reason");
	for (i = 0; i < GP_PROVIDER_END_REASONS; i++) {
		reason[3] = snap->end_reasons[i] != NULL ? snap->end_reasons[i]
		                                         : "other";
		rc |= gp_prom_sample(out,
		    "gpupool_agent_jobs_ended_by_owner_total", reason,
		    (double)snap->owner_ends[i]);
	}
	free(snap);
	return rc != 0 ? GP_ENOMEM : 0;
}

static enum MHD_Result
reply(struct MHD_Connection *conn, unsigned status, const char *ctype,
    char *text, size_t len)
{
	struct MHD_Response *resp;
	enum MHD_Result rc;

	resp =
	    MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
	if (resp == NULL) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, "Content-Type", ctype);
	rc = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return rc;
}

static enum MHD_Result
reply_text(struct MHD_Connection *conn, unsigned status, const char *msg)
{
	char *text = strdup(msg);

	if (text == NULL)
		return MHD_NO;
	return reply(conn, status, "text/plain; charset=utf-8", text,
	    strlen(text));
}

/* 1 when the request carries the configured bearer token (or none is). */
static int
authorized(struct gp_agent_metrics *m, struct MHD_Connection *conn)
{
	const char *h;
	size_t n = strlen(m->token);

	if (n == 0)
		return 1;
	h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
	/* The scheme is case-insensitive (RFC 9110 11.1). */
	if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0 ||
	    strlen(h + 7) != n)
		return 0;
	return sodium_memcmp(h + 7, m->token, n) == 0;
}

static enum MHD_Result
handle(void *cls, struct MHD_Connection *conn, const char *url,
    const char *method, const char *version, const char *upload_data,
    size_t *upload_data_size, void **con_cls)
{
	struct gp_agent_metrics *m = cls;
	struct gp_buf out = {0};

	(void)version;
	(void)upload_data;
	if (*con_cls == NULL) {
		*con_cls = m; /* headers seen; answer on the next call */
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		*upload_data_size = 0; /* bodies are read and dropped */
		return MHD_YES;
	}
	if (strcmp(url, "/metrics") != 0)
		return reply_text(conn, 404, "only /metrics here\n");
	if (strcmp(method, "GET") != 0)
		return reply_text(conn, 405, "GET /metrics\n");
	if (!authorized(m, conn))
		return reply_text(conn, 401,
		    "missing or wrong token (Authorization: Bearer ...)\n");
	if (gp_agent_metrics_render(m->ag, &out) != 0 || out.data == NULL) {
		gp_buf_free(&out);
		return reply_text(conn, 503, "out of memory\n");
	}
	return reply(conn, 200, GP_PROM_CONTENT_TYPE, out.data, out.len);
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
	gp_warn("metrics http: %s", msg);
}

struct gp_agent_metrics *
gp_agent_metrics_start(struct gp_agent *ag, const struct sockaddr_in *addr,
    const char *token, char *err, size_t errlen)
{
	struct gp_agent_metrics *m = calloc(1, sizeof(*m));
	char host[INET_ADDRSTRLEN];

	if (m == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	m->ag = ag;
	if (token != NULL)
		gp_strlcpy(m->token, token, sizeof(m->token));
	m->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD |
	        MHD_USE_ERROR_LOG,
	    0, NULL, NULL, handle, m, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
	    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)addr,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned int)64,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)10,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024),
	    MHD_OPTION_END);
	inet_ntop(AF_INET, &addr->sin_addr, host, sizeof(host));
	if (m->daemon == NULL) {
		snprintf(err, errlen,
		    "cannot listen on %s:%d for metrics "
		    "(in use?)",
		    host, ntohs(addr->sin_port));
		free(m);
		return NULL;
	}
	gp_info("metrics listening addr=%s:%d auth=%s", host,
	    ntohs(addr->sin_port), m->token[0] ? "token" : "none");
	return m;
}

void
gp_agent_metrics_stop(struct gp_agent_metrics *m)
{
	if (m == NULL)
		return;
	MHD_stop_daemon(m->daemon);
	sodium_memzero(m->token, sizeof(m->token));
	free(m);
}
