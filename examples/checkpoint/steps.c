/*
 * steps.c: the step-counting job of steps.sh, in plain C: how a program
 * follows gpupool's checkpoint protocol (docs/checkpoints.md).
 *
 *   cc -O2 -o steps steps.c        (or `make examples`: build/examples/steps)
 *   steps TOTAL_STEPS SAVE_EVERY [STEP_SECONDS]
 *
 * It prints the same lines as steps.sh ("starting at step 0", "resumed at
 * step N (restart R)", "saved step=N", "ran K steps in this attempt",
 * "done steps=TOTAL") and keeps the same checkpoint: the files `state`
 * (the counter) and `COMPLETE` (first line `step=N`) in
 * $GPUPOOL_CHECKPOINT_DIR (default ./checkpoint).
 *
 * The three rules it shows:
 *  1. The signal handler only sets a flag; the main loop checks it between
 *     steps (nothing else is safe in a handler). It is installed first
 *     thing: before that, the checkpoint signal would kill the process.
 *  2. Every file is written to a temporary name, fsync'd and renamed into
 *     place, so no reader ever sees half a file.
 *  3. COMPLETE is removed before a save and written last, after everything
 *     it vouches for: the agent uploads a version only when COMPLETE
 *     exists and no file is newer.
 *
 * Exit status: 0 when done, and 0 after saving on the checkpoint signal
 * (the agent knows it asked, and records the attempt as reclaimed); 2 bad
 * usage, 3 an unreadable checkpoint or a failed save.
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t want_checkpoint;

static void
on_checkpoint_signal(int sig)
{
	(void)sig;
	want_checkpoint = 1;
}

static const struct {
	const char *name;
	int sig;
} signals[] = {
	{"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM},
	{"INT", SIGINT}, {"HUP", SIGHUP}, {"QUIT", SIGQUIT},
	{"ALRM", SIGALRM}, {"WINCH", SIGWINCH}, {"URG", SIGURG},
};

/* "USR1", "SIGUSR1" or a number; -1 when unknown. */
static int
signal_by_name(const char *s)
{
	size_t i;
	char *end;
	long n;

	if (strncmp(s, "SIG", 3) == 0)
		s += 3;
	for (i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
		if (strcmp(s, signals[i].name) == 0)
			return signals[i].sig;
	n = strtol(s, &end, 10);
	if (*s != '\0' && *end == '\0' && n > 0 && n < 65 && n != SIGKILL &&
	    n != SIGSTOP)
		return (int)n;
	return -1;
}

static int
parse_uint(const char *s, int64_t *out)
{
	char *end;
	long long v;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return -1;
	*out = v;
	return 0;
}

/*
 * Writes text to dir/name atomically: a temporary file in the same
 * directory, fsync, rename over name, then fsync of the directory so the
 * rename itself is durable. Returns 0 or -1 (errno set).
 */
static int
write_atomic(const char *dir, const char *name, const char *text)
{
	char tmp[4096], path[4096];
	size_t len = strlen(text), off = 0;
	ssize_t n;
	int fd;

	snprintf(tmp, sizeof(tmp), "%s/.%s.tmp", dir, name);
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) <
	    0)
		return -1;
	while (off < len) {
		n = write(fd, text + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			goto fail;
		off += (size_t)n;
	}
	if (fsync(fd) != 0)
		goto fail;
	if (close(fd) != 0) {
		fd = -1;
		goto fail;
	}
	fd = -1;
	if (rename(tmp, path) != 0)
		goto fail;
	if ((fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		fsync(fd);
		close(fd);
	}
	return 0;
fail:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	return -1;
}

/*
 * The checkpoint: the old marker goes first (so the directory never shows
 * a marker beside files it does not vouch for, even within one clock tick),
 * then `state`, then the new `COMPLETE`.
 */
static int
save(const char *dir, int64_t step)
{
	char text[4096];

	snprintf(text, sizeof(text), "%s/COMPLETE", dir);
	if (unlink(text) != 0 && errno != ENOENT)
		return -1;
	snprintf(text, sizeof(text), "%" PRId64 "\n", step);
	if (write_atomic(dir, "state", text) != 0)
		return -1;
	snprintf(text, sizeof(text), "step=%" PRId64 "\n", step);
	if (write_atomic(dir, "COMPLETE", text) != 0)
		return -1;
	printf("saved step=%" PRId64 "\n", step);
	return 0;
}

/* First line of dir/name, without its newline; "" when absent. */
static int
read_line(const char *dir, const char *name, char *buf, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	buf[0] = '\0';
	if ((f = fopen(path, "r")) == NULL)
		return errno == ENOENT ? 0 : -1;
	if (fgets(buf, (int)len, f) == NULL)
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

static void
usage(void)
{
	fprintf(stderr, "usage: steps TOTAL_STEPS SAVE_EVERY [STEP_SECONDS]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	const char *dir = getenv("GPUPOOL_CHECKPOINT_DIR");
	const char *signame = getenv("GPUPOOL_CHECKPOINT_SIGNAL");
	const char *restart = getenv("GPUPOOL_RESTART_COUNT");
	const char *attempt = getenv("GPUPOOL_ATTEMPT");
	const char *version = getenv("GPUPOOL_CHECKPOINT_VERSION");
	struct sigaction sa;
	struct timespec ts;
	char state[64], label[256], expect[80];
	int64_t total, save_every, step = 0, saved = -1, ran = 0;
	double step_s = 0.1;
	char *end;
	int sig;

	/* 1. The handler before anything else. No SA_RESTART: a signal
	 * interrupts nanosleep (or a long read) at once. */
	sig = signal_by_name(signame != NULL && *signame ? signame : "USR1");
	if (sig < 0) {
		fprintf(stderr, "steps: unknown checkpoint signal '%s'\n",
		    signame);
		return 2;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_checkpoint_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);

	if (argc < 3 || argc > 4 || parse_uint(argv[1], &total) != 0 ||
	    parse_uint(argv[2], &save_every) != 0)
		usage();
	if (argc == 4) {
		step_s = strtod(argv[3], &end);
		if (*end != '\0' || !(step_s >= 0 && step_s < 86400))
			usage();
	}
	if (dir == NULL || *dir == '\0')
		dir = "./checkpoint";
	if (restart == NULL || *restart == '\0')
		restart = "0";
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
		fprintf(stderr, "steps: mkdir %s: %s\n", dir, strerror(errno));
		return 3;
	}
	printf("attempt=%s restart=%s checkpoint_version=%s\n",
	    attempt != NULL ? attempt : "?", restart,
	    version != NULL ? version : "0");

	/* Restore: only a version with its marker, and they must agree. */
	if (read_line(dir, "COMPLETE", label, sizeof(label)) != 0 ||
	    read_line(dir, "state", state, sizeof(state)) != 0) {
		fprintf(stderr, "steps: cannot read %s: %s\n", dir,
		    strerror(errno));
		return 3;
	}
	if (label[0] != '\0') {
		snprintf(expect, sizeof(expect), "step=%s", state);
		if (parse_uint(state, &step) != 0 || strcmp(label, expect)) {
			fprintf(stderr,
			    "steps: inconsistent checkpoint in %s: state '%s', "
			    "COMPLETE '%s'\n",
			    dir, state, label);
			return 3;
		}
		saved = step;
		printf("resumed at step %" PRId64 " (restart %s)\n", step,
		    restart);
	} else {
		printf("starting at step 0\n");
	}

	while (step < total && !want_checkpoint) {
		/* One step of "work". A real program checks the flag between
		 * its own steps (batches, iterations) the same way. */
		ts.tv_sec = (time_t)step_s;
		ts.tv_nsec = (long)((step_s - (double)ts.tv_sec) * 1e9);
		if (nanosleep(&ts, NULL) != 0 && want_checkpoint)
			break; /* interrupted: this step does not count */
		step++;
		ran++;
		if (save_every > 0 && step % save_every == 0) {
			if (save(dir, step) != 0)
				goto save_failed;
			saved = step;
		}
	}
	if (saved != step && save(dir, step) != 0)
		goto save_failed;
	if (step < total) {
		printf("checkpoint signal at step %" PRId64 ": saved, exiting\n",
		    step);
		printf("ran %" PRId64 " steps in this attempt\n", ran);
		return 0;
	}
	printf("ran %" PRId64 " steps in this attempt\n", ran);
	printf("done steps=%" PRId64 "\n", total);
	return 0;
save_failed:
	fprintf(stderr, "steps: cannot save a checkpoint in %s: %s\n", dir,
	    strerror(errno));
	return 3;
}
