/*
 * test_blob.c: the blob store (src/coord/blob.c) on a scratch directory,
 * without HTTP: the streamed upload (stored, stored already, a content
 * that hashes to another name, a blob over its limit), both stores'
 * layout and hashes, a blob stored behind the answer found by blob_stat,
 * and the GC: it removes old garbage, keeps what a user references and
 * young garbage (and looks again), removes nothing when a user cannot
 * say what it keeps, looks only at owners marked, and sweeps abandoned
 * temporary files.
 */
#include <sys/stat.h>

#include <fcntl.h>
#include <jansson.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "coord/blob.h"
#include "coord/model.h"
#include "gp.h"
#include "unit.h"
#include "util.h"

static char dir[256];

/* The hex name of data in a store of hash kind h. */
static void
name_of(enum blob_hash h, const char *data, size_t len, char *hex)
{
	unsigned char hash[32];

	if (h == BLOB_SHA256)
		crypto_hash_sha256(hash, (const unsigned char *)data, len);
	else
		crypto_generichash(hash, sizeof(hash),
		    (const unsigned char *)data, len, NULL, 0);
	sodium_bin2hex(hex, BLOB_HEX_LEN + 1, hash, sizeof(hash));
}

/* Uploads data as hex (NULL: its own name) in pieces; the end's result. */
static enum blob_end
put(struct blob_store *s, const char *owner, const char *data, size_t len,
    const char *hex, int64_t limit, char *got)
{
	struct blob_upload *u = blob_upload_new();
	char own[BLOB_HEX_LEN + 1];
	enum blob_end end;
	size_t off, n;

	if (hex == NULL) {
		name_of(s == blob_images ? BLOB_SHA256 : BLOB_BLAKE2B_256, data,
		    len, own);
		hex = own;
	}
	blob_upload_open(u, s, owner, hex, limit, "too big");
	for (off = 0; off < len; off += n) {
		n = len - off < 70000 ? len - off : 70000;
		blob_upload_data(u, data + off, n);
	}
	end = blob_upload_end(u, got);
	blob_upload_free(u);
	return end;
}

/* Sets a file's times to age_s seconds ago. */
static int
age(const char *path, int age_s)
{
	struct timespec t[2];

	clock_gettime(CLOCK_REALTIME, &t[0]);
	t[0].tv_sec -= age_s;
	t[1] = t[0];
	return utimensat(AT_FDCWD, path, t, 0);
}

static int
exists(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0;
}

/* A user that keeps what its set says, or fails when told to. */
static json_t *kept;
static int collect_fails;

static int
collect(const char *owner, json_t *refs)
{
	(void)owner;
	if (collect_fails)
		return GP_EIO;
	json_object_update(refs, kept);
	return 0;
}

static const struct blob_user test_user = {"test", NULL, collect, NULL};

TEST(upload_stored_then_existed)
{
	char got[BLOB_HEX_LEN + 1], hex[BLOB_HEX_LEN + 1], path[1400];
	size_t len = 3 * 1024 * 1024 + 17, i;
	char *data = malloc(len);
	struct stat sb;

	for (i = 0; i < len; i++)
		data[i] = (char)(i * 7 + i / 4096);
	name_of(BLOB_BLAKE2B_256, data, len, hex);
	CHECK_EQ(put(blob_chunks, "alice", data, len, NULL, 4 << 20, got),
	    BLOB_STORED);
	/* Stored behind the answer: blob_stat waits for it. */
	CHECK_EQ(blob_stat(blob_chunks, "alice", hex, &sb), 0);
	CHECK_EQ(sb.st_size, len);
	blob_path(blob_chunks, "alice", hex, path, sizeof(path));
	CHECK(strstr(path, "/checkpoints/alice/chunks/") != NULL);
	CHECK_EQ(put(blob_chunks, "alice", data, len, NULL, 4 << 20, got),
	    BLOB_EXISTED);
	/* Per owner: bob's copy is his own. */
	CHECK_EQ(put(blob_chunks, "bob", data, len, NULL, 4 << 20, got),
	    BLOB_STORED);
	/* A dot-owner cannot climb out. */
	blob_path(blob_chunks, "..", hex, path, sizeof(path));
	CHECK(strstr(path, "/checkpoints/%../chunks/") != NULL);
	free(data);
}

TEST(upload_refused)
{
	char got[BLOB_HEX_LEN + 1], hex[BLOB_HEX_LEN + 1], path[1400];
	char tmp[1400];
	struct blob_upload *u;
	const char *msg;

	name_of(BLOB_BLAKE2B_256, "other", 5, hex);
	CHECK_EQ(put(blob_chunks, "alice", "content", 7, hex, 100, got),
	    BLOB_MISMATCH);
	name_of(BLOB_BLAKE2B_256, "content", 7, tmp);
	CHECK_STR(got, tmp);
	blob_path(blob_chunks, "alice", hex, path, sizeof(path));
	CHECK(!exists(path));
	/* Over its limit: 413 with the caller's message, nothing kept. */
	u = blob_upload_new();
	name_of(BLOB_BLAKE2B_256, "0123456789", 10, hex);
	blob_upload_open(u, blob_chunks, "alice", hex, 5, "at most 5 bytes");
	blob_upload_data(u, "0123456789", 10);
	CHECK_EQ(blob_upload_end(u, got), BLOB_REFUSED);
	CHECK_EQ(blob_upload_refused(u, &msg), 413);
	CHECK_STR(msg, "at most 5 bytes");
	blob_upload_free(u);
	/* No temporary file left by either. */
	snprintf(tmp, sizeof(tmp), "rmdir %s/checkpoints/alice/tmp 2>/dev/null",
	    dir);
	CHECK_EQ(system(tmp), 0);
}

