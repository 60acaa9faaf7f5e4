/*
 * jobspec.h: what a user asks for when submitting a job, and its codec.
 * The decoder is strict: it is fed bytes from the network (see
 * tests/fuzz/fuzz_jobspec.c) and names the field at fault.
 */
#ifndef GP_JOBSPEC_H
#define GP_JOBSPEC_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define GP_NAME_MAX	   64
#define GP_ARGC_MAX	   256
#define GP_ARG_MAX	   4096
#define GP_ENV_MAX	   128
#define GP_ENV_KEY_MAX	   128
#define GP_GPUS_MAX	   64
#define GP_MIB_MAX	   16777216LL
#define GP_CPUS_MAX	   1024
#define GP_TIME_LIMIT_MAX  31536000LL
#define GP_SUBMIT_BODY_MAX 65536
#define GP_CHECKPOINT_EVERY_DEFAULT 300 /* seconds */
#define GP_DATA_MOUNTS_MAX 16  /* data sets one job mounts */
#define GP_MOUNT_PATH_MAX  512 /* bytes of a mount path */
#define GP_IMAGE_REF_MAX   400 /* "NAME[:TAG][@sha256:HEX]" */
#define GP_MAX_PRICE_MICRO_MAX 1000000000000LL /* GP_PRICE_MICRO_MAX */
#define GP_NODES_MAX	   64 /* parts of a gang (GP_SCHED_PARTS_MAX) */
#define GP_CAPABILITY_MAX  999 /* compute capability x 10: 99.9 */
#define GP_ARRAY_MAX	   10000  /* tasks in one job array */
#define GP_ARRAY_TASK_MAX  999999 /* the largest task index */
#define GP_EXPOSE_MAX	   8 /* ports one job declares (submit --expose) */

/* "USR1", "SIGUSR1" or "10" -> 10; -1 when not a signal a job may get. */
int gp_signal_parse(const char *text);
/* "USR1" for 10; "?" for unknown numbers. */
const char *gp_signal_name(int sig);

#define GP_IDEMPOTENCY_KEY_MIN 16
#define GP_IDEMPOTENCY_KEY_MAX 64

