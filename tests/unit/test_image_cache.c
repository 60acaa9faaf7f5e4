/*
 * test_image_cache.c: the agent's image cache (agent/image.c) against a
 * fake coordinator (libmicrohttpd on 127.0.0.1) that serves a job's image
 * metadata and blobs, and can lie. Checks: the container image it fills
 * in; a second prepare transfers nothing; a layer in use is never evicted
 * and the least recently used goes first once released; the owner's
 * trust (any, none, signed: unsigned, untrusted, forged, good); tampered
 * layers and manifests, lying sizes, unsafe layers and other platforms
 * refused with nothing left in the cache; two jobs wanting the same
 * layers at once fetch each layer once.
 */
#include <sys/stat.h>

#include <archive.h>
#include <archive_entry.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/image.h"
#include "agent/policy.h"
#include "gp.h"
#include "http_client.h"
#include "oci.h"
#include "sign.h"
#include "unit.h"
#include "util.h"

/* ---- the fake coordinator ---- */

#define BLOBS_MAX 64

static struct {
	char digest[GP_OCI_DIGEST_SIZE];
	char *data;
	size_t len;
	int tamper; /* serve one byte flipped */
	int requests;
} blobs[BLOBS_MAX];
static int nblobs;
static pthread_mutex_t srv_lock = PTHREAD_MUTEX_INITIALIZER;
static char image_digest[GP_OCI_DIGEST_SIZE];
static json_t *signatures; /* what .../image answers */
static int served_bytes;

static const char *
add_blob(const char *data, size_t len)
{
	pthread_mutex_lock(&srv_lock);
	blobs[nblobs].data = malloc(len);
	memcpy(blobs[nblobs].data, data, len);
	blobs[nblobs].len = len;
	gp_oci_digest_of(data, len, blobs[nblobs].digest);
	pthread_mutex_unlock(&srv_lock);
	return blobs[nblobs++].digest;
}

static int
find_blob(const char *digest)
{
	int i;

	for (i = 0; i < nblobs; i++)
		if (strcmp(blobs[i].digest, digest) == 0)
			return i;
	return -1;
}

static enum MHD_Result
serve(void *cls, struct MHD_Connection *conn, const char *url,
    const char *method, const char *version, const char *upload_data,
    size_t *upload_data_size, void **con_cls)
{
	struct MHD_Response *resp;
	enum MHD_Result rc;
	char *body;
	size_t len;
	int i, status = 200;

	(void)cls;
	(void)method;
	(void)version;
	(void)upload_data;
	(void)upload_data_size;
	(void)con_cls;
	pthread_mutex_lock(&srv_lock);
	if (strcmp(url, "/v1/agent/jobs/1/1/image") == 0) {
		json_t *o = json_pack("{s:s,s:O}", "digest", image_digest,
		    "signatures", signatures);
		body = json_dumps(o, JSON_COMPACT);
		len = strlen(body);
		json_decref(o);
	} else if (strncmp(url, "/v1/agent/jobs/1/1/image/blobs/", 31) == 0 &&
	    (i = find_blob(url + 31)) >= 0) {
		blobs[i].requests++;
		len = blobs[i].len;
		body = malloc(len);
		memcpy(body, blobs[i].data, len);
		if (blobs[i].tamper)
			body[len / 2] ^= 0x5a;
		served_bytes += (int)len;
	} else {
		body = strdup("{\"error\":\"no such blob\"}");
		len = strlen(body);
		status = 404;
	}
	pthread_mutex_unlock(&srv_lock);
	resp =
	    MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
	rc = MHD_queue_response(conn, (unsigned)status, resp);
	MHD_destroy_response(resp);
	return rc;
}

/* ---- images ---- */

