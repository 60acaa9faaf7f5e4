/*
 * control.h: the provider's control socket. The owner of a provider
 * machine drives the local agent with `gpupool provider ...` over a Unix
 * socket; only the owner's uid (and root) may use it, checked on the
 * peer's credentials (SO_PEERCRED), not on the file mode alone.
 *
 * Wire format (docs/provider.md): the client sends one JSON object on one
 * line ({"cmd": "reclaim", "now": true, "gpus": [0]}), the agent answers
 * one JSON object on one line ({"ok": true, ...} or {"ok": false,
 * "error": "..."}), then closes. Requests are at most 64 KiB and decoded
 * strictly (tests/fuzz/fuzz_control.c).
 */
#ifndef GP_AGENT_CONTROL_H
#define GP_AGENT_CONTROL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define GP_CONTROL_REQUEST_MAX (64 * 1024)

enum gp_control_cmd {
	GP_CONTROL_STATUS = 1,
	GP_CONTROL_PAUSE,
	GP_CONTROL_RESUME,
	GP_CONTROL_RECLAIM,
	GP_CONTROL_LEAVE,
	GP_CONTROL_POLICY_SHOW,
};

struct gp_control_request {
	enum gp_control_cmd cmd;
	int now;		/* reclaim --now */
	uint64_t gpus;		/* reclaim/resume: GPU indices; 0: all */
};

/*
 * Decodes one request line (untrusted: any local user can connect before
 * the credential check answers them). OUT: req. Returns 0 or GP_EINVAL
 * with err set.
 */
int gp_control_decode(const char *text, size_t len,
    struct gp_control_request *req, char *err, size_t errlen);

/*
 * What the agent does for each command. Each returns a new JSON object to
 * send back ("ok" is added by the server), or NULL with err set. They may
 * block (reclaim waits until the GPUs are free, leave until drained); each
 * connection is served on its own thread.
 */
struct gp_control_ops {
	void *arg;
	json_t *(*handle)(void *arg, const struct gp_control_request *req,
	    char *err, size_t errlen);
};

struct gp_control;

/*
 * Listens on path (an existing socket file there is replaced), mode 0660.
 * IN: owner_uid: the one non-root uid allowed. Returns NULL with err set.
 */
struct gp_control *gp_control_start(const char *path, uid_t owner_uid,
    const struct gp_control_ops *ops, char *err, size_t errlen);

/* Stops listening, waits for the connections being served, unlinks. */
void gp_control_stop(struct gp_control *c);

/*
 * Client side (the CLI): sends req_line (a JSON object, no newline) and
 * returns the answer. OUT: *answer (new reference, only on success: an
 * {"ok": true} answer). timeout_ms 0: none.
 * Returns 0, GP_ECONN (no agent listening), GP_EPERM (refused), GP_EIO.
 * Also (with err set, *answer NULL): GP_EINVAL for an {"ok": false}
 * answer (err is its error), GP_ETIMEDOUT, GP_EPROTO (not JSON).
 */
int gp_control_call(const char *path, const char *req_line,
    long timeout_ms, json_t **answer, char *err, size_t errlen);

#endif
