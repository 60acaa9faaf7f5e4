/*
 * oci.h: what the container executor hands an OCI runtime (crun, runc):
 * the container's config.json (built with jansson from struct
 * gp_oci_config, oci_config.c), the "container edits" that put GPUs into
 * it (from a CDI specification, cdi.c, or from the NVIDIA nodes and
 * libraries the agent discovers, nvidia.c), and the runtime itself:
 * detection at start and spawning it in a private mount namespace
 * (oci_runtime.c). See docs/agent.md, "Container jobs".
 */
#ifndef GP_AGENT_OCI_H
#define GP_AGENT_OCI_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/assignment.h"

/* Where gpupool-init is bind-mounted inside every container. */
#define GP_OCI_INIT_PATH "/dev/.gpupool-init"

/*
 * A device node given to the container: bind-mounted from host_path to
 * path (as the runtimes do in a user namespace) and allowed in the
 * devices cgroup. type 'c' or 'b', major and minor are filled by
 * gp_oci_edits_resolve from the host node when the spec left them out.
 */
struct gp_oci_device {
	char *path;		/* in the container */
	char *host_path;	/* on the host; NULL: path */
	char type;		/* 'c', 'b', or 0: unknown yet */
	int64_t major, minor;	/* -1: unknown yet */
	char *permissions;	/* cgroup access, "rwm" when NULL */
};

/* A mount given to the container (CDI "mounts", driver libraries). */
struct gp_oci_mount {
	char *host_path;
	char *container_path;
	char *type;		/* NULL: "bind" */
	char **options;		/* NULL-ended, or NULL: bind, ro, nosuid, nodev */
};

/* An OCI hook (CDI "hooks"): run by the runtime at hook_name. */
struct gp_oci_hook {
	char *hook_name;	/* createRuntime, createContainer, ... */
	char *path;
	char **args;		/* NULL-ended or NULL */
	char **env;		/* NULL-ended or NULL */
	int timeout;		/* seconds, 0: none */
};

/*
 * Container edits, as CDI calls them. Every pointer is owned; release
 * with gp_oci_edits_fini. Arrays are plain (count given).
 */
struct gp_oci_edits {
	char **env;		/* "K=V" */
	int nenv;
	struct gp_oci_device *devices;
	int ndevices;
	struct gp_oci_mount *mounts;
	int nmounts;
	struct gp_oci_hook *hooks;
	int nhooks;
	int64_t *gids;		/* additionalGids */
	int ngids;
};

void gp_oci_edits_fini(struct gp_oci_edits *e);
/* Appends deep copies of what src holds to dst. 0 or GP_ENOMEM. */
int gp_oci_edits_append(struct gp_oci_edits *dst,
    const struct gp_oci_edits *src);
/*
 * Fills the type and numbers of each device that lacks them from its host
 * node (stat; a symbolic link is followed). Returns 0, or GP_ENOENT /
 * GP_EINVAL with err naming the device that is missing or is not a
 * device node.
 */
int gp_oci_edits_resolve(struct gp_oci_edits *e, char *err, size_t errlen);

/* Everything config.json says, in the executor's terms. */
struct gp_oci_config {
	char *const *args;	/* process.args, NULL-ended */
	char *const *env;	/* process.env, NULL-ended */
	const char *cwd;	/* absolute */
	uint32_t uid, gid;	/* the job's ids inside (never 0) */
	const char *hostname;
	const char *rootfs;	/* root.path (mounted by the executor) */
	uint32_t userns_host;	/* container ids 0..size-1 map to */
	uint32_t userns_size;	/*   host ids host..host+size-1 */
	const char *cgroups_path; /* linux.cgroupsPath, or NULL */
	int64_t mem_bytes;	/* 0: no memory limit */
	int mem_swap;		/* also memory.swap = mem_bytes (no swap) */
	int64_t pids_max;
	int64_t cpu_quota_us;	/* 0: no CPU limit */
	int64_t cpu_period_us;
	int64_t scratch_bytes;	/* size of /tmp and /dev/shm */
	const char *workdir;	/* bound read-write at the same path */
	const char *init_host_path; /* gpupool-init, bound at GP_OCI_INIT_PATH */
	const struct gp_mount *mounts; /* the job's mounts */
	int nmounts;
	const struct gp_oci_edits *edits; /* devices, mounts, hooks, gids */
	int cgroup_mount;	/* mount the job's cgroup at /sys/fs/cgroup */
	/* A new, empty network namespace (a non-root agent's jobs). */
	int new_net;
};

/*
 * Builds config.json. OUT: *out (a new reference, only on success).
 * Returns 0, GP_ENOMEM, or GP_EINVAL with err set (a relative path, a
 * mount on a reserved target).
 */
int gp_oci_config_build(const struct gp_oci_config *c, json_t **out,
    char *err, size_t errlen);

/* 1 when p is absolute with no empty, "." or ".." part, no end "/". */
int gp_oci_path_normal(const char *p);

/* 1 when target (absolute, normalised) is one the executor owns. */
int gp_oci_reserved_target(const char *target);

/* ---- oci_runtime.c ---- */

enum gp_oci_runtime_kind { GP_OCI_CRUN = 1, GP_OCI_RUNC, GP_OCI_OTHER };

