/* Temporary stand-ins until policy.c and control.c land (branch provider). */
#include <string.h>

#include "agent/control.h"
#include "agent/policy.h"
#include "gp.h"

void
gp_policy_default(struct gp_policy *p)
{
	memset(p, 0, sizeof(*p));
	p->all_gpus = 1;
	p->grace_s = 30;
}

int
gp_policy_load(const char *path, struct gp_policy *p, int *line, char *err,
    size_t errlen)
{
	(void)path;
	(void)p;
	*line = 0;
	strncpy(err, "not implemented", errlen);
	return GP_EINVAL;
}

int
gp_policy_window_open(const struct gp_policy *p, const struct tm *tm,
    int64_t *next)
{
	(void)p;
	(void)tm;
	if (next)
		*next = -1;
	return 1;
}

int
gp_policy_lends_gpu(const struct gp_policy *p, int i)
{
	return p->all_gpus || (p->gpus >> i) & 1;
}

json_t *
gp_policy_to_json(const struct gp_policy *p)
{
	(void)p;
	return json_object();
}

struct gp_control *
gp_control_start(const char *path, uid_t owner_uid,
    const struct gp_control_ops *ops, char *err, size_t errlen)
{
	(void)path;
	(void)owner_uid;
	(void)ops;
	(void)err;
	(void)errlen;
	static int dummy;
	return (struct gp_control *)&dummy;
}

void
gp_control_stop(struct gp_control *c)
{
	(void)c;
}

#include "agent/checkpoint.h"

int
gp_ckpt_upload(const struct gp_ckpt_target *t, const char *dir,
    struct gp_ckpt_mark *mark, struct gp_ckpt_stats *st, char *err,
    size_t errlen)
{
	(void)t;
	(void)dir;
	(void)mark;
	(void)err;
	(void)errlen;
	memset(st, 0, sizeof(*st));
	strcpy(st->skipped, "not implemented");
	return 0;
}

int
gp_ckpt_download(const struct gp_ckpt_target *t, const char *dir, uid_t uid,
    gid_t gid, struct gp_ckpt_mark *mark, struct gp_ckpt_stats *st,
    char *err, size_t errlen)
{
	(void)t;
	(void)dir;
	(void)uid;
	(void)gid;
	(void)mark;
	(void)err;
	(void)errlen;
	memset(st, 0, sizeof(*st));
	return 0;
}
