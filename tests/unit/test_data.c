/*
 * test_data.c: data sets' pure parts and the agent's data cache: the
 * eviction rule (gp_datacache_plan), the cache itself on a directory
 * (versions kept across restarts, unfinished builds removed, least
 * recently used versions evicted, a version a job holds never evicted,
 * new versions built from chunks the cache already holds), the --data
 * operand and mount path rules, the upload request decoder, data refs in
 * job specs and assignments, and byte sizes.
 */
#include <sys/stat.h>

#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/assignment.h"
#include "agent/datacache.h"
#include "ckpt.h"
#include "cli/cmd.h"
#include "gp.h"
#include "jobspec.h"
#include "unit.h"
#include "util.h"

#define HELLO "324dcf027dd4a30a932c441f365a25e86b173defa4b8e58948253471b81b72cf"

/* ---- the eviction rule ---- */

TEST(plan_fits_without_eviction)
{
	struct gp_datacache_view e[2] = {{10, 1, 0}, {10, 2, 0}};
	size_t v[2], n = 99;

	CHECK_EQ(gp_datacache_plan(e, 2, 100, 80, v, &n), 0);
	CHECK_EQ(n, 0);
	CHECK_EQ(gp_datacache_plan(NULL, 0, 100, 100, v, &n), 0);
	CHECK_EQ(n, 0);
}

TEST(plan_least_recently_used_first)
{
	/* 4 unused entries of 10 bytes; last used 4, 1, 3, 2. */
	struct gp_datacache_view e[4] = {{10, 4, 0}, {10, 1, 0}, {10, 3, 0},
	    {10, 2, 0}};
	size_t v[4], n;

	/* 40 held, cap 50, need 25: evict 15 or more: two, oldest first. */
	CHECK_EQ(gp_datacache_plan(e, 4, 50, 25, v, &n), 0);
	CHECK_EQ(n, 2);
	CHECK_EQ(v[0], 1);
	CHECK_EQ(v[1], 3);
	/* As few as will do: need 15 evicts one. */
	CHECK_EQ(gp_datacache_plan(e, 4, 50, 15, v, &n), 0);
	CHECK_EQ(n, 1);
	CHECK_EQ(v[0], 1);
}

TEST(plan_never_evicts_in_use)
{
	/* The oldest is in use: the next oldest goes instead. */
	struct gp_datacache_view e[3] = {{10, 1, 1}, {10, 2, 0}, {10, 3, 0}};
	size_t v[3], n;

	CHECK_EQ(gp_datacache_plan(e, 3, 30, 10, v, &n), 0);
	CHECK_EQ(n, 1);
	CHECK_EQ(v[0], 1);
	/* Everything in use: no room, nothing chosen. */
	e[1].in_use = e[2].in_use = 1;
	n = 99;
	CHECK_EQ(gp_datacache_plan(e, 3, 30, 10, v, &n), GP_ETOOBIG);
	CHECK_EQ(n, 0);
	/* Larger than the cap: never. */
	e[0].in_use = e[1].in_use = e[2].in_use = 0;
	CHECK_EQ(gp_datacache_plan(e, 3, 30, 31, v, &n), GP_ETOOBIG);
	CHECK_EQ(n, 0);
	/* Evicting all unused is not enough. */
	e[0].in_use = 1;
	e[0].bytes = 25;
	CHECK_EQ(gp_datacache_plan(e, 3, 30, 10, v, &n), GP_ETOOBIG);
	CHECK_EQ(n, 0);
}

/* ---- the cache on a directory ---- */

static char cache_dir[256];

static void
write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	if (f != NULL) {
		fputs(text, f);
		fclose(f);
	}
}