TEST(images_sha256_pool_wide)
{
	char got[BLOB_HEX_LEN + 1], hex[BLOB_HEX_LEN + 1], path[1400];
	char *data = NULL;
	size_t len = 0;

	name_of(BLOB_SHA256, "layer", 5, hex);
	CHECK_EQ(put(blob_images, NULL, "layer", 5, NULL, 1 << 20, got),
	    BLOB_STORED);
	/* Stored and its directory synced before the answer. */
	blob_path(blob_images, NULL, hex, path, sizeof(path));
	CHECK(strstr(path, "/images/blobs/") != NULL);
	CHECK(exists(path));
	CHECK_EQ(blob_read(blob_images, NULL, hex, 100, &data, &len), 0);
	CHECK_EQ(len, 5);
	CHECK(data != NULL && memcmp(data, "layer", 5) == 0);
	free(data);
	/* A BLAKE2b name is not a sha256 one. */
	name_of(BLOB_BLAKE2B_256, "layer", 5, hex);
	CHECK_EQ(put(blob_images, NULL, "layer", 5, hex, 1 << 20, got),
	    BLOB_MISMATCH);
}

TEST(gc_keeps_references_and_young)
{
	char got[BLOB_HEX_LEN + 1], a[BLOB_HEX_LEN + 1], b[BLOB_HEX_LEN + 1];
	char c[BLOB_HEX_LEN + 1], pa[1400], pb[1400], pc[1400], tmp[1500];
	struct stat sb;
	int fd;

	CHECK_EQ(put(blob_chunks, "carol", "kept", 4, NULL, 100, got),
	    BLOB_STORED);
	CHECK_EQ(put(blob_chunks, "carol", "garbage", 7, NULL, 100, got),
	    BLOB_STORED);
	CHECK_EQ(put(blob_chunks, "carol", "young", 5, NULL, 100, got),
	    BLOB_STORED);
	name_of(BLOB_BLAKE2B_256, "kept", 4, a);
	name_of(BLOB_BLAKE2B_256, "garbage", 7, b);
	name_of(BLOB_BLAKE2B_256, "young", 5, c);
	CHECK_EQ(blob_stat(blob_chunks, "carol", a, &sb), 0);
	CHECK_EQ(blob_stat(blob_chunks, "carol", b, &sb), 0);
	CHECK_EQ(blob_stat(blob_chunks, "carol", c, &sb), 0);
	blob_path(blob_chunks, "carol", a, pa, sizeof(pa));
	blob_path(blob_chunks, "carol", b, pb, sizeof(pb));
	blob_path(blob_chunks, "carol", c, pc, sizeof(pc));
	CHECK_EQ(age(pa, 7200), 0);
	CHECK_EQ(age(pb, 7200), 0);
	/* An abandoned temporary file. */
	snprintf(tmp, sizeof(tmp), "%s/checkpoints/carol/tmp/x.abc", dir);
	fd = open(tmp, O_CREAT | O_WRONLY, 0600);
	CHECK(fd >= 0);
	close(fd);
	CHECK_EQ(age(tmp, 7200), 0);
	json_object_set_new(kept, a, json_true());

	/* A user that cannot say what it keeps: nothing goes. */
	collect_fails = 1;
	blob_gc_mark(blob_chunks, "carol");
	blob_gc_run(blob_chunks);
	CHECK(exists(pa) && exists(pb) && exists(pc));

	collect_fails = 0;
	blob_gc_mark(blob_chunks, "carol");
	blob_gc_run(blob_chunks);
	CHECK(exists(pa)); /* referenced */
	CHECK(!exists(pb)); /* old garbage */
	CHECK(exists(pc));  /* young garbage: an upload in progress */
	CHECK(!exists(tmp));
	/* "missing" makes a blob young again: an old one stays. */
	CHECK_EQ(age(pc, 7200), 0);
	CHECK_EQ(blob_touch(blob_chunks, "carol", c, 0), 0);
	blob_gc_mark(blob_chunks, "carol");
	blob_gc_run(blob_chunks);
	CHECK(exists(pc));
	CHECK_EQ(blob_touch(blob_chunks, "carol", b, 0), -1);
	/* Young garbage left: the owner gets another pass unmarked. */
	CHECK_EQ(age(pc, 7200), 0);
	blob_gc_run(blob_chunks);
	CHECK(!exists(pc));
	/* Nothing left to look again at: an owner not marked is not. */
	CHECK_EQ(put(blob_chunks, "carol", "young", 5, NULL, 100, got),
	    BLOB_STORED);
	CHECK_EQ(blob_stat(blob_chunks, "carol", c, &sb), 0);
	CHECK_EQ(age(pc, 7200), 0);
	blob_gc_run(blob_chunks);
	CHECK(exists(pc));
}

int
main(void)
{
	struct coord_config cfg;
	char cmd[300];

	if (sodium_init() < 0)
		return 1;
	snprintf(dir, sizeof(dir), "/tmp/gp-test-blob.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return 1;
	memset(&cfg, 0, sizeof(cfg));
	gp_strlcpy(cfg.data_dir, dir, sizeof(cfg.data_dir));
	kept = json_object();
	if (blob_init(&cfg) != 0 ||
	    blob_add_user(blob_chunks, &test_user) != 0) {
		fprintf(stderr, "blob_init failed\n");
		return 1;
	}
	/* No GC thread (blob_start): the tests run the passes. */
	RUN(upload_stored_then_existed);
	RUN(upload_refused);
	RUN(images_sha256_pool_wide);
	RUN(gc_keeps_references_and_young);
	blob_stop();
	json_decref(kept);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", dir);
	return unit_report();
}
