/*
 * test_oci.c: the image formats (common/oci.c), signatures (common/sign.c),
 * the WWW-Authenticate parser (common/registry.c) and the layer
 * unpacker's checks and writing (agent/layer.c), with archives built here
 * by libarchive.
 */
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/layer.h"
#include "coord/sched.h"
#include "gp.h"
#include "oci.h"
#include "registry.h"
#include "sign.h"
#include "unit.h"
#include "util.h"

#define D1                                                                     \
	"sha256:1111111111111111111111111111111111111111111111111111111111111111"
#define D2                                                                     \
	"sha256:2222222222222222222222222222222222222222222222222222222222222222"
#define D3                                                                     \
	"sha256:3333333333333333333333333333333333333333333333333333333333333333"

static char err[512];

TEST(digest)
{
	char d[GP_OCI_DIGEST_SIZE];

	CHECK(gp_oci_digest_valid(D1));
	CHECK(!gp_oci_digest_valid("sha256:11"));
	CHECK(!gp_oci_digest_valid(D1 "1"));
	CHECK(!gp_oci_digest_valid(
	    "sha512:1111111111111111111111111111111111111111111111111111111111111111"));
	CHECK(!gp_oci_digest_valid(
	    "sha256:111111111111111111111111111111111111111111111111111111111111111A"));
	CHECK(!gp_oci_digest_valid(NULL));
	gp_oci_digest_of("", 0, d);
	CHECK_STR(d,
	    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

static const char manifest_ok[] =
    "{\"schemaVersion\":2,\"mediaType\":\"" GP_OCI_MT_MANIFEST "\","
    "\"config\":{\"mediaType\":\"" GP_OCI_MT_CONFIG "\",\"digest\":\"" D1
    "\",\"size\":100},\"layers\":[{\"mediaType\":\"" GP_OCI_MT_LAYER_GZ
    "\",\"digest\":\"" D2 "\",\"size\":2000},{\"mediaType\":\"" GP_OCI_MT_LAYER
    "\",\"digest\":\"" D3 "\",\"size\":3000,"
    "\"annotations\":{\"a\":\"b\"}}]}";

static int
manifest_refused(const char *text, const char *needle)
{
	struct gp_oci_manifest m;
	int rc =
	    gp_oci_manifest_decode(text, strlen(text), &m, err, sizeof(err));

	gp_oci_manifest_fini(&m);
	if (rc == 0)
		return 0;
	if (needle != NULL && strstr(err, needle) == NULL) {
		fprintf(stderr, "error '%s' lacks '%s'\n", err, needle);
		return 0;
	}
	return 1;
}

TEST(manifest)
{
	struct gp_oci_manifest m;
	char buf[4096];

	CHECK_EQ(gp_oci_manifest_decode(manifest_ok, strlen(manifest_ok), &m,
	             err, sizeof(err)),
	    0);
	CHECK_EQ(m.nlayers, 2);
	CHECK_STR(m.config.digest, D1);
	CHECK_STR(m.layers[1].digest, D3);
	CHECK_EQ(m.layers[0].size, 2000);
	CHECK_EQ(gp_oci_manifest_bytes(&m), 5100);
	gp_oci_manifest_fini(&m);
	CHECK_EQ(gp_oci_detect(manifest_ok, strlen(manifest_ok), NULL),
	    GP_OCI_MANIFEST);
	CHECK(manifest_refused("[]", "not a JSON object"));
	CHECK(manifest_refused("{\"schemaVersion\":1}", "schemaVersion"));
	CHECK(manifest_refused(
	    "{\"schemaVersion\":2,\"mediaType\":\"" GP_OCI_MT_INDEX "\"}",
	    "index"));
	/* A lying size, a bad digest, too many layers, a foreign layer. */
	snprintf(buf, sizeof(buf),
	    "{\"schemaVersion\":2,\"config\":{"
	    "\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":-1},\"layers\":"
	    "[]}",
	    GP_OCI_MT_CONFIG, D1);
	CHECK(manifest_refused(buf, "config.size"));
	snprintf(buf, sizeof(buf),
	    "{\"schemaVersion\":2,\"config\":{"
	    "\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":99999999},"
	    "\"layers\":[]}",
	    GP_OCI_MT_CONFIG, D1);
	CHECK(manifest_refused(buf, "config.size"));
	snprintf(buf, sizeof(buf),
	    "{\"schemaVersion\":2,\"config\":{"
	    "\"mediaType\":\"%s\",\"digest\":\"md5:00\",\"size\":9},"
	    "\"layers\":[]}",
	    GP_OCI_MT_CONFIG);
	CHECK(manifest_refused(buf, "config.digest"));
	snprintf(buf, sizeof(buf),
	    "{\"schemaVersion\":2,\"config\":{"
	    "\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":9},\"layers\":"
	    "[]}",
	    GP_OCI_MT_CONFIG, D1);
	CHECK(manifest_refused(buf, "non-empty"));
	snprintf(buf, sizeof(buf),
	    "{\"schemaVersion\":2,\"config\":{"
	    "\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":9},\"layers\":"
	    "[{\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":9,\"urls\":"
	    "[\"http://x\"]}]}",
	    GP_OCI_MT_CONFIG, D1, GP_OCI_MT_LAYER, D2);
	CHECK(manifest_refused(buf, "foreign"));
	snprintf(buf, sizeof(buf),
	    "{\"schemaVersion\":2,\"config\":{"
	    "\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":9},\"layers\":"
	    "[{\"mediaType\":\"application/x-evil\",\"digest\":\"%s\","
	    "\"size\":9}]}",
	    GP_OCI_MT_CONFIG, D1, D2);
	CHECK(manifest_refused(buf, "unsupported"));
	{
		struct gp_buf b = {0};
		int i;
		gp_buf_printf(&b,
		    "{\"schemaVersion\":2,\"config\":{"
		    "\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":9},"
		    "\"layers\":[",
		    GP_OCI_MT_CONFIG, D1);
		for (i = 0; i <= GP_OCI_LAYERS_MAX; i++)
			gp_buf_printf(&b,
			    "%s{\"mediaType\":\"%s\",\"digest\":"
			    "\"%s\",\"size\":9}",
			    i ? "," : "", GP_OCI_MT_LAYER, D2);
		gp_buf_printf(&b, "]}");
		CHECK(manifest_refused(b.data, "at most"));
		gp_buf_free(&b);
	}
}