/* A tar+gzip layer: marker file NAME with content, size random bytes. */
static const char *
make_layer(const char *name, size_t size, const char *evil)
{
	size_t cap = size + (1 << 20), used = 0;
	char *buf = malloc(cap), *content = malloc(size + 1);
	struct archive *a = archive_write_new();
	struct archive_entry *e;
	const char *d;
	size_t i;

	for (i = 0; i < size; i++)
		content[i] = (char)(rand() & 0xff);
	archive_write_set_format_pax_restricted(a);
	archive_write_add_filter_gzip(a);
	archive_write_open_memory(a, buf, cap, &used);
	e = archive_entry_new();
	archive_entry_set_pathname(e, evil != NULL ? evil : name);
	archive_entry_set_mode(e, AE_IFREG | 0644);
	archive_entry_set_size(e, (la_int64_t)size);
	archive_write_header(a, e);
	archive_write_data(a, content, size);
	archive_entry_free(e);
	archive_write_close(a);
	archive_write_free(a);
	d = add_blob(buf, used);
	free(buf);
	free(content);
	return d;
}

/* An image of the layers; returns its manifest digest. */
static const char *
make_image(const char *const *layers, int n, const char *arch, int64_t size_lie)
{
	json_t *cfg, *man, *ls = json_array();
	char *text, cdigest[GP_OCI_DIGEST_SIZE];
	const char *d;
	int i;

	cfg =
	    json_pack("{s:s,s:s,s:{s:[s],s:[s],s:[s],s:s,s:s}}", "architecture",
	        arch, "os", "linux", "config", "Env", "PATH=/bin", "Entrypoint",
	        "/bin/sh", "Cmd", "-c", "WorkingDir", "/w", "User", "1000");
	text = json_dumps(cfg, JSON_COMPACT);
	gp_strlcpy(cdigest, add_blob(text, strlen(text)), sizeof(cdigest));
	for (i = 0; i < n; i++) {
		int b = find_blob(layers[i]);
		json_array_append_new(ls,
		    json_pack("{s:s,s:s,s:I}", "mediaType", GP_OCI_MT_LAYER_GZ,
		        "digest", layers[i], "size",
		        (json_int_t)blobs[b].len + (i == 0 ? size_lie : 0)));
	}
	man = json_pack("{s:i,s:s,s:{s:s,s:s,s:I},s:o}", "schemaVersion", 2,
	    "mediaType", GP_OCI_MT_MANIFEST, "config", "mediaType",
	    GP_OCI_MT_CONFIG, "digest", cdigest, "size",
	    (json_int_t)strlen(text), "layers", ls);
	free(text);
	text = json_dumps(man, JSON_COMPACT);
	d = add_blob(text, strlen(text));
	free(text);
	json_decref(cfg);
	json_decref(man);
	return d;
}

/* ---- the tests ---- */

static char url[64], dir[256];
static struct gp_image_cache *cache;
static const struct gp_image_trust trust_any = {GP_IMAGES_ANY, NULL, 0};

static int
prepare(const char *digest, const struct gp_image_trust *t,
    struct gp_container_image **img, struct gp_image_hold **hold,
    struct gp_image_prepared *st, char *why)
{
	struct gp_image_source src = {url, "gpt_test", NULL, 1, 1};

	pthread_mutex_lock(&srv_lock);
	gp_strlcpy(image_digest, digest, sizeof(image_digest));
	pthread_mutex_unlock(&srv_lock);
	return gp_image_prepare(cache, &src, digest, t, img, hold, st, why,
	    600);
}

static int
layer_cached(const char *digest)
{
	char p[600];
	struct stat st;

	snprintf(p, sizeof(p), "%s/layers/%s", dir, digest + 7);
	return stat(p, &st) == 0;
}

static int
tmp_empty(void)
{
	char p[600];
	int n = 0;

	snprintf(p, sizeof(p), "find %s/tmp -mindepth 1 | grep -q .", dir);
	n = system(p);
	return n != 0;
}

static const char *A1, *A2, *B1, *IMG_A, *IMG_B;

