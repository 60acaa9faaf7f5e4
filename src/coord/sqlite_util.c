/*
 * sqlite_util.c: the one SQLite helper (see sqlite_util.h): open with
 * the file's mode, WAL and durability set; a statement cache; binds from
 * a format string; errors as GP_E* codes with their text.
 */
#include "sqlite_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gp.h"
#include "log.h"
#include "util.h"

int
gp_sqlite_code(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_DONE:
	case SQLITE_ROW:
		return 0;
	case SQLITE_NOMEM:
		return GP_ENOMEM;
	case SQLITE_CONSTRAINT:
		return GP_ECONFLICT;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return GP_ETIMEDOUT;
	case SQLITE_CANTOPEN:
	case SQLITE_NOTFOUND:
		return GP_ENOENT;
	case SQLITE_PERM:
	case SQLITE_READONLY:
	case SQLITE_AUTH:
		return GP_EPERM;
	default:
		return GP_EIO;
	}
}

/* Keeps the connection's error text; logs it once. Returns the GP_E*. */
static int
fail(struct gp_sqlite *db, int rc, const char *sql)
{
	const char *msg =
	    db->db != NULL ? sqlite3_errmsg(db->db) : sqlite3_errstr(rc);

	snprintf(db->error, sizeof(db->error), "%s", msg);
	gp_error("sqlite failed db=%s sql=\"%.60s\" error=\"%s\"", db->what,
	    sql != NULL ? sql : "?", db->error);
	return gp_sqlite_code(rc) != 0 ? gp_sqlite_code(rc) : GP_EIO;
}

int
gp_sqlite_open(struct gp_sqlite *db, const char *path, unsigned flags,
    const char *what)
{
	int oflags = SQLITE_OPEN_NOMUTEX, rc, fd;

	memset(db, 0, sizeof(*db));
	gp_strlcpy(db->what, what != NULL ? what : "?", sizeof(db->what));
	if (flags & GP_SQLITE_READONLY) {
		oflags |= SQLITE_OPEN_READONLY;
	} else {
		oflags |= SQLITE_OPEN_READWRITE;
		if (!(flags & GP_SQLITE_NO_CREATE)) {
			oflags |= SQLITE_OPEN_CREATE;
			/* The mode SQLite gives its -wal and -shm too. */
			fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
			if (fd < 0) {
				snprintf(db->error, sizeof(db->error), "%s: %s",
				    path, strerror(errno));
				gp_error("cannot open database db=%s path=%s "
				         "error=\"%s\"",
				    db->what, path, strerror(errno));
				return GP_EIO;
			}
			close(fd);
		}
	}
	if (flags & GP_SQLITE_SERIALIZED)
		oflags =
		    (oflags & ~SQLITE_OPEN_NOMUTEX) | SQLITE_OPEN_FULLMUTEX;
	rc = sqlite3_open_v2(path, &db->db, oflags, NULL);
	if (rc != SQLITE_OK) {
		snprintf(db->error, sizeof(db->error), "%s",
		    db->db != NULL ? sqlite3_errmsg(db->db) : "out of memory");
		gp_error("cannot open database db=%s path=%s error=\"%s\"",
		    db->what, path, db->error);
		gp_sqlite_close(db);
		return GP_EIO;
	}
	sqlite3_busy_timeout(db->db, 5000);
	if (!(flags & GP_SQLITE_READONLY) &&
	    (gp_sqlite_exec(db, "PRAGMA journal_mode=WAL;") != 0 ||
	        gp_sqlite_exec(db, "PRAGMA synchronous=FULL;") != 0)) {
		gp_sqlite_close(db);
		return GP_EIO;
	}
	return 0;
}

void
gp_sqlite_close(struct gp_sqlite *db)
{
	int i;

	for (i = 0; i < db->ncache; i++)
		sqlite3_finalize(db->cache[i].stmt);
	db->ncache = 0;
	if (db->db != NULL)
		sqlite3_close(db->db);
	db->db = NULL;
}

