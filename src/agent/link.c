/*
 * link.c: the agent's two loops towards the coordinator. The heartbeat
 * thread registers (again whenever the coordinator answers 404), then
 * beats every heartbeat_ms with the running list and GPU use, and applies
 * kill lists. The poll thread long-polls for assignments and cancels and
 * hands them to the executor at once.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/agentd.h"
#include "agent/executor.h"
#include "agent/netns.h"
#include "agent/overlay.h"
#include "gp.h"
#include "http_client.h"
#include "log.h"
#include "util.h"

#define POLL_WAIT_MS	25000
#define POLL_TIMEOUT_MS (POLL_WAIT_MS + 10000)
#define RETRY_MAX_MS	5000
#define STANDBY_RETRY_MS 200 /* a standby's 503: the leader comes soon */

static pthread_t heartbeat_thread, poll_thread;
/* The poll thread's client while it runs, for the stop to end its poll. */
static pthread_mutex_t poll_http_lock = PTHREAD_MUTEX_INITIALIZER;
static struct gp_http_client *poll_http;

/* Sleeps ms unless the agent stops or node_id changes first. */
static void
nap(struct gp_agent *ag, int64_t ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&ag->lock);
	if (!atomic_load(&ag->stop))
		pthread_cond_timedwait(&ag->cond, &ag->lock, &ts);
	pthread_mutex_unlock(&ag->lock);
}

static void
set_node(struct gp_agent *ag, int64_t node_id)
{
	pthread_mutex_lock(&ag->lock);
	ag->node_id = node_id;
	pthread_cond_broadcast(&ag->cond);
	pthread_mutex_unlock(&ag->lock);
}

int64_t
gp_link_node_id(struct gp_agent *ag)
{
	int64_t id;

	pthread_mutex_lock(&ag->lock);
	while (ag->node_id == 0 && !atomic_load(&ag->stop))
		pthread_cond_wait(&ag->cond, &ag->lock);
	id = ag->node_id;
	pthread_mutex_unlock(&ag->lock);
	return id;
}

void
gp_link_apply_kills(struct gp_agent *ag, json_t *list)
{
	struct gp_attempt_id *ids;
	char err[256];
	int i, n;

	if (gp_attempt_list_decode(list, &ids, &n, err, sizeof(err)) != 0) {
		gp_error("bad kill list from coordinator: %s", err);
		return;
	}
	for (i = 0; i < n; i++) {
		gp_info("coordinator wants attempt gone job=%lld attempt=%lld",
		    (long long)ids[i].job_id, (long long)ids[i].attempt);
		gp_provider_drop(ag->provider, &ids[i]);
	}
	free(ids);
}

static json_t *
gpus_json(struct gp_agent *ag, int usage)
{
	json_t *list = json_array(), *o;
	uint64_t busy = usage ? gp_provider_busy_gpus(ag->provider) : 0;
	int i;

	for (i = 0; i < ag->gpus.n && list != NULL; i++) {
		const struct gp_gpu_info *g = &ag->gpus.gpus[i];
		struct gp_gpu_usage u;

		if (!usage) {
			o = json_pack("{si ss ss sI}", "index", g->index,
			    "uuid", g->uuid, "model", g->model, "mem_mib",
			    (json_int_t)g->mem_mib);
			if (o != NULL && g->capability > 0) {
				char cap[16];
				gp_capability_format(g->capability, cap,
				    sizeof(cap));
				json_object_set_new(o, "compute_capability",
				    json_string(cap));
			}
			json_array_append_new(list, o);
			continue;
		}
		gp_gpu_usage(&ag->gpus, i, i < 64 && ((busy >> i) & 1), &u);
		o = json_pack("{si si sI}", "index", g->index, "util", u.util,
		    "mem_used_mib", (json_int_t)u.mem_used_mib);
		/* Sensors the GPU lacks are left out. */
		if (o != NULL && u.temp_c >= 0)
			json_object_set_new(o, "temp_c",
			    json_integer(u.temp_c));
		if (o != NULL && u.power_mw >= 0)
			json_object_set_new(o, "power_mw",
			    json_integer(u.power_mw));
		json_array_append_new(list, o);
	}
	return list;
}