struct gp_jobspec {
	char name[GP_NAME_MAX + 1];
	json_t *command; /* array of strings, owned */
	json_t *env;	 /* object of strings, owned */
	int gpus;	      /* per node (part): whole GPUs, or 1 */
	/*
	 * A fraction of one GPU: its share (gpu_milli, 1..999 thousandths;
	 * the API's gpu_share) and/or this much of its memory (gpu_mem_mib).
	 * Both 0: whole GPUs. Fractions are scheduled, not enforced.
	 */
	int gpu_milli;
	int64_t gpu_mem_mib;
	/* Constraints on each GPU. */
	int64_t min_gpu_mem_mib;	 /* its total memory, at least */
	int min_capability;		 /* compute capability x 10; 0: any */
	char gpu_model[GP_NAME_MAX + 1]; /* "" when any model will do */
	int nodes;			 /* a gang of this many parts; 1 */
	int cpus;
	int64_t mem_mib;      /* 0: no limit */
	int64_t time_limit_s; /* 0: no limit */
	/* Checkpoints (docs/checkpoints.md). */
	int64_t checkpoint_every_s; /* least time between uploads */
	int checkpoint_signal;	    /* "save now and exit"; SIGUSR1 */
	/*
	 * Data sets mounted read-only (docs/data.md): an array of
	 * {"name", "owner", "version", "path"}, owned. At submit owner and
	 * version may be absent (the submitter's, the latest); the
	 * coordinator pins both before the job is queued.
	 */
	json_t *data;
	/*
	 * The container image (docs/images.md), "" for a plain command. At
	 * submit a reference to the coordinator's image store; the
	 * coordinator pins it to "NAME@sha256:..." (or "sha256:...") before
	 * the job is stored. With an image the command may be empty (the
	 * image's Entrypoint and Cmd run). Never NULL once initialised:
	 * a shared "" or a string the spec owns (gp_jobspec_set_image), so
	 * that the many plain jobs a coordinator holds carry no 401 bytes.
	 */
	char *image;
	/* Accounting (docs/accounting.md). */
	char group[GP_NAME_MAX + 1]; /* "" : the user's first group */
	int64_t max_price_micro;     /* per GPU-hour; 0: any price */
	/*
	 * A task of a job array (POST /v1/jobs/array): the array's id (its
	 * first job's) and the task's index; 0 and 0 for other jobs. Set by
	 * the coordinator only; the job sees them as GPUPOOL_ARRAY_JOB_ID
	 * and GPUPOOL_ARRAY_TASK_ID.
	 */
	int64_t array_job_id;
	int array_task_id;
	/* At most so many of the array's tasks run at once (`%LIMIT`); 0:
	 * no limit. Set by the coordinator from the array's indices. */
	int array_limit;
	/*
	 * The submission's idempotency key (docs/api.md): a repeat with the
	 * same key by the same user is answered with the first one's job id
	 * and makes no job. "" when none; else 16 to 64 of A-Z a-z 0-9 _ -.
	 */
	char idempotency_key[GP_IDEMPOTENCY_KEY_MAX + 1];
	/* The most its work directory may hold (MiB); 0: the owner's cap. */
	int64_t disk_mib;
	/*
	 * The network the job asks for (docs/agent.md, "Job networks"):
	 * 0, what its node allows; else 1 + the level: 1 none, 2 internet,
	 * 3 lan. It gets no more than it asks for, and runs only where the
	 * owner allows at least that much.
	 */
	int network;
	/*
	 * An interactive job (docs/interactive.md): a person is waiting at
	 * a terminal or a browser. 1 when the body says "interactive": true;
	 * the scheduler gives it its own time limits and queue position, and
	 * owners may keep GPUs for it or refuse it (docs/scheduling.md).
	 */
	int interactive;
	/*
	 * The ports of the job's own loopback it declares ("expose": [8888,
	 * "1:8888"]): the dashboard offers an Open link to each, proxied by
	 * the coordinator for the owner only. expose[i] 1..65535 on part
	 * expose_part[i] of a gang (0: rank 0, or the only part; below
	 * nodes); the pairs distinct, in the order given; n_expose of them.
	 */
	int n_expose;
	uint16_t expose[GP_EXPOSE_MAX];
	uint8_t expose_part[GP_EXPOSE_MAX];
};

/* 1 when key is a valid idempotency key (16..64 of A-Z a-z 0-9 _ -). */
int gp_idempotency_key_valid(const char *key);

/* "none", "internet", "lan" for 1..3; NULL for anything else. */
const char *gp_jobspec_network_name(int network);
/* 0 and *network (1..3), or GP_EINVAL. */
int gp_jobspec_network_parse(const char *name, int *network);

/* Sets the defaults: 1 GPU, 1 CPU, no limits, empty command and env. */
void gp_jobspec_init(struct gp_jobspec *spec);
void gp_jobspec_fini(struct gp_jobspec *spec);
/*
 * Sets spec's image to a copy of ref (NULL or "": none), freeing the one
 * it owned. A spec copied by assignment shares its image: set its image
 * to NULL first, then to a copy. Returns 0 or GP_ENOMEM (spec unchanged).
 */
int gp_jobspec_set_image(struct gp_jobspec *spec, const char *ref);

/*
 * Decodes a submit body. OUT: spec (initialised by this call; release
 * with gp_jobspec_fini whatever the result), err: why it was refused.
 * Returns 0 or GP_EINVAL.
 */
int gp_jobspec_decode(const char *text, size_t len, struct gp_jobspec *spec,
    char *err, size_t errlen);

/* Checks the bounds of a filled-in spec; same contract as decode. */
int gp_jobspec_validate(const struct gp_jobspec *spec, char *err,
    size_t errlen);

