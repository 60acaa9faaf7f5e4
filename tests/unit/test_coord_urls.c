/*
 * test_coord_urls.c: following the leader among several coordinators
 * (common/coord_urls.c): the list's parser and where a client goes after
 * each kind of try.
 */
#include "unit.h"

#include "coord_urls.h"
#include "gp.h"

TEST(parse_list)
{
	struct gp_coord_urls u;
	char err[256];

	CHECK_EQ(gp_coord_urls_parse("http://a:7070", &u, err, sizeof(err)),
	    0);
	CHECK_EQ(u.n, 1);
	CHECK_STR(u.url[0], "http://a:7070");
	CHECK_EQ(gp_coord_urls_parse(" https://a:7070/ , https://b:7070//",
	    &u, err, sizeof(err)), 0);
	CHECK_EQ(u.n, 2);
	CHECK_EQ(u.cur, 0);
	CHECK_STR(u.url[0], "https://a:7070");
	CHECK_STR(u.url[1], "https://b:7070");
	CHECK_EQ(gp_coord_urls_parse("", &u, err, sizeof(err)), GP_EINVAL);
	CHECK_EQ(gp_coord_urls_parse("http://a,,http://b", &u, err,
	    sizeof(err)), GP_EINVAL);
	CHECK_EQ(gp_coord_urls_parse("http://a,", &u, err, sizeof(err)),
	    GP_EINVAL);
	CHECK_EQ(gp_coord_urls_parse("a,b,c,d,e,f,g,h,i", &u, err,
	    sizeof(err)), GP_EINVAL);
	CHECK_EQ(gp_coord_urls_parse("a,b,c,d,e,f,g,h", &u, err, sizeof(err)),
	    0);
	CHECK(gp_coord_urls_all_start("http://a, http://b", "http://"));
	CHECK(!gp_coord_urls_all_start("http://a,https://b", "http://"));
	CHECK(!gp_coord_urls_all_start("https://a", "http://"));
}

TEST(answer_ends_the_call)
{
	struct gp_coord_urls u;
	char err[64];

	gp_coord_urls_parse("http://a,http://b", &u, err, sizeof(err));
	gp_coord_urls_begin(&u);
	CHECK_EQ(gp_coord_urls_after(&u, GP_COORD_ANSWERED, NULL), 0);
	CHECK_EQ(u.cur, 0);
}

TEST(standby_names_the_leader)
{
	struct gp_coord_urls u;
	char err[64];

	gp_coord_urls_parse("http://a,http://b,http://c", &u, err,
	    sizeof(err));
	gp_coord_urls_begin(&u);
	/* To the named leader at once, no pause, with or without a '/'. */
	CHECK_EQ(gp_coord_urls_after(&u, GP_COORD_NOT_LEADER, "http://c/"),
	    1);
	CHECK_EQ(u.cur, 2);
	CHECK_EQ(gp_coord_urls_pause_ms(&u), 0);
	CHECK_EQ(gp_coord_urls_after(&u, GP_COORD_ANSWERED, NULL), 0);
	CHECK_EQ(u.cur, 2);
	/* Kept for the next call. */
	gp_coord_urls_begin(&u);
	CHECK_EQ(u.cur, 2);
}

TEST(leader_not_in_the_list_is_not_followed)
{
	struct gp_coord_urls u;
	char err[64];

	gp_coord_urls_parse("http://a,http://b", &u, err, sizeof(err));
	gp_coord_urls_begin(&u);
	/* A token goes only where the user pointed it: the next URL. */
	CHECK_EQ(gp_coord_urls_after(&u, GP_COORD_NOT_LEADER,
	    "http://evil:7070"), 1);
	CHECK_EQ(u.cur, 1);
	/* No leader known (an election): the next, a pause after a round. */
	CHECK_EQ(gp_coord_urls_after(&u, GP_COORD_NOT_LEADER, ""), 1);
	CHECK_EQ(u.cur, 0);
	CHECK_EQ(gp_coord_urls_pause_ms(&u), 50);
}

TEST(unreachable_goes_round_with_bounded_pauses)
{
	struct gp_coord_urls u;
	char err[64];
	int tries = 0, again;
	long paused = 0;

	gp_coord_urls_parse("http://a,http://b", &u, err, sizeof(err));
	gp_coord_urls_begin(&u);
	do {
		tries++;
		again = gp_coord_urls_after(&u, GP_COORD_NO_CONNECT, NULL);
		paused += gp_coord_urls_pause_ms(&u);
		CHECK(gp_coord_urls_pause_ms(&u) <= 1000);
	} while (again && tries < 100);
	CHECK_EQ(tries, 2 * GP_COORD_URLS_ROUNDS);
	CHECK_EQ(paused, 50 + 100 + 200);
}

TEST(lost_answer_is_not_repeated)
{
	struct gp_coord_urls u;
	char err[64];

	gp_coord_urls_parse("http://a,http://b", &u, err, sizeof(err));
	gp_coord_urls_begin(&u);
	/* Sent, no answer: the caller decides; the next call goes on. */
	CHECK_EQ(gp_coord_urls_after(&u, GP_COORD_LOST, NULL), 0);
	CHECK_EQ(u.cur, 1);
}

TEST(standbys_naming_each_other_end)
{
	struct gp_coord_urls u;
	char err[64];
	int tries = 0;

	gp_coord_urls_parse("http://a,http://b", &u, err, sizeof(err));
	gp_coord_urls_begin(&u);
	/* a says b leads, b says a leads (stale rows): bounded. */
	while (gp_coord_urls_after(&u, GP_COORD_NOT_LEADER,
	    u.cur == 0 ? "http://b" : "http://a") && tries < 1000)
		tries++;
	CHECK(tries < 1000);
	CHECK(tries >= 2);
}

int
main(void)
{
	RUN(parse_list);
	RUN(answer_ends_the_call);
	RUN(standby_names_the_leader);
	RUN(leader_not_in_the_list_is_not_followed);
	RUN(unreachable_goes_round_with_bounded_pauses);
	RUN(lost_answer_is_not_repeated);
	RUN(standbys_naming_each_other_end);
	return unit_report();
}
