/*
 * fuzz_policy.c: libFuzzer harness for the owner's policy parser
 * (src/agent/policy.c). Whatever the bytes, parsing must not crash, leak
 * or read out of bounds; an error names a line within the text; an
 * accepted policy holds what policy.h promises, its windows print as
 * text that parses back to the same windows, and the window evaluation
 * agrees with itself one change later.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_windows(const struct gp_policy *p, const uint8_t *data, size_t size)
{
	struct gp_policy q;
	struct tm tm;
	char text[96], line_text[128], err[256];
	int64_t next, next2;
	int i, open, line;

	for (i = 0; i < p->nwindows; i++) {
		const struct gp_policy_window *w = &p->windows[i];
		if (w->days == 0 || w->days > 0x7f || w->start_min < 0 ||
		    w->start_min > 1439 || w->end_min < 1 ||
		    w->end_min > 1440)
			abort();
		gp_policy_window_format(w, text, sizeof(text));
		snprintf(line_text, sizeof(line_text), "window = %s\n", text);
		if (gp_policy_parse(line_text, strlen(line_text), &q, &line,
		    err, sizeof(err)) != 0 || q.nwindows != 1 ||
		    q.windows[0].days != w->days ||
		    q.windows[0].start_min != w->start_min ||
		    q.windows[0].end_min != w->end_min)
			abort();
	}
	/* A time taken from the input. */
	memset(&tm, 0, sizeof(tm));
	tm.tm_wday = size > 0 ? data[0] % 7 : 0;
	tm.tm_hour = size > 1 ? data[1] % 24 : 0;
	tm.tm_min = size > 2 ? data[2] % 60 : 0;
	tm.tm_sec = size > 3 ? data[3] % 60 : 0;
	open = gp_policy_window_open(p, &tm, &next);
	if (open != 0 && open != 1)
		abort();
	if (p->nwindows == 0 && (open != 1 || next != -1))
		abort();
	if (next == 0 || next < -1 || next > 7 * 86400)
		abort();
	if (next > 0) {
		/* At the change the answer flips. */
		int64_t t = (((int64_t)((tm.tm_wday + 6) % 7) * 86400 +
		    tm.tm_hour * 3600 + tm.tm_min * 60 + tm.tm_sec) + next) %
		    (7 * 86400);
		struct tm later;
		memset(&later, 0, sizeof(later));
		later.tm_wday = (int)((t / 86400 + 1) % 7);
		later.tm_hour = (int)(t / 3600 % 24);
		later.tm_min = (int)(t / 60 % 60);
		later.tm_sec = (int)(t % 60);
		if (gp_policy_window_open(p, &later, &next2) == open)
			abort();
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gp_policy p;
	char err[256];
	json_t *j;
	size_t i, lines = 1;
	int line, rc;

	rc = gp_policy_parse((const char *)data, size, &p, &line, err,
	    sizeof(err));
	for (i = 0; i < size; i++)
		if (data[i] == '\n')
			lines++;
	if (rc != 0) {
		if (line < 0 || (size_t)line > lines || err[0] == '\0' ||
		    memchr(err, '\0', sizeof(err)) == NULL)
			abort();
		return 0;
	}
	if (p.nwindows < 0 || p.nwindows > GP_POLICY_WINDOWS_MAX ||
	    p.grace_s < 0 || p.grace_s > 3600 || p.cpus < 0 ||
	    p.mem_mib < 0 || p.max_job_s < 0 ||
	    (!p.all_gpus && p.gpus == 0))
		abort();
	check_windows(&p, data, size);
	j = gp_policy_to_json(&p);
	if (j == NULL)
		abort();
	json_decref(j);
	gp_policy_describe(&p, err, sizeof(err));
	return 0;
}