TEST(fills_the_image)
{
	struct gp_container_image *img;
	struct gp_image_hold *hold;
	struct gp_image_prepared st;
	char why[600], p[700];
	struct stat sbuf;

	CHECK_EQ(prepare(IMG_A, &trust_any, &img, &hold, &st, why), 0);
	if (img == NULL) {
		fprintf(stderr, "why: %s\n", why);
		return;
	}
	CHECK_EQ(st.layers, 2);
	CHECK_EQ(st.fetched, 2);
	CHECK_EQ(st.cached, 0);
	CHECK_STR(img->digest, IMG_A);
	CHECK(img->layers[0] != NULL && img->layers[1] != NULL &&
	    img->layers[2] == NULL);
	snprintf(p, sizeof(p), "%s/a1", img->layers[0]);
	CHECK_EQ(stat(p, &sbuf), 0);
	snprintf(p, sizeof(p), "%s/a2", img->layers[1]);
	CHECK_EQ(stat(p, &sbuf), 0);
	CHECK_STR(img->env[0], "PATH=/bin");
	CHECK_STR(img->entrypoint[0], "/bin/sh");
	CHECK_STR(img->cmd[0], "-c");
	CHECK_STR(img->workdir, "/w");
	CHECK_STR(img->user, "1000");
	gp_container_image_free(img);
	gp_image_release(cache, hold);
	/* Again: nothing transferred. */
	served_bytes = 0;
	CHECK_EQ(prepare(IMG_A, &trust_any, &img, &hold, &st, why), 0);
	CHECK_EQ(st.cached, 2);
	CHECK_EQ(st.fetched, 0);
	CHECK_EQ(st.fetched_bytes, 0);
	CHECK_EQ(served_bytes, 0);
	CHECK_EQ(blobs[find_blob(A1)].requests, 1);
	gp_container_image_free(img);
	gp_image_release(cache, hold);
}

TEST(in_use_is_never_evicted)
{
	struct gp_container_image *img_a, *img_b;
	struct gp_image_hold *hold_a, *hold_b;
	struct gp_image_prepared st;
	struct gp_image_cache_stats cs;
	char why[600];

	/* The cap holds two of the three 100 KB layers. */
	CHECK_EQ(prepare(IMG_A, &trust_any, &img_a, &hold_a, &st, why), 0);
	CHECK_EQ(prepare(IMG_B, &trust_any, &img_b, &hold_b, &st, why), 0);
	/* Over the cap, but A is in use: nothing evicted. */
	CHECK(layer_cached(A1) && layer_cached(A2) && layer_cached(B1));
	gp_image_cache_stats(cache, &cs);
	CHECK(cs.bytes > cs.max_bytes);
	CHECK_EQ(cs.in_use, 3);
	/* Released: the least recently used unused layer goes. */
	gp_image_release(cache, hold_a);
	gp_container_image_free(img_a);
	CHECK(layer_cached(B1));
	CHECK(!layer_cached(A1) || !layer_cached(A2));
	gp_image_cache_stats(cache, &cs);
	CHECK(cs.bytes <= cs.max_bytes);
	CHECK(cs.evictions >= 1);
	gp_image_release(cache, hold_b);
	gp_container_image_free(img_b);
}

