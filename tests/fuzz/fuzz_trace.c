/*
 * fuzz_trace.c: libFuzzer harness for the trace reader (src/sim/trace.c),
 * which `gpupool sim` feeds files it did not write. The input is a node
 * list, a NUL byte, then a pod list; the whole input is also read as a
 * run-time list. Whatever the bytes, parsing must not
 * crash, leak or read out of bounds; what it accepts keeps within the
 * documented bounds; and a small accepted trace goes through the FGD
 * protocol and a replay (the engine on fuzzed input) without harm.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "sim/sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check(const struct gp_trace *t)
{
	size_t i;

	for (i = 0; i < t->nnodes; i++) {
		const struct gp_trace_node *n = &t->nodes[i];
		if (n->name[0] == '\0' || n->cpu_milli < 0 || n->mem_mib < 0 ||
		    n->gpus < 0 || n->gpus > GP_SCHED_GPUS_MAX ||
		    memchr(n->model, '\0', sizeof(n->model)) == NULL)
			abort();
	}
	for (i = 0; i < t->npods; i++) {
		const struct gp_trace_pod *p = &t->pods[i];
		if (p->cpu_milli < 0 || p->mem_mib < 0 || p->num_gpu < 0 ||
		    p->num_gpu > GP_SCHED_GPUS_MAX || p->gpu_milli < 0 ||
		    p->gpu_milli > 1000 ||
		    (p->num_gpu > 1 && p->gpu_milli != 1000) ||
		    (p->num_gpu > 0 && p->gpu_milli == 0) ||
		    memchr(p->gpu_spec, '\0', sizeof(p->gpu_spec)) == NULL)
			abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, '\0', size);
	size_t nlen = nul != NULL ? (size_t)(nul - data) : size;
	struct gp_trace t;
	struct gp_sim_opts o;
	struct gp_sim_fgd_result fr;
	struct gp_sim_replay_result rr;
	char err[256];
	int rc;

	memset(&t, 0, sizeof(t));
	rc = gp_trace_parse_nodes((const char *)data, nlen, &t, err,
	    sizeof(err));
	if (rc != 0 && (err[0] == '\0' || strlen(err) >= sizeof(err)))
		abort();
	if (rc == 0 && nul != NULL) {
		rc = gp_trace_parse_pods((const char *)nul + 1, size - nlen - 1,
		    &t, err, sizeof(err));
		if (rc != 0 && err[0] == '\0')
			abort();
	}
	check(&t);
	if (rc == 0 && t.nnodes > 0 && t.nnodes <= 16 && t.npods > 0 &&
	    t.npods <= 64) {
		memset(&o, 0, sizeof(o));
		o.seed = 1;
		o.inflate = 1.3;
		rc = gp_sim_fgd(&t, &o, &fr);
		if (rc == 0 &&
		    (fr.pods_failed > fr.pods ||
		        fr.unallocated_pct_at_100 < -1e-9 ||
		        fr.unallocated_pct_at_100 > 100 + 1e-9))
			abort();
		o.group_by = "labs:2";
		o.static_partition = 1;
		rc = gp_sim_replay(&t, &o, &rr);
		if (rc == 0 && rr.pods != (int64_t)t.npods)
			abort();
	}
	gp_trace_free(&t);

	/* The same bytes as a run-time list (philly_runtime.csv). */
	memset(&t, 0, sizeof(t));
	rc = gp_trace_parse_runtimes((const char *)data, size, &t, err,
	    sizeof(err));
	if (rc != 0 && err[0] == '\0')
		abort();
	for (size_t i = 0; i < t.nruntimes; i++)
		if (t.runtimes[i] < 0 || t.runtimes[i] > 366LL * 86400)
			abort();
	gp_trace_free(&t);
	return 0;
}
