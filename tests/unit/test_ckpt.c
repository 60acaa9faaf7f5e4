/*
 * test_ckpt.c: the pure parts of the checkpoint store (src/common/ckpt.c):
 * chunk naming, path and name checks, manifest validation, labels, and
 * the CLI's table of versions.
 */
#include <jansson.h>
#include <sodium.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "cli/cmd.h"
#include "gp.h"
#include "unit.h"

#define HELLO "324dcf027dd4a30a932c441f365a25e86b173defa4b8e58948253471b81b72cf"
#define EMPTY "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8"

TEST(chunk_name)
{
	char name[GP_CKPT_NAME_HEX];

	/* BLAKE2b-256, as `b2sum -l 256` computes it. */
	gp_ckpt_chunk_name("hello", 5, name);
	CHECK_STR(name, HELLO);
	gp_ckpt_chunk_name("", 0, name);
	CHECK_STR(name, EMPTY);
	CHECK(gp_ckpt_name_valid(HELLO));
	CHECK(!gp_ckpt_name_valid(NULL));
	CHECK(!gp_ckpt_name_valid(""));
	CHECK(!gp_ckpt_name_valid("abc"));
	CHECK(!gp_ckpt_name_valid(HELLO "0"));
	name[0] = 'A';
	CHECK(!gp_ckpt_name_valid(name));
	name[0] = 'g';
	CHECK(!gp_ckpt_name_valid(name));
}

/* Named piece by piece, a chunk gets the name it gets at once. */
TEST(chunk_name_pieces)
{
	static unsigned char data[300000];
	char whole[GP_CKPT_NAME_HEX], pieces[GP_CKPT_NAME_HEX];
	gp_ckpt_hash_state st;
	size_t i, n, cuts[] = {1, 127, 128, 129, 4096, 65537, 262144};

	for (i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i * 2654435761u >> 13);
	gp_ckpt_chunk_name(data, sizeof(data), whole);
	for (n = 0; n < sizeof(cuts) / sizeof(cuts[0]); n++) {
		gp_ckpt_hash_init(&st);
		for (i = 0; i < sizeof(data); i += cuts[n])
			gp_ckpt_hash_update(&st, data + i,
			    sizeof(data) - i < cuts[n] ? sizeof(data) - i
						       : cuts[n]);
		gp_ckpt_hash_final(&st, pieces);
		CHECK_STR(pieces, whole);
	}
	gp_ckpt_hash_init(&st);
	gp_ckpt_hash_update(&st, "hel", 3);
	gp_ckpt_hash_update(&st, "", 0);
	gp_ckpt_hash_update(&st, "lo", 2);
	gp_ckpt_hash_final(&st, pieces);
	CHECK_STR(pieces, HELLO);
	gp_ckpt_hash_init(&st);
	gp_ckpt_hash_final(&st, pieces);
	CHECK_STR(pieces, EMPTY);
}

TEST(path_valid)
{
	char long_path[GP_CKPT_PATH_MAX + 2];

	CHECK(gp_ckpt_path_valid("a"));
	CHECK(gp_ckpt_path_valid("a/b/c.bin"));
	CHECK(gp_ckpt_path_valid("..a/b..")); /* only whole components */
	CHECK(gp_ckpt_path_valid(".hidden"));
	CHECK(!gp_ckpt_path_valid(NULL));
	CHECK(!gp_ckpt_path_valid(""));
	CHECK(!gp_ckpt_path_valid("/etc/passwd"));
	CHECK(!gp_ckpt_path_valid("a/"));
	CHECK(!gp_ckpt_path_valid("a//b"));
	CHECK(!gp_ckpt_path_valid(".."));
	CHECK(!gp_ckpt_path_valid("../x"));
	CHECK(!gp_ckpt_path_valid("a/../../x"));
	CHECK(!gp_ckpt_path_valid("a/./b"));
	CHECK(!gp_ckpt_path_valid("."));
	CHECK(!gp_ckpt_path_valid("a\nb"));
	memset(long_path, 'x', GP_CKPT_PATH_MAX);
	long_path[GP_CKPT_PATH_MAX] = '\0';
	CHECK(gp_ckpt_path_valid(long_path));
	long_path[GP_CKPT_PATH_MAX] = 'x';
	long_path[GP_CKPT_PATH_MAX + 1] = '\0';
	CHECK(!gp_ckpt_path_valid(long_path));
}

TEST(chunk_count)
{
	CHECK_EQ(gp_ckpt_chunk_count(0), 0);
	CHECK_EQ(gp_ckpt_chunk_count(1), 1);
	CHECK_EQ(gp_ckpt_chunk_count(GP_CKPT_CHUNK_SIZE), 1);
	CHECK_EQ(gp_ckpt_chunk_count(GP_CKPT_CHUNK_SIZE + 1), 2);
}

static int
check(const char *text, int64_t max, int meta, struct gp_ckpt_totals *tot)
{
	char err[256];
	json_t *m = json_loads(text, JSON_ALLOW_NUL, NULL);
	int ret;

	if (m == NULL)
		return 99;
	ret = gp_ckpt_manifest_check(m, max, meta, tot, err, sizeof(err));
	if (ret != 0 && err[0] == '\0')
		ret = 98; /* an error must say why */
	json_decref(m);
	return ret;
}