TEST(trust)
{
	struct gp_sign_key k1, k2;
	struct gp_trusted_key keys[1];
	struct gp_image_trust t = {GP_IMAGES_SIGNED, keys, 1};
	struct gp_image_trust none = {GP_IMAGES_NONE, NULL, 0};
	struct gp_container_image *img;
	struct gp_image_hold *hold;
	struct gp_image_prepared st;
	char why[600], sig[GP_SIGN_SIG_TEXT], other[GP_SIGN_SIG_TEXT], *text;

	gp_sign_key_generate("k1", &k1, &text);
	free(text);
	gp_sign_key_generate("k2", &k2, &text);
	free(text);
	gp_strlcpy(keys[0].key, k1.public_text, sizeof(keys[0].key));
	gp_strlcpy(keys[0].name, "k1", sizeof(keys[0].name));
	CHECK_EQ(prepare(IMG_B, &none, &img, &hold, &st, why), GP_EPERM);
	CHECK(strstr(why, "images = none") != NULL);
	CHECK_EQ(prepare(IMG_B, &t, &img, &hold, &st, why), GP_EPERM);
	CHECK(strncmp(why, "unsigned", 8) == 0);
	gp_sign_digest(&k2, IMG_B, sig, sizeof(sig));
	json_array_append_new(signatures,
	    json_pack("{s:s,s:s}", "key", k2.public_text, "signature", sig));
	CHECK_EQ(prepare(IMG_B, &t, &img, &hold, &st, why), GP_EPERM);
	CHECK(strstr(why, "not signed by a key this provider trusts") != NULL);
	gp_sign_digest(&k1, IMG_A, other, sizeof(other));
	json_array_append_new(signatures,
	    json_pack("{s:s,s:s}", "key", k1.public_text, "signature", other));
	CHECK_EQ(prepare(IMG_B, &t, &img, &hold, &st, why), GP_EPERM);
	CHECK(strstr(why, "wrongly signed") != NULL);
	json_array_clear(signatures);
	gp_sign_digest(&k1, IMG_B, sig, sizeof(sig));
	json_array_append_new(signatures,
	    json_pack("{s:s,s:s}", "key", k1.public_text, "signature", sig));
	CHECK_EQ(prepare(IMG_B, &t, &img, &hold, &st, why), 0);
	CHECK(strstr(st.trusted_by, "signed by trusted key k1") != NULL);
	gp_container_image_free(img);
	gp_image_release(cache, hold);
	json_array_clear(signatures);
	gp_sign_key_wipe(&k1);
	gp_sign_key_wipe(&k2);
}

TEST(refusals_leave_nothing)
{
	struct gp_container_image *img;
	struct gp_image_hold *hold;
	struct gp_image_prepared st;
	const char *t1, *img_t, *img_lie, *img_tm, *bad, *img_bad, *img_arm;
	const char *layers[1];
	char why[600];
	int m;

	t1 = make_layer("t1", 1000, NULL);
	layers[0] = t1;
	img_t = make_image(layers, 1, "amd64", 0);
	blobs[find_blob(t1)].tamper = 1;
	CHECK_EQ(prepare(img_t, &trust_any, &img, &hold, &st, why), GP_EINVAL);
	CHECK(strstr(why, "failed its digest check") != NULL);
	CHECK(!layer_cached(t1));
	CHECK(tmp_empty());
	blobs[find_blob(t1)].tamper = 0;
	CHECK_EQ(prepare(img_t, &trust_any, &img, &hold, &st, why), 0);
	gp_container_image_free(img);
	gp_image_release(cache, hold);
	/* A manifest that says its layer is bigger than it is. */
	layers[0] = make_layer("t2", 1000, NULL);
	img_lie = make_image(layers, 1, "amd64", 7);
	CHECK_EQ(prepare(img_lie, &trust_any, &img, &hold, &st, why),
	    GP_EINVAL);
	CHECK(strstr(why, "the manifest says") != NULL);
	CHECK(!layer_cached(layers[0]));
	/* A tampered manifest (one the agent has not cached). */
	layers[0] = make_layer("t3", 1000, NULL);
	img_tm = make_image(layers, 1, "amd64", 0);
	m = find_blob(img_tm);
	blobs[m].tamper = 1;
	CHECK_EQ(prepare(img_tm, &trust_any, &img, &hold, &st, why), GP_EINVAL);
	CHECK(strstr(why, "the manifest failed its digest check") != NULL);
	/* An unsafe layer. */
	bad = make_layer("x", 10, "../../escape");
	layers[0] = bad;
	img_bad = make_image(layers, 1, "amd64", 0);
	CHECK_EQ(prepare(img_bad, &trust_any, &img, &hold, &st, why),
	    GP_EINVAL);
	CHECK(strstr(why, "refused: entry '../../escape'") != NULL);
	CHECK(!layer_cached(bad));
	CHECK(tmp_empty());
	/* Another platform. */
	layers[0] = t1;
	img_arm = make_image(layers, 1, "arm64", 0);
	CHECK_EQ(prepare(img_arm, &trust_any, &img, &hold, &st, why),
	    GP_EINVAL);
	CHECK(strstr(why, "linux/arm64") != NULL);
	/* Unknown to the coordinator. */
	CHECK_EQ(prepare("sha256:0000000000000000000000000000000000000000000000"
	                 "000000000000000000",
	             &trust_any, &img, &hold, &st, why) != 0,
	    1);
}

