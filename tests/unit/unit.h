/*
 * unit.h: the smallest test harness that does the job. Each test binary
 * defines tests with TEST(name), lists them in main() with RUN(name), and
 * ends with return unit_report(); which prints "N passed, N failed".
 */
#ifndef GP_UNIT_H
#define GP_UNIT_H

#include <stdio.h>
#include <string.h>

static int unit_failed_checks;
static int unit_passed, unit_failed;

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
		test_##name();                                              \
		if (unit_failed_checks == before) {                         \
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
	printf("%d passed, %d failed\n", unit_passed, unit_failed);
	return unit_failed == 0 ? 0 : 1;
}

#endif
