/*
 * joblog.c: each job's output, in BLOB/logs/<id>.log (BLOB: --blob-dir,
 * the directory every coordinator of the pool mounts; the data directory
 * unless given): every attempt's combined stdout and stderr, one after
 * another, with a marker line between attempts. A gang's other parts
 * each have their own, BLOB/logs/<id>.<part>.log. Agents send chunks
 * with the offset they start at in the attempt's stream, so a retried
 * chunk is never written twice. Past the cap, one notice is written and
 * the rest is dropped.
 *
 * Only the leader writes (a standby serves no request, and joblog_init
 * runs once this process leads), so a new leader finds every line its
 * predecessor acknowledged. Each write goes at the offset the leader's
 * state names (pwrite, not O_APPEND, which NFS does not make atomic), and
 * the file is closed before the agent is answered, which on NFS puts the
 * bytes on the server (close-to-open): a chunk written twice, by a retry
 * or by a deposed leader's late request for the same attempt, lands as
 * the same bytes at the same place.
 */
#include <dirent.h>
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

/* Copies from to a new file to (mode 0600, fsync'd). 0 or GP_EIO. */
static int
copy_file(const char *from, const char *to)
{
	char buf[65536];
	ssize_t n;
	int in, out, rc = 0;

	if ((in = open(from, O_RDONLY | O_CLOEXEC)) < 0)
		return GP_EIO;
	out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (out < 0) {
		close(in);
		return GP_EIO;
	}
	while (rc == 0 && (n = read(in, buf, sizeof(buf))) != 0) {
		if (n < 0)
			rc = errno == EINTR ? 0 : GP_EIO;
		else
			rc = gp_write_all(out, buf, (size_t)n);
	}
	if (rc == 0 && fsync(out) != 0)
		rc = GP_EIO;
	close(in);
	if (close(out) != 0)
		rc = GP_EIO;
	return rc;
}

/*
 * Logs an older coordinator wrote into its own data directory (before
 * they lived beside the blobs) move to log_dir, once: renamed, or where
 * the two are on different file systems copied (a temporary name, then
 * renamed) and removed. A log already in log_dir wins; the old one is
 * left where it is, with a warning. Runs while this process leads, so
 * no other coordinator writes log_dir meanwhile.
 */
static int
move_old_logs(const char *old_dir)
{
	char from[1400], to[1400], tmp[1400];
	struct dirent *de;
	int moved = 0, kept = 0, rc = 0;
	DIR *d;

	if ((d = opendir(old_dir)) == NULL)
		return errno == ENOENT ? 0 : GP_EIO;
	while ((de = readdir(d)) != NULL) {
		size_t n = strlen(de->d_name);

		/* <id>.log, <id>.<part>.log; nothing else is ours. */
		if (de->d_name[0] == '.' || n < 5 ||
		    strcmp(de->d_name + n - 4, ".log") != 0)
			continue;
		snprintf(from, sizeof(from), "%s/%s", old_dir, de->d_name);
		snprintf(to, sizeof(to), "%s/%s", log_dir, de->d_name);
		if (access(to, F_OK) == 0) {
			gp_warn("job log in both places, keeping the new one "
			    "old=%s new=%s", from, to);
			kept++;
			continue;
		}
		if (rename(from, to) == 0) {
			moved++;
			continue;
		}
		if (errno != EXDEV) {
			gp_error("cannot move job log from=%s to=%s: %s", from,
			    to, strerror(errno));
			rc = GP_EIO;
			break;
		}
		snprintf(tmp, sizeof(tmp), "%s/.%s.moving", log_dir,
		    de->d_name);
		unlink(tmp);
		if (copy_file(from, tmp) != 0 || rename(tmp, to) != 0) {
			gp_error("cannot copy job log from=%s to=%s", from, to);
			unlink(tmp);
			rc = GP_EIO;
			break;
		}
		unlink(from);
		moved++;
	}
	closedir(d);
	if (moved > 0)
		gp_info("moved job logs to the blob directory count=%d from=%s "
		    "to=%s", moved, old_dir, log_dir);
	if (rc == 0 && kept == 0)
		rmdir(old_dir); /* empty now; fails harmlessly if not */
	return rc;
}

int
joblog_init(const char *blob_dir, const char *data_dir)
{
	char old_dir[1100];
	struct stat a, b;

	snprintf(log_dir, sizeof(log_dir), "%s/logs", blob_dir);
	if (gp_mkdir_p(log_dir, 0700) != 0) {
		gp_error("cannot create log directory path=%s", log_dir);
		return GP_EIO;
	}
	snprintf(old_dir, sizeof(old_dir), "%s/logs", data_dir);
	if (stat(old_dir, &a) != 0 || stat(log_dir, &b) != 0 ||
	    (a.st_dev == b.st_dev && a.st_ino == b.st_ino))
		return 0; /* none there, or the same directory */
	return move_old_logs(old_dir);
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
	int fd, rc;

	/* open, not stat: on NFS an open revalidates the size we read. */
	log_path(job_id, part, path, sizeof(path));
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	rc = fstat(fd, &st);
	close(fd);
	return rc == 0 ? (int64_t)st.st_size : 0;
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
	size_t done = 0;
	ssize_t n;
	int fd, rc = 0;

	log_path(job->id, part, path, sizeof(path));
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return GP_EIO;
	/* At the stream's end as the leader's state has it (see above). */
	while (done < len) {
		n = pwrite(fd, data + done, len - done,
		    (off_t)(*st->size + (int64_t)done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = GP_EIO;
			break;
		}
		done += (size_t)n;
	}
	/* On NFS, close is where the bytes reach the server. */
	if (close(fd) != 0)
		rc = GP_EIO;
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