TEST(index_pick)
{
	struct gp_oci_index idx;
	struct gp_oci_descriptor d;
	char buf[2048];

	snprintf(buf, sizeof(buf),
	    "{\"schemaVersion\":2,\"mediaType\":\"%s\","
	    "\"manifests\":[{\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":"
	    "10,\"platform\":{\"os\":\"linux\",\"architecture\":\"arm64\"}},"
	    "{\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":11,\"platform\":"
	    "{\"os\":\"linux\",\"architecture\":\"amd64\"}}]}",
	    GP_OCI_MT_INDEX, GP_OCI_MT_MANIFEST, D1, GP_DOCKER_MT_MANIFEST, D2);
	CHECK_EQ(gp_oci_detect(buf, strlen(buf), NULL), GP_OCI_INDEX);
	CHECK_EQ(gp_oci_index_decode(buf, strlen(buf), &idx, err, sizeof(err)),
	    0);
	CHECK_EQ(idx.n, 2);
	CHECK_EQ(gp_oci_index_pick(&idx, "linux", "amd64", &d, err,
	             sizeof(err)),
	    0);
	CHECK_STR(d.digest, D2);
	CHECK_EQ(gp_oci_index_pick(&idx, "linux", "s390x", &d, err,
	             sizeof(err)),
	    GP_ENOENT);
	CHECK(strstr(err, "linux/arm64") != NULL);
	gp_oci_index_fini(&idx);
	/* Without mediaType: detected by shape. */
	snprintf(buf, sizeof(buf),
	    "{\"schemaVersion\":2,\"manifests\":[{"
	    "\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":10}]}",
	    GP_OCI_MT_MANIFEST, D1);
	CHECK_EQ(gp_oci_detect(buf, strlen(buf), NULL), GP_OCI_INDEX);
	CHECK_EQ(gp_oci_index_decode(buf, strlen(buf), &idx, err, sizeof(err)),
	    0);
	/* One image without a platform is taken. */
	CHECK_EQ(gp_oci_index_pick(&idx, "linux", "amd64", &d, err,
	             sizeof(err)),
	    0);
	gp_oci_index_fini(&idx);
	CHECK(gp_oci_index_decode("{\"schemaVersion\":2,\"manifests\":[]}", 33,
	          &idx, err, sizeof(err)) != 0);
	gp_oci_index_fini(&idx);
}

