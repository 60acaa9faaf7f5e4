/*
 * region.h: the shared-memory region of one job's GPU share, the contract
 * between the agent (which creates it and sets the cap and the share)
 * and libgpupool-cuda.so in each of the job's processes (which account
 * their allocations in it and read the share). A file of fixed size,
 * mapped MAP_SHARED by everyone; every field that changes is atomic, so
 * no lock is held across processes (a process killed with kill -9 leaves
 * nothing locked).
 *
 * Memory: `used` is the job's total; each process also keeps its own
 * part in a slot (pid, start time, bytes). A process takes its bytes
 * from `used` first (compare-and-swap against `limit`: the cap holds at
 * the byte however many processes race), then adds them to its slot.
 * When a process is gone (kill -9 too), whoever notices (the next
 * process that nears the cap, a new process taking a slot, the agent)
 * claims its slot by compare-and-swap on the pid and gives its bytes
 * back to `used`: the driver freed that process's memory when it died.
 *
 * Versioned: a region whose magic or version differs is not used (the
 * library then passes every call through, and says so once on stderr).
 */
#ifndef GP_SHIM_REGION_H
#define GP_SHIM_REGION_H

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#define GP_REGION_MAGIC	  0x48535047u	/* "GPSH" */
#define GP_REGION_VERSION 2u
#define GP_REGION_SLOTS	  256

/* flags */
#define GP_REGION_STRICT 0x1u	/* no idle time beyond the share */
/*
 * The agent sends the job's utilisation (host_util): the library steers
 * on those readings alone and never measures its own, which inside the
 * job's pid namespace would match none of NVML's pids.
 */
#define GP_REGION_AGENT_UTIL 0x2u

struct gp_region_slot {
	_Atomic int32_t pid;		/* 0: free */
	uint32_t pad;
	_Atomic uint64_t start;		/* the pid's start time (clock ticks) */
	_Atomic uint64_t used;		/* bytes this process holds */
};

struct gp_region {
	uint32_t magic;
	uint32_t version;
	uint32_t size;			/* sizeof(struct gp_region) */
	_Atomic uint32_t flags;
	_Atomic uint64_t limit;		/* bytes; 0: no cap */
	_Atomic uint64_t used;		/* bytes, the job's processes summed */
	_Atomic uint64_t peak;		/* the most `used` has been */
	/*
	 * Share of the GPU's time, thousandths: share is what the job
	 * asked for, effective what it may use now (the agent lowers it
	 * to the owner-presence throttle, raises it to 1000 when the job
	 * is alone on its GPU and the policy allows idle time). 1000: no
	 * throttling at all.
	 */
	_Atomic uint32_t share;
	_Atomic uint32_t effective;
	/* What the library measures, for reports. */
	_Atomic uint32_t util;		/* the job's last GPU utilisation, % */
	_Atomic uint32_t oom;		/* allocations refused at the cap */
	_Atomic uint64_t launches;	/* kernel launches */
	_Atomic uint64_t throttled_ns;	/* time launches waited */
	/*
	 * The job's SM utilisation (%) as the agent measured it on the
	 * host, where NVML's pids are those of the job's cgroup (inside the
	 * job's pid namespace they match nothing); host_util_seq counts its
	 * readings (0: the agent sends none, the library measures).
	 */
	_Atomic uint32_t host_util;
	_Atomic uint32_t host_util_seq;
	/*
	 * What a CUDA context takes of the device's memory (the agent
	 * measures it on this GPU and driver: tens to hundreds of MiB that
	 * no allocation call shows). Each process of the job is charged it
	 * once, when it first uses the device, so that the job's processes
	 * with their contexts stay within the cap, and the caps of the
	 * jobs on one GPU within its memory.
	 */
	_Atomic uint64_t ctx_bytes;
	struct gp_region_slot slots[GP_REGION_SLOTS];
};

/*
 * The start time of pid (field 22 of /proc/PID/stat), or 0 when it is
 * not there. Two processes with one pid differ in it.
 */
static inline uint64_t
gp_region_pid_start(pid_t pid)
{
	char path[64], buf[512], *p;
	unsigned long long start = 0;
	FILE *f;
	int field;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	if ((f = fopen(path, "re")) == NULL)
		return 0;
	p = fgets(buf, sizeof(buf), f);
	fclose(f);
	if (p == NULL || (p = strrchr(buf, ')')) == NULL)
		return 0;
	/* After "comm)": field 3 is the state; start time is field 22. */
	for (field = 2; field < 22 && p != NULL; field++)
		p = strchr(p + 1, ' ');
	if (p == NULL || sscanf(p + 1, "%llu", &start) != 1)
		return 0;
	return start;
}

/* 1 when slot's process is gone (or its pid now names another one). */
static inline int
gp_region_slot_dead(int32_t pid, uint64_t start)
{
	if (pid <= 0)
		return 0;
	if (kill(pid, 0) != 0 && errno == ESRCH)
		return 1;
	return start != 0 && gp_region_pid_start(pid) != start;
}

/*
 * Gives the bytes of every dead process's slot back to the job. Safe
 * from any process of the job (its pid namespace) at any time. Returns
 * the bytes reclaimed.
 */
static inline uint64_t
gp_region_reap(struct gp_region *r)
{
	uint64_t got = 0;
	int i;

	for (i = 0; i < GP_REGION_SLOTS; i++) {
		struct gp_region_slot *s = &r->slots[i];
		int32_t pid = atomic_load(&s->pid);
		uint64_t bytes;

		if (pid <= 0 || !gp_region_slot_dead(pid,
		    atomic_load(&s->start)))
			continue;
		/* -pid: ours to empty; a racing reaper sees it taken. */
		if (!atomic_compare_exchange_strong(&s->pid, &pid, -pid))
			continue;
		bytes = atomic_exchange(&s->used, 0);
		atomic_fetch_sub(&r->used, bytes);
		got += bytes;
		atomic_store(&s->pid, 0);
	}
	return got;
}

/* Fills a new region (the creator, before anyone else maps it). */
static inline void
gp_region_init(struct gp_region *r, uint64_t limit, uint32_t share,
    uint32_t flags)
{
	memset(r, 0, sizeof(*r));
	r->magic = GP_REGION_MAGIC;
	r->version = GP_REGION_VERSION;
	r->size = (uint32_t)sizeof(*r);
	atomic_store(&r->limit, limit);
	atomic_store(&r->share, share);
	atomic_store(&r->effective, share);
	atomic_store(&r->flags, flags);
}

static inline int
gp_region_valid(const struct gp_region *r)
{
	return r->magic == GP_REGION_MAGIC &&
	    r->version == GP_REGION_VERSION && r->size == sizeof(*r);
}

#endif