/* POSTs JSON; OUT: resp (fini'd by the caller). timeout_ms 0: 30 s. */
static int
post(struct gp_http_client *http, const char *path, json_t *body,
    long timeout_ms, struct gp_http_response *resp)
{
	char *text = json_dumps(body, JSON_COMPACT);
	int ret;

	json_decref(body);
	if (text == NULL) {
		memset(resp, 0, sizeof(*resp));
		return GP_ENOMEM;
	}
	ret = gp_http_request(http, "POST", path, text, strlen(text), NULL,
	    timeout_ms, resp);
	free(text);
	return ret;
}

/*
 * The heartbeat period and lease the coordinator asks for, in a register
 * or heartbeat answer: a big pool asks its agents to beat less often.
 * Out-of-range or missing values keep what the agent had.
 */
static void
apply_timing(struct gp_agent *ag, json_t *root, int registering)
{
	json_t *hb = json_object_get(root, "heartbeat_ms");
	json_t *lease = json_object_get(root, "lease_ms");

	if (json_is_integer(hb) && json_integer_value(hb) >= 50 &&
	    json_integer_value(hb) <= 60000 &&
	    json_integer_value(hb) != ag->heartbeat_ms) {
		if (!registering)
			gp_info("heartbeat period changed heartbeat_ms=%lld "
				"was=%d",
			    (long long)json_integer_value(hb),
			    ag->heartbeat_ms);
		ag->heartbeat_ms = (int)json_integer_value(hb);
	}
	if (json_is_integer(lease) && json_integer_value(lease) > 0 &&
	    json_integer_value(lease) <= 24 * 3600 * 1000LL)
		ag->lease_ms = (int)json_integer_value(lease);
	if (!registering)
		atomic_store(&ag->coord_net,
		    json_is_true(json_object_get(root, "job_network")) &&
		    !atomic_load(&ag->net_refused));
}

/*
 * The bytes each running job sent and received over its network so far
 * (the heartbeat's "network"); NULL when there is none.
 */
static json_t *
networks_json(struct gp_agent *ag)
{
	struct gp_exec_network *nets;
	json_t *list;
	int n, i;

	if (ag->executor == NULL ||
	    (nets = calloc(256, sizeof(*nets))) == NULL)
		return NULL;
	n = gp_executor_networks(ag->executor, nets, 256);
	if (n > 256)
		n = 256;
	list = n > 0 ? json_array() : NULL;
	for (i = 0; i < n && list != NULL; i++) {
		int64_t sent, received;
		gp_net_job_bytes(&nets[i].net, &sent, &received);
		json_array_append_new(list, json_pack("{sI sI sI sI}",
		    "job_id", (json_int_t)nets[i].id.job_id, "attempt",
		    (json_int_t)nets[i].id.attempt, "sent_bytes",
		    (json_int_t)sent, "received_bytes",
		    (json_int_t)received));
	}
	free(nets);
	return list;
}