/* Returns a new JSON object (caller decrefs) in the submit-body form. */
json_t *gp_jobspec_encode(const struct gp_jobspec *spec);

/* The "sha256:..." an image field pins, or NULL when it pins none. */
const char *gp_jobspec_image_digest(const struct gp_jobspec *spec);

/* 1 when name is 1..64 of [A-Za-z0-9._-]. */
int gp_name_valid(const char *name);

/* 1 when name may name a data set: gp_name_valid, not starting with '.'. */
int gp_data_name_valid(const char *name);

/*
 * Checks where a data set is mounted: an absolute path of at most
 * GP_MOUNT_PATH_MAX bytes without empty, "." or ".." components, control
 * characters or a trailing '/', that covers none of the job's system
 * directories (/proc, /dev, /sys and what lies beneath them; /, /tmp,
 * /etc, /usr, /var, /run, /bin, /sbin, /lib*, /boot themselves). Returns
 * 0 or GP_EINVAL with err set.
 */
int gp_mount_path_check(const char *path, char *err, size_t errlen);

/*
 * Parses a --data operand, "[OWNER/]NAME[@VERSION]:/PATH" (untrusted:
 * fuzzed by tests/fuzz/fuzz_data_spec.c). OUT: *out, a new
 * {"name", "owner"?, "version"?, "path"} object, written only on
 * success. Returns 0 or GP_EINVAL with err set.
 */
int gp_data_spec_parse(const char *text, json_t **out, char *err,
    size_t errlen);


/*
 * Parses a job array's task indices as `sbatch --array` writes them:
 * comma-separated items, each N, A-B or A-B:STEP, 0 <= N <= 999999
 * (untrusted: fuzzed by tests/fuzz/fuzz_array_spec.c), then an optional
 * "%LIMIT" (at most LIMIT tasks at once, 1 <= LIMIT <= GP_ARRAY_MAX).
 * OUT: *tasks (malloc'd, ascending, caller frees), *n (1..GP_ARRAY_MAX),
 * *limit (0: none; limit may be NULL when the caller refuses a limit),
 * written only on success. Returns 0, GP_EINVAL with err set (a repeated
 * index, more than GP_ARRAY_MAX tasks, a malformed item or limit) or
 * GP_ENOMEM.
 */
int gp_array_parse(const char *text, int **tasks, int *n, int *limit, char *err,
    size_t errlen);

/* 1 when the spec declares port on part 0 (submit --expose PORT). */
int gp_jobspec_exposes(const struct gp_jobspec *spec, int port);
/* 1 when it declares port on part (submit --expose PART:PORT). */
int gp_jobspec_exposes_on(const struct gp_jobspec *spec, int part, int port);
/*
 * "PORT" or "PART:PORT" (--expose; part 0 to GP_NODES_MAX - 1, port 1 to
 * 65535) into *part (0 when not given) and *port. 0 or GP_EINVAL.
 */
int gp_jobspec_expose_parse(const char *text, int *part, int *port);
/* expose entry i as JSON: PORT for part 0, else "PART:PORT" (new ref). */
json_t *gp_jobspec_expose_entry(const struct gp_jobspec *spec, int i);

/* 1 when the spec asks for a fraction of one GPU. */
int gp_jobspec_is_fraction(const struct gp_jobspec *spec);

/*
 * "8.6" (or "8") -> 86: a compute capability X.Y as X * 10 + Y, X in
 * 1..99, Y in 0..9. Returns 0 or GP_EINVAL.
 */
int gp_capability_parse(const char *text, int *out);
/* 86 -> "8.6". */
void gp_capability_format(int cap, char *buf, size_t len);

/*
 * "0.5", ".25" -> 500, 250: a share of one GPU, 0 < F < 1, in
 * thousandths (rounded; at least 1, at most 999). 0 or GP_EINVAL.
 */
int gp_share_parse(const char *text, int *milli);

#endif