struct gp_oci_runtime {
	enum gp_oci_runtime_kind kind;
	char path[4096];	/* the runtime binary */
	char name[32];		/* "crun", "runc", or the file name */
	char version[128];	/* first line of --version */
	char state_root[4096];	/* its --root: <base>/state */
	char init_path[4096];	/* gpupool-init on the host */
	/*
	 * On a cgroup v1/v2 hybrid host the runtime runs with the v2 mount
	 * (/sys/fs/cgroup/unified) hidden in its private mount namespace:
	 * crun refuses hybrid hosts, and runc would make stray v2 cgroups.
	 */
	int hide_unified;
	int mem_swap;		/* the v1 memory.memsw files exist */
	uint32_t userns_host, userns_size;
};

/*
 * Finds the runtime and checks that it really runs a container here: a
 * probe container (the host's root read-only, a user namespace, the
 * job's limits) must run gpupool-init to the end. IN: want: "auto"
 * (crun, then runc), "crun", "runc" or a path; base: the executor's
 * directory (WORK/containers: state/ is the runtime's --root, bundle/
 * the mount point of every bundle's private tmpfs); init_path (NULL: gpupool-init next to the running
 * binary); the user namespace range. Deletes containers an earlier agent
 * left in state/.
 * OUT: rt. Returns 0, or GP_ENOENT / GP_EIO with err saying what was
 * tried and why each failed.
 */
int gp_oci_runtime_detect(const char *want, const char *base,
    const char *init_path, uint32_t userns_host, uint32_t userns_size,
    struct gp_oci_runtime *rt, char *err, size_t errlen);

/*
 * Checks a user namespace range for container jobs: it must not include
 * uid or gid 0, must fit in 32 bits, hold at least 65536 ids (the job's
 * uid and nobody) and name no user of the host's passwd database.
 * Returns 0 or GP_EINVAL with err saying why.
 */
int gp_oci_userns_check(uint32_t host, uint32_t size, char *err,
    size_t errlen);

/*
 * Composes the image's root as a detached mount (the new mount API, so it
 * belongs to no namespace until the runtime's process attaches it):
 * overlayfs with layers (bottom first) as read-only lower layers and the
 * upper layer on a tmpfs of scratch_bytes, which only ever holds the
 * mount points gp_oci_rootfs_mkpath makes (the runtime mounts the root
 * read-only). Nothing is written to the layers. OUT: *root_fd (close it
 * when the runtime's process has it). Returns 0 or GP_E* with err set.
 */
int gp_oci_rootfs_compose(char *const *layers, int64_t scratch_bytes,
    int *root_fd, char *err, size_t errlen);

/*
 * Makes path (absolute in the container) exist in the root: missing
 * directories, and an empty file at the end when is_file. Symbolic links
 * in the image resolve as if the root were / (openat2 RESOLVE_IN_ROOT):
 * nothing is ever created outside it. The runtime, which runs as the
 * container's unprivileged root, could not create these in the image's
 * root-owned directories. Returns 0 or GP_E* with err set.
 */
int gp_oci_rootfs_mkpath(int root_fd, const char *path, int is_file,
    char *err, size_t errlen);

/*
 * Opens path inside the root with flags (O_CLOEXEC added), symbolic
 * links resolved as if the root were / and never leaving it. Returns the
 * descriptor or -1 (errno).
 */
int gp_oci_rootfs_open(int root_fd, const char *path, int flags);

/*
 * The process the agent holds for a container: clone3 into a new mount
 * and pid namespace (it is pid 1: killing it kills the runtime and the
 * container, which is nested in its pid namespace), mounts a /proc of
 * that pid namespace, hides the v2 cgroup mount when the runtime says
 * so, and, with a bundle, mounts a small tmpfs on it (private to this
 * namespace, so every container may use one path and nothing of a bundle
 * touches the disk), writes config there and attaches rootfs_fd at
 * bundle/rootfs; then sets fds 0-4 to the given ones and execs the
 * runtime with argv. Only system calls run in the child. A failure before
 * exec is written as a GP_SANDBOX_SETUP_FAILED record on status_fd.
 * OUT: *pid, *pidfd (close-on-exec). Returns 0 or GP_EIO.
 */
struct gp_oci_spawn {
	const struct gp_oci_runtime *rt;
	char *const *argv;
	char *const *envp;
	const char *bundle;	/* an existing directory, or NULL: none */
	const char *config;	/* config.json's text for the bundle */
	size_t config_len;
	int rootfs_fd;		/* from gp_oci_rootfs_compose, or -1 */
	int fds[5];		/* become 0..4 in the runtime; -1: /dev/null */
	int status_fd;		/* for setup failures (fds[3] or -1) */
	/*
	 * The job's network namespace (netns.h), joined before the runtime
	 * runs: its container, with no network namespace in its config,
	 * shares it. NULL: the agent's.
	 */
	const int *net_fd;
};
int gp_oci_spawn(const struct gp_oci_spawn *s, pid_t *pid, int *pidfd);

/* The last line of what the runtime wrote to fd (a memfd), or "". */
void gp_oci_log_last_line(int fd, char *out, size_t len);

/* A short name for a gp_oci_spawn setup stage. */
const char *gp_oci_stage_name(int stage);

/*
 * Runs `RUNTIME --root STATE delete --force ID` when the runtime left
 * state for id (it was killed), waiting at most timeout_ms. Returns 0,
 * or GP_EIO / GP_ETIMEDOUT (logged by the caller).
 */
int gp_oci_runtime_delete(const struct gp_oci_runtime *rt, const char *id,
    int timeout_ms);
/* Deletes every container left in the state root (an agent crashed). */
void gp_oci_runtime_sweep(const struct gp_oci_runtime *rt);

#endif
