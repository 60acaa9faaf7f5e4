/*
 * unit.h: the smallest test harness that does the job. Each test binary
 * defines tests with TEST(name), lists them in main() with RUN(name), and
 * ends with return unit_report(); which prints "N passed, N failed" (and
 * ", N skipped" when some were).
 *
 * A test that cannot run here says so and returns:
 *	if (geteuid() != 0) {
 *		UNIT_SKIP("root", "changes uid");
 *		return;
 *	}
 * and main() skips everything with return unit_skip_all("root", "...");
 * The first argument is one word of tests/requirements.sh (root, busybox,
 * oci-runtime, cgroup-v1, ...): tests/run.sh reads the "SKIP" line, shows
 * SKIP rather than ok, and under CI fails a skip whose requirement is in
 * fact present. A binary with any skip (and no failure) exits UNIT_EXIT_SKIP.
 */
#ifndef GP_UNIT_H
#define GP_UNIT_H

#include <stdio.h>
#include <string.h>

/* The exit status of a test that skipped (automake's, read by run.sh). */
#define UNIT_EXIT_SKIP 77

static int unit_failed_checks;
static int unit_passed, unit_failed, unit_skipped;
static const char *unit_current = "all";
static int unit_skipping;

/* Prints the line tests/run.sh reads; the caller returns. */
#define UNIT_SKIP(need, why)                                                \
	do {                                                                \
		printf("SKIP %s: needs %s: %s\n", unit_current, (need),    \
		    (why));                                                 \
		unit_skipping = 1;                                          \
	} while (0)

#define CHECK(cond)                                                         \
	do {                                                                \
		if (!(cond)) {                                              \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n",        \
			    __FILE__, __LINE__, #cond);                     \
			unit_failed_checks++;                               \
		}                                                           \
	} while (0)

#define CHECK_EQ(a, b)                                                      \
	do {                                                                \
		long long va = (long long)(a), vb = (long long)(b);         \
		if (va != vb) {                                             \
			fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", \
			    __FILE__, __LINE__, #a, #b, va, vb);            \
			unit_failed_checks++;                               \
		}                                                           \
	} while (0)

#define CHECK_STR(a, b)                                                     \
	do {                                                                \
		const char *sa = (a), *sb = (b);                            \
		if (sa == NULL || sb == NULL || strcmp(sa, sb) != 0) {      \
			fprintf(stderr, "%s:%d: \"%s\" != \"%s\"\n",        \
			    __FILE__, __LINE__, sa ? sa : "(null)",         \
			    sb ? sb : "(null)");                            \
			unit_failed_checks++;                               \
		}                                                           \
	} while (0)

#define TEST(name) static void test_##name(void)

#define RUN(name)                                                           \
	do {                                                                \
		int before = unit_failed_checks;                            \
		unit_current = #name;                                       \
		unit_skipping = 0;                                          \
		test_##name();                                              \
		unit_current = "all";                                       \
		if (unit_failed_checks == before && unit_skipping) {        \
			unit_skipped++;                                     \
		} else if (unit_failed_checks == before) {                  \
			unit_passed++;                                      \
			printf("ok %s\n", #name);                           \
		} else {                                                    \
			unit_failed++;                                      \
			printf("FAIL %s\n", #name);                         \
		}                                                           \
	} while (0)

static inline int
unit_report(void)
{
	if (unit_skipped > 0)
		printf("%d passed, %d failed, %d skipped\n", unit_passed,
		    unit_failed, unit_skipped);
	else
		printf("%d passed, %d failed\n", unit_passed, unit_failed);
	if (unit_failed > 0 || unit_failed_checks > 0)
		return 1;
	return unit_skipped > 0 ? UNIT_EXIT_SKIP : 0;
}

/* main() leaving out a part of its tests (counted as one skip). */
static inline void
unit_skip_some(const char *need, const char *why)
{
	UNIT_SKIP(need, why);
	unit_skipping = 0;
	unit_skipped++;
}

/* main() of a binary none of whose tests can run here. */
static inline int
unit_skip_all(const char *need, const char *why)
{
	unit_skip_some(need, why);
	return unit_report();
}

#endif
