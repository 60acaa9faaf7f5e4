/*
 * trace.c: reads the Alibaba GPU-sharing 2023 trace files as published
 * (openb_node_list_*.csv, openb_pod_list_*.csv) and a list of job run
 * times (philly_runtime.csv, one column "runtime"): CSV parsed by libcsv,
 * columns found by their header names, every number checked. Fed
 * untrusted bytes by tests/fuzz/fuzz_trace.c.
 */
#include <csv.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gp.h"
#include "sim/sim.h"
#include "util.h"

#define MAX_COLS  64
#define FIELD_MAX 256

enum kind {
	NODES,
	PODS,
	RUNTIMES
};

enum col {
	C_NAME,
	C_CPU,
	C_MEM,
	C_GPUS,
	C_MODEL, /* nodes */
	C_MILLI, /* pods from here */
	C_SPEC,
	C_QOS,
	C_PHASE,
	C_CREATED,
	C_DELETED,
	C_SCHEDULED,
	C_RUNTIME, /* run times */
	C_COUNT
};

static const char *const node_cols[C_COUNT] = {[C_NAME] = "sn",
    [C_CPU] = "cpu_milli",
    [C_MEM] = "memory_mib",
    [C_GPUS] = "gpu",
    [C_MODEL] = "model"};
static const char *const pod_cols[C_COUNT] = {[C_NAME] = "name",
    [C_CPU] = "cpu_milli",
    [C_MEM] = "memory_mib",
    [C_GPUS] = "num_gpu",
    [C_MILLI] = "gpu_milli",
    [C_SPEC] = "gpu_spec",
    [C_QOS] = "qos",
    [C_PHASE] = "pod_phase",
    [C_CREATED] = "creation_time",
    [C_DELETED] = "deletion_time",
    [C_SCHEDULED] = "scheduled_time"};
/* Columns a file must have; the others may be absent. */
static const char *const runtime_cols[C_COUNT] = {[C_RUNTIME] = "runtime"};
static const int runtime_need[C_COUNT] = {[C_RUNTIME] = 1};
static const int node_need[C_COUNT] =
    {[C_NAME] = 1, [C_CPU] = 1, [C_MEM] = 1, [C_GPUS] = 1, [C_MODEL] = 1};
static const int pod_need[C_COUNT] =
    {[C_NAME] = 1, [C_CPU] = 1, [C_MEM] = 1, [C_GPUS] = 1, [C_MILLI] = 1};

struct reader {
	enum kind kind;
	struct gp_trace *t;
	size_t line;
	int ncols;
	char fields[MAX_COLS][FIELD_MAX];
	int col_of[C_COUNT]; /* column index, -1: absent */
	int header_done;
	int rc;
	char *err;
	size_t errlen;
	size_t cap;
};

static void
fail(struct reader *r, int rc, const char *fmt, const char *a, const char *b)
{
	if (r->rc != 0)
		return;
	r->rc = rc;
	snprintf(r->err, r->errlen, fmt, r->line, a, b);
}

static void
on_field(void *s, size_t len, void *data)
{
	struct reader *r = data;

	if (r->rc != 0)
		return;
	if (r->ncols >= MAX_COLS) {
		fail(r, GP_EINVAL, "line %zu: more than 64 columns%s%s", "",
		    "");
		return;
	}
	if (len >= FIELD_MAX) {
		fail(r, GP_EINVAL,
		    "line %zu: a field longer than 255 bytes%s%s", "", "");
		return;
	}
	if (len > 0)
		memcpy(r->fields[r->ncols], s, len);
	r->fields[r->ncols][len] = '\0';
	r->ncols++;
}

static const char *
field(struct reader *r, enum col c)
{
	int i = r->col_of[c];

	return i >= 0 && i < r->ncols ? r->fields[i] : NULL;
}

/* A number in [lo, hi]; "" only when empty_ok (then *out = dflt). */
static const char *const *
cols_of(const struct reader *r)
{
	return r->kind == NODES ? node_cols
	    : r->kind == PODS   ? pod_cols
	                        : runtime_cols;
}