/* Registers until it works or the agent stops. */
static void
register_node(struct gp_agent *ag, struct gp_http_client *http,
    int first)
{
	struct gp_http_response resp;
	int backoff = 200, warned = 0, send_overlay = 1;
	char text[256];

	set_node(ag, 0);
	while (!atomic_load(&ag->stop)) {
		json_t *body = json_pack("{si ss si sI so so so}", "protocol",
		    GP_PROTOCOL_VERSION, "name", ag->name, "cpus", ag->cpus,
		    "mem_mib", (json_int_t)ag->mem_mib, "gpus",
		    gpus_json(ag, 0), "running",
		    gp_reports_running(ag->reports), "offer",
		    gp_provider_offer_json(ag->provider));
		int64_t sent = gp_mono_ms();
		int ret;

		if (body != NULL && ag->advertise_addr[0] != '\0')
			json_object_set_new(body, "addr",
			    json_string(ag->advertise_addr));
		/* The gang overlay's ports (overlay.h). */
		if (body != NULL && ag->overlay != NULL && send_overlay) {
			json_t *ov = json_pack("{si si}", "port",
			    gp_overlay_port(ag->overlay), "ports",
			    gp_overlay_ports(ag->overlay));

			if (ov != NULL && gp_overlay_mode(ag->overlay) ==
			    GP_OVERLAY_ALWAYS)
				json_object_set_new(ov, "always", json_true());
			json_object_set_new(body, "overlay", ov);
		}
		ret = post(http, "/v1/agent/register", body, 0, &resp);

		if (ret != 0 && resp.refused)
			atomic_store(&ag->last_contact_mono, gp_mono_ms());

		if (ret == 0 && resp.status == 200) {
			json_t *root = json_loadb(resp.body, resp.body_len, 0,
			    NULL);
			json_t *id = json_object_get(root, "node_id");

			if (json_is_integer(id) && json_integer_value(id) > 0) {
				ag->heartbeat_ms = 1000;
				ag->lease_ms = 0;
				apply_timing(ag, root, 1);
				gp_info("registered node=%s node_id=%lld "
				    "heartbeat_ms=%d lease_ms=%d gpus=%d",
				    ag->name, (long long)json_integer_value(id),
				    ag->heartbeat_ms, ag->lease_ms, ag->gpus.n);
				gp_link_apply_kills(ag,
				    json_object_get(root, "kill"));
				atomic_store(&ag->last_contact_mono, sent);
				set_node(ag, json_integer_value(id));
				json_decref(root);
				gp_http_response_fini(&resp);
				return;
			}
			json_decref(root);
			snprintf(text, sizeof(text), "no node_id in answer");
		} else
			gp_http_error_text(&resp, text, sizeof(text));
		/*
		 * A coordinator older than gang overlays refuses the field
		 * (unknown fields are refused): without it, gangs are linked
		 * directly.
		 */
		if (ret == 0 && resp.status == 400 && ag->overlay != NULL &&
		    send_overlay) {
			gp_warn("coordinator refused the gang overlay in the "
			    "registration (older than overlays?): registering "
			    "without it; gangs are linked directly "
			    "error=\"%s\"", text);
			send_overlay = 0;
			gp_http_response_fini(&resp);
			continue;
		}
		if (first && ret == 0 && (resp.status == 400 ||
		    resp.status == 401 || resp.status == 403)) {
			gp_error("coordinator refused registration url=%s "
			    "status=%ld error=\"%s\"", ag->url, resp.status,
			    text);
			gp_http_response_fini(&resp);
			atomic_store(&ag->fatal, 1);
			atomic_store(&ag->stop, 1);
			kill(getpid(), SIGTERM);
			return;
		}
		if (!warned++)
			gp_warn("cannot register, will retry url=%s "
			    "error=\"%s\"", ag->url, text);
		gp_http_response_fini(&resp);
		nap(ag, backoff);
		backoff = backoff * 2 > RETRY_MAX_MS ? RETRY_MAX_MS :
		    backoff * 2;
	}
}

