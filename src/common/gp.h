/*
 * gp.h: what every part of gpupool shares: error codes, the protocol
 * version and small helpers that have no better home.
 */
#ifndef GP_H
#define GP_H

#include <stddef.h>
#include <stdint.h>

#define GP_PROTOCOL_VERSION 1
#define GP_VERSION	    "0.1.0"

/* Functions return 0 or one of these (negative). */
enum {
	GP_OK = 0,
	GP_ENOMEM = -1,	   /* out of memory */
	GP_EINVAL = -2,	   /* invalid argument or input */
	GP_EIO = -3,	   /* input/output error (see errno) */
	GP_ENOENT = -4,	   /* no such object */
	GP_EPERM = -5,	   /* not allowed */
	GP_ECONN = -6,	   /* could not reach the peer */
	GP_ETIMEDOUT = -7, /* timed out */
	GP_EPROTO = -8,	   /* the peer answered something unexpected */
	GP_ECONFLICT = -9, /* conflicts with the current state */
	GP_ETOOBIG = -10,  /* too large */
	GP_EAUTH = -11,	   /* authentication failed */
	GP_EFENCED = -12,  /* another coordinator leads now (fencing epoch) */
	GP_ESTOPPED = -13, /* given up: the process is stopping */
};

const char *gp_strerror(int err);

#define GP_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* "Cannot happen" branches, as in SQLite. */
#define GP_ALWAYS(x) (x)
#define GP_NEVER(x)  (x)

#endif
