/*
 * policy.h: the owner's lending policy for one provider machine: which
 * GPUs are lent, when (weekly windows in local time), how much CPU and
 * memory jobs may take, the longest job accepted, the grace period a job
 * gets to checkpoint, and what to do when the owner starts using a lent
 * GPU. Parsed from a small text file (docs/provider.md); the parser is
 * fed files the owner edits by hand, so it names the line and the reason
 * of the first error (tests/unit/test_policy.c, tests/fuzz/fuzz_policy.c).
 */
#ifndef GP_AGENT_POLICY_H
#define GP_AGENT_POLICY_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "agent/netns.h"
#include "sign.h"

#define GP_POLICY_WINDOWS_MAX 64
#define GP_POLICY_FILE_MAX (64 * 1024)
#define GP_POLICY_KEYS_MAX 32	/* trust-key lines */
#define GP_POLICY_EXPOSE_MAX 16	/* expose lines */
#define GP_POLICY_PATH_MAX 256	/* an exposed path, with its NUL */

/* A host path shown to plain jobs at the same place (expose = PATH ro). */
struct gp_policy_expose {
	char path[GP_POLICY_PATH_MAX];	/* absolute, normal */
	int read_only;
};

/* A weekly window: it opens on each day of `days` at start_min. */
struct gp_policy_window {
	unsigned days;	/* bit 0 Monday ... bit 6 Sunday: opening days */
	int start_min;	/* minutes after local midnight, 0..1439 */
	int end_min;	/* 1..1440; <= start_min: ends the next day */
};

/* Which container images the owner lets run (docs/images.md). */
enum gp_image_policy {
	GP_IMAGES_SIGNED = 0,	/* signed by a key of trust-key (default) */
	GP_IMAGES_ANY,		/* any image */
	GP_IMAGES_NONE,		/* no images */
};

enum gp_owner_presence {
	GP_PRESENCE_RECLAIM = 0, /* reclaim the GPU (graceful) */
	GP_PRESENCE_IGNORE,	 /* leave pool jobs alone */
	GP_PRESENCE_THROTTLE,	 /* slow pool jobs to throttle_milli */
};

/* How a job's compute share is held (docs/gpu-sharing.md). */
enum gp_gpu_share_mode {
	GP_SHARE_ELASTIC = 0,	/* a job alone on its GPU may use idle time */
	GP_SHARE_STRICT,	/* never more than its share */
};

struct gp_policy {
	int all_gpus;		/* 1: every GPU discovered is lent */
	uint64_t gpus;		/* else: bit i set = GPU index i lent */
	int cpus;		/* CPUs jobs may take in all; 0: the agent's */
	int64_t mem_mib;	/* memory jobs may take in all; 0: the agent's */
	int64_t max_job_s;	/* longest time limit accepted; 0: any */
	int64_t grace_s;	/* checkpoint grace on reclaim (default 30) */
	int nwindows;		/* 0: always available */
	struct gp_policy_window windows[GP_POLICY_WINDOWS_MAX];
	enum gp_owner_presence presence;
	int throttle_milli;	/* presence throttle: share, 1..1000 */
	enum gp_gpu_share_mode gpu_share;
	/* Images and plain commands. */
	enum gp_image_policy images;
	int refuse_plain;	/* plain-jobs = refuse */
	int nkeys;
	struct gp_trusted_key keys[GP_POLICY_KEYS_MAX];
	/* Jobs' networks (netns.h): the most a job gets, its rate cap. */
	enum gp_net_policy network;	/* default internet */
	int64_t net_rate_bps;		/* bits/s each way; 0: no cap */
	/* The most a job's work directory may hold; 0: no cap (scratch-max). */
	int64_t scratch_max_mib;
	/* What plain jobs see besides the minimal root (docs/agent.md). */
	int nexpose;
	struct gp_policy_expose expose[GP_POLICY_EXPOSE_MAX];
	/*
	 * Interactive jobs (docs/interactive.md): refused (interactive =
	 * refuse), and how many lent GPUs are kept for them alone
	 * (interactive-gpus = N; the coordinator keeps the last N lent).
	 */
	int refuse_interactive;
	int interactive_gpus;
};

/*
 * Everything lent, always, grace 30 s, presence reclaims; images only
 * when signed by a trusted key (none is trusted yet); plain jobs allowed;
 * network internet, no rate cap.
 */
void gp_policy_default(struct gp_policy *p);

/*
 * Parses a policy file's text. OUT: p (written only on success), *line
 * (1-based line of the error, 0 when not about one line), err. Returns 0
 * or GP_EINVAL.
 */
int gp_policy_parse(const char *text, size_t len, struct gp_policy *p,
    int *line, char *err, size_t errlen);

/* Reads and parses path; same contract (GP_EIO when it cannot be read). */
int gp_policy_load(const char *path, struct gp_policy *p, int *line,
    char *err, size_t errlen);

/*
 * 1 when lending is allowed at local time *tm (always 1 without windows),
 * else 0. OUT (may be NULL): *next_change_s: seconds until that answer
 * changes (-1 when it never does).
 */
int gp_policy_window_open(const struct gp_policy *p, const struct tm *tm,
    int64_t *next_change_s);

/* "signed", "any" or "none". */
const char *gp_policy_images_name(enum gp_image_policy images);

/* 1 when GPU index i is lent by the policy (windows aside). */
int gp_policy_lends_gpu(const struct gp_policy *p, int i);

/* The policy as JSON (a new object) for `provider policy show`/status. */
json_t *gp_policy_to_json(const struct gp_policy *p);

/*
 * Added with policy.c: a window as the file writes it ("Mon-Fri
 * 19:00-08:00"; it parses back to the same window) into out (64 bytes
 * are enough), and a one-line summary of the policy for logs and
 * `gpupool provider policy check` ("gpus 0,1, 2 windows, ...").
 */
void gp_policy_window_format(const struct gp_policy_window *w, char *out,
    size_t len);
void gp_policy_describe(const struct gp_policy *p, char *out, size_t len);

#endif