/* A cached version as a previous run leaves it: one file of content. */
static void
make_version(const char *key, const char *file, const char *content,
    time_t used)
{
	char dir[512], path[600], m[400], name[GP_CKPT_NAME_HEX];
	struct timespec t[2] = {{used, 0}, {used, 0}};

	gp_ckpt_chunk_name(content, strlen(content), name);
	snprintf(dir, sizeof(dir), "%s/sets/%s/tree", cache_dir, key);
	gp_mkdir_p(dir, 0755);
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	write_text(path, content);
	snprintf(m, sizeof(m),
	    "{\"files\":[{\"path\":\"%s\",\"size\":%zu,"
	    "\"mode\":420,\"chunks\":[\"%s\"]}]}",
	    file, strlen(content), name);
	snprintf(path, sizeof(path), "%s/sets/%s/manifest.json", cache_dir,
	    key);
	write_text(path, m);
	utimensat(AT_FDCWD, path, t, 0);
}

static json_t *
manifest_mode(const char *file, const char *content, int mode)
{
	char name[GP_CKPT_NAME_HEX];

	gp_ckpt_chunk_name(content, strlen(content), name);
	return json_pack("{s:[{s:s,s:i,s:i,s:[s]}]}", "files", "path", file,
	    "size", (int)strlen(content), "mode", mode, "chunks", name);
}

static json_t *
manifest_of(const char *file, const char *content)
{
	return manifest_mode(file, content, 0644);
}

static int
exists(const char *key)
{
	char path[600];
	struct stat st;

	snprintf(path, sizeof(path), "%s/sets/%s", cache_dir, key);
	return stat(path, &st) == 0;
}

