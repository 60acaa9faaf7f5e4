/*
 * spawner.h: a small helper process, forked once when the agent starts
 * (before its threads and caches), that clones each job's init on the
 * agent's behalf. Cloning copies the caller's page tables and, while the
 * parent has other threads running, costs TLB shootdowns on every write
 * before exec: the helper stays a few MiB and single-threaded whatever
 * the agent grows to, so a job's start costs the same in a small agent
 * and in a big one (docs/agent.md, "How a job is started").
 */
#ifndef GP_AGENT_SPAWNER_H
#define GP_AGENT_SPAWNER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct gp_spawner;

/*
 * Forks the helper. Call it while the agent has one thread. Returns the
 * handle (gp_spawner_free frees it and ends the helper), or NULL with err
 * set.
 */
struct gp_spawner *gp_spawner_start(char *err, size_t errlen);
void gp_spawner_free(struct gp_spawner *sp);

/* The helper's pid (tests and the bench look at it). */
pid_t gp_spawner_pid(const struct gp_spawner *sp);

/*
 * Asks the helper to clone (clone3 with flags, plus CLONE_PARENT so that
 * the child is the agent's own, and CLONE_PIDFD) a child that maps memfd
 * at arena (arena_len bytes, the address the agent maps it at) and runs
 * gp_sandbox_child_main(kind, arena, fds, nfds). fds (at most
 * GP_SPAWNER_FDS_MAX) are passed, not taken: the caller still closes its
 * own. Thread-safe. OUT (on success): *pid, *pidfd (close-on-exec).
 * Returns 0, GP_EIO when the helper is gone (errno EPIPE) or failed to
 * clone (errno its errno).
 */
#define GP_SPAWNER_FDS_MAX 6
int gp_spawner_clone(struct gp_spawner *sp, int kind, uint64_t flags,
    int memfd, void *arena, size_t arena_len, const int *fds, int nfds,
    pid_t *pid, int *pidfd);

#endif