TEST(manifest_check)
{
	struct gp_ckpt_totals tot = {-1, -1, -1};

	CHECK_EQ(check("{\"files\":[]}", 0, 0, &tot), 0);
	CHECK_EQ(tot.files, 0);
	CHECK_EQ(check("{\"files\":[{\"path\":\"a/b\",\"size\":5,\"mode\":420,"
		       "\"chunks\":[\"" HELLO "\"]},{\"path\":\"e\",\"size\":0,"
		       "\"mode\":384,\"chunks\":[]}],\"label\":\"step=1\"}",
		     0, 0, &tot),
	    0);
	CHECK_EQ(tot.files, 2);
	CHECK_EQ(tot.bytes, 5);
	CHECK_EQ(tot.chunks, 1);
	/* Shapes. */
	CHECK_EQ(check("[]", 0, 0, &tot), GP_EINVAL);
	CHECK_EQ(check("{}", 0, 0, &tot), GP_EINVAL);
	CHECK_EQ(check("{\"files\":[],\"x\":1}", 0, 0, &tot), GP_EINVAL);
	CHECK_EQ(check("{\"files\":[],\"version\":1}", 0, 0, &tot),
	    GP_EINVAL);
	CHECK_EQ(check("{\"files\":[],\"version\":1}", 0, 1, &tot), 0);
	CHECK_EQ(check("{\"files\":[1]}", 0, 0, &tot), GP_EINVAL);
	/* Paths. */
	CHECK_EQ(check("{\"files\":[{\"path\":\"../a\",\"size\":0,\"mode\":0,"
		       "\"chunks\":[]}]}",
		     0, 0, &tot),
	    GP_EINVAL);
	CHECK_EQ(check("{\"files\":[{\"path\":\"a\\u0000b\",\"size\":0,"
		       "\"mode\":0,\"chunks\":[]}]}",
		     0, 0, &tot),
	    GP_EINVAL);
	CHECK_EQ(check("{\"files\":[{\"path\":\"a\",\"size\":0,\"mode\":0,"
		       "\"chunks\":[]},{\"path\":\"a\",\"size\":0,\"mode\":0,"
		       "\"chunks\":[]}]}",
		     0, 0, &tot),
	    GP_EINVAL);
	CHECK_EQ(check("{\"files\":[{\"path\":\"a/b\",\"size\":0,\"mode\":0,"
		       "\"chunks\":[]},{\"path\":\"a\",\"size\":0,\"mode\":0,"
		       "\"chunks\":[]}]}",
		     0, 0, &tot),
	    GP_EINVAL);
	/* Sizes and chunks. */
	CHECK_EQ(check("{\"files\":[{\"path\":\"a\",\"size\":5,\"mode\":0,"
		       "\"chunks\":[]}]}",
		     0, 0, &tot),
	    GP_EINVAL);
	CHECK_EQ(check("{\"files\":[{\"path\":\"a\",\"size\":-1,\"mode\":0,"
		       "\"chunks\":[]}]}",
		     0, 0, &tot),
	    GP_EINVAL);
	CHECK_EQ(check("{\"files\":[{\"path\":\"a\",\"size\":5,\"mode\":0,"
		       "\"chunks\":[\"XYZ\"]}]}",
		     0, 0, &tot),
	    GP_EINVAL);
	CHECK_EQ(check("{\"files\":[{\"path\":\"a\",\"size\":5,\"mode\":99999,"
		       "\"chunks\":[\"" HELLO "\"]}]}",
		     0, 0, &tot),
	    GP_EINVAL);
	CHECK_EQ(check("{\"files\":[{\"path\":\"a\",\"size\":5,\"mode\":0,"
		       "\"chunks\":[\"" HELLO "\"]}]}",
		     4, 0, &tot),
	    GP_ETOOBIG);
	/* Labels. */
	CHECK_EQ(check("{\"files\":[],\"label\":\"a\\nb\"}", 0, 0, &tot),
	    GP_EINVAL);
	CHECK_EQ(check("{\"files\":[],\"label\":7}", 0, 0, &tot), GP_EINVAL);
}

TEST(label)
{
	char out[GP_CKPT_LABEL_LEN + 1], big[500];

	gp_ckpt_label("step=40\nmore", 12, out);
	CHECK_STR(out, "step=40");
	gp_ckpt_label("a\tb\r\n", 5, out);
	CHECK_STR(out, "a?b");
	gp_ckpt_label("", 0, out);
	CHECK_STR(out, "");
	memset(big, 'x', sizeof(big));
	gp_ckpt_label(big, sizeof(big), out);
	CHECK_EQ(strlen(out), GP_CKPT_LABEL_LEN);
}

TEST(render_checkpoints)
{
	struct gp_buf out = {0};
	json_t *reply = json_loads(
	    "{\"job_id\":7,\"checkpoints\":[{\"version\":3,\"attempt\":2,"
	    "\"bytes\":1073741824,\"files\":4,\"label\":\"step=40\","
	    "\"created_at\":\"2026-11-22T21:05:00.123Z\"}]}",
	    0, NULL);

	CHECK_EQ(gp_cli_render_checkpoints(reply, &out), 0);
	CHECK(out.data != NULL && strstr(out.data, "VERSION") != NULL);
	CHECK(out.data != NULL && strstr(out.data, "1.0G") != NULL);
	CHECK(out.data != NULL && strstr(out.data, "step=40") != NULL);
	gp_buf_free(&out);
	json_decref(reply);
}

int
main(void)
{
	if (sodium_init() < 0)
		return 1;
	RUN(chunk_name);
	RUN(chunk_name_pieces);
	RUN(path_valid);
	RUN(chunk_count);
	RUN(manifest_check);
	RUN(label);
	RUN(render_checkpoints);
	return unit_report();
}