TEST(cache_on_disk)
{
	struct gp_transfer_peer peer = {"http://127.0.0.1:1", "gpt_x", NULL,
	    1, NULL, NULL};
	struct gp_datacache_source src;
	struct gp_datacache_stats st;
	struct gp_datacache *c;
	char err[512], *tree = NULL, path[700], buf[16];
	json_t *m;
	FILE *f;

	snprintf(cache_dir, sizeof(cache_dir), "/var/tmp/gp-test-data.%d",
	    (int)getpid());
	gp_remove_tree(cache_dir);
	/* A: "hello" (oldest), B: "world", C: "moon" (newest); a build
	   that never finished. 15 bytes, cap 10: A goes at start. */
	make_version("alice+a@1", "a.txt", "hello", 1000);
	make_version("alice+b@1", "b.txt", "world", 2000);
	make_version("alice+c@1", "c.txt", "moon", 3000);
	snprintf(path, sizeof(path), "%s/sets/alice+d@1.partial", cache_dir);
	gp_mkdir_p(path, 0755);
	c = gp_datacache_new(cache_dir, 10, err, sizeof(err));
	CHECK(c != NULL);
	if (c == NULL)
		return;
	CHECK(!exists("alice+d@1.partial"));
	CHECK(!exists("alice+a@1"));
	CHECK(exists("alice+b@1"));
	CHECK(exists("alice+c@1"));

	/* B is cached: ready without a transfer, and held. */
	memset(&src, 0, sizeof(src));
	src.owner = "alice";
	src.name = "b";
	src.version = 1;
	src.peer = &peer;
	src.chunk_prefix = "/nowhere/";
	src.manifest = m = manifest_of("b.txt", "world");
	CHECK_EQ(gp_datacache_acquire(c, &src, &tree, &st, err, sizeof(err)),
	    0);
	json_decref(m);
	CHECK_EQ(st.cached, 1);
	CHECK_EQ(st.fetched, 0);
	CHECK(tree != NULL && strstr(tree, "alice+b@1/tree") != NULL);
	free(tree);
	tree = NULL;

	/* E: "world" again (another mode: not the same file), under
	   another name: needs 5 bytes of room. C is the only one unused:
	   evicted; E is built from B's chunk, read back and verified. */
	src.name = "e";
	src.manifest = m = manifest_mode("sub/e.txt", "world", 0755);
	CHECK_EQ(gp_datacache_acquire(c, &src, &tree, &st, err, sizeof(err)),
	    0);
	json_decref(m);
	CHECK_EQ(st.cached, 0);
	CHECK_EQ(st.fetched, 0);
	CHECK_EQ(st.copied, 5);
	CHECK(!exists("alice+c@1"));
	CHECK(exists("alice+b@1"));
	CHECK(exists("alice+e@1"));
	snprintf(path, sizeof(path), "%s/sub/e.txt", tree ? tree : "");
	memset(buf, 0, sizeof(buf));
	if ((f = fopen(path, "r")) != NULL) {
		CHECK_EQ(fread(buf, 1, sizeof(buf) - 1, f), 5);
		fclose(f);
	}
	CHECK_STR(buf, "world");
	free(tree);
	tree = NULL;
	/* The same file as B's: hard-linked, no bytes copied. */
	gp_datacache_release(c, "alice", "e", 1);
	src.name = "g";
	src.manifest = m = manifest_of("g.txt", "world");
	CHECK_EQ(gp_datacache_acquire(c, &src, &tree, &st, err, sizeof(err)),
	    0);
	json_decref(m);
	CHECK_EQ(st.linked, 5);
	CHECK_EQ(st.copied + st.fetched, 0);
	CHECK(!exists("alice+e@1")); /* the LRU unused one made room */
	free(tree);
	tree = NULL;
	gp_datacache_release(c, "alice", "g", 1);
	src.name = "e";
	src.manifest = m = manifest_mode("sub/e.txt", "world", 0755);
	CHECK_EQ(gp_datacache_acquire(c, &src, &tree, &st, err, sizeof(err)),
	    0);
	json_decref(m);
	CHECK(!exists("alice+g@1"));
	free(tree);
	tree = NULL;

	/* Both held: no room for F; nothing is evicted. */
	src.name = "f";
	src.manifest = m = manifest_of("f.txt", "hello");
	CHECK_EQ(gp_datacache_acquire(c, &src, &tree, &st, err, sizeof(err)),
	    GP_ETOOBIG);
	CHECK(strstr(err, "in use") != NULL);
	CHECK(exists("alice+b@1") && exists("alice+e@1"));
	/* Larger than the cache: says so. */
	json_decref(m);
	src.manifest = m = manifest_of("f.txt", "hello, world");
	CHECK_EQ(gp_datacache_acquire(c, &src, &tree, &st, err, sizeof(err)),
	    GP_ETOOBIG);
	CHECK(strstr(err, "more than") != NULL);
	json_decref(m);

	/* B released: F (needs fetching "hello") evicts B, the LRU one... */
	gp_datacache_release(c, "alice", "b", 1);
	src.manifest = m = manifest_of("f.txt", "hello");
	CHECK(gp_datacache_acquire(c, &src, &tree, &st, err, sizeof(err)) != 0);
	json_decref(m);
	/* ...but nothing serves "hello" here: the build fails, no leftover. */
	CHECK(!exists("alice+f@1") && !exists("alice+f@1.partial"));
	CHECK(!exists("alice+b@1"));
	CHECK(exists("alice+e@1"));
	gp_datacache_release(c, "alice", "e", 1);
	gp_datacache_free(c);

	/* A restart keeps E. */
	c = gp_datacache_new(cache_dir, 10, err, sizeof(err));
	CHECK(c != NULL);
	if (c != NULL) {
		json_t *s = gp_datacache_status(c);
		CHECK_EQ(json_integer_value(json_object_get(s, "versions")), 1);
		CHECK_EQ(json_integer_value(json_object_get(s, "bytes")), 5);
		json_decref(s);
		gp_datacache_free(c);
	}
	gp_remove_tree(cache_dir);
}

/* ---- --data operands and mount paths ---- */

