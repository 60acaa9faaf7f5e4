/*
 * test_pg.c: the pure parts of pg.c: the reconnect back-off (100 ms
 * doubled, at most 5 s), the redaction of passwords from connection
 * strings before they reach a log, the classification of SQLSTATEs
 * (lost, read-only, conflict, other), pool ids.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coord/pg.h"
#include "gp.h"
#include "unit.h"

TEST(backoff)
{
	CHECK_EQ(pg_backoff_ms(0), 100);
	CHECK_EQ(pg_backoff_ms(1), 200);
	CHECK_EQ(pg_backoff_ms(2), 400);
	CHECK_EQ(pg_backoff_ms(5), 3200);
	CHECK_EQ(pg_backoff_ms(6), 5000);
	CHECK_EQ(pg_backoff_ms(1000), 5000);
}

static void
redacts(const char *url, const char *want)
{
	char out[256];

	pg_url_redact(url, out, sizeof(out));
	CHECK_STR(out, want);
}

TEST(redact)
{
	redacts("postgresql://gp@db:5432/pool", "postgresql://gp@db:5432/pool");
	redacts("postgresql://gp:s3cret@db/pool", "postgresql://gp:***@db/pool");
	redacts("postgres://gp:p@ss@db/pool", "postgres://gp:***@db/pool");
	redacts("postgresql://db/pool?user=gp&password=s3cret&sslmode=require",
	    "postgresql://db/pool?user=gp&password=***&sslmode=require");
	redacts("host=db user=gp password=s3cret dbname=pool",
	    "host=db user=gp password=*** dbname=pool");
	redacts("host=db password = 'a b\\' c' dbname=pool",
	    "host=db password = *** dbname=pool");
	/* Not a password parameter: kept. */
	redacts("postgresql://db/pool?application_name=mypassword",
	    "postgresql://db/pool?application_name=mypassword");
	redacts("host=/var/run/postgresql dbname=pool",
	    "host=/var/run/postgresql dbname=pool");
	{
		char small[12];

		pg_url_redact("postgresql://gp:s3cret@db/pool", small,
		    sizeof(small));
		CHECK_STR(small, "postgresql:");
	}
}

TEST(sqlstate)
{
	CHECK_EQ(pg_sqlstate_error("08006"), GP_ECONN);
	CHECK_EQ(pg_sqlstate_error("08001"), GP_ECONN);
	CHECK_EQ(pg_sqlstate_error("08P01"), GP_EIO);
	CHECK_EQ(pg_sqlstate_error("57P01"), GP_ECONN);
	CHECK_EQ(pg_sqlstate_error("57P03"), GP_ECONN);
	CHECK_EQ(pg_sqlstate_error("25P03"), GP_ECONN); /* idle in tx cut */
	CHECK_EQ(pg_sqlstate_error("57P05"), GP_ECONN); /* idle session cut */
	CHECK_EQ(pg_sqlstate_error("25006"), GP_EPERM);
	CHECK_EQ(pg_sqlstate_error("40001"), GP_ECONFLICT);
	CHECK_EQ(pg_sqlstate_error("40P01"), GP_ECONFLICT);
	CHECK_EQ(pg_sqlstate_error("GPF01"), GP_EFENCED);
	CHECK_EQ(pg_sqlstate_error("23505"), GP_EIO);
	CHECK_EQ(pg_sqlstate_error("42P01"), GP_EIO);
	CHECK_EQ(pg_sqlstate_error(NULL), GP_EIO);
	CHECK_EQ(pg_sqlstate_error("080"), GP_EIO);
}

TEST(pool_id)
{
	CHECK(pg_pool_id_valid("0123456789abcdef0123456789abcdef"));
	CHECK(!pg_pool_id_valid("0123456789ABCDEF0123456789abcdef"));
	CHECK(!pg_pool_id_valid("0123456789abcdef0123456789abcde"));
	CHECK(!pg_pool_id_valid(""));
	CHECK(!pg_pool_id_valid(NULL));
}

int
main(void)
{
	RUN(backoff);
	RUN(redact);
	RUN(sqlstate);
	RUN(pool_id);
	return unit_report();
}