int
gp_sqlite_exec(struct gp_sqlite *db, const char *sql)
{
	char *msg = NULL;
	int rc;

	if (db->db == NULL)
		return GP_EIO;
	rc = sqlite3_exec(db->db, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK) {
		snprintf(db->error, sizeof(db->error), "%s",
		    msg != NULL ? msg : sqlite3_errstr(rc));
		gp_error("sqlite failed db=%s sql=\"%.60s\" error=\"%s\"",
		    db->what, sql, db->error);
		sqlite3_free(msg);
		return gp_sqlite_code(rc) != 0 ? gp_sqlite_code(rc) : GP_EIO;
	}
	return 0;
}

sqlite3_stmt *
gp_sqlite_prepare(struct gp_sqlite *db, const char *sql)
{
	sqlite3_stmt *s = NULL;
	int rc;

	if (db->db == NULL)
		return NULL;
	rc = sqlite3_prepare_v2(db->db, sql, -1, &s, NULL);
	if (rc != SQLITE_OK) {
		(void)fail(db, rc, sql);
		return NULL;
	}
	return s;
}

sqlite3_stmt *
gp_sqlite_stmt(struct gp_sqlite *db, const char *sql)
{
	sqlite3_stmt *s;
	int i;

	for (i = 0; i < db->ncache; i++)
		if (db->cache[i].sql == sql)
			return db->cache[i].stmt;
	for (i = 0; i < db->ncache; i++)
		if (strcmp(db->cache[i].sql, sql) == 0)
			return db->cache[i].stmt;
	if ((s = gp_sqlite_prepare(db, sql)) == NULL)
		return NULL;
	if (db->ncache == GP_SQLITE_CACHE_MAX) {
		/* A caller with more statements than the cache: the
		 * oldest goes (never in use: each is reset after use). */
		sqlite3_finalize(db->cache[0].stmt);
		memmove(&db->cache[0], &db->cache[1],
		    (size_t)(db->ncache - 1) * sizeof(db->cache[0]));
		db->ncache--;
	}
	db->cache[db->ncache].sql = sql;
	db->cache[db->ncache].stmt = s;
	db->ncache++;
	return s;
}

int
gp_sqlite_vbind(struct gp_sqlite *db, sqlite3_stmt *s, const char *fmt,
    va_list ap)
{
	const char *text;
	int col = 1, rc = SQLITE_OK;
	size_t want = (size_t)sqlite3_bind_parameter_count(s);

	/* A format that does not match the statement is a bug: say so. */
	if ((fmt != NULL ? strlen(fmt) : 0) != want) {
		snprintf(db->error, sizeof(db->error),
		    "bind format \"%s\" for %zu parameters",
		    fmt != NULL ? fmt : "", want);
		gp_error("sqlite bind db=%s sql=\"%.60s\" error=\"%s\"",
		    db->what, sqlite3_sql(s), db->error);
		return GP_EINVAL;
	}
	for (; rc == SQLITE_OK && fmt != NULL && *fmt != '\0'; fmt++, col++) {
		switch (*fmt) {
		case 'i':
			rc = sqlite3_bind_int(s, col, va_arg(ap, int));
			break;
		case 'I':
			rc = sqlite3_bind_int64(s, col, va_arg(ap, int64_t));
			break;
		case 'd':
			rc = sqlite3_bind_double(s, col, va_arg(ap, double));
			break;
		case 't':
		case 's':
			text = va_arg(ap, const char *);
			rc = text == NULL ? sqlite3_bind_null(s, col)
			                  : sqlite3_bind_text(s, col, text, -1,
			                        *fmt == 't' ? SQLITE_TRANSIENT
			                                    : SQLITE_STATIC);
			break;
		case 'n':
			rc = sqlite3_bind_null(s, col);
			break;
		default:
			gp_error("sqlite bind: unknown format '%c'", *fmt);
			return GP_EINVAL;
		}
	}
	if (rc != SQLITE_OK)
		return fail(db, rc, sqlite3_sql(s));
	return 0;
}