TEST(data_spec_parse)
{
	char err[256];
	json_t *d = NULL;

	CHECK_EQ(gp_data_spec_parse("ds:/mnt", &d, err, sizeof(err)), 0);
	CHECK_STR(json_string_value(json_object_get(d, "name")), "ds");
	CHECK_STR(json_string_value(json_object_get(d, "path")), "/mnt");
	CHECK(json_object_get(d, "owner") == NULL);
	CHECK(json_object_get(d, "version") == NULL);
	json_decref(d);
	CHECK_EQ(gp_data_spec_parse("alice/img.v2@3:/data/img:x", &d, err,
	             sizeof(err)),
	    0);
	CHECK_STR(json_string_value(json_object_get(d, "owner")), "alice");
	CHECK_STR(json_string_value(json_object_get(d, "name")), "img.v2");
	CHECK_EQ(json_integer_value(json_object_get(d, "version")), 3);
	CHECK_STR(json_string_value(json_object_get(d, "path")), "/data/img:x");
	json_decref(d);
	d = NULL;
	CHECK_EQ(gp_data_spec_parse("ds", &d, err, sizeof(err)), GP_EINVAL);
	CHECK_EQ(gp_data_spec_parse(":/mnt", &d, err, sizeof(err)), GP_EINVAL);
	CHECK_EQ(gp_data_spec_parse("ds:mnt", &d, err, sizeof(err)), GP_EINVAL);
	CHECK(strstr(err, "absolute") != NULL);
	CHECK_EQ(gp_data_spec_parse(".ds:/mnt", &d, err, sizeof(err)),
	    GP_EINVAL);
	CHECK_EQ(gp_data_spec_parse("a/b/c:/mnt", &d, err, sizeof(err)),
	    GP_EINVAL);
	CHECK_EQ(gp_data_spec_parse("ds@0:/mnt", &d, err, sizeof(err)),
	    GP_EINVAL);
	CHECK_EQ(gp_data_spec_parse("ds@x:/mnt", &d, err, sizeof(err)),
	    GP_EINVAL);
	CHECK_EQ(gp_data_spec_parse("/ds:/mnt", &d, err, sizeof(err)),
	    GP_EINVAL);
	CHECK(d == NULL);
}

TEST(mount_path_check)
{
	static const char *const good[] = {"/mnt", "/data/imagenet", "/srv/a",
	    "/etc2", "/procfs", "/usr/share/data", "/var/data", "/home/x",
	    "/tmpdata", "/tmp/x", NULL};
	static const char *const bad[] = {"", "mnt", "/", "/proc", "/proc/x",
	    "/dev", "/dev/shm", "/sys/fs", "/tmp", "/etc", "/usr",
	    "/var", "/run", "/bin", "/lib64", "/mnt/", "//mnt", "/mnt//x",
	    "/mnt/./x", "/mnt/..", "/a/../etc", "/mn\tt", NULL};
	char err[256], longer[GP_MOUNT_PATH_MAX + 2];
	int i;

	for (i = 0; good[i] != NULL; i++)
		if (gp_mount_path_check(good[i], err, sizeof(err)) != 0) {
			fprintf(stderr, "refused: %s (%s)\n", good[i], err);
			CHECK(0);
		}
	for (i = 0; bad[i] != NULL; i++) {
		err[0] = '\0';
		if (gp_mount_path_check(bad[i], err, sizeof(err)) == 0) {
			fprintf(stderr, "accepted: %s\n", bad[i]);
			CHECK(0);
		}
		CHECK(err[0] != '\0');
	}
	memset(longer, 'a', sizeof(longer));
	longer[0] = '/';
	longer[sizeof(longer) - 1] = '\0';
	CHECK_EQ(gp_mount_path_check(longer, err, sizeof(err)), GP_EINVAL);
}

static int
decode(const char *text, struct gp_jobspec *spec, char *err, size_t len)
{
	return gp_jobspec_decode(text, strlen(text), spec, err, len);
}