static int
number(struct reader *r, enum col c, int64_t lo, int64_t hi, int empty_ok,
    int64_t dflt, int64_t *out)
{
	const char *name = cols_of(r)[c];
	const char *v = field(r, c);
	char *end;
	long long x;

	if (v == NULL || v[0] == '\0') {
		if (empty_ok) {
			*out = dflt;
			return 0;
		}
		fail(r, GP_EINVAL, "line %zu: %s is empty%s", name, "");
		return -1;
	}
	errno = 0;
	x = strtoll(v, &end, 10);
	/* Some exports write whole numbers as "12.0". */
	if (end != v && *end == '.' && end[1] == '0' && end[2] == '\0')
		end += 2;
	if (errno != 0 || end == v || *end != '\0' || x < lo || x > hi) {
		fail(r, GP_EINVAL, "line %zu: %s: bad number '%s'", name, v);
		return -1;
	}
	*out = x;
	return 0;
}

static int
text(struct reader *r, enum col c, char *dst, size_t len)
{
	const char *name = cols_of(r)[c];
	const char *v = field(r, c);

	if (v == NULL)
		v = "";
	if (strcmp(v, "nan") == 0 || strcmp(v, "NaN") == 0)
		v = "";
	if (gp_strlcpy(dst, v, len) >= len) {
		fail(r, GP_EINVAL, "line %zu: %s: longer than allowed ('%s')",
		    name, v);
		return -1;
	}
	return 0;
}

static void
header(struct reader *r)
{
	const char *const *names = cols_of(r);
	const int *need = r->kind == NODES ? node_need
	    : r->kind == PODS              ? pod_need
	                                   : runtime_need;
	int c, i;

	for (c = 0; c < C_COUNT; c++) {
		r->col_of[c] = -1;
		if (names[c] == NULL)
			continue;
		for (i = 0; i < r->ncols; i++)
			if (strcasecmp(r->fields[i], names[c]) == 0)
				r->col_of[c] = i;
		if (r->col_of[c] < 0 && need[c]) {
			fail(r, GP_EINVAL, "line %zu: no column '%s'%s",
			    names[c], "");
			return;
		}
	}
	r->header_done = 1;
}

static int
grow(struct reader *r, size_t have, void **arr, size_t size)
{
	void *n;
	size_t cap;

	if (have < r->cap)
		return 0;
	if (have >= GP_TRACE_ROWS_MAX) {
		fail(r, GP_ETOOBIG, "line %zu: more than 10000000 rows%s%s", "",
		    "");
		return -1;
	}
	cap = r->cap ? r->cap * 2 : 1024;
	n = realloc(*arr, cap * size);
	if (n == NULL) {
		fail(r, GP_ENOMEM, "line %zu: out of memory%s%s", "", "");
		return -1;
	}
	*arr = n;
	r->cap = cap;
	return 0;
}

static void
node_row(struct reader *r)
{
	struct gp_trace *t = r->t;
	struct gp_trace_node *n;
	int64_t v;

	if (grow(r, t->nnodes, (void **)&t->nodes, sizeof(*t->nodes)) != 0)
		return;
	n = &t->nodes[t->nnodes];
	memset(n, 0, sizeof(*n));
	if (text(r, C_NAME, n->name, sizeof(n->name)) != 0 ||
	    number(r, C_CPU, 0, 100000000, 0, 0, &n->cpu_milli) != 0 ||
	    number(r, C_MEM, 0, 1LL << 40, 0, 0, &n->mem_mib) != 0 ||
	    number(r, C_GPUS, 0, GP_SCHED_GPUS_MAX, 0, 0, &v) != 0 ||
	    text(r, C_MODEL, n->model, sizeof(n->model)) != 0)
		return;
	n->gpus = (int)v;
	if (n->name[0] == '\0') {
		fail(r, GP_EINVAL, "line %zu: sn is empty%s%s", "", "");
		return;
	}
	t->nnodes++;
}

