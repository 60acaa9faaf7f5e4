/*
 * relay.h: the interactive stream broker (relay.c; docs/interactive.md).
 *
 * A stream joins a client (the CLI, or the coordinator itself for the
 * dashboard's terminal and the HTTP proxy: relay_open) to a new process
 * or a loopback port inside a running job. Agents never listen: the
 * broker asks the job's agent in its long poll's answer ("streams"), the
 * agent dials a connection of its own for that stream, and one of the
 * relay's threads splices the two legs, each an HTTP/1.1 Upgrade
 * (gpupool-stream/1) on the API's own port, TLS included when it has TLS.
 * Both legs carry the frames of common/stream.h; the broker copies them
 * through bounded buffers (RELAY_BUFFER each way: a slow reader stops the
 * other side, never grows a buffer) and adds only its own NOTICE and
 * ERROR frames, between two frames of the agent's.
 */
#ifndef GP_COORD_RELAY_H
#define GP_COORD_RELAY_H

#include <jansson.h>
#include <stdint.h>

#define RELAY_BUFFER (16 * 1024) /* per direction and stream */

struct relay_config {
	int per_job_max;	/* streams open into one job */
	int per_user_max;	/* streams open by one user */
	int total_max;		/* streams open in all */
	int64_t idle_max_ms;	/* the cap on a session's idle limit */
	int64_t connect_ms;	/* how long the agent has to dial back */
	int threads;		/* relay threads (0: one per core, <= 16) */
};

/* The defaults, for main.c's flags. */
void relay_config_default(struct relay_config *cfg);
/* Starts the relay's threads. 0 or GP_E*. */
int relay_start(const struct relay_config *cfg);
/* Stops and joins the threads, then ends every stream. */
void relay_stop(void);

/*
 * Opens a stream for the coordinator's own use (the dashboard's
 * terminal, the HTTP proxy of a job's port: issue 17 part B), as the
 * HTTP route does for the CLI, with the same checks: user must own job,
 * whose attempt must be running; the caps.
 * IN: kind (enum gp_stream_kind; the OPEN frame, written by the caller
 * as the first bytes on *fd, says what to open exactly), idle_ms (0: no
 * idle end; else capped by the configuration).
 * OUT: *fd: one end of a socket pair (non-blocking, close-on-exec,
 * SO_SNDBUF small) that carries frames both ways: write the OPEN frame,
 * then DATA/RESIZE/SIGNAL/EOF frames; read READY, STDOUT, STDERR, EXIT,
 * ERROR, NOTICE frames (gp_frame_read). The caller closes it; a
 * stream's end closes the other side. Backpressure is the socket's:
 * stop reading and the job's side stops. *stream_id: for the logs.
 * Returns 0, GP_ENOENT (no such job / not yours: say 404), GP_ECONFLICT
 * (not running), GP_ETOOBIG (a cap is reached), or GP_E*. Takes the
 * state's read lock: call it without.
 */
int relay_open(int64_t job_id, const char *user, int kind, int64_t idle_ms,
    int *fd, int64_t *stream_id);
/*
 * relay_open into part of a gang (0: rank 0, or the only part); also
 * GP_EINVAL (no such part).
 */
int relay_open_part(int64_t job_id, int part, const char *user, int kind,
    int64_t idle_ms, int *fd, int64_t *stream_id);

/* The streams open into a job, for its views (ps, show). */
int relay_job_sessions(int64_t job_id);

/*
 * Poll (api_agent.c): the streams node must dial, as a JSON array (new
 * reference; an empty array when none), taken off the node's list. 1 /
 * 0: whether the node has any. Call with notify_lock held (the relay
 * wakes the node's poll under it).
 */
int relay_node_has_streams(int64_t node_id);
json_t *relay_node_take_streams(int64_t node_id);

/* /metrics: the relay's counters (metrics.c). */
struct gp_buf;
int relay_metrics_render(struct gp_buf *out);

/* Its routes: relay_routes (route.h). */

#endif