TEST(jobspec_data)
{
	struct gp_jobspec spec, back;
	char err[256], *text;
	json_t *o;

	CHECK_EQ(decode("{\"command\":[\"true\"],\"data\":[{\"name\":\"ds\","
	                "\"path\":\"/mnt/a\"},{\"name\":\"x\",\"owner\":"
	                "\"bob\",\"version\":2,\"path\":\"/mnt/ab\"}]}",
	             &spec, err, sizeof(err)),
	    0);
	CHECK_EQ(json_array_size(spec.data), 2);
	/* Encoded and decoded again (the store does so): the same. */
	o = gp_jobspec_encode(&spec);
	text = json_dumps(o, JSON_COMPACT);
	CHECK_EQ(decode(text, &back, err, sizeof(err)), 0);
	CHECK(json_equal(spec.data, back.data));
	free(text);
	json_decref(o);
	gp_jobspec_fini(&back);
	gp_jobspec_fini(&spec);
	/* Without data: no "data" key, as before. */
	CHECK_EQ(decode("{\"command\":[\"true\"]}", &spec, err, sizeof(err)),
	    0);
	o = gp_jobspec_encode(&spec);
	CHECK(json_object_get(o, "data") == NULL);
	json_decref(o);
	gp_jobspec_fini(&spec);
	/* Refused: same path, nested paths, reserved, bad fields. */
	CHECK_EQ(decode("{\"command\":[\"true\"],\"data\":[{\"name\":\"a\","
	                "\"path\":\"/mnt\"},{\"name\":\"b\",\"path\":"
	                "\"/mnt\"}]}",
	             &spec, err, sizeof(err)),
	    GP_EINVAL);
	gp_jobspec_fini(&spec);
	CHECK_EQ(decode("{\"command\":[\"true\"],\"data\":[{\"name\":\"a\","
	                "\"path\":\"/mnt/x\"},{\"name\":\"b\",\"path\":"
	                "\"/mnt\"}]}",
	             &spec, err, sizeof(err)),
	    GP_EINVAL);
	CHECK(strstr(err, "overlaps") != NULL);
	gp_jobspec_fini(&spec);
	CHECK_EQ(decode("{\"command\":[\"true\"],\"data\":[{\"name\":\"a\","
	                "\"path\":\"/sys/x\"}]}",
	             &spec, err, sizeof(err)),
	    GP_EINVAL);
	gp_jobspec_fini(&spec);
	CHECK_EQ(decode("{\"command\":[\"true\"],\"data\":[{\"name\":\"a\","
	                "\"path\":\"/mnt\",\"version\":0}]}",
	             &spec, err, sizeof(err)),
	    GP_EINVAL);
	gp_jobspec_fini(&spec);
	CHECK_EQ(decode("{\"command\":[\"true\"],\"data\":[{\"name\":\"a\","
	                "\"path\":\"/mnt\",\"mode\":\"rw\"}]}",
	             &spec, err, sizeof(err)),
	    GP_EINVAL);
	gp_jobspec_fini(&spec);
	CHECK_EQ(decode("{\"command\":[\"true\"],\"data\":[{\"name\":\"a\","
	                "\"owner\":\"b/c\",\"path\":\"/mnt\"}]}",
	             &spec, err, sizeof(err)),
	    GP_EINVAL);
	gp_jobspec_fini(&spec);
}

