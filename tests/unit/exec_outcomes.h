/*
 * exec_outcomes.h: what the executor's unit tests (test_agent_executor.c,
 * test_agent_container.c) share: each attempt's outcome as the executor's
 * events report it, waits on them, and a look for a process by a marker
 * in its command line. Included once by each test program.
 */
#ifndef GP_TEST_EXEC_OUTCOMES_H
#define GP_TEST_EXEC_OUTCOMES_H

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/executor.h"
#include "util.h"

struct outcome {
	struct gp_attempt_id id;
	int started, finished;
	struct gp_exec_result result;
	struct gp_buf output;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static struct outcome outcomes[256];
static int noutcomes;

static struct outcome *
lookup(const struct gp_attempt_id *id)
{
	for (int i = 0; i < noutcomes; i++)
		if (outcomes[i].id.job_id == id->job_id &&
		    outcomes[i].id.attempt == id->attempt)
			return &outcomes[i];
	if (noutcomes == (int)GP_ARRAY_LEN(outcomes))
		abort();
	outcomes[noutcomes].id = *id;
	return &outcomes[noutcomes++];
}

static void
on_started(void *arg, const struct gp_attempt_id *id, pid_t pid)
{
	(void)arg;
	(void)pid;
	pthread_mutex_lock(&lock);
	lookup(id)->started++;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

static void
on_output(void *arg, const struct gp_attempt_id *id, const char *data,
    size_t len)
{
	(void)arg;
	pthread_mutex_lock(&lock);
	gp_buf_append(&lookup(id)->output, data, len);
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

static void
on_finished(void *arg, const struct gp_attempt_id *id,
    const struct gp_exec_result *r)
{
	struct outcome *o;

	(void)arg;
	pthread_mutex_lock(&lock);
	o = lookup(id);
	o->finished++;
	o->result = *r;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
}

static const struct gp_exec_events events = {
	.started = on_started, .output = on_output, .finished = on_finished,
};

/* Waits until the job finishes; copies the outcome. */
static void
wait_done(struct gp_attempt_id id, struct outcome *out)
{
	struct outcome *o;

	pthread_mutex_lock(&lock);
	while (!(o = lookup(&id))->finished)
		pthread_cond_wait(&cond, &lock);
	*out = *o;
	pthread_mutex_unlock(&lock);
	/* NUL-terminate a private copy of the output. */
	out->output.data = strndup(o->output.data ? o->output.data : "",
	    o->output.len);
}

/* Waits until the job's output contains text. */
static void
wait_output(struct gp_attempt_id id, const char *text)
{
	struct outcome *o;

	pthread_mutex_lock(&lock);
	for (;;) {
		o = lookup(&id);
		if (o->finished || (o->output.data != NULL &&
		    memmem(o->output.data, o->output.len, text,
		    strlen(text)) != NULL))
			break;
		pthread_cond_wait(&cond, &lock);
	}
	pthread_mutex_unlock(&lock);
}

/* 1 when some process has marker in its command line. */
static int
marker_alive(const char *marker)
{
	DIR *d = opendir("/proc");
	struct dirent *de;
	int found = 0;

	while (d != NULL && (de = readdir(d)) != NULL) {
		char path[300], buf[4096];
		ssize_t n;
		int fd;

		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
		if ((fd = open(path, O_RDONLY)) < 0)
			continue;
		n = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		for (ssize_t i = 0; i < n; i++)
			if (buf[i] == '\0')
				buf[i] = ' ';
		if (n > 0) {
			buf[n] = '\0';
			if (strstr(buf, marker) != NULL)
				found = 1;
		}
	}
	if (d != NULL)
		closedir(d);
	return found;
}

#endif
