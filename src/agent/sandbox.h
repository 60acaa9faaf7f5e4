/*
 * sandbox.h: starts one job inside its own namespaces (mount, pid, ipc,
 * uts, and user when the agent is not root), with a read-only root, a
 * writable work directory, private /tmp and /dev/shm, as an unprivileged
 * user. See docs/agent.md.
 *
 * The process tree of a job: the agent clones "init" (pid 1 of the job's
 * pid namespace), which sets the sandbox up, forks the job's command and
 * reaps until the command exits. Killing init kills the whole namespace.
 * init reports through the status pipe with fixed-size records.
 */
#ifndef GP_AGENT_SANDBOX_H
#define GP_AGENT_SANDBOX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "agent/cgroup.h"

#define GP_SANDBOX_GROUPS_MAX 64

/* Who jobs run as; filled once at start by gp_sandbox_user_init. */
struct gp_sandbox_user {
	char name[64];
	uid_t uid;
	gid_t gid;
	gid_t groups[GP_SANDBOX_GROUPS_MAX];
	int ngroups;
	int userns;		/* agent not root: map ourselves in a user ns */
	char uid_map[64];	/* "<uid> <uid> 1\n" when userns */
	char gid_map[64];
};

/*
 * IN: run_as: user name or NULL. As root, NULL means "nobody" (with a
 * warning) and root itself is refused; as non-root, jobs run as the
 * agent's own user and run_as must be NULL or that user.
 * Returns 0 or GP_E* with err set.
 */
int gp_sandbox_user_init(const char *run_as, struct gp_sandbox_user *user,
    char *err, size_t errlen);

#define GP_SANDBOX_MOUNTS_MAX 64

/* A mount of the job (struct gp_mount), checked and planned. */
struct gp_sandbox_mount {
	const char *source;
	const char *target;
	const char *parent;	/* target's directory (for a file target) */
	int read_only;
	int is_file;		/* the source is not a directory */
	int make;		/* the host lacks target: make it */
	int in_tmp;		/* target is in the job's /tmp or /dev/shm */
};

struct gp_sandbox_spec {
	const struct gp_sandbox_user *user;
	const char *workdir;	/* absolute; not under /tmp or /dev/shm */
	const char *agent_work;	/* hidden, but for workdir */
	int agent_work_hidden;	/* agent_work is under a hide_dirs entry */
	char *const *hide_dirs;	/* empty read-only tmpfs over each */
	char *const *hide_files; /* /dev/null over each */
	/*
	 * Directories re-created as a tmpfs of binds of their entries
	 * (shallowest first, "/" included), so that mount points the host
	 * lacks can be made without writing to the host.
	 */
	char *const *shadows;
	const struct gp_sandbox_mount *mounts;
	int nmounts;		/* at most GP_SANDBOX_MOUNTS_MAX */
	/*
	 * The minimal root (issue 15): when root_binds is not NULL, the
	 * job's root is a fresh tmpfs holding only these host paths, each
	 * at its own place (a symbolic link copied as a link, anything else
	 * bound with its submounts), the owner's exposures (followed when
	 * links; expose_rw stay writable), the agent's work directory's
	 * path, and empty /proc, /tmp, /dev/shm; /dev holds the nodes in
	 * root_binds and the links fd, stdin, stdout and stderr. Everything
	 * else of the host is simply not there.
	 */
	/* The job's /tmp and /dev/shm tmpfs options ("mode=1777,size=..."). */
	const char *tmp_options;
	char *const *root_binds;
	/*
	 * The minimal root's template (below), or NULL: a directory of
	 * init's mount namespace holding the root_binds not under /dev,
	 * the exposures and the agent's work directory's path, already
	 * bound. init moves it to / instead of binding each path, after
	 * giving it a /dev of the job's own (a tmpfs with the /dev
	 * entries of root_binds). Only for a job that makes no mount point
	 * in the root itself: the template's tmpfs is shared by every job
	 * started from it.
	 */
	const char *root_template;
	/*
	 * Shown at /etc/resolv.conf instead of the host's, or NULL: the
	 * agent's DNS relay (netns.h, gp_net_resolv_conf).
	 */
	const char *resolv_conf;
	char *const *expose_ro;
	char *const *expose_rw;
	char *const *argv;	/* NULL-terminated */
	char *const *envp;	/* NULL-terminated, "KEY=value" */
	int out_fd;		/* write end: the job's stdout and stderr */
	int status_fd;		/* write end: init's records */
	const int *cgroup_fds;	/* cgroup.procs files init joins */
	int ncgroup_fds;
	/*
	 * The job's network (netns.h): net_fd >= 0, the namespace init
	 * joins first; else new_net 1, a new one of its own (loopback up);
	 * else the agent's (tests only).
	 */
	int net_fd;
	int new_net;
	/*
	 * >= 0 with new_net: init waits for one byte on it after making its
	 * namespace (the agent attaches pasta meanwhile; EOF: no network,
	 * the job fails at stage network). -1: no wait.
	 */
	int net_wait_fd;
};

/* What init writes on the status pipe. */
enum gp_sandbox_record_kind {
	GP_SANDBOX_SETUP_FAILED = 1,	/* stage, value = errno */
	GP_SANDBOX_EXEC_FAILED,		/* value = errno */
	GP_SANDBOX_EXEC_OK,
	GP_SANDBOX_EXITED,		/* value = the command's wait status */
};