static void
pod_row(struct reader *r)
{
	struct gp_trace *t = r->t;
	struct gp_trace_pod *p;
	int64_t v, milli;

	if (grow(r, t->npods, (void **)&t->pods, sizeof(*t->pods)) != 0)
		return;
	p = &t->pods[t->npods];
	memset(p, 0, sizeof(*p));
	if (text(r, C_NAME, p->name, sizeof(p->name)) != 0 ||
	    number(r, C_CPU, 0, 100000000, 0, 0, &p->cpu_milli) != 0 ||
	    number(r, C_MEM, 0, 1LL << 40, 0, 0, &p->mem_mib) != 0 ||
	    number(r, C_GPUS, 0, GP_SCHED_GPUS_MAX, 0, 0, &v) != 0 ||
	    number(r, C_MILLI, 0, 1000, 1, 0, &milli) != 0 ||
	    text(r, C_SPEC, p->gpu_spec, sizeof(p->gpu_spec)) != 0 ||
	    text(r, C_QOS, p->qos, sizeof(p->qos)) != 0 ||
	    text(r, C_PHASE, p->phase, sizeof(p->phase)) != 0 ||
	    number(r, C_CREATED, 0, 1LL << 40, 1, 0, &p->creation) != 0 ||
	    number(r, C_DELETED, 0, 1LL << 40, 1, -1, &p->deletion) != 0 ||
	    number(r, C_SCHEDULED, 0, 1LL << 40, 1, -1, &p->scheduled) != 0)
		return;
	p->num_gpu = (int)v;
	p->gpu_milli = (int)milli;
	if (p->num_gpu > 0 && p->gpu_milli == 0) {
		fail(r, GP_EINVAL, "line %zu: num_gpu %s with gpu_milli 0%s",
		    r->fields[r->col_of[C_GPUS]], "");
		return;
	}
	if (p->num_gpu > 1 && p->gpu_milli < 1000) {
		fail(r, GP_EINVAL,
		    "line %zu: a share of a GPU (gpu_milli %s) "
		    "asks for one GPU%s",
		    r->fields[r->col_of[C_MILLI]], "");
		return;
	}
	if (p->num_gpu == 0)
		p->gpu_milli = 0;
	t->npods++;
}

/* A run time in seconds (Philly's "12.0" too), 0 to a year. */
static void
runtime_row(struct reader *r)
{
	struct gp_trace *t = r->t;

	if (grow(r, t->nruntimes, (void **)&t->runtimes,
	        sizeof(*t->runtimes)) != 0)
		return;
	if (number(r, C_RUNTIME, 0, 366LL * 86400, 0, 0,
	        &t->runtimes[t->nruntimes]) != 0)
		return;
	t->nruntimes++;
}

static void
on_row(int c, void *data)
{
	struct reader *r = data;

	(void)c;
	r->line++;
	if (r->rc == 0) {
		if (r->ncols == 1 && r->fields[0][0] == '\0')
			; /* a blank line */
		else if (!r->header_done)
			header(r);
		else if (r->kind == NODES)
			node_row(r);
		else if (r->kind == PODS)
			pod_row(r);
		else
			runtime_row(r);
	}
	r->ncols = 0;
}