static void *
heartbeat_main(void *arg)
{
	struct gp_agent *ag = arg;
	struct gp_http_client *http;
	struct gp_http_response resp;
	char path[] = "/v1/agent/heartbeat", text[256];
	/* no_gpushare, no_network: refused by it */
	int down = 0, no_gpushare = 0, no_network = 0;

	http = gp_http_client_new(ag->url, ag->token, ag->ca_file);
	if (http == NULL) {
		gp_error("heartbeat: cannot create an HTTP client");
		return NULL;
	}
	register_node(ag, http, 1);
	while (!atomic_load(&ag->stop)) {
		int64_t start = gp_mono_ms(), node_id, spent;
		json_t *body, *share, *nets;
		int ret, sent_share = 0, sent_net = 0;

		if (atomic_load(&ag->left)) {
			/* Unregistered (provider leave): the agent exits. */
			nap(ag, ag->heartbeat_ms);
			continue;
		}
		pthread_mutex_lock(&ag->lock);
		node_id = ag->node_id;
		pthread_mutex_unlock(&ag->lock);
		body = json_pack("{sI so so so}", "node_id",
		    (json_int_t)node_id, "running",
		    gp_reports_running(ag->reports), "gpus", gpus_json(ag, 1),
		    "offer", gp_provider_offer_json(ag->provider));
		/*
		 * Only when there is some: a coordinator older than it
		 * refuses the field (400), and is then not sent it again.
		 */
		if (body != NULL && !no_gpushare &&
		    (share = gp_provider_gpushare_json(ag->provider)) != NULL) {
			if (json_array_size(share) > 0) {
				json_object_set_new(body, "gpushare", share);
				sent_share = 1;
			} else
				json_decref(share);
		}
		/* The same for the jobs' network bytes, if it takes them. */
		if (body != NULL && !no_network &&
		    atomic_load(&ag->coord_net) &&
		    (nets = networks_json(ag)) != NULL) {
			json_object_set_new(body, "network", nets);
			sent_net = 1;
		}
		/* Short: a hung request must not hide a partition. */
		ret = post(http, path, body, ag->lease_ms > 2000 ?
		    ag->lease_ms / 2 : 1000, &resp);
		/* Where the leader is: the agent's other clients follow. */
		atomic_store(&ag->coord_at, gp_http_client_current(http));
		if ((ret == 0 && resp.status == 200) ||
		    (ret != 0 && resp.refused))
			atomic_store(&ag->last_contact_mono,
			    ret == 0 ? start : gp_mono_ms());
		if (ret == 0 && resp.status == 200) {
			json_t *root = json_loadb(resp.body, resp.body_len, 0,
			    NULL);
			if (down)
				gp_info("coordinator reachable again url=%s",
				    ag->url);
			down = 0;
			apply_timing(ag, root, 0);
			gp_link_apply_kills(ag, json_object_get(root, "kill"));
			json_decref(root);
		} else if (ret == 0 && resp.status == 400 &&
		    (sent_net || sent_share)) {
			/*
			 * The field it names, or (it names neither) every
			 * optional one sent: one refusal, not one a field.
			 */
			gp_http_error_text(&resp, text, sizeof(text));
			if (sent_share && sent_net &&
			    strstr(text, "'network'") != NULL)
				sent_share = 0;
			else if (sent_share && sent_net &&
			    strstr(text, "'gpushare'") != NULL)
				sent_net = 0;
			if (sent_net) {
				gp_warn("coordinator refused the job network "
				    "report: not sending it again url=%s",
				    ag->url);
				no_network = 1;
				atomic_store(&ag->net_refused, 1);
				atomic_store(&ag->coord_net, 0);
			}
			if (sent_share) {
				gp_warn("coordinator refused the GPU sharing "
				    "report: not sending it again url=%s",
				    ag->url);
				no_gpushare = 1;
			}
		} else if (ret == 0 && resp.status == 404 &&
		    !atomic_load(&ag->left)) {
			gp_warn("coordinator does not know this node: "
			    "registering again node=%s", ag->name);
			gp_http_response_fini(&resp);
			register_node(ag, http, 0);
			continue;
		} else if (!down++) {
			gp_http_error_text(&resp, text, sizeof(text));
			gp_warn("heartbeat failed, jobs keep running url=%s "
			    "error=\"%s\"", ag->url, text);
		}
		gp_http_response_fini(&resp);
		spent = gp_mono_ms() - start;
		if (spent < ag->heartbeat_ms)
			nap(ag, ag->heartbeat_ms - spent);
	}
	gp_http_client_free(http);
	return NULL;
}

static void
apply_poll(struct gp_agent *ag, struct gp_poll_answer *answer)
{
	int i;

	for (i = 0; i < answer->nassignments; i++) {
		struct gp_assignment *a = &answer->assignments[i];

		gp_info("assignment job=%lld attempt=%lld name=%s user=%s "
		    "gpus=%d restart=%lld share_milli=%d part=%d parts=%d",
		    (long long)a->id.job_id, (long long)a->id.attempt,
		    a->name, a->user, a->ngpus, (long long)a->restart_count,
		    a->gpu_milli, a->part, a->parts);
		gp_provider_assign(ag->provider, a);
	}
	for (i = 0; i < answer->ncancels; i++) {
		gp_info("cancel job=%lld attempt=%lld",
		    (long long)answer->cancels[i].job_id,
		    (long long)answer->cancels[i].attempt);
		gp_provider_cancel(ag->provider, &answer->cancels[i]);
	}
	for (i = 0; i < answer->ncheckpoints; i++) {
		gp_info("checkpoint requested job=%lld attempt=%lld",
		    (long long)answer->checkpoints[i].job_id,
		    (long long)answer->checkpoints[i].attempt);
		gp_provider_checkpoint_now(ag->provider,
		    &answer->checkpoints[i]);
	}
	for (i = 0; i < answer->nstops; i++) {
		gp_info("stop requested job=%lld attempt=%lld reason=%s",
		    (long long)answer->stops[i].id.job_id,
		    (long long)answer->stops[i].id.attempt,
		    answer->stops[i].reason);
		gp_provider_stop(ag->provider, &answer->stops[i].id,
		    answer->stops[i].reason);
	}
	for (i = 0; i < answer->nstreams; i++) {
		gp_info("stream requested id=%lld job=%lld attempt=%lld",
		    (long long)answer->streams[i].id,
		    (long long)answer->streams[i].job.job_id,
		    (long long)answer->streams[i].job.attempt);
		gp_attach_stream(ag, &answer->streams[i]);
	}
}