TEST(upload_request)
{
	char name[GP_CKPT_DATA_NAME_LEN], err[256], text[600];
	struct gp_ckpt_totals tot;
	json_t *m;

	snprintf(text, sizeof(text),
	    "{\"data_set\":\"ds\",\"manifest\":"
	    "{\"files\":[{\"path\":\"a\",\"size\":5,\"mode\":420,\"chunks\":"
	    "[\"%s\"]}]}}",
	    HELLO);
	CHECK_EQ(gp_upload_request_decode(text, strlen(text), 1, 0, name, &m,
	             &tot, err, sizeof(err)),
	    0);
	CHECK_STR(name, "ds");
	CHECK_EQ(tot.bytes, 5);
	json_decref(m);
	/* Without a name for outputs; with one refused there. */
	CHECK_EQ(gp_upload_request_decode(text, strlen(text), 0, 0, name, &m,
	             &tot, err, sizeof(err)),
	    GP_EINVAL);
	snprintf(text, sizeof(text), "{\"manifest\":{\"files\":[]}}");
	CHECK_EQ(gp_upload_request_decode(text, strlen(text), 0, 0, name, &m,
	             &tot, err, sizeof(err)),
	    0);
	CHECK_STR(name, "");
	json_decref(m);
	CHECK_EQ(gp_upload_request_decode(text, strlen(text), 1, 0, name, &m,
	             &tot, err, sizeof(err)),
	    GP_EINVAL);
	/* One chunk, two sizes. */
	snprintf(text, sizeof(text),
	    "{\"manifest\":{\"files\":[{\"path\":"
	    "\"a\",\"size\":5,\"mode\":420,\"chunks\":[\"%s\"]},{\"path\":"
	    "\"b\",\"size\":4,\"mode\":420,\"chunks\":[\"%s\"]}]}}",
	    HELLO, HELLO);
	CHECK_EQ(gp_upload_request_decode(text, strlen(text), 0, 0, name, &m,
	             &tot, err, sizeof(err)),
	    GP_EINVAL);
	CHECK(strstr(err, "two sizes") != NULL);
	/* A label; too big. */
	snprintf(text, sizeof(text),
	    "{\"manifest\":{\"files\":[],\"label\":"
	    "\"x\"}}");
	CHECK_EQ(gp_upload_request_decode(text, strlen(text), 0, 0, name, &m,
	             &tot, err, sizeof(err)),
	    GP_EINVAL);
	snprintf(text, sizeof(text),
	    "{\"manifest\":{\"files\":[{\"path\":"
	    "\"a\",\"size\":5,\"mode\":420,\"chunks\":[\"%s\"]}]}}",
	    HELLO);
	CHECK_EQ(gp_upload_request_decode(text, strlen(text), 0, 4, name, &m,
	             &tot, err, sizeof(err)),
	    GP_ETOOBIG);
}

TEST(assignment_data)
{
	struct gp_poll_answer ans;
	char err[256];
	const char *ok = "{\"assignments\":[{\"job_id\":1,\"attempt\":1,"
	                 "\"command\":[\"true\"],\"data\":[{\"owner\":\"a\","
	                 "\"name\":\"ds\",\"version\":4,\"path\":\"/mnt\"}]}]}";
	const char *bad =
	    "{\"assignments\":[{\"job_id\":1,\"attempt\":1,"
	    "\"command\":[\"true\"],\"data\":[{\"owner\":\"a\","
	    "\"name\":\"ds\",\"version\":4,\"path\":\"/dev\"}]}]}";

	CHECK_EQ(gp_assignment_decode(ok, strlen(ok), &ans, err, sizeof(err)),
	    0);
	CHECK_EQ(ans.nassignments, 1);
	if (ans.nassignments == 1) {
		CHECK_EQ(ans.assignments[0].ndata, 1);
		CHECK_STR(ans.assignments[0].data[0].owner, "a");
		CHECK_EQ(ans.assignments[0].data[0].version, 4);
		CHECK_STR(ans.assignments[0].data[0].path, "/mnt");
	}
	gp_poll_answer_fini(&ans);
	CHECK_EQ(gp_assignment_decode(bad, strlen(bad), &ans, err, sizeof(err)),
	    GP_EINVAL);
	gp_poll_answer_fini(&ans);
}

