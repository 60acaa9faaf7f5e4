/*
 * util.h: time, parsing of human quantities (durations, sizes), files.
 */
#ifndef GP_UTIL_H
#define GP_UTIL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Milliseconds: wall clock since the epoch, and a monotonic clock. */
int64_t gp_now_ms(void);
int64_t gp_mono_ms(void);
/* Microseconds on the monotonic clock, for benchmarks. */
int64_t gp_mono_us(void);

/*
 * Condition variables whose timed waits run on CLOCK_MONOTONIC, so that a
 * step of the wall clock (NTP, an operator's date) neither shortens nor
 * stretches a wait. gp_cond_init_monotonic initialises *cond (destroy it
 * with pthread_cond_destroy); returns 0 or GP_ENOMEM.
 * gp_cond_wait_ms waits on a cond made so, mutex held, at most ms
 * milliseconds; returns 0 when woken (or spuriously) and GP_ETIMEDOUT
 * when the time passed.
 */
int gp_cond_init_monotonic(pthread_cond_t *cond);
int gp_cond_wait_ms(pthread_cond_t *cond, pthread_mutex_t *mutex, int64_t ms);

/*
 * Writes "2026-11-22T21:05:00.123Z" for ms since the epoch into out
 * (at least 32 bytes).
 */
void gp_format_time(int64_t ms, char *out, size_t len);
/* Parses what gp_format_time writes. Returns 0 or GP_EINVAL. */
int gp_parse_time(const char *text, int64_t *ms);

/*
 * Durations as Slurm and Go users write them: "90" (seconds), "90s", "15m",
 * "2h", "1h30m", "1d12h", "2:30:00", "1-12:00:00". OUT: seconds, written
 * only on success. Returns 0 or GP_EINVAL.
 */
int gp_parse_duration(const char *text, int64_t *seconds);
/* Writes a duration as "1h30m0s"-style short text. */
void gp_format_duration(int64_t seconds, char *out, size_t len);

/*
 * Sizes in MiB: "512" (MiB), "512M", "16G", "1T", "512MiB", "16GiB".
 * Returns 0 or GP_EINVAL.
 */
int gp_parse_mib(const char *text, int64_t *mib);

/*
 * Sizes in bytes: "4096", "100K", "512M", "16G", "1T" (powers of 1024;
 * "KiB", "KB" and "k" too). Returns 0 or GP_EINVAL.
 */
int gp_parse_bytes(const char *text, int64_t *bytes);
/* Writes bytes for a person: "512B", "1.5KiB", "12.3GiB". */
void gp_format_bytes(int64_t bytes, char *out, size_t len);

/* Strict decimal integer in [min, max]. Returns 0 or GP_EINVAL. */
int gp_parse_int(const char *text, int64_t min, int64_t max, int64_t *out);

/* Like strlcpy: always terminates, returns strlen(src). */
size_t gp_strlcpy(char *dst, const char *src, size_t size);

/*
 * A parser's refusal: writes why (printf's fmt) into err, at most errlen
 * bytes (nothing when errlen is 0), and returns code (GP_EINVAL, ...).
 */
int gp_fail(char *err, size_t errlen, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Frees a NULL-terminated array of strings and its strings; NULL is fine. */
void gp_strv_free(char **v);

/*
 * Reads a whole file. OUT: *data (malloc'd, NUL-terminated, caller frees),
 * *len. Fails with GP_ETOOBIG beyond max bytes.
 */
int gp_read_file(const char *path, size_t max, char **data, size_t *len);
/* Writes a file atomically (temp file, fsync, rename) with mode. */
int gp_write_file(const char *path, const void *data, size_t len, int mode);
/* mkdir -p with mode for the directories it creates. */
int gp_mkdir_p(const char *path, int mode);
/*
 * A secret someone else made (a token file, a private key): 0 when no one
 * but its owner may read, write or enter it (mode & 077 == 0); else
 * GP_EPERM, or GP_EIO when it cannot be looked at, with err saying which
 * and, for GP_EPERM, the command that fixes it ("chmod 600 PATH").
 */
int gp_secret_check(const char *what, const char *path, char *err,
    size_t errlen);
/*
 * One of our own secrets (a database, a directory of them): takes every
 * permission away from group and others, whatever its mode was (a
 * symbolic link is left alone). OUT: *old_mode: its mode before when it
 * changed, else -1. Returns 0 (a path that does not exist too) or GP_EIO
 * (errno set).
 */
int gp_secret_tighten(const char *path, int *old_mode);
/* rm -rf, without following symbolic links. */
int gp_remove_tree(const char *path);

/* Writes all of buf, retrying on EINTR and short writes. 0 or GP_EIO. */
int gp_write_all(int fd, const void *buf, size_t len);

/* A growable byte buffer. */
struct gp_buf {
	char *data;
	size_t len;
	size_t cap;
};
int gp_buf_append(struct gp_buf *buf, const void *data, size_t len);
int gp_buf_printf(struct gp_buf *buf, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void gp_buf_free(struct gp_buf *buf);

#endif
