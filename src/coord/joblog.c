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
 *
 * Fencing (several coordinators over PostgreSQL): every leader writes
 * into files named with its fencing epoch, BLOB/logs/<id>.e<E>.log and
 * <id>.<part>.e<E>.log (epoch 0, one coordinator on SQLite: the plain
 * names above, as before). On taking the lead, the new leader copies the
 * log of every job still running or queued from the newest epoch's file
 * into one of its own (a temporary name, fsync'd, renamed; the old file
 * then removed), and reads and writes only that, up to the size its
 * state holds (what it acknowledged). A deposed leader that resumes from
 * a pause and writes one late chunk writes it into its own epoch's file
 * (or a descriptor of the removed one), which no leader reads: the next
 * takeover removes it. Which epoch holds a job's log is the newest epoch
 * (not past this leader's) whose <id>.e<E>.log (part 0's) exists: the
 * takeover writes part 0's last, and makes an empty one for a running
 * job that has no log yet, so that a deposed leader's late first chunk
 * of a job is never newer than the log its successor acknowledged.
 */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
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
/* This leader's fencing epoch (leader_epoch()); 0 on SQLite. */
static int64_t epoch_now;

/* The takeover scan's answer: the epoch that holds each job's log. */
struct found_log {
	int64_t id, epoch;
};
static struct found_log *found;
static size_t nfound;

/*
 * Copies the first len bytes of from into a new file to (mode 0600,
 * fsync'd): a takeover's copy. 0 or GP_EIO.
 */