struct racer {
	const char *digest;
	int ret;
	struct gp_container_image *img;
	struct gp_image_hold *hold;
};

static void *
race(void *arg)
{
	struct racer *r = arg;
	struct gp_image_source src = {url, "gpt_test", NULL, 1, 1};
	struct gp_image_prepared st;
	char why[600];

	r->ret = gp_image_prepare(cache, &src, r->digest, &trust_any, &r->img,
	    &r->hold, &st, why, sizeof(why));
	return NULL;
}

TEST(one_fetch_for_two_jobs)
{
	const char *layers[2], *digest;
	struct racer r[2];
	pthread_t t[2];
	int i;

	layers[0] = make_layer("c1", 50000, NULL);
	layers[1] = make_layer("c2", 50000, NULL);
	digest = make_image(layers, 2, "amd64", 0);
	pthread_mutex_lock(&srv_lock);
	gp_strlcpy(image_digest, digest, sizeof(image_digest));
	pthread_mutex_unlock(&srv_lock);
	for (i = 0; i < 2; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		r[i].digest = image_digest;
		pthread_create(&t[i], NULL, race, &r[i]);
	}
	for (i = 0; i < 2; i++) {
		pthread_join(t[i], NULL);
		CHECK_EQ(r[i].ret, 0);
	}
	CHECK_EQ(blobs[find_blob(layers[0])].requests, 1);
	CHECK_EQ(blobs[find_blob(layers[1])].requests, 1);
	for (i = 0; i < 2; i++) {
		gp_container_image_free(r[i].img);
		gp_image_release(cache, r[i].hold);
	}
}

TEST(reopen_keeps_the_cache)
{
	struct gp_image_cache_stats cs;
	char err[300];

	gp_image_cache_free(cache);
	cache = gp_image_cache_new(dir, 1 << 30, NULL, err, sizeof(err));
	CHECK(cache != NULL);
	gp_image_cache_stats(cache, &cs);
	CHECK(cs.layers > 0 && cs.bytes > 0);
}

int
main(void)
{
	struct MHD_Daemon *d;
	const union MHD_DaemonInfo *info;
	const char *layers[2];
	char err[300];

	srand(42);
	gp_http_global_init();
	snprintf(dir, sizeof(dir), "/var/tmp/gp-test-cache.XXXXXX");
	if (mkdtemp(dir) == NULL)
		return 1;
	signatures = json_array();
	d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD |
	        MHD_USE_THREAD_PER_CONNECTION,
	    0, NULL, NULL, serve, NULL, MHD_OPTION_END);
	if (d == NULL)
		return 1;
	info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	snprintf(url, sizeof(url), "http://127.0.0.1:%u", (unsigned)info->port);
	A1 = make_layer("a1", 100000, NULL);
	A2 = make_layer("a2", 100000, NULL);
	B1 = make_layer("b1", 100000, NULL);
	layers[0] = A1;
	layers[1] = A2;
	IMG_A = make_image(layers, 2, "amd64", 0);
	layers[0] = B1;
	IMG_B = make_image(layers, 1, "amd64", 0);
	/* Room for two of the 100 KB layers, not three. */
	cache = gp_image_cache_new(dir, 250000, NULL, err, sizeof(err));
	if (cache == NULL) {
		fprintf(stderr, "cache: %s\n", err);
		return 1;
	}
	RUN(fills_the_image);
	RUN(in_use_is_never_evicted);
	RUN(trust);
	RUN(refusals_leave_nothing);
	RUN(one_fetch_for_two_jobs);
	RUN(reopen_keeps_the_cache);
	gp_image_cache_free(cache);
	MHD_stop_daemon(d);
	json_decref(signatures);
	for (int i = 0; i < nblobs; i++)
		free(blobs[i].data);
	gp_remove_tree(dir);
	return unit_report();
}
