/*
 * assignment.h: what the coordinator hands the agent (poll answers and
 * kill lists) and their strict decoders. These bytes come from the
 * network: the decoders never trust a length or a type (see
 * tests/fuzz/fuzz_assignment.c).
 */
#ifndef GP_AGENT_ASSIGNMENT_H
#define GP_AGENT_ASSIGNMENT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/overlay_relay.h"
#include "jobspec.h"
#include "wg.h"

/* One attempt of one job: the key of everything the agent tracks. */
struct gp_attempt_id {
	int64_t job_id;
	int64_t attempt;
};

/*
 * A container image made ready on this provider (agent/image.c fills it
 * from its layer cache; the container executor runs it). Every string and
 * array is owned; free with gp_container_image_free.
 */
struct gp_container_image {
	char *digest;	   /* the manifest's "sha256:<hex>" */
	char **layers;	   /* unpacked layer directories, bottom first, NULL-ended */
	char **env;	   /* the image config's Env, "K=V", NULL-ended (may be empty) */
	char **entrypoint; /* Entrypoint, NULL-ended, or NULL */
	char **cmd;	   /* Cmd, NULL-ended, or NULL */
	char *workdir;	   /* WorkingDir, or NULL */
	char *user;	   /* User, or NULL (the job never runs as root anyway) */
};

/* Frees img and everything it owns; NULL is fine. */
void gp_container_image_free(struct gp_container_image *img);

/*
 * A host directory or file shown inside the job at target (both absolute),
 * read-only unless read_only is 0. Filled by the agent (data sets);
 * honoured by both executors.
 */
struct gp_mount {
	char *source;
	char *target;
	int read_only;
};

/* A data set version the job mounts (pinned by the coordinator). */
struct gp_data_ref {
	char owner[GP_NAME_MAX + 1];
	char name[GP_NAME_MAX + 1];
	int64_t version;
	char *path; /* where the job sees it (checked: absolute, not reserved) */
};

struct gp_assignment {
	struct gp_attempt_id id;
	char name[GP_NAME_MAX + 1];
	char user[GP_NAME_MAX + 1];
	char **argv;	/* argc strings and a NULL, owned */
	int argc;
	char **env;	/* nenv "KEY=value" strings and a NULL, owned */
	int nenv;
	int gpus[GP_GPUS_MAX];
	int ngpus;
	int cpus;
	int64_t mem_mib;	/* 0: no limit */
	int64_t disk_mib;	/* its work directory's cap; 0: none */
	int64_t time_limit_s;	/* 0: no limit */
	int64_t checkpoint_every_s; /* least time between uploads */
	int checkpoint_signal;	/* "save now and exit" */
	int64_t restart_count;	/* earlier attempts of this job */
	struct gp_data_ref *data; /* ndata, owned; the K-th is data/K+1 */
	int ndata;
	/*
	 * The container image the job runs in: its manifest digest
	 * ("sha256:<64 hex>"), "" for a plain command. With an image, argc
	 * may be 0 (argv is then an empty list): the image's Entrypoint
	 * and Cmd run (docker semantics: a command replaces Cmd).
	 */
	char image[72];
	/*
	 * The network the job asked for (`submit --network`): 0, what the
	 * node allows; else 1 + the level (1 none, 2 internet, 3 lan).
	 */
	int network;
	/*
	 * An interactive job (docs/interactive.md): on a reclaim it gets no
	 * checkpoint signal, the relay's terminals are warned (the
	 * provider's reclaim hook) and it is ended after the grace.
	 */
	int interactive;
	/* Filled by the agent, not the coordinator. */
	char *restore_dir;	/* restored checkpoint to move in, or NULL */
	int64_t restored_version;
	struct gp_container_image *container; /* NULL: a plain command */
	struct gp_mount *mounts; /* nmounts, owned */
	int nmounts;
	/*
	 * The owner's exposures (policy "expose"), for a plain command:
	 * host paths shown at the same place (source == target), owned.
	 */
	struct gp_mount *expose;
	int nexpose;
	/*
	 * A fraction of gpus[0] (docs/scheduling.md): its share in
	 * thousandths (1..999; 0: whole GPUs) and the GPU memory it may use
	 * (0: not said). Scheduled, not enforced inside the GPU.
	 */
	int gpu_milli;
	int64_t gpu_mem_mib;
	/* A gang's part (parts > 1; else 0): torchrun's environment. */
	int part, parts, gpus_per_node;
	char master_addr[256];
	int master_port;
	/* Each part's node address (--advertise-addr; "" unknown). */
	char part_addrs[GP_NODES_MAX][64];
	/*
	 * The gang's overlay (gang.overlay; docs/agent.md, "Gangs behind
	 * NATs"): parts entries, each part's public key and endpoint, when
	 * the coordinator sends them (else NULL; freed by
	 * gp_assignment_fini), and this part's private key in it
	 * (gang.overlay_private_key; wiped by gp_assignment_fini).
	 */
	struct gp_overlay_peer *overlay_peers;
	char overlay_priv[GP_WG_KEY_LEN];
	/*
	 * The coordinator's gang relay (gang.overlay_relay: its UDP port,
	 * this part's relay key; wiped by gp_assignment_fini), port 0 when
	 * it sent none; attempt: this attempt's.
	 */
	struct gp_overlay_relay overlay_relay;
};

/* Save and stop, asked by the coordinator: "preempted", "gang_stopped". */
struct gp_stop {
	struct gp_attempt_id id;
	const char *reason; /* a static string */
};

/* A stream the coordinator asks the agent to dial (agent/attach.c). */
struct gp_stream_request {
	int64_t id;
	char secret[33];	/* 32 hex digits: the stream's, for its header */
	struct gp_attempt_id job;
	int kind;		/* enum gp_stream_kind */
};

struct gp_poll_answer {
	struct gp_assignment *assignments;
	int nassignments;
	struct gp_attempt_id *cancels;
	int ncancels;
	struct gp_attempt_id *checkpoints; /* upload now, please */
	int ncheckpoints;
	struct gp_stop *stops; /* save (checkpoint signal, grace) and stop */
	int nstops;
	struct gp_stream_request *streams; /* interactive streams to dial */
	int nstreams;
};

/*
 * Decodes a poll answer. OUT: answer (zeroed by this call; release with
 * gp_poll_answer_fini whatever the result), err: why it was refused.
 * Unknown fields are ignored (a newer coordinator may add some); known
 * fields of the wrong type or out of range refuse the whole answer.
 * Returns 0 or GP_EINVAL.
 */
int gp_assignment_decode(const char *text, size_t len,
    struct gp_poll_answer *answer, char *err, size_t errlen);
void gp_poll_answer_fini(struct gp_poll_answer *answer);

/* Releases what an assignment owns (not the struct itself). */
void gp_assignment_fini(struct gp_assignment *a);

/*
 * Decodes a "kill" list ([{"job_id": 9, "attempt": 2}, ...]; NULL or a
 * missing field is an empty list). OUT: *ids (malloc'd, caller frees),
 * *n. Returns 0 or GP_EINVAL.
 */
int gp_attempt_list_decode(json_t *list, struct gp_attempt_id **ids, int *n,
    char *err, size_t errlen);

#endif