TEST(config)
{
	struct gp_oci_image_config c;
	const char *ok =
	    "{\"architecture\":\"amd64\",\"os\":\"linux\","
	    "\"config\":{\"Env\":[\"PATH=/bin\",\"A=b=c\"],\"Entrypoint\":"
	    "[\"/bin/sh\",\"-c\"],\"Cmd\":null,\"WorkingDir\":\"/work\","
	    "\"User\":\"1000:1000\"},\"rootfs\":{\"type\":\"layers\","
	    "\"diff_ids\":[\"" D1 "\"]}}";

	CHECK_EQ(gp_oci_config_decode(ok, strlen(ok), &c, err, sizeof(err)), 0);
	CHECK_STR(c.env[1], "A=b=c");
	CHECK(c.env[2] == NULL);
	CHECK_STR(c.entrypoint[0], "/bin/sh");
	CHECK(c.cmd == NULL);
	CHECK_STR(c.workdir, "/work");
	CHECK_STR(c.user, "1000:1000");
	CHECK_STR(c.arch, "amd64");
	CHECK_EQ(c.ndiff_ids, 1);
	gp_oci_config_fini(&c);
	CHECK(gp_oci_config_decode("{\"config\":{\"Env\":[\"=x\"]}}", 24, &c,
	          err, sizeof(err)) != 0);
	CHECK(gp_oci_config_decode("{\"config\":{\"WorkingDir\":\"rel\"}}", 30,
	          &c, err, sizeof(err)) != 0);
	CHECK(gp_oci_config_decode("{\"config\":{\"Cmd\":[1]}}", 22, &c, err,
	          sizeof(err)) != 0);
	CHECK(gp_oci_config_decode("{}", 2, &c, err, sizeof(err)) == 0);
	CHECK(c.env == NULL && c.cmd == NULL);
	gp_oci_config_fini(&c);
}

TEST(docker_save)
{
	struct gp_docker_save ds;
	const char *ok =
	    "[{\"Config\":\"abc.json\",\"RepoTags\":[\"busybox:"
	    "latest\"],\"Layers\":[\"l1/layer.tar\",\"./l2/layer.tar\"]}]";

	CHECK_EQ(gp_docker_save_decode(ok, strlen(ok), &ds, err, sizeof(err)),
	    0);
	CHECK_EQ(ds.n, 1);
	CHECK_STR(ds.images[0].layers[1], "l2/layer.tar");
	CHECK_STR(ds.images[0].tags[0], "busybox:latest");
	gp_docker_save_fini(&ds);
	ok = "[{\"Config\":\"../etc/passwd\",\"Layers\":[\"a\"]}]";
	CHECK(
	    gp_docker_save_decode(ok, strlen(ok), &ds, err, sizeof(err)) != 0);
	CHECK(strstr(err, "..") != NULL);
	ok = "[{\"Config\":\"c\",\"Layers\":[\"/abs/layer.tar\"]}]";
	CHECK(
	    gp_docker_save_decode(ok, strlen(ok), &ds, err, sizeof(err)) != 0);
	CHECK(strstr(err, "absolute") != NULL);
	ok = "[{\"Config\":\"c\",\"Layers\":[]}]";
	CHECK(
	    gp_docker_save_decode(ok, strlen(ok), &ds, err, sizeof(err)) != 0);
}

TEST(refs)
{
	struct gp_image_ref r;
	char name[300];

	CHECK_EQ(gp_image_ref_parse("busybox", &r, err, sizeof(err)), 0);
	CHECK_STR(r.registry, "registry-1.docker.io");
	CHECK_STR(r.repository, "library/busybox");
	CHECK_STR(r.tag, "");
	CHECK_EQ(gp_image_ref_parse("127.0.0.1:5000/test/busy-box:v1.2@" D1, &r,
	             err, sizeof(err)),
	    0);
	CHECK_STR(r.registry, "127.0.0.1:5000");
	CHECK_STR(r.repository, "test/busy-box");
	CHECK_STR(r.tag, "v1.2");
	CHECK_STR(r.digest, D1);
	CHECK_EQ(gp_image_ref_parse("localhost/a/b", &r, err, sizeof(err)), 0);
	CHECK_STR(r.registry, "localhost");
	CHECK_EQ(gp_image_ref_parse("lab/pytorch:2.1", &r, err, sizeof(err)),
	    0);
	CHECK_STR(r.repository, "lab/pytorch");
	CHECK(gp_image_ref_parse("Busybox", &r, err, sizeof(err)) != 0);
	CHECK(gp_image_ref_parse("a//b", &r, err, sizeof(err)) != 0);
	CHECK(gp_image_ref_parse("a:-x", &r, err, sizeof(err)) != 0);
	CHECK(gp_image_ref_parse("a@sha256:12", &r, err, sizeof(err)) != 0);
	CHECK(gp_image_ref_parse("", &r, err, sizeof(err)) != 0);
	CHECK(gp_image_ref_parse("host:99999/a", &r, err, sizeof(err)) != 0);
	CHECK_EQ(gp_image_name_normalize("busybox", name, sizeof(name), err,
	             sizeof(err)),
	    0);
	CHECK_STR(name, "busybox:latest");
	CHECK_EQ(gp_image_name_normalize("127.0.0.1:5000/t/b:1", name,
	             sizeof(name), err, sizeof(err)),
	    0);
	CHECK_STR(name, "127.0.0.1:5000/t/b:1");
	CHECK(gp_image_name_normalize("b@" D1, name, sizeof(name), err,
	          sizeof(err)) != 0);
}