int
gp_sqlite_bind(struct gp_sqlite *db, sqlite3_stmt *s, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = gp_sqlite_vbind(db, s, fmt, ap);
	va_end(ap);
	return rc;
}

void
gp_sqlite_done(sqlite3_stmt *s)
{
	if (s == NULL)
		return;
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
}

int
gp_sqlite_step(struct gp_sqlite *db, sqlite3_stmt *s)
{
	int rc = sqlite3_step(s);

	if (rc == SQLITE_ROW)
		return 1;
	if (rc == SQLITE_DONE)
		return 0;
	return fail(db, rc, sqlite3_sql(s));
}

int
gp_sqlite_step_done(struct gp_sqlite *db, sqlite3_stmt *s)
{
	int rc;

	while ((rc = sqlite3_step(s)) == SQLITE_ROW)
		;
	if (rc != SQLITE_DONE) {
		rc = fail(db, rc, sqlite3_sql(s));
		gp_sqlite_done(s);
		return rc;
	}
	gp_sqlite_done(s);
	return 0;
}

int
gp_sqlite_run(struct gp_sqlite *db, const char *sql, const char *fmt, ...)
{
	sqlite3_stmt *s = gp_sqlite_stmt(db, sql);
	va_list ap;
	int rc;

	if (s == NULL)
		return GP_EIO;
	va_start(ap, fmt);
	rc = gp_sqlite_vbind(db, s, fmt, ap);
	va_end(ap);
	if (rc != 0) {
		gp_sqlite_done(s);
		return rc;
	}
	return gp_sqlite_step_done(db, s);
}

int
gp_sqlite_query_int(struct gp_sqlite *db, const char *sql, int64_t *out,
    const char *fmt, ...)
{
	sqlite3_stmt *s = gp_sqlite_stmt(db, sql);
	va_list ap;
	int rc;

	if (s == NULL)
		return GP_EIO;
	va_start(ap, fmt);
	rc = gp_sqlite_vbind(db, s, fmt, ap);
	va_end(ap);
	if (rc == 0 && (rc = gp_sqlite_step(db, s)) == 1)
		*out = sqlite3_column_int64(s, 0);
	gp_sqlite_done(s);
	return rc;
}

int
gp_sqlite_begin(struct gp_sqlite *db)
{
	return gp_sqlite_run(db, "BEGIN IMMEDIATE;", NULL);
}

int
gp_sqlite_commit(struct gp_sqlite *db)
{
	return gp_sqlite_run(db, "COMMIT;", NULL);
}

int
gp_sqlite_rollback(struct gp_sqlite *db)
{
	if (!gp_sqlite_in_transaction(db))
		return 0;
	return gp_sqlite_run(db, "ROLLBACK;", NULL);
}

int
gp_sqlite_in_transaction(struct gp_sqlite *db)
{
	return db->db != NULL && !sqlite3_get_autocommit(db->db);
}

int
gp_sqlite_has(struct gp_sqlite *db, const char *table, const char *column)
{
	int64_t n = 0;

	if (column == NULL)
		return gp_sqlite_query_int(db,
		           "SELECT 1 FROM sqlite_master WHERE type = 'table'"
		           " AND name = ?",
		           &n, "s", table) == 1;
	return gp_sqlite_query_int(db,
	           "SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?",
	           &n, "ss", table, column) == 1 &&
	    n > 0;
}

const char *
gp_sqlite_text(sqlite3_stmt *s, int col)
{
	const unsigned char *t = sqlite3_column_text(s, col);

	return t != NULL ? (const char *)t : "";
}

const char *
gp_sqlite_errmsg(const struct gp_sqlite *db)
{
	return db->error;
}
