/*
 * joblog.c: each job's output, in DATA/logs/<id>.log: every attempt's
 * combined stdout and stderr, one after another, with a marker line
 * between attempts. A gang's other parts each have their own,
 * DATA/logs/<id>.<part>.log. Agents send chunks with the offset they start at in
 * the attempt's stream, so a retried chunk is never written twice. Past
 * the cap, one notice is written and the rest is dropped.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "joblog.h"
#include "state.h"
#include "gp.h"
#include "log.h"

pthread_mutex_t joblog_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_dir[1100];

int
joblog_init(const char *data_dir)
{
	snprintf(log_dir, sizeof(log_dir), "%s/logs", data_dir);
	if (gp_mkdir_p(log_dir, 0700) != 0) {
		gp_error("cannot create log directory path=%s", log_dir);
		return GP_EIO;
	}
	return 0;
}

static void
log_path(int64_t job_id, int part, char *out, size_t len)
{
	if (part == 0)
		snprintf(out, len, "%s/%lld.log", log_dir, (long long)job_id);
	else
		snprintf(out, len, "%s/%lld.%d.log", log_dir,
		    (long long)job_id, part);
}

int64_t
joblog_size_on_disk(int64_t job_id)
{
	return joblog_part_size_on_disk(job_id, 0);
}

int64_t
joblog_part_size_on_disk(int64_t job_id, int part)
{
	char path[1200];
	struct stat st;

	log_path(job_id, part, path, sizeof(path));
	return stat(path, &st) == 0 ? (int64_t)st.st_size : 0;
}

/* Where a part's stream stands: part 0's is the job's own. */
struct stream {
	int64_t *size, *base;
	int *truncated;
};

static void
stream_of(struct job *job, int part, struct stream *s)
{
	if (part <= 0 || part >= job->nparts) {
		s->size = &job->log_size;
		s->base = &job->log_base;
		s->truncated = &job->log_truncated;
		return;
	}
	s->size = &job->parts[part].log_size;
	s->base = &job->parts[part].log_base;
	s->truncated = &job->parts[part].log_truncated;
}

static int
append_raw(struct job *job, int part, const struct stream *st,
    const char *data, size_t len)
{
	char path[1200];
	int fd, rc;

	log_path(job->id, part, path, sizeof(path));
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd < 0)
		return GP_EIO;
	rc = gp_write_all(fd, data, len);
	close(fd);
	if (rc == 0)
		*st->size += (int64_t)len;
	return rc;
}

int
joblog_note(struct job *job, const char *text)
{
	return joblog_part_note(job, 0, text);
}

int
joblog_part_note(struct job *job, int part, const char *text)
{
	struct stream st;
	char line[512];
	int n;

	pthread_mutex_lock(&joblog_lock);
	stream_of(job, part, &st);
	/* Start the note on a line of its own. */
	n = snprintf(line, sizeof(line), "%s%s\n", *st.size > 0 ? "\n" : "",
	    text);
	if (n > 0 && (size_t)n < sizeof(line))
		append_raw(job, part, &st, line, (size_t)n);
	pthread_mutex_unlock(&joblog_lock);
	return 0;
}

int
joblog_append(struct job *job, int part, int64_t offset, const char *data,
    size_t len, int64_t cap, int64_t *held)
{
	struct stream st;
	int64_t have, skip;
	int rc = 0;

	pthread_mutex_lock(&joblog_lock);
	stream_of(job, part, &st);
	if (part <= 0 || part >= job->nparts)
		part = 0;
	have = *st.size - *st.base;
	if (*st.truncated) {
		/* Everything past the cap is dropped; say we have it all. */
		*held = offset + (int64_t)len;
		goto out;
	}
	if (offset > have) {
		/* A gap: ask for what we are missing. */
		*held = have;
		goto out;
	}
	skip = have - offset;
	if (skip >= (int64_t)len) {
		*held = have;
		goto out;
	}
	data += skip;
	len -= (size_t)skip;
	if (cap > 0 && *st.size + (int64_t)len > cap) {
		size_t room = *st.size < cap ? (size_t)(cap - *st.size) : 0;
		char notice[128];
		if (room > 0)
			rc = append_raw(job, part, &st, data, room);
		/* The notice goes on a line of its own. */
		snprintf(notice, sizeof(notice),
		    "%s[gpupool: log truncated at %lld bytes]\n",
		    room > 0 && data[room - 1] == '\n' ? "" : "\n",
		    (long long)cap);
		if (rc == 0)
			rc = append_raw(job, part, &st, notice, strlen(notice));
		*st.truncated = 1;
		*held = offset + skip + (int64_t)len;
		goto out;
	}
	rc = append_raw(job, part, &st, data, len);
	*held = *st.size - *st.base;
out:
	pthread_mutex_unlock(&joblog_lock);
	return rc;
}

int
joblog_read(int64_t job_id, int part, int64_t offset, size_t max,
    char **data, size_t *len)
{
	char path[1200];
	ssize_t n;
	char *buf;
	int fd;

	*data = NULL;
	*len = 0;
	log_path(job_id, part, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : GP_EIO;
	buf = malloc(max + 1);
	if (buf == NULL) {
		close(fd);
		return GP_ENOMEM;
	}
	n = pread(fd, buf, max, offset);
	close(fd);
	if (n < 0) {
		free(buf);
		return GP_EIO;
	}
	*data = buf;
	*len = (size_t)n;
	return 0;
}
