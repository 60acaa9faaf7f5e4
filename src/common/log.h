/*
 * log.h: one line per event, "time level message key=value ...", to stderr.
 * Never pass a secret: show tokens with gp_token_prefix() at most.
 */
#ifndef GP_LOG_H
#define GP_LOG_H

enum gp_log_level { GP_LOG_ERROR, GP_LOG_WARN, GP_LOG_INFO, GP_LOG_DEBUG };

/* IN: name: the program part ("coord", "agent"); level: lowest shown. */
void gp_log_init(const char *name, enum gp_log_level level);
void gp_log_set_level(enum gp_log_level level);
int gp_log_enabled(enum gp_log_level level);

void gp_log(enum gp_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
#define gp_error(...) gp_log(GP_LOG_ERROR, __VA_ARGS__)
#define gp_warn(...)  gp_log(GP_LOG_WARN, __VA_ARGS__)
#define gp_info(...)  gp_log(GP_LOG_INFO, __VA_ARGS__)
#define gp_debug(...)                                                       \
	do {                                                                \
		if (gp_log_enabled(GP_LOG_DEBUG))                           \
			gp_log(GP_LOG_DEBUG, __VA_ARGS__);                  \
	} while (0)

/* Log and exit(1); gp_fatal() adds strerror(errno). */
void gp_fatal(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));
void gp_fatalx(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn));

#endif