TEST(challenge)
{
	struct gp_auth_challenge c;

	CHECK_EQ(gp_auth_challenge_parse(
	             "Bearer realm=\"https://auth.x/token"
	             "\",service=\"registry.x\",scope=\"repository:a/b:pull\"",
	             &c),
	    0);
	CHECK_EQ(c.scheme, GP_AUTH_BEARER);
	CHECK_STR(c.realm, "https://auth.x/token");
	CHECK_STR(c.service, "registry.x");
	CHECK_STR(c.scope, "repository:a/b:pull");
	CHECK_EQ(gp_auth_challenge_parse("Basic realm=\"Registry Realm\"", &c),
	    0);
	CHECK_EQ(c.scheme, GP_AUTH_BASIC);
	CHECK_STR(c.realm, "Registry Realm");
	/* Several challenges: Bearer wins; escapes; spaces; token values. */
	CHECK_EQ(
	    gp_auth_challenge_parse(
	        "Basic realm=\"r\", Bearer "
	        "realm = \"https://a/t\" , service=svc,error=\"insufficient_"
	        "scope\", scope=\"a\\\"b\"",
	        &c),
	    0);
	CHECK_EQ(c.scheme, GP_AUTH_BEARER);
	CHECK_STR(c.service, "svc");
	CHECK_STR(c.scope, "a\"b");
	CHECK_STR(c.error, "insufficient_scope");
	CHECK_EQ(gp_auth_challenge_parse("Negotiate abc==, Basic realm=x", &c),
	    0);
	CHECK_EQ(c.scheme, GP_AUTH_BASIC);
	CHECK(gp_auth_challenge_parse("Bearer service=x", &c) != 0);
	CHECK(gp_auth_challenge_parse("Bearer realm=\"unterminated", &c) != 0);
	CHECK(gp_auth_challenge_parse("Negotiate", &c) != 0);
	CHECK(gp_auth_challenge_parse("", &c) != 0);
	CHECK(gp_auth_challenge_parse("Bearer realm=x y", &c) != 0 ||
	    c.scheme == GP_AUTH_BEARER);
}

TEST(signatures)
{
	struct gp_sign_key k, k2, parsed;
	struct gp_trusted_key trusted[2];
	char *text = NULL, sig[GP_SIGN_SIG_TEXT], why[512];
	json_t *sigs;

	CHECK_EQ(gp_sign_key_generate("lab-a", &k, &text), 0);
	CHECK_EQ(gp_sign_key_parse(text, strlen(text), &parsed, err,
	             sizeof(err)),
	    0);
	CHECK_STR(parsed.public_text, k.public_text);
	CHECK_STR(parsed.name, "lab-a");
	CHECK(gp_sign_public_parse(k.public_text, parsed.pk));
	CHECK(!gp_sign_public_parse("ed25519:abc", parsed.pk));
	free(text);
	text = NULL;
	CHECK(
	    gp_sign_key_generate("bad name", &k2, &text) != 0 || text == NULL);
	free(text);
	text = NULL;
	CHECK_EQ(gp_sign_key_generate("lab-b", &k2, &text), 0);
	/* A key file whose public half is another key's. */
	{
		char bad[1024];
		const char *sec = strstr(text, "secret = ");
		snprintf(bad, sizeof(bad), "name = x\npublic = %s\n%s",
		    k.public_text, sec);
		CHECK(gp_sign_key_parse(bad, strlen(bad), &parsed, err,
		          sizeof(err)) != 0);
		CHECK(strstr(err, "does not belong") != NULL);
	}
	free(text);
	CHECK_EQ(gp_sign_digest(&k, D1, sig, sizeof(sig)), 0);
	CHECK_EQ(gp_sign_verify(k.public_text, D1, sig), 0);
	CHECK_EQ(gp_sign_verify(k.public_text, D2, sig), GP_EPERM);
	CHECK_EQ(gp_sign_verify(k2.public_text, D1, sig), GP_EPERM);
	CHECK_EQ(gp_sign_verify(k.public_text, D1, "garbage"), GP_EINVAL);
	/* The agent's decision. */
	gp_strlcpy(trusted[0].key, k.public_text, sizeof(trusted[0].key));
	gp_strlcpy(trusted[0].name, "lab-a", sizeof(trusted[0].name));
	sigs = json_array();
	CHECK_EQ(gp_sign_check(D1, sigs, trusted, 1, why, sizeof(why)),
	    GP_EPERM);
	CHECK(strncmp(why, "unsigned", 8) == 0);
	json_array_append_new(sigs,
	    json_pack("{s:s,s:s}", "key", k2.public_text, "signature", sig));
	CHECK_EQ(gp_sign_check(D1, sigs, trusted, 1, why, sizeof(why)),
	    GP_EPERM);
	CHECK(
	    strncmp(why, "not signed by a key this provider trusts", 40) == 0);
	json_array_append_new(sigs,
	    json_pack("{s:s,s:s}", "key", k.public_text, "signature", sig));
	CHECK_EQ(gp_sign_check(D2, sigs, trusted, 1, why, sizeof(why)),
	    GP_EPERM);
	CHECK(strncmp(why, "wrongly signed", 14) == 0);
	CHECK_EQ(gp_sign_check(D1, sigs, trusted, 1, why, sizeof(why)), 0);
	CHECK(strstr(why, "lab-a") != NULL);
	json_decref(sigs);
	gp_sign_key_wipe(&k);
	gp_sign_key_wipe(&k2);
}

