/*
 * store_meta.c: the calls of store_meta.h over an implementation's
 * gp_meta_ops, and gp_meta_open, which asks the coordinator's store
 * (state.store) for the connection: its records then live where its
 * state does; and the blob GC's scan and fence calls that every blob
 * user makes under its own lock (gp_meta_scan_*).
 */
#include <stdio.h>
#include <string.h>

#include "gp.h"
#include "log.h"
#include "state.h"
#include "store.h"
#include "store_meta.h"

int
gp_meta_open(enum gp_meta_area area, const char *data_dir,
    struct gp_meta **out)
{
	char path[1200];

	if (state.store != NULL)
		return state.store->ops->meta_open(state.store, area, data_dir,
		    out);
	/* No store (a tool, a test): SQLite in data_dir. */
	gp_meta_sqlite_path(area, data_dir, path, sizeof(path));
	return gp_meta_sqlite_open(area, path, out);
}

void
gp_meta_close(struct gp_meta *m)
{
	if (m != NULL)
		m->ops->close(m);
}

int
gp_meta_begin(struct gp_meta *m)
{
	int rc = m->ops->begin(m);

	if (rc == 0) {
		m->in_tx = 1;
		m->failed = 0;
	}
	return rc;
}

int
gp_meta_commit(struct gp_meta *m)
{
	int rc;

	if (m->in_tx && m->failed != 0) {
		/* A statement failed: nothing of it may commit. */
		rc = m->failed;
		gp_meta_rollback(m);
		return rc;
	}
	m->in_tx = 0;
	return m->ops->commit(m);
}

int
gp_meta_rollback(struct gp_meta *m)
{
	m->in_tx = 0;
	m->failed = 0;
	return m->ops->rollback(m);
}

/* rc of a statement: the transaction's first failure is kept. */
static int
noted(struct gp_meta *m, int rc)
{
	if (rc < 0 && m->in_tx && m->failed == 0)
		m->failed = rc;
	return rc;
}

int
gp_meta_transact(struct gp_meta *m, int (*body)(struct gp_meta *m, void *arg),
    void *arg)
{
	int rc;

	for (;;) {
		if ((rc = gp_meta_begin(m)) != 0)
			return rc;
		rc = body(m, arg);
		if (m->failed != 0)
			rc = m->failed; /* whatever body made of it */
		if (rc == 0)
			rc = gp_meta_commit(m);
		else
			gp_meta_rollback(m);
		if (rc >= 0 || m->ops->retry == NULL)
			return rc;
		if ((rc = m->ops->retry(m, rc)) != 0)
			return rc;
	}
}

int
gp_meta_run(struct gp_meta *m, const char *sql, const char *fmt, ...)
{
	va_list ap;
	int rc;

	if (m->in_tx && m->failed != 0)
		return m->failed;
	va_start(ap, fmt);
	m->changes = 0;
	rc = m->ops->run(m, sql, fmt, ap, &m->changes);
	va_end(ap);
	return noted(m, rc);
}

int64_t
gp_meta_changes(const struct gp_meta *m)
{
	return m->changes;
}

int
gp_meta_query(struct gp_meta *m, struct gp_meta_rows **out, const char *sql,
    const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = gp_meta_vquery(m, out, sql, fmt, ap);
	va_end(ap);
	return rc;
}

int
gp_meta_vquery(struct gp_meta *m, struct gp_meta_rows **out, const char *sql,
    const char *fmt, va_list ap)
{
	if (m->in_tx && m->failed != 0)
		return m->failed;
	return noted(m, m->ops->query(m, sql, fmt, ap, out));
}

int
gp_meta_next(struct gp_meta_rows *r)
{
	return r->m->ops->next(r);
}

int
gp_meta_null(struct gp_meta_rows *r, int col)
{
	return r->m->ops->is_null(r, col);
}

int64_t
gp_meta_int(struct gp_meta_rows *r, int col)
{
	return r->m->ops->integer(r, col);
}

double
gp_meta_real(struct gp_meta_rows *r, int col)
{
	return r->m->ops->real(r, col);
}

const char *
gp_meta_text(struct gp_meta_rows *r, int col)
{
	return r->m->ops->text(r, col);
}

void
gp_meta_done(struct gp_meta_rows *r)
{
	if (r != NULL)
		r->m->ops->done(r);
}

int
gp_meta_query_int(struct gp_meta *m, const char *sql, int64_t *out,
    const char *fmt, ...)
{
	struct gp_meta_rows *r;
	va_list ap;
	int rc;

	if (m->in_tx && m->failed != 0)
		return m->failed;
	va_start(ap, fmt);
	rc = m->ops->query(m, sql, fmt, ap, &r);
	va_end(ap);
	if (noted(m, rc) != 0)
		return rc;
	if ((rc = gp_meta_next(r)) == 1)
		*out = gp_meta_int(r, 0);
	gp_meta_done(r);
	return rc;
}

int
gp_meta_fence(struct gp_meta *m)
{
	return m->ops->fence(m);
}

void
gp_meta_scan_begin(pthread_mutex_t *lock, struct gp_meta *const *m)
{
	pthread_mutex_lock(lock);
	if (*m != NULL)
		(*m)->impatient = 1;
}

void
gp_meta_scan_end(pthread_mutex_t *lock, struct gp_meta *const *m)
{
	if (*m != NULL)
		(*m)->impatient = 0;
	pthread_mutex_unlock(lock);
}

int
gp_meta_scan_fence(pthread_mutex_t *lock, struct gp_meta *const *m)
{
	int rc;

	gp_meta_scan_begin(lock, m);
	rc = *m != NULL ? gp_meta_fence(*m) : GP_EIO;
	gp_meta_scan_end(lock, m);
	return rc;
}

const char *
gp_meta_error(const struct gp_meta *m)
{
	return m->error[0] != '\0' ? m->error : "no error";
}

int
gp_meta_http_status(int rc)
{
	switch (rc) {
	case GP_EFENCED:
	case GP_ETIMEDOUT:
	case GP_ESTOPPED:
	case GP_ECONN:
	case GP_EPERM:
		return 503;
	default:
		return 500;
	}
}
