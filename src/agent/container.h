/*
 * container.h: the container executor's configuration and state: which
 * OCI runtime runs container jobs, the user namespace range they map to,
 * their scratch size, and how GPUs enter them (CDI specs, else the NVIDIA
 * nodes and libraries the agent found). The executor runs a job with
 * gp_container_exec_ops (container.c) when its assignment has an image.
 */
#ifndef GP_AGENT_CONTAINER_H
#define GP_AGENT_CONTAINER_H

#include <stddef.h>
#include <stdint.h>

#include "agent/cgroup.h"
#include "agent/gpu.h"
#include "agent/oci.h"

/* The default user namespace range: 65536 ids just below 2^31. */
#define GP_CONTAINER_USERNS_BASE 2147418112U
#define GP_CONTAINER_USERNS_SIZE 65536U
/* Who a job runs as inside when its image says root or nothing. */
#define GP_CONTAINER_DEFAULT_UID 1000U
#define GP_CONTAINER_DEFAULT_GID 1000U
#define GP_CONTAINER_SCRATCH_DEFAULT (1024LL << 20)

struct gp_container_options {
	const char *runtime;	/* "auto", "crun", "runc" or a path */
	const char *init_path;	/* gpupool-init; NULL: next to the binary */
	uint32_t userns_base;	/* 0: GP_CONTAINER_USERNS_BASE */
	uint32_t userns_size;	/* 0: GP_CONTAINER_USERNS_SIZE */
	int64_t scratch_bytes;	/* /tmp and /dev/shm; 0: the default */
	/*
	 * Tests: a directory standing in for / when looking for NVIDIA
	 * nodes, the ld cache and CDI specs (root/etc/cdi, root/var/run/cdi).
	 */
	const char *fake_gpu_root;
};

struct gp_containers;

/*
 * Detects the runtime (gp_oci_runtime_detect, a probe container), checks
 * the user namespace range, loads CDI specs and finds NVIDIA devices.
 * IN: work_dir (the agent's; containers live in work_dir/containers),
 * cgroups, the node's GPUs and the minor number of each one's device node
 * (may be NULL: the index). OUT: *out. Returns 0 or GP_E* with err
 * saying why container jobs cannot run here.
 */
int gp_containers_new(const char *work_dir, const struct gp_container_options *o,
    const struct gp_cgroups *cgroups, const struct gp_gpu_info *gpus,
    int ngpus, const int *minors, struct gp_containers **out, char *err,
    size_t errlen);
void gp_containers_free(struct gp_containers *c);

/* The runtime in use (for logs and benchmarks). */
const struct gp_oci_runtime *gp_containers_runtime(
    const struct gp_containers *c);

/*
 * The job's uid and gid inside its container: from the image's User
 * ("uid", "uid:gid", "name", "name:group"; names looked up in the
 * image's /etc/passwd and /etc/group through root_fd), else, and when
 * that is root, GP_CONTAINER_DEFAULT_UID:GID. Never 0. Returns 0 or
 * GP_EINVAL / GP_ENOENT with err set. For tests too.
 */
int gp_container_resolve_user(int root_fd, const char *user, uint32_t *uid,
    uint32_t *gid, char *err, size_t errlen);

#endif