static void *
poll_main(void *arg)
{
	struct gp_agent *ag = arg;
	struct gp_http_client *http;
	struct gp_http_response resp;
	struct gp_poll_answer answer;
	char path[128], err[256];
	int backoff = 200;

	http = gp_http_client_new(ag->url, ag->token, ag->ca_file);
	if (http == NULL) {
		gp_error("poll: cannot create an HTTP client");
		return NULL;
	}
	gp_http_client_follow(http, &ag->coord_at);
	gp_http_client_abort_on(http, &ag->stop);
	pthread_mutex_lock(&poll_http_lock);
	poll_http = http;
	pthread_mutex_unlock(&poll_http_lock);
	while (!atomic_load(&ag->stop)) {
		int64_t node_id = gp_link_node_id(ag);
		int ret;

		if (node_id == 0)
			break;
		snprintf(path, sizeof(path), "/v1/agent/poll?node_id=%lld&"
		    "wait_ms=%d", (long long)node_id, POLL_WAIT_MS);
		ret = gp_http_request(http, "GET", path, NULL, 0, NULL,
		    POLL_TIMEOUT_MS, &resp);
		if (ret == 0 && resp.status == 200) {
			backoff = 200;
			if (gp_assignment_decode(resp.body, resp.body_len,
			    &answer, err, sizeof(err)) != 0)
				gp_error("bad poll answer from coordinator: %s",
				    err);
			else {
				pthread_mutex_lock(&ag->apply_lock);
				if (!atomic_load(&ag->stop))
					apply_poll(ag, &answer);
				pthread_mutex_unlock(&ag->apply_lock);
			}
			gp_poll_answer_fini(&answer);
			gp_http_response_fini(&resp);
			continue;
		}
		/* 404: the heartbeat thread registers again; wait for it. */
		gp_debug("poll failed status=%ld", resp.status);
		/*
		 * Several coordinators, none leading yet (an election after
		 * the leader died): short naps, no growing back-off, so that
		 * the first assignment of the new leader comes at once.
		 */
		if (ret == 0 && resp.not_leader) {
			gp_http_response_fini(&resp);
			nap(ag, STANDBY_RETRY_MS);
			continue;
		}
		gp_http_response_fini(&resp);
		nap(ag, backoff);
		backoff = backoff * 2 > RETRY_MAX_MS ? RETRY_MAX_MS :
		    backoff * 2;
	}
	pthread_mutex_lock(&poll_http_lock);
	poll_http = NULL;
	pthread_mutex_unlock(&poll_http_lock);
	gp_http_client_free(http);
	return NULL;
}

int
gp_link_start(struct gp_agent *ag)
{
	if (pthread_create(&heartbeat_thread, NULL, heartbeat_main, ag) != 0)
		return GP_EIO;
	if (pthread_create(&poll_thread, NULL, poll_main, ag) != 0)
		return GP_EIO;
	return 0;
}

void
gp_link_stop(struct gp_agent *ag)
{
	pthread_mutex_lock(&ag->lock);
	atomic_store(&ag->stop, 1);
	pthread_cond_broadcast(&ag->cond);
	pthread_mutex_unlock(&ag->lock);
	pthread_join(heartbeat_thread, NULL);
	pthread_mutex_lock(&poll_http_lock);
	if (poll_http != NULL)
		gp_http_client_abort(poll_http);
	pthread_mutex_unlock(&poll_http_lock);
	/*
	 * A long poll in flight ends now (its socket shut; within a second
	 * of stop anyway), an answer being applied finishes first: joined, so
	 * that no thread of the link outlives the agent's exit (OpenSSL's
	 * per-thread state, freed as a thread ends, would leak then).
	 */
	pthread_join(poll_thread, NULL);
}