/* ---- the owner's acceptance (coord/sched_accept.c) ---- */

TEST(acceptance)
{
	static const char *const k1[] = {"ed25519:k1"};
	static const char *const k12[] = {"ed25519:k2", "ed25519:k1"};
	static const char *const k3[] = {"ed25519:k3"};
	struct gp_sched_owner any = {GP_SCHED_IMAGES_ANY, 0, NULL, 0, 0, 0, 0};
	struct gp_sched_owner none = {GP_SCHED_IMAGES_NONE, 0, NULL, 0, 0,
	    0, 0};
	struct gp_sched_owner trusts1 = {GP_SCHED_IMAGES_SIGNED, 0, k1, 1, 0,
	    0, 0};
	struct gp_sched_owner picky = {GP_SCHED_IMAGES_SIGNED, 1, k12, 2, 0,
	    0, 0};
	struct gp_sched_owner inet = {GP_SCHED_IMAGES_ANY, 0, NULL, 0, 2, 0, 0};
	struct gp_sched_owner lan = {GP_SCHED_IMAGES_ANY, 0, NULL, 0, 3, 0, 0};
	struct gp_sched_owner offline = {GP_SCHED_IMAGES_ANY, 0, NULL, 0, 1,
	    0, 0};
	struct gp_sched_image plain = {0, NULL, 0, 0, 0, 0};
	struct gp_sched_image unsigned_img = {1, NULL, 0, 0, 0, 0};
	struct gp_sched_image by1 = {1, k1, 1, 0, 0, 0};
	struct gp_sched_image by3 = {1, k3, 1, 0, 0, 0};
	struct gp_sched_image by21 = {1, k12, 2, 0, 0, 0};
	struct gp_sched_image wants_none = {0, NULL, 0, 1, 0, 0};
	struct gp_sched_image wants_inet = {0, NULL, 0, 2, 0, 0};
	struct gp_sched_image wants_lan = {0, NULL, 0, 3, 0, 0};
	struct gp_sched_owner no_shells = {GP_SCHED_IMAGES_ANY, 0, NULL, 0, 0,
	    1, 0};
	struct gp_sched_image shell = {0, NULL, 0, 0, 1, 0};
	struct gp_sched_owner unlinked = {GP_SCHED_IMAGES_ANY, 0, NULL, 0, 2,
	    0, 1};
	struct gp_sched_image gang = {0, NULL, 0, 0, 0, 1};
	char why[160];

	CHECK(gp_sched_owner_accepts(&any, &plain));
	CHECK(gp_sched_owner_accepts(&any, &unsigned_img));
	CHECK(!gp_sched_why_refused(&none, &by1, why, sizeof(why)));
	CHECK_STR(why, "takes no images");
	CHECK(gp_sched_owner_accepts(&none, &plain));
	CHECK(!gp_sched_why_refused(&trusts1, &unsigned_img, why,
	    sizeof(why)));
	CHECK_STR(why, "takes only signed images, and this one is unsigned");
	CHECK(gp_sched_owner_accepts(&trusts1, &by1));
	CHECK(gp_sched_owner_accepts(&trusts1, &by21));
	CHECK(!gp_sched_why_refused(&trusts1, &by3, why, sizeof(why)));
	CHECK_STR(why, "trusts none of the 1 key that signed the image");
	CHECK(!gp_sched_why_refused(&picky, &plain, why, sizeof(why)));
	CHECK_STR(why, "takes only container images, no plain commands");
	CHECK(gp_sched_owner_accepts(&picky, &by1));
	/* Networks: a job may ask for less than the owner allows. */
	CHECK(gp_sched_owner_accepts(&inet, &wants_none));
	CHECK(gp_sched_owner_accepts(&inet, &wants_inet));
	CHECK(gp_sched_owner_accepts(&lan, &wants_lan));
	CHECK(gp_sched_owner_accepts(&offline, &wants_none));
	CHECK(gp_sched_owner_accepts(&offline, &plain));
	CHECK(gp_sched_owner_accepts(&any, &wants_lan)); /* not said */
	CHECK(!gp_sched_why_refused(&inet, &wants_lan, why, sizeof(why)));
	CHECK_STR(why, "lets jobs reach only network internet (the job asks "
	    "for lan)");
	/* Interactive jobs: an owner may refuse them, batch work aside. */
	CHECK(gp_sched_owner_accepts(&any, &shell));
	CHECK(gp_sched_owner_accepts(&no_shells, &plain));
	CHECK(!gp_sched_why_refused(&no_shells, &shell, why, sizeof(why)));
	CHECK_STR(why, "takes no interactive jobs (interactive = refuse)");
	CHECK(!gp_sched_why_refused(&offline, &wants_inet, why, sizeof(why)));
	CHECK_STR(why, "lets jobs reach only network none (the job asks "
	    "for internet)");
	/* Gangs of several nodes: only where the agent links their parts. */
	CHECK(gp_sched_owner_accepts(&any, &gang));
	CHECK(gp_sched_owner_accepts(&unlinked, &plain));
	CHECK(gp_sched_owner_accepts(&unlinked, &wants_inet));
	CHECK(!gp_sched_why_refused(&unlinked, &gang, why, sizeof(why)));
	CHECK_STR(why, "cannot link a gang's parts across nodes (its agent "
	    "is not root, or its network is none)");
}