static int
copy_prefix(const char *from, const char *to, int64_t len)
{
	char buf[65536];
	int64_t done = 0;
	ssize_t n;
	int in, out, rc = 0;

	if ((in = open(from, O_RDONLY | O_CLOEXEC)) < 0)
		return GP_EIO;
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (out < 0) {
		close(in);
		return GP_EIO;
	}
	/*
	 * copy_file_range first: a clone (XFS, btrfs) or a copy the NFS
	 * server makes (4.2), without the bytes crossing this process.
	 */
	while (done < len) {
		loff_t at_in = done, at_out = done;
		n = copy_file_range(in, &at_in, out, &at_out,
		    (size_t)(len - done), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break; /* not here (EXDEV, ENOSYS...), or short: read */
		done += n;
	}
	/* copy_file_range moved neither descriptor's own offset. */
	if (done < len && lseek(out, (off_t)done, SEEK_SET) < 0)
		rc = GP_EIO;
	while (rc == 0 && done < len) {
		size_t want = len - done < (int64_t)sizeof(buf)
		    ? (size_t)(len - done)
		    : sizeof(buf);
		n = pread(in, buf, want, (off_t)done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = GP_EIO;
			break;
		}
		rc = gp_write_all(out, buf, (size_t)n);
		done += n;
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
	struct stat st;
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
		if (stat(from, &st) != 0 ||
		    copy_prefix(from, tmp, (int64_t)st.st_size) != 0 ||
		    rename(tmp, to) != 0) {
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

/*
 * A log file's name: "<id>.log", "<id>.<part>.log", "<id>.e<E>.log" or
 * "<id>.<part>.e<E>.log". 0 and OUT: *id, *part, *epoch (0: none in the
 * name); -1 for any other name.
 */
static int
parse_log_name(const char *name, int64_t *id, int *part, int64_t *epoch)
{
	const char *p = name;
	long long v;
	char *end;

	*part = 0;
	*epoch = 0;
	if (*p < '0' || *p > '9')
		return -1;
	v = strtoll(p, &end, 10);
	if (v <= 0 || v == LLONG_MAX || *end != '.')
		return -1;
	*id = v;
	p = end + 1;
	if (*p >= '0' && *p <= '9') {
		v = strtoll(p, &end, 10);
		if (v < 1 || v > INT_MAX || *end != '.')
			return -1;
		*part = (int)v;
		p = end + 1;
	}
	if (*p == 'e' && p[1] >= '0' && p[1] <= '9') {
		v = strtoll(p + 1, &end, 10);
		if (v < 1 || v == LLONG_MAX || *end != '.')
			return -1;
		*epoch = v;
		p = end + 1;
	}
	return strcmp(p, "log") == 0 ? 0 : -1;
}

static int
cmp_found(const void *a, const void *b)
{
	const struct found_log *x = a, *y = b;

	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return x->epoch < y->epoch ? -1 : x->epoch > y->epoch;
}

/* The scan's epoch for the job's log; -1 when it found no part 0. */
static int64_t
found_epoch(int64_t job_id)
{
	struct found_log key = { job_id, 0 }, *f;
	size_t lo = 0, hi = nfound;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (found[mid].id < key.id)
			lo = mid + 1;
		else
			hi = mid;
	}
	f = lo < nfound ? &found[lo] : NULL;
	return f != NULL && f->id == job_id ? f->epoch : -1;
}

/*
 * On taking the lead (epoch_now > 0): which epoch holds each job's log,
 * the newest part 0 file no newer than this leader; then the files of
 * every other epoch go (earlier leaders' copies, a deposed leader's late
 * writes, parts a takeover renamed before it stopped), and so do
 * takeovers' temporary copies. Files of a newer epoch than ours are a
 * newer leader's: we are already deposed, and leave them be.
 */
static int
scan_epochs(void)
{
	char path[1400];
	struct dirent *de;
	size_t cap = 0, n, i;
	int64_t id, epoch, keep, newest = 0;
	int part, removed = 0;
	DIR *d;

	free(found);
	found = NULL;
	nfound = 0;
	if ((d = opendir(log_dir)) == NULL)
		return GP_EIO;
	while ((de = readdir(d)) != NULL) {
		n = strlen(de->d_name);
		if (de->d_name[0] == '.' && n > 7 &&
		    strcmp(de->d_name + n - 7, ".taking") == 0) {
			snprintf(path, sizeof(path), "%s/%s", log_dir,
			    de->d_name);
			if (unlink(path) == 0)
				removed++;
			continue;
		}
		if (parse_log_name(de->d_name, &id, &part, &epoch) != 0)
			continue;
		if (epoch > newest)
			newest = epoch;
		if (part != 0 || epoch > epoch_now)
			continue;
		if (nfound == cap) {
			struct found_log *f;
			cap = cap ? cap * 2 : 1024;
			if ((f = realloc(found, cap * sizeof(*f))) == NULL) {
				closedir(d);
				return GP_ENOMEM;
			}
			found = f;
		}
		found[nfound].id = id;
		found[nfound++].epoch = epoch;
	}
	if (nfound > 1)
		qsort(found, nfound, sizeof(*found), cmp_found);
	/* The newest epoch of each id: the last of its run. */
	for (i = n = 0; i < nfound; i++) {
		if (i + 1 < nfound && found[i + 1].id == found[i].id)
			continue;
		found[n++] = found[i];
	}
	nfound = n;
	rewinddir(d);
	while ((de = readdir(d)) != NULL) {
		if (parse_log_name(de->d_name, &id, &part, &epoch) != 0 ||
		    epoch > epoch_now)
			continue;
		keep = found_epoch(id);
		/* Without a part 0 anywhere: only what predates epochs. */
		if (epoch == keep || (keep < 0 && epoch == 0))
			continue;
		snprintf(path, sizeof(path), "%s/%s", log_dir, de->d_name);
		if (unlink(path) == 0)
			removed++;
	}
	closedir(d);
	gp_info("job logs of this epoch epoch=%lld logs=%zu removed=%d",
	    (long long)epoch_now, nfound, removed);
	/*
	 * A newer leader's, or a database restored from a dump older than
	 * the logs: its epoch must then be raised past them (operations.md,
	 * "Backups"), or their jobs show older logs.
	 */
	if (newest > epoch_now)
		gp_warn("job logs of a newer epoch than this leader's "
		    "epoch=%lld newest=%lld (a database restored from an "
		    "older dump? docs/operations.md, Backups)",
		    (long long)epoch_now, (long long)newest);
	return 0;
}

int
joblog_init(const char *blob_dir, const char *data_dir, int64_t epoch)
{
	char old_dir[1100];
	struct stat a, b;
	int rc = 0;

	epoch_now = epoch;
	snprintf(log_dir, sizeof(log_dir), "%s/logs", blob_dir);
	if (gp_mkdir_p(log_dir, 0700) != 0) {
		gp_error("cannot create log directory path=%s", log_dir);
		return GP_EIO;
	}
	snprintf(old_dir, sizeof(old_dir), "%s/logs", data_dir);
	if (stat(old_dir, &a) == 0 && stat(log_dir, &b) == 0 &&
	    (a.st_dev != b.st_dev || a.st_ino != b.st_ino))
		rc = move_old_logs(old_dir);
	if (rc == 0 && epoch_now > 0)
		rc = scan_epochs();
	return rc;
}

static void
log_path(int64_t job_id, int part, int64_t epoch, char *out, size_t len)
{
	char e[32] = "";

	if (epoch > 0)
		snprintf(e, sizeof(e), ".e%lld", (long long)epoch);
	if (part == 0)
		snprintf(out, len, "%s/%lld%s.log", log_dir, (long long)job_id,
		    e);
	else
		snprintf(out, len, "%s/%lld.%d%s.log", log_dir,
		    (long long)job_id, part, e);
}

int64_t
joblog_epoch_of(int64_t job_id)
{
	char path[1200];
	int64_t e;

	if (epoch_now == 0)
		return 0;
	/* Written by this leader since the scan (its part 0 is made first). */
	log_path(job_id, 0, epoch_now, path, sizeof(path));
	if (access(path, F_OK) == 0)
		return epoch_now;
	e = found_epoch(job_id);
	return e > 0 ? e : 0;
}

int64_t
joblog_size_on_disk(int64_t job_id, int64_t epoch)
{
	return joblog_part_size_on_disk(job_id, epoch, 0);
}

int64_t
joblog_part_size_on_disk(int64_t job_id, int64_t epoch, int part)
{
	char path[1200];
	struct stat st;
	int fd, rc;

	/* open, not stat: on NFS an open revalidates the size we read. */
	log_path(job_id, part, epoch, path, sizeof(path));
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

/*
 * This leader's copy of the job's log (every part's), from the epoch
 * that held it, up to the sizes the state holds: what the previous
 * leader acknowledged, as this one loaded it. Parts are renamed into
 * place before part 0, whose file says which epoch holds the log; a
 * running job with no log yet gets an empty part 0 all the same. The
 * old files go last. Under joblog_lock, or while loading.
 */
static int
take_over(struct job *job)
{
	char from[1200], to[1200], tmp[1300];
	int64_t was = job->log_epoch, size, any = 0;
	int k, n = job->nparts > 0 ? job->nparts : 1, fd, dfd;

	if (epoch_now == 0 || was == epoch_now)
		return 0;
	for (k = n - 1; k >= 0; k--) {
		size = k == 0 ? job->log_size : job->parts[k].log_size;
		any |= size;
		log_path(job->id, k, was, from, sizeof(from));
		log_path(job->id, k, epoch_now, to, sizeof(to));
		snprintf(tmp, sizeof(tmp), "%s/.%s.taking", log_dir,
		    strrchr(to, '/') + 1);
		if (size > 0) {
			if (copy_prefix(from, tmp, size) != 0 ||
			    rename(tmp, to) != 0) {
				gp_error("cannot take over job log from=%s "
				    "to=%s: %s", from, to, strerror(errno));
				unlink(tmp);
				return GP_EIO;
			}
		} else if (k == 0 && (any > 0 || job->state == JOB_RUNNING)) {
			int bad;
			fd = open(to, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
			bad = fd < 0 || fsync(fd) != 0;
			if ((fd >= 0 && close(fd) != 0) || bad) {
				gp_error("cannot create job log path=%s: %s",
				    to, strerror(errno));
				return GP_EIO;
			}
		}
	}
	job->log_epoch = epoch_now;
	if (any == 0)
		return 0;
	/* The renames on disk before the files they replace go. */
	if ((dfd = open(log_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		fsync(dfd);
		close(dfd);
	}
	for (k = 0; k < n; k++) {
		log_path(job->id, k, was, from, sizeof(from));
		unlink(from);
	}
	return 0;
}

/* What this leader's load copied: joblog_took_over logs it. */
static int64_t taken_logs, taken_bytes, taken_ms;

int
joblog_take_over(struct job *job)
{
	int64_t t0 = gp_mono_ms(), was = job->log_epoch;
	int rc, k;

	pthread_mutex_lock(&joblog_lock);
	rc = take_over(job);
	if (rc == 0 && job->log_epoch != was) {
		taken_logs++;
		taken_bytes += job->log_size;
		for (k = 1; k < job->nparts; k++)
			taken_bytes += job->parts[k].log_size;
	}
	taken_ms += gp_mono_ms() - t0;
	pthread_mutex_unlock(&joblog_lock);
	return rc;
}

void
joblog_took_over(void)
{
	if (epoch_now == 0)
		return;
	pthread_mutex_lock(&joblog_lock);
	gp_info("took over job logs epoch=%lld jobs=%lld bytes=%lld ms=%lld",
	    (long long)epoch_now, (long long)taken_logs,
	    (long long)taken_bytes, (long long)taken_ms);
	taken_logs = taken_bytes = taken_ms = 0;
	pthread_mutex_unlock(&joblog_lock);
}

/*
 * Tests only: GPUPOOL_TEST_LOG_HOLD=FLAG. The first log write of this
 * process waits, its file open, while the file FLAG exists (at most
 * 120 s): a test stops the process there (SIGSTOP), lets another
 * coordinator take the lead, removes FLAG and resumes it, so that it
 * writes one chunk deposed. Under joblog_lock.
 */
static void
test_hold(const char *path)
{
	static int done;
	const char *flag;
	int i;

	if (done || (flag = getenv("GPUPOOL_TEST_LOG_HOLD")) == NULL)
		return;
	done = 1;
	gp_warn("log write held: holding path=%s "
	    "(GPUPOOL_TEST_LOG_HOLD, tests only)", path);
	for (i = 0; i < 12000 && access(flag, F_OK) == 0; i++)
		usleep(10000);
	gp_warn("log write held: writing path=%s", path);
}

static int
append_raw(struct job *job, int part, const struct stream *st,
    const char *data, size_t len)
{
	char path[1200];
	size_t done = 0;
	ssize_t n;
	int fd, rc = 0;

	if (job->log_epoch != epoch_now) {
		/*
		 * This leader's first write to the job's log: one loaded
		 * without a takeover (finished then), or one with no log.
		 * Part 0's file first: it says which epoch holds the log.
		 */
		if ((rc = take_over(job)) != 0)
			return rc;
		log_path(job->id, 0, epoch_now, path, sizeof(path));
		if (part != 0 && (fd = open(path, O_WRONLY | O_CREAT |
		    O_CLOEXEC, 0600)) >= 0)
			close(fd);
	}
	log_path(job->id, part, epoch_now, path, sizeof(path));
	fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return GP_EIO;
	test_hold(path);
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
joblog_read(int64_t job_id, int64_t epoch, int part, int64_t offset,
    size_t max, char **data, size_t *len)
{
	char path[1200];
	ssize_t n;
	char *buf;
	int fd;

	*data = NULL;
	*len = 0;
	log_path(job_id, part, epoch, path, sizeof(path));
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
