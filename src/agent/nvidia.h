/*
 * nvidia.h: the NVIDIA device nodes and driver files of this host, found
 * once at start, for container jobs on a host without a CDI spec for its
 * GPUs: /dev/nvidia<minor> of each GPU, the control nodes (nvidiactl,
 * nvidia-uvm, nvidia-uvm-tools, nvidia-modeset), the driver libraries the
 * ld cache lists and the utility programs (nvidia-smi ...). A job gets
 * the control nodes, the files and the nodes of its own GPUs only.
 */
#ifndef GP_AGENT_NVIDIA_H
#define GP_AGENT_NVIDIA_H

#include <limits.h>
#include <stddef.h>

#include "agent/oci.h"

struct gp_nvidia_host {
	char root[PATH_MAX];	/* "" (the host), or a fake root (tests) */
	int present;		/* <root>/dev/nvidiactl is a device node */
	struct gp_oci_edits common; /* control nodes, libraries, programs */
	struct gp_oci_device *gpu_nodes; /* per GPU index; path NULL: none */
	int ngpus;
	int nlibs;		/* libraries found (for the log) */
};

/*
 * IN: root: NULL or "" for the real host, else a directory that stands
 * in for / (agent --fake-gpu-root, tests): nodes under root/dev, the ld
 * cache root/etc/ld.so.cache (whose paths are relative to root), programs
 * under root/usr/bin; container paths drop the root. minors[i]: the
 * minor number of GPU index i (/dev/nvidia<minor>). OUT: h (release with
 * gp_nvidia_host_fini). Returns 0 (also when nothing is found) or
 * GP_ENOMEM.
 */
int gp_nvidia_discover(const char *root, const int *minors, int ngpus,
    struct gp_nvidia_host *h);
void gp_nvidia_host_fini(struct gp_nvidia_host *h);

/*
 * Appends what a job with GPU indices gpus[0..n-1] gets to out: nothing
 * when n is 0 or no NVIDIA device is present. Returns 0, GP_ENOENT with
 * err set when a GPU's node is missing, or GP_ENOMEM.
 */
int gp_nvidia_edits(const struct gp_nvidia_host *h, const int *gpus, int n,
    struct gp_oci_edits *out, char *err, size_t errlen);

/*
 * Parses `ldconfig -p` output and keeps the x86-64 NVIDIA driver
 * libraries. Calls add(arg, soname, path) for each (in order, without
 * duplicate paths). Returns how many it kept. For tests.
 */
int gp_nvidia_parse_ldcache(const char *text,
    int (*add)(void *arg, const char *soname, const char *path), void *arg);

#endif