/* ---- layers ---- */

struct ent {
	const char *path;
	unsigned type;    /* AE_IF* */
	const char *data; /* file content, or link target */
	int hardlink;
	unsigned mode;
};

/* A tar (gzip when gz) of the entries. OUT: *len; the caller frees. */
static void *
build_tar(const struct ent *ents, int n, int gz, size_t *len)
{
	size_t cap = 8 << 20, used = 0;
	char *buf = malloc(cap);
	struct archive *a = archive_write_new();
	struct archive_entry *e;
	int i;

	archive_write_set_format_pax_restricted(a);
	if (gz)
		archive_write_add_filter_gzip(a);
	else
		archive_write_add_filter_none(a);
	archive_write_open_memory(a, buf, cap, &used);
	for (i = 0; i < n; i++) {
		e = archive_entry_new();
		archive_entry_set_pathname(e, ents[i].path);
		archive_entry_set_mode(e,
		    ents[i].type |
		        (ents[i].mode
		                ? ents[i].mode
		                : (ents[i].type == AE_IFDIR ? 0755 : 0644)));
		if (ents[i].hardlink) {
			archive_entry_set_hardlink(e, ents[i].data);
			archive_entry_set_size(e, 0);
		} else if (ents[i].type == AE_IFLNK)
			archive_entry_set_symlink(e, ents[i].data);
		else if (ents[i].type == AE_IFREG && ents[i].data != NULL)
			archive_entry_set_size(e,
			    (la_int64_t)strlen(ents[i].data));
		if (ents[i].type == AE_IFCHR)
			archive_entry_set_rdev(e, makedev(1, 3));
		archive_write_header(a, e);
		if (ents[i].type == AE_IFREG && !ents[i].hardlink &&
		    ents[i].data != NULL)
			archive_write_data(a, ents[i].data,
			    strlen(ents[i].data));
		archive_entry_free(e);
	}
	archive_write_close(a);
	archive_write_free(a);
	*len = used;
	return buf;
}

static char tmpdir[256];

/* Unpacks ents into tmpdir/name; returns the result code. */
static int
unpack(const struct ent *ents, int n, const char *name,
    struct gp_layer_stats *st)
{
	char blob[512], dir[512];
	size_t len;
	void *tar = build_tar(ents, n, 1, &len);
	int rc;