static int
parse(enum kind kind, const char *buf, size_t len, struct gp_trace *t,
    char *err, size_t errlen)
{
	struct csv_parser p;
	struct reader *r;
	int rc;

	if (errlen > 0)
		err[0] = '\0';
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return GP_ENOMEM;
	r->kind = kind;
	r->t = t;
	r->err = err;
	r->errlen = errlen;
	r->cap = kind == NODES ? t->nnodes
	    : kind == PODS     ? t->npods
	                       : t->nruntimes;
	if (csv_init(&p, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL) != 0) {
		free(r);
		return GP_ENOMEM;
	}
	if (csv_parse(&p, buf, len, on_field, on_row, r) != len && r->rc == 0) {
		r->line++;
		fail(r, GP_EINVAL, "line %zu: %s%s",
		    csv_strerror(csv_error(&p)), "");
	}
	if (r->rc == 0 && csv_fini(&p, on_field, on_row, r) != 0 && r->rc == 0)
		fail(r, GP_EINVAL, "line %zu: %s%s",
		    csv_strerror(csv_error(&p)), "");
	csv_free(&p);
	if (r->rc == 0 && !r->header_done)
		fail(r, GP_EINVAL, "line %zu: no header%s%s", "", "");
	rc = r->rc;
	free(r);
	return rc;
}

int
gp_trace_parse_nodes(const char *buf, size_t len, struct gp_trace *t, char *err,
    size_t errlen)
{
	return parse(NODES, buf, len, t, err, errlen);
}

int
gp_trace_parse_pods(const char *buf, size_t len, struct gp_trace *t, char *err,
    size_t errlen)
{
	return parse(PODS, buf, len, t, err, errlen);
}

int
gp_trace_parse_runtimes(const char *buf, size_t len, struct gp_trace *t,
    char *err, size_t errlen)
{
	return parse(RUNTIMES, buf, len, t, err, errlen);
}

int
gp_trace_load_runtimes(const char *path, struct gp_trace *t, char *err,
    size_t errlen)
{
	char *buf = NULL, why[256];
	size_t len = 0;
	int rc;

	if ((rc = gp_read_file(path, 1LL << 30, &buf, &len)) != 0) {
		snprintf(err, errlen, "%s: cannot read it", path);
		return rc;
	}
	rc = gp_trace_parse_runtimes(buf, len, t, why, sizeof(why));
	free(buf);
	if (rc != 0)
		snprintf(err, errlen, "%s: %s", path, why);
	return rc;
}

int
gp_trace_load(const char *nodes_path, const char *pods_path, struct gp_trace *t,
    char *err, size_t errlen)
{
	char *buf = NULL, why[256];
	size_t len = 0;
	int rc;

	memset(t, 0, sizeof(*t));
	if ((rc = gp_read_file(nodes_path, 1LL << 30, &buf, &len)) != 0) {
		snprintf(err, errlen, "%s: cannot read it", nodes_path);
		return rc;
	}
	rc = gp_trace_parse_nodes(buf, len, t, why, sizeof(why));
	free(buf);
	if (rc != 0) {
		snprintf(err, errlen, "%s: %s", nodes_path, why);
		goto fail;
	}
	if ((rc = gp_read_file(pods_path, 1LL << 30, &buf, &len)) != 0) {
		snprintf(err, errlen, "%s: cannot read it", pods_path);
		goto fail;
	}
	rc = gp_trace_parse_pods(buf, len, t, why, sizeof(why));
	free(buf);
	if (rc != 0) {
		snprintf(err, errlen, "%s: %s", pods_path, why);
		goto fail;
	}
	return 0;
fail:
	gp_trace_free(t);
	return rc;
}

void
gp_trace_free(struct gp_trace *t)
{
	free(t->nodes);
	free(t->pods);
	free(t->runtimes);
	memset(t, 0, sizeof(*t));
}

int64_t
gp_trace_model_mem(const char *model)
{
	/* The trace's models (its README); G2, G3 are not disclosed. */
	static const struct {
		const char *model;
		int64_t mib;
	} known[] = {
	    {"P4", 7611},
	    {"T4", 15109},
	    {"V100M16", 16160},
	    {"P100", 16280},
	    {"A10", 22731},
	    {"V100M32", 32510},
	    {"A100", 81251},
	    {"2080", 11019},
	    {"1080", 11178},
	    {"M40", 11448},
	    {"3090", 24268},
	};
	size_t i;

	for (i = 0; i < GP_ARRAY_LEN(known); i++)
		if (strcmp(known[i].model, model) == 0)
			return known[i].mib;
	return 0;
}