TEST(sizes_and_refs)
{
	char out[32], owner[GP_NAME_MAX + 1], name[GP_NAME_MAX + 1];
	int64_t v;

	CHECK_EQ(gp_parse_bytes("4096", &v), 0);
	CHECK_EQ(v, 4096);
	CHECK_EQ(gp_parse_bytes("100K", &v), 0);
	CHECK_EQ(v, 102400);
	CHECK_EQ(gp_parse_bytes("5MiB", &v), 0);
	CHECK_EQ(v, 5 << 20);
	CHECK_EQ(gp_parse_bytes("1t", &v), 0);
	CHECK_EQ(v, 1LL << 40);
	CHECK_EQ(gp_parse_bytes("1X", &v), GP_EINVAL);
	CHECK_EQ(gp_parse_bytes("-1", &v), GP_EINVAL);
	CHECK_EQ(gp_parse_bytes("99999999999T", &v), GP_EINVAL);
	gp_format_bytes(512, out, sizeof(out));
	CHECK_STR(out, "512B");
	gp_format_bytes(3 << 20, out, sizeof(out));
	CHECK_STR(out, "3.0MiB");
	CHECK_EQ(gp_cli_parse_data_ref("ds", "me", owner, name, &v), 0);
	CHECK_STR(owner, "me");
	CHECK_STR(name, "ds");
	CHECK_EQ(v, 0);
	CHECK_EQ(gp_cli_parse_data_ref("al/ds@7", NULL, owner, name, &v), 0);
	CHECK_STR(owner, "al");
	CHECK_EQ(v, 7);
	CHECK_EQ(gp_cli_parse_data_ref("ds", NULL, owner, name, &v), GP_EINVAL);
	CHECK_EQ(gp_cli_parse_data_ref("/ds", "me", owner, name, &v),
	    GP_EINVAL);
	CHECK_EQ(gp_cli_parse_data_ref("ds@", "me", owner, name, &v),
	    GP_EINVAL);
}

/* The walk: links and special files skipped, and others' files. */
TEST(tree_walk_owner)
{
	char dir[256], path[300], err[256];
	struct gp_transfer_stats st;
	struct gp_tree *t = NULL;

	snprintf(dir, sizeof(dir), "/var/tmp/gp-test-tree.%d", (int)getpid());
	gp_remove_tree(dir);
	snprintf(path, sizeof(path), "%s/sub", dir);
	gp_mkdir_p(path, 0755);
	snprintf(path, sizeof(path), "%s/mine", dir);
	write_text(path, "mine");
	snprintf(path, sizeof(path), "%s/sub/theirs", dir);
	write_text(path, "theirs");
	if (geteuid() == 0)
		CHECK_EQ(chown(path, 65534, 65534), 0);
	snprintf(path, sizeof(path), "%s/link", dir);
	CHECK_EQ(symlink("/etc/passwd", path), 0);
	memset(&st, 0, sizeof(st));
	CHECK_EQ(gp_tree_open(dir, 0, (uid_t)-1, &t, err, sizeof(err)), 0);
	if (t != NULL)
		gp_tree_totals(t, &st);
	CHECK_EQ(st.files, 2);
	CHECK_EQ(st.skipped, 1);
	gp_tree_free(t);
	t = NULL;
	if (geteuid() == 0) {
		CHECK_EQ(gp_tree_open(dir, 0, 0, &t, err, sizeof(err)), 0);
		if (t != NULL)
			gp_tree_totals(t, &st);
		CHECK_EQ(st.files, 1);
		CHECK_EQ(st.skipped, 2);
		gp_tree_free(t);
	}
	/* A file is a tree only when asked; a link never. */
	snprintf(path, sizeof(path), "%s/mine", dir);
	CHECK_EQ(gp_tree_open(path, 0, (uid_t)-1, &t, err, sizeof(err)),
	    GP_EINVAL);
	CHECK_EQ(gp_tree_open(path, 1, (uid_t)-1, &t, err, sizeof(err)), 0);
	gp_tree_free(t);
	snprintf(path, sizeof(path), "%s/link", dir);
	CHECK(gp_tree_open(path, 1, (uid_t)-1, &t, err, sizeof(err)) != 0);
	gp_remove_tree(dir);
}

int
main(void)
{
	RUN(plan_fits_without_eviction);
	RUN(plan_least_recently_used_first);
	RUN(plan_never_evicts_in_use);
	RUN(cache_on_disk);
	RUN(data_spec_parse);
	RUN(mount_path_check);
	RUN(jobspec_data);
	RUN(upload_request);
	RUN(assignment_data);
	RUN(sizes_and_refs);
	RUN(tree_walk_owner);
	return unit_report();
}