	snprintf(blob, sizeof(blob), "%s/%s.tgz", tmpdir, name);
	snprintf(dir, sizeof(dir), "%s/%s", tmpdir, name);
	gp_write_file(blob, tar, len, 0600);
	rc = gp_layer_unpack(blob, dir, NULL, st, err, sizeof(err));
	/* The scan of the same bytes decides the same. */
	{
		struct gp_layer_stats s2;
		char e2[512];
		int rc2 =
		    gp_layer_scan_memory(tar, len, NULL, &s2, e2, sizeof(e2));
		if ((rc == 0) != (rc2 == 0) && rc != GP_EIO) {
			fprintf(stderr,
			    "scan and unpack disagree on %s: %d "
			    "(%s) vs %d (%s)\n",
			    name, rc, err, rc2, e2);
			rc = 99;
		}
	}
	free(tar);
	return rc;
}

static int
exists(const char *rel)
{
	char p[600];
	struct stat st;

	snprintf(p, sizeof(p), "%s/%s", tmpdir, rel);
	return lstat(p, &st) == 0;
}

TEST(layer_good)
{
	static const struct ent ents[] = {
	    {"./", AE_IFDIR, NULL, 0, 0},
	    {"./bin/", AE_IFDIR, NULL, 0, 0},
	    {"./bin/busybox", AE_IFREG, "#!fake busybox\n", 0, 04755},
	    {"./bin/sh", AE_IFLNK, "/bin/busybox", 0, 0},
	    {"./bin/ls", AE_IFLNK, "busybox", 0, 0},
	    {"bin/cat", AE_IFREG, "bin/busybox", 1, 0},
	    {"etc/deep/er/file", AE_IFREG, "x", 0, 0},
	    {"etc/.wh.gone", AE_IFREG, "", 0, 0},
	    {"opq/.wh..wh..opq", AE_IFREG, "", 0, 0},
	    {"usr/lib/rel", AE_IFLNK, "../../bin/busybox", 0, 0},
	    {"bin/busybox2", AE_IFREG, "second", 0, 0},
	    {"bin/busybox2", AE_IFREG, "replaced", 0, 0},
	};
	struct gp_layer_stats st;
	char path[600], *data = NULL;
	struct stat sbuf;
	size_t len;

	CHECK_EQ(unpack(ents, (int)GP_ARRAY_LEN(ents), "good", &st), 0);
	if (err[0])
		fprintf(stderr, "err: %s\n", err);
	CHECK(exists("good/bin/busybox"));
	snprintf(path, sizeof(path), "%s/good/bin/busybox", tmpdir);
	CHECK_EQ(stat(path, &sbuf), 0);
	CHECK((sbuf.st_mode & 06000) == 0); /* set-id dropped */
	CHECK((sbuf.st_mode & 0755) == 0755);
	snprintf(path, sizeof(path), "%s/good/bin/cat", tmpdir);
	CHECK_EQ(stat(path, &sbuf), 0);
	CHECK_EQ(sbuf.st_nlink, 2);
	snprintf(path, sizeof(path), "%s/good/etc/gone", tmpdir);
	if (getuid() == 0) {
		CHECK_EQ(lstat(path, &sbuf), 0);
		CHECK(S_ISCHR(sbuf.st_mode) && sbuf.st_rdev == makedev(0, 0));
		CHECK_EQ(st.whiteouts, 1);
		snprintf(path, sizeof(path), "%s/good/opq", tmpdir);
		CHECK(getxattr(path, "trusted.overlay.opaque", data, 0) == 1);
	}
	CHECK_EQ(st.opaques, 1);
	snprintf(path, sizeof(path), "%s/good/bin/busybox2", tmpdir);
	CHECK_EQ(gp_read_file(path, 100, &data, &len), 0);
	CHECK_STR(data, "replaced");
	free(data);
	CHECK(exists("good/usr/lib/rel"));
}

/* Each bad archive is refused, names the check, and leaves nothing. */
static void
expect_refused(const struct ent *ents, int n, const char *name,
    const char *needle)
{
	struct gp_layer_stats st;
	int rc = unpack(ents, n, name, &st);
	char rel[300];

	if (rc == 0 || (needle != NULL && strstr(err, needle) == NULL)) {
		fprintf(stderr, "%s: rc %d, error '%s' (wanted '%s')\n", name,
		    rc, err, needle);
		CHECK(0);
	}
	snprintf(rel, sizeof(rel), "%s", name);
	CHECK(!exists(rel));
}