struct gp_sandbox_record {
	int32_t kind;
	int32_t stage;
	int32_t value;
};

/* A short name for a setup stage ("mount /proc"). */
const char *gp_sandbox_stage_name(int stage);

/*
 * Clones init, from the spawn helper sp when it is not NULL and answers
 * (then nothing of the agent's address space is copied), else from the
 * calling thread. Only async-signal-safe system calls run in the child;
 * all memory it needs is prepared here (a deep copy of spec). OUT (on
 * success): *pid (in the agent's pid namespace, a child of the agent
 * either way), *pidfd (close-on-exec). Returns 0 or GP_EIO (errno set).
 */
struct gp_spawner;
int gp_sandbox_spawn(struct gp_spawner *sp,
    const struct gp_sandbox_spec *spec, pid_t *pid, int *pidfd);

/* What a child cloned by gp_sandbox_spawn or _warm_make runs. */
enum gp_sandbox_child_kind {
	GP_SANDBOX_CHILD_NOW = 1,	/* fds: out, status, cgroup.procs... */
	GP_SANDBOX_CHILD_WARM,		/* fds: out, status, go, cgroup... */
};
#define GP_SANDBOX_CGROUP_FDS_MAX 2

/*
 * The child's side of a clone (from the agent or from the spawn helper,
 * agent/spawner.h): arena holds the spec (a deep copy, at its start, now
 * or when the warm child is told to go), fds its descriptors. Never
 * returns.
 */
__attribute__((noreturn)) void gp_sandbox_child_main(int kind, void *arena,
    const int *fds, int nfds);

/*
 * A warm sandbox: init cloned ahead of its job, already in a fresh cgroup
 * of its own (joining a cgroup is the slow step of a start: the kernel's
 * cgroup_threadgroup_rwsem waits for an RCU grace period, 5 to 25 ms), and
 * waiting for the job. gp_sandbox_warm_use copies the job's spec into a
 * shared page and lets init go on with the setup and the command. Until
 * then init runs nothing of a job, outside its cgroup or inside.
 */
struct gp_sandbox_warm {
	pid_t pid;		/* init, in the agent's pid namespace */
	int pidfd;		/* close-on-exec */
	int go_fd;		/* write end: the spec is in the arena */
	int out_fd;		/* read ends of the job's output pipe */
	int status_fd;		/* and of init's status records */
	struct gp_cgroup_job cgroup;	/* no descriptors left open */
	void *arena;		/* shared with init: the spec goes here */
	size_t arena_len;
	/* The root template's generation in init's mount namespace. */
	unsigned int root_gen;
};

/*
 * Makes the cgroup(s) "<name>" with pids_max and no memory limit, the
 * pipes, and clones init into them (it joins, then waits). OUT: w.
 * Returns 0 or GP_E* with err set (nothing left behind).
 */
int gp_sandbox_warm_make(struct gp_sandbox_warm *w, struct gp_spawner *sp,
    const struct gp_cgroups *cg, const struct gp_sandbox_user *user,
    const char *name, int64_t pids_max, char *err, size_t errlen);
/*
 * Hands the job's spec (deep-copied; out_fd, status_fd and cgroup_fds are
 * ignored: init has its own; net_fd is passed over the socket) to the
 * waiting init. Returns 0, GP_ETOOBIG
 * when the spec does not fit the arena, or GP_EIO when init is gone; on
 * an error w is unchanged (discard it or keep it for another job).
 */
int gp_sandbox_warm_use(struct gp_sandbox_warm *w,
    const struct gp_sandbox_spec *spec);
/*
 * After a successful use: closes and forgets what the job now owns (pid,
 * pidfd and pipes were taken by the caller) and the arena.
 */
void gp_sandbox_warm_forget(struct gp_sandbox_warm *w);
/* Kills and reaps an unused warm init, closes all, removes its cgroup. */
void gp_sandbox_warm_discard(struct gp_sandbox_warm *w);

/*
 * The minimal root's template: what every plain job's root holds of the
 * host but /dev (system directories, files of /etc, the owner's
 * exposures), bound once under <work>/roots/{0,1} (in turn) in the agent's
 * mount namespace instead of path by path in each job's (docs/agent.md,
 * "What a job can see and do"). Each job's init gets a copy with its
 * mount namespace and moves it to /. The agent's executor thread owns
 * it; a template older than GP_SANDBOX_TEMPLATE_MAX_AGE_MS is built
 * again before a job uses it, so that a host file replaced (by rename,
 * as useradd and resolvers do) reaches jobs within that time.
 */
#define GP_SANDBOX_TEMPLATE_MAX_AGE_MS 2000
struct gp_sandbox_template;
/*
 * Sweeps <work_dir>/roots (what a killed agent left), then makes it a
 * private mount of its own (nothing under it propagates to the host's
 * other namespaces). OUT: *t (free with _free). Returns 0 or GP_E* with
 * err set (jobs then build their roots themselves).
 */
int gp_sandbox_template_new(struct gp_sandbox_template **t,
    const char *work_dir, char *err, size_t errlen);
/* Unmounts and removes every template; NULL is fine. */
void gp_sandbox_template_free(struct gp_sandbox_template *t);
/* The current template's generation (0: none yet, or t NULL). */
unsigned int gp_sandbox_template_gen(const struct gp_sandbox_template *t);
/* How many templates were built so far (benches, tests). */
unsigned long gp_sandbox_template_builds(const struct gp_sandbox_template *t);

#endif