TEST(layer_bad)
{
	static const struct ent dotdot[] = {
	    {"a/../../etc/passwd", AE_IFREG, "x", 0, 0}};
	static const struct ent absolute[] = {
	    {"/etc/passwd", AE_IFREG, "x", 0, 0}};
	static const struct ent dev[] = {{"dev/null", AE_IFCHR, NULL, 0, 0}};
	static const struct ent fifo[] = {{"p", AE_IFIFO, NULL, 0, 0}};
	static const struct ent escape_link[] = {
	    {"a/b", AE_IFLNK, "../../../etc", 0, 0}};
	static const struct ent through_link[] = {{"lnk", AE_IFLNK, "/", 0, 0},
	    {"lnk/etc/passwd", AE_IFREG, "owned", 0, 0}};
	static const struct ent through_rel[] = {{"d", AE_IFDIR, NULL, 0, 0},
	    {"d/up", AE_IFLNK, "..", 0, 0}, {"d/up/x", AE_IFREG, "x", 0, 0}};
	static const struct ent hard_out[] = {
	    {"h", AE_IFREG, "../../etc/passwd", 1, 0}};
	static const struct ent hard_abs[] = {
	    {"h", AE_IFREG, "/etc/passwd", 1, 0}};
	static const struct ent hard_missing[] = {
	    {"h", AE_IFREG, "etc/passwd", 1, 0}};
	static const struct ent hard_via_link[] = {{"l", AE_IFLNK, "/etc", 0,
	                                               0},
	    {"h", AE_IFREG, "l/passwd", 1, 0}};
	static const struct ent aufs[] = {
	    {".wh..wh.plnk/x", AE_IFREG, "", 0, 0}};

	expect_refused(dotdot, 1, "dotdot", "..");
	expect_refused(absolute, 1, "absolute", "absolute");
	expect_refused(dev, 1, "dev", "device");
	expect_refused(fifo, 1, "fifo", "fifo");
	expect_refused(escape_link, 1, "escape_link", "escapes");
	expect_refused(through_link, 2, "through_link", "symbolic link");
	expect_refused(through_rel, 3, "through_rel", "symbolic link");
	expect_refused(hard_out, 1, "hard_out", "escapes");
	expect_refused(hard_abs, 1, "hard_abs", "escapes");
	expect_refused(hard_missing, 1, "hard_missing", "no file");
	expect_refused(hard_via_link, 2, "hard_via_link", NULL);
	expect_refused(aufs, 1, "aufs", "aufs");
}

TEST(layer_bomb)
{
	struct gp_layer_limits lim;
	struct gp_layer_stats st;
	struct ent e = {"zeros", AE_IFREG, NULL, 0, 0};
	char *zeros = calloc(1, (4 << 20) + 1);
	void *tar;
	size_t len;
	char blob[512], dir[512];

	memset(zeros, 'z', 4 << 20);
	e.data = zeros;
	tar = build_tar(&e, 1, 1, &len);
	CHECK(len < 64 * 1024);
	gp_layer_limits_default(&lim);
	lim.ratio_floor = 1 << 20;
	lim.max_ratio = 10;
	CHECK_EQ(gp_layer_scan_memory(tar, len, &lim, &st, err, sizeof(err)),
	    GP_ETOOBIG);
	CHECK(strstr(err, "bomb") != NULL);
	gp_layer_limits_default(&lim);
	lim.max_bytes = 1 << 20;
	snprintf(blob, sizeof(blob), "%s/bomb.tgz", tmpdir);
	snprintf(dir, sizeof(dir), "%s/bomb", tmpdir);
	gp_write_file(blob, tar, len, 0600);
	CHECK_EQ(gp_layer_unpack(blob, dir, &lim, &st, err, sizeof(err)),
	    GP_ETOOBIG);
	CHECK(!exists("bomb"));
	gp_layer_limits_default(&lim);
	lim.max_entries = 0;
	CHECK_EQ(gp_layer_scan_memory(tar, len, &lim, &st, err, sizeof(err)),
	    GP_ETOOBIG);
	free(tar);
	free(zeros);
	/* Not an archive at all. */
	CHECK_EQ(gp_layer_scan_memory("hello", 5, NULL, &st, err, sizeof(err)),
	    GP_EINVAL);
}

int
main(void)
{
	snprintf(tmpdir, sizeof(tmpdir), "/var/tmp/gp-test-oci.XXXXXX");
	if (mkdtemp(tmpdir) == NULL)
		return 1;
	RUN(digest);
	RUN(manifest);
	RUN(index_pick);
	RUN(config);
	RUN(docker_save);
	RUN(refs);
	RUN(challenge);
	RUN(signatures);
	RUN(acceptance);
	RUN(layer_good);
	RUN(layer_bad);
	RUN(layer_bomb);
	gp_remove_tree(tmpdir);
	return unit_report();
}
