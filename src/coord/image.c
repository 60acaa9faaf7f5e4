/*
 * image.c: the coordinator's image store (docs/images.md, docs/api.md
 * "Images").
 *
 * Layout under DATA:
 *   (the store)                manifests, names, signatures: behind the
 *                              storage interface (store_meta.h), a
 *                              connection of its own, guarded by image_lock
 *   images/blobs/ab/<hex>      blobs (manifests, configs, layers): the blob
 *                              store's image store (blob.h, blob_images),
 *                              named by the hex of their sha256 digest
 *
 * Who may do what (a pool-wide registry, as in a cluster): every
 * authenticated caller may list images and any user may run any image;
 * users and admins upload blobs and name images; a name belongs to the
 * user who first imported it: only they (or an admin) may point it at
 * another image or remove it; only admins attach signatures (a provider
 * trusts keys, never the coordinator: the agent verifies each signature
 * itself). Agents read the manifest, config and layers of the image of a
 * job they run, and nothing else.
 *
 * Durability: the image store flushes, renames and syncs a blob's
 * directory before its PUT is answered (blob.c), so a blob that exists is
 * whole and verified; a commit checks that every blob the manifest lists
 * exists with the size the manifest gives.
 *
 * Garbage: the image store's GC (a pass every minute and after each
 * removal) asks this file (a blob_user): first a manifest with no name
 * and no unfinished job pinned to it is dropped (gc_expire); then every
 * blob no kept manifest lists is garbage (gc_collect), removed unless it
 * was written or asked about in the last hour (an import in progress). A
 * commit checks and records under blob_lock, which the GC holds from
 * collecting to removing, so no blob goes between the two.
 *
 * Locking: blob_lock (blob_images), then image_lock, then state.lock for
 * reading (briefly); never the other way round.
 */
#include <sys/stat.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api_int.h"
#include "blob.h"
#include "datasets.h"
#include "gp.h"
#include "image_store.h"
#include "joblog.h"
#include "log.h"
#include "oci.h"
#include "route.h"
#include "sign.h"
#include "state.h"
#include "store_meta.h"

#define IMAGE_JSON_BODY_MAX (1u << 20)
#define MISSING_MAX         1000
#define AGENT_PREFIX        "/v1/agent/jobs/"

static struct gp_meta *db; /* guarded by its lock */
static pthread_mutex_t image_lock = PTHREAD_MUTEX_INITIALIZER;
static int64_t blob_max = 64LL << 30;

/* ---- paths ---- */

/* The store's name of a blob: the hex of "sha256:<hex>". */
#define HEX(digest) ((digest) + 7)

/* The size of a stored blob, or -1. */
static int64_t
blob_size(const char *digest)
{
	char path[1400];
	struct stat st;

	blob_path(blob_images, NULL, HEX(digest), path, sizeof(path));
	if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
		return -1;
	return (int64_t)st.st_size;
}

/* ---- database ---- */

/*
 * gp_image_manifests, gp_image_manifest_blobs (every blob a manifest
 * needs, the manifest itself included), gp_image_names and
 * gp_image_signatures, behind the storage interface (store_meta.h):
 * DATA/images.db, or the pool's PostgreSQL database.
 */

/* ---- garbage collection ---- */

/* The digests unfinished jobs are pinned to: {digest: true}. */
static json_t *
pinned_digests(void)
{
	json_t *set = json_object();
	const char *d;
	const struct job *j;
	int64_t c = 0;

	pthread_rwlock_rdlock(&state.lock);
	while (set != NULL && (j = state_job_next(&c)) != NULL) {
		if (!job_finished(j) &&
		    (d = gp_jobspec_image_digest(&j->spec)) != NULL)
			json_object_set_new(set, d, json_true());
	}
	pthread_rwlock_unlock(&state.lock);
	return set;
}

/* Drops manifests nothing names or pins. image_lock held. */
/* Deletes the manifests in arg (a JSON array of digests): one transaction. */
static int
drop_manifests(struct gp_meta *m, void *arg)
{
	static const char *const sql[] = {
	    "DELETE FROM gp_image_manifests WHERE digest = ?",
	    "DELETE FROM gp_image_manifest_blobs WHERE manifest = ?",
	    "DELETE FROM gp_image_signatures WHERE digest = ?"};
	json_t *v;
	size_t i, k;

	json_array_foreach((json_t *)arg, i, v)
	{
		for (k = 0; k < GP_ARRAY_LEN(sql); k++)
			if (gp_meta_run(m, sql[k], "s",
			    json_string_value(v)) != 0)
				return GP_EIO;
	}
	return 0;
}

static void
gc_manifests(json_t *pinned)
{
	struct gp_meta_rows *st;
	json_t *drop = json_array(), *v;
	size_t i;

	if (gp_meta_query(db, &st, "SELECT digest FROM gp_image_manifests "
	    "WHERE digest NOT IN (SELECT digest FROM gp_image_names)",
	    "") == 0) {
		while (gp_meta_next(st) == 1)
			if (json_object_get(pinned, gp_meta_text(st, 0)) ==
			    NULL)
				json_array_append_new(drop,
				    json_string(gp_meta_text(st, 0)));
		gp_meta_done(st);
	}
	if (json_array_size(drop) > 0 &&
	    gp_meta_transact(db, drop_manifests, drop) == 0) {
		json_array_foreach(drop, i, v)
			gp_info("image dropped digest=%s",
			    json_string_value(v));
	}
	json_decref(drop);
}

/*
 * The image store's GC, before each pass (a blob_user's expire): drops
 * the manifests nothing names or pins, and has the store looked at.
 */
static void
gc_expire(void)
{
	json_t *pinned = pinned_digests();

	pthread_mutex_lock(&image_lock);
	if (db != NULL && pinned != NULL)
		gc_manifests(pinned);
	pthread_mutex_unlock(&image_lock);
	json_decref(pinned);
	blob_gc_mark(blob_images, "");
}

/* The blobs kept manifests list (a blob_user's collect; blob_lock held). */
static int
gc_collect(const char *owner, json_t *refs)
{
	struct gp_meta_rows *st;
	const char *d;
	int rc = GP_EIO;

	(void)owner;
	gp_meta_scan_begin(&image_lock, &db);
	if (db != NULL && gp_meta_query(db, &st, "SELECT DISTINCT blob FROM "
	    "gp_image_manifest_blobs", "") == 0) {
		while ((rc = gp_meta_next(st)) == 1) {
			d = gp_meta_text(st, 0);
			if (gp_oci_digest_valid(d))
				json_object_set_new(refs, HEX(d), json_true());
		}
		gp_meta_done(st);
	}
	gp_meta_scan_end(&image_lock, &db);
	return rc == 0 ? 0 : GP_EIO;
}

/*
 * A GC pass removes nothing unless this coordinator still leads
 * (store_meta.h, gp_meta_scan_fence).
 */
static int
gc_fence(void)
{
	return gp_meta_scan_fence(&image_lock, &db);
}

static const struct blob_user image_blob_user = {"images", gc_expire,
    gc_collect, gc_fence};

int
image_init(const struct coord_config *cfg)
{
	blob_max = cfg->image_blob_max > 0 ? cfg->image_blob_max : 64LL << 30;
	if (gp_meta_open(GP_META_IMAGES, cfg->data_dir, &db) != 0)
		return GP_EIO;
	if (blob_add_user(blob_images, &image_blob_user) != 0)
		return GP_EINVAL;
	gp_info("image store blob_max=%lld", (long long)blob_max);
	return 0;
}

/* After blob_stop: the GC no longer asks. */
void
image_stop(void)
{
	pthread_mutex_lock(&image_lock);
	gp_meta_close(db);
	db = NULL;
	pthread_mutex_unlock(&image_lock);
}

/* Sends a stored blob's bytes. */
static enum MHD_Result
reply_blob(struct MHD_Connection *conn, const char *digest)
{
	return blob_reply(conn, blob_images, NULL, HEX(digest));
}

/* ---- lookups (image_lock held) ---- */

/*
 * Finds the image a reference names: "sha256:...", "NAME@sha256:..." (by
 * digest; the name is informational) or a name. OUT: digest, name (the
 * stored name, "" when looked up by digest). Returns 0, GP_EINVAL (not a
 * reference) or GP_ENOENT, with err.
 */
static int
lookup(const char *ref, char *digest, char *name, size_t namelen, char *err,
    size_t errlen)
{
	char norm[GP_IMAGE_NAME_MAX + 1];
	const char *at;
	int64_t one = 0;
	int found = 0, rc;

	name[0] = '\0';
	at = strrchr(ref, '@');
	if (gp_oci_digest_valid(ref) ||
	    (at != NULL && gp_oci_digest_valid(at + 1))) {
		gp_strlcpy(digest, at != NULL ? at + 1 : ref,
		    GP_OCI_DIGEST_SIZE);
		rc = gp_meta_query_int(db, "SELECT 1 FROM gp_image_manifests "
		    "WHERE digest = ?", &one, "s", digest);
		if (rc < 0) {
			snprintf(err, errlen, "image database error");
			return GP_EIO;
		}
		found = rc == 1;
		if (!found) {
			snprintf(err, errlen,
			    "no image %.200s in the store "
			    "(gpupool image ls)",
			    digest);
			return GP_ENOENT;
		}
		if (at != NULL) {
			snprintf(norm, sizeof(norm), "%.*s", (int)(at - ref),
			    ref);
			gp_strlcpy(name, norm, namelen);
		}
		return 0;
	}
	if (gp_image_name_normalize(ref, norm, sizeof(norm), err, errlen) != 0)
		return GP_EINVAL;
	{
		struct gp_meta_rows *st;

		if (gp_meta_query(db, &st, "SELECT digest FROM gp_image_names "
		    "WHERE name = ?", "s", norm) != 0) {
			snprintf(err, errlen, "image database error");
			return GP_EIO;
		}
		if (gp_meta_next(st) == 1) {
			gp_strlcpy(digest, gp_meta_text(st, 0),
			    GP_OCI_DIGEST_SIZE);
			found = 1;
		}
		gp_meta_done(st);
	}
	if (!found) {
		snprintf(err, errlen,
		    "no image named %.256s in the store "
		    "(gpupool image ls)",
		    norm);
		return GP_ENOENT;
	}
	gp_strlcpy(name, norm, namelen);
	return 0;
}

static json_t *
signers_of(const char *digest, int with_signatures)
{
	json_t *list = json_array();
	struct gp_meta_rows *st;
	char tm[40];

	if (gp_meta_query(db, &st, "SELECT key, signature, signer, created_ms "
	    "FROM gp_image_signatures WHERE digest = ? ORDER BY created_ms, "
	    "key", "s", digest) != 0)
		return list;
	while (gp_meta_next(st) == 1) {
		const char *key = gp_meta_text(st, 0);
		if (with_signatures == 0) {
			json_array_append_new(list, json_string(key));
			continue;
		}
		gp_format_time(gp_meta_int(st, 3), tm, sizeof(tm));
		if (with_signatures == 1)
			json_array_append_new(list,
			    json_pack("{s:s,s:s}", "key", key, "signature",
				gp_meta_text(st, 1)));
		else
			json_array_append_new(list,
			    json_pack("{s:s,s:s,s:s}", "key", key, "signer",
				gp_meta_text(st, 2), "created_at", tm));
	}
	gp_meta_done(st);
	return list;
}

json_t *
image_signers(const char *digest)
{
	json_t *list;

	pthread_mutex_lock(&image_lock);
	list = db != NULL ? signers_of(digest, 0) : json_array();
	pthread_mutex_unlock(&image_lock);
	return list;
}

/*
 * The signatures of digest (NULL: of every image) as signers_of's
 * with_signatures 2 lists them, by digest, in one query: a listing asks
 * once, not once per image (a round trip each on PostgreSQL).
 */
static json_t *
signers_by_digest(const char *digest)
{
	json_t *map = json_object(), *list;
	struct gp_meta_rows *st;
	const char *d;
	char tm[40];
	int rc;

	rc = digest != NULL
	    ? gp_meta_query(db, &st, "SELECT digest, key, signer, created_ms "
		  "FROM gp_image_signatures WHERE digest = ? ORDER BY "
		  "created_ms, key", "s", digest)
	    : gp_meta_query(db, &st, "SELECT digest, key, signer, created_ms "
		  "FROM gp_image_signatures ORDER BY digest, created_ms, key",
		  "");
	if (rc != 0 || map == NULL)
		return map;
	while (gp_meta_next(st) == 1) {
		d = gp_meta_text(st, 0);
		if ((list = json_object_get(map, d)) == NULL) {
			list = json_array();
			json_object_set_new(map, d, list);
		}
		gp_format_time(gp_meta_int(st, 3), tm, sizeof(tm));
		json_array_append_new(list, json_pack("{s:s,s:s,s:s}", "key",
		    gp_meta_text(st, 1), "signer", gp_meta_text(st, 2),
		    "created_at", tm));
	}
	gp_meta_done(st);
	return map;
}

/* The image object of a name row; sigs: signers_by_digest's. */
static json_t *
image_json(struct gp_meta_rows *st, json_t *sigs)
{
	const char *digest = gp_meta_text(st, 1);
	json_t *list = json_object_get(sigs, digest);
	char tm[40];

	gp_format_time(gp_meta_int(st, 3), tm, sizeof(tm));
	return json_pack("{s:s,s:s,s:s,s:s,s:I,s:I,s:o}", "name",
	    gp_meta_text(st, 0), "digest", digest, "user", gp_meta_text(st, 2),
	    "created_at", tm, "bytes", (json_int_t)gp_meta_int(st, 4),
	    "layers", (json_int_t)gp_meta_int(st, 5), "signatures",
	    list != NULL ? json_deep_copy(list) : json_array());
}

#define IMAGE_SELECT                                                           \
	"SELECT n.name, n.digest, n.\"user\", n.created_ms, m.bytes, m.layers "    \
	"FROM gp_image_names n JOIN gp_image_manifests m ON m.digest = n.digest "

int
image_resolve(const char *ref, char *pinned, size_t len, json_t **signers,
    char *err, size_t errlen)
{
	char digest[GP_OCI_DIGEST_SIZE], name[GP_IMAGE_NAME_MAX + 1];
	int ret;

	*signers = NULL;
	pthread_mutex_lock(&image_lock);
	if (db == NULL) {
		pthread_mutex_unlock(&image_lock);
		snprintf(err, errlen, "the image store is not open");
		return GP_EIO;
	}
	ret = lookup(ref, digest, name, sizeof(name), err, errlen);
	if (ret == 0) {
		*signers = signers_of(digest, 0);
		if (name[0] != '\0')
			snprintf(pinned, len, "%s@%s", name, digest);
		else
			gp_strlcpy(pinned, digest, len);
	}
	pthread_mutex_unlock(&image_lock);
	return ret;
}

void
image_attach_jobs(void)
{
	const char *d;
	struct job *j;
	int64_t c = 0, n = 0;

	pthread_rwlock_wrlock(&state.lock);
	while ((j = state_job_next(&c)) != NULL) {
		if (job_finished(j) ||
		    (d = gp_jobspec_image_digest(&j->spec)) == NULL)
			continue;
		job_set_signers(j, image_signers(d));
		n++;
	}
	state.sched_dirty = 1;
	pthread_rwlock_unlock(&state.lock);
	if (n > 0)
		gp_info("image jobs attached jobs=%lld", (long long)n);
}

/* ---- who may do what ---- */

/*
 * 1 when who (a provider's token, or an admin's) owns the node of a part
 * of job that still runs: every part of a gang runs in the job's image,
 * so each part's node reads it, not only the rank-0 part's. Under
 * state.lock.
 */
static int
runs_on(const struct job *job, const struct token_entry *who)
{
	const struct node *node;
	int k;

	if (who->role == GP_ROLE_ADMIN)
		return 1;
	for (k = 0; k < job->nparts; k++) {
		node = state_node(job->parts[k].node_id);
		if (node != NULL && !job->parts[k].ended &&
		    node->owner_token == who->id)
			return 1;
	}
	return 0;
}

/*
 * An agent's image call for (id, attempt): the caller's token must own
 * the node running a part of that attempt, and it must be the job's
 * current, running attempt (as checkpoint calls). OUT: digest (the job's pinned
 * image). Returns 0 or the HTTP status, with err (and *kill).
 */
static int
agent_job(const struct token_entry *who, int64_t id, int64_t attempt,
    char *digest, char *err, size_t errlen, int *kill)
{
	struct job *job;
	const char *d;
	int status = 0;

	*kill = 0;
	if (who->role != GP_ROLE_PROVIDER && who->role != GP_ROLE_ADMIN) {
		snprintf(err, errlen, "agent calls need a provider token");
		return 403;
	}
	pthread_rwlock_rdlock(&state.lock);
	job = state_job(id);
	if (job == NULL || job->state != JOB_RUNNING ||
	    job->attempts != attempt) {
		snprintf(err, errlen, "stale attempt %lld of job %lld: kill it",
		    (long long)attempt, (long long)id);
		*kill = 1;
		status = 409;
	} else if (!runs_on(job, who)) {
		snprintf(err, errlen, "job %lld does not run on your node",
		    (long long)id);
		status = 403;
	} else if ((d = gp_jobspec_image_digest(&job->spec)) == NULL) {
		snprintf(err, errlen, "job %lld has no image", (long long)id);
		status = 404;
	} else
		gp_strlcpy(digest, d, GP_OCI_DIGEST_SIZE);
	pthread_rwlock_unlock(&state.lock);
	return status;
}

static int
may_write(const struct token_entry *who)
{
	return who->role == GP_ROLE_USER || who->role == GP_ROLE_ADMIN;
}

/* ---- URLs ---- */

/* "/v1/agent/jobs/ID/ATTEMPT/image[/blobs/DIGEST]". OUT: rest. */
static int
parse_agent_url(const char *url, int64_t *id, int64_t *attempt,
    const char **rest)
{
	char num[24];
	const char *p, *slash;
	size_t len;
	int i;

	if (strncmp(url, AGENT_PREFIX, strlen(AGENT_PREFIX)) != 0)
		return 0;
	p = url + strlen(AGENT_PREFIX);
	for (i = 0; i < 2; i++) {
		slash = strchr(p, '/');
		if (slash == NULL || (len = (size_t)(slash - p)) == 0 ||
		    len >= sizeof(num))
			return 0;
		memcpy(num, p, len);
		num[len] = '\0';
		if (gp_parse_int(num, 1, i == 0 ? INT64_MAX / 2 : 1000000,
		        i == 0 ? id : attempt) != 0)
			return 0;
		p = slash + 1;
	}
	if (strncmp(p, "image", 5) != 0 || (p[5] != '\0' && p[5] != '/'))
		return 0;
	*rest = p[5] == '/' ? p + 6 : p + 5;
	return 1;
}

/* ---- the streamed blob PUT: the image store's (blob.h) ---- */

void
image_upload_begin(struct request *req, const char *url)
{
	struct blob_upload *u;
	/* The route is /v1/images/blobs/DIGEST (image_routes). */
	const char *digest = url + strlen("/v1/images/blobs/");
	char too_big[100];

	if ((u = blob_upload_new()) == NULL)
		return; /* _end answers 503 when req->stream is NULL */
	req->stream = u;
	if (req->auth == NULL) {
		blob_upload_refuse(u, 401,
		    "missing or unknown token (Authorization: Bearer ...)");
		return;
	}
	if (!may_write(req->auth)) {
		blob_upload_refuse(u, 403, "only users and admins upload images");
		return;
	}
	if (!gp_oci_digest_valid(digest)) {
		blob_upload_refuse(u, 404,
		    "blobs are named sha256:<64 lowercase "
		    "hex digits>");
		return;
	}
	snprintf(too_big, sizeof(too_big),
	    "a blob is at most %lld bytes (--image-blob-max)",
	    (long long)blob_max);
	blob_upload_open(u, blob_images, NULL, HEX(digest), blob_max, too_big);
}

void
image_upload_data(struct request *req, const char *data, size_t len)
{
	blob_upload_data(req->stream, data, len);
}

enum MHD_Result
image_upload_end(struct MHD_Connection *conn, struct request *req)
{
	struct blob_upload *u = req->stream;
	char got[BLOB_HEX_LEN + 1], digest[GP_OCI_DIGEST_SIZE];
	const char *msg;
	int status;

	if (u == NULL)
		return reply_error(conn, 503, "out of memory");
	snprintf(digest, sizeof(digest), "sha256:%s", blob_upload_name(u));
	switch (blob_upload_end(u, got)) {
	case BLOB_STORED:
		return reply_json(conn, 201,
		    json_pack("{s:b,s:s,s:I}", "stored", 1, "digest", digest,
		        "bytes", (json_int_t)blob_upload_len(u)));
	case BLOB_EXISTED:
		return reply_json(conn, 200,
		    json_pack("{s:b,s:s}", "stored", 0, "digest", digest));
	case BLOB_MISMATCH:
		return reply_error(conn, 400,
		    "blob content hashes to sha256:%s, not %s: nothing "
		    "stored", got, digest);
	case BLOB_WRITE_FAILED:
		return reply_error(conn, 500, "cannot write the blob");
	case BLOB_STORE_FAILED:
		return reply_error(conn, 500, "cannot store the blob");
	case BLOB_REFUSED:
		break;
	}
	/* (msg is set by the call: not in one expression with its use.) */
	status = blob_upload_refused(u, &msg);
	return reply_error(conn, status, "%s", msg);
}

/* ---- handlers ---- */

static enum MHD_Result
handle_missing(struct MHD_Connection *conn, struct request *req)
{
	json_t *body = api_body_object(req), *list, *missing, *c;
	size_t i;

	list = json_object_get(body, "digests");
	if (!json_is_array(list) || json_array_size(list) > MISSING_MAX ||
	    json_object_size(body) != 1) {
		json_decref(body);
		return reply_error(conn, 400,
		    "body: {\"digests\": [...]} with "
		    "at most %d digests",
		    MISSING_MAX);
	}
	json_array_foreach(list, i, c)
	{
		if (!gp_oci_digest_valid(json_string_value(c))) {
			json_decref(body);
			return reply_error(conn, 400,
			    "digests[%zu]: not "
			    "sha256:<64 lowercase hex digits>",
			    i);
		}
	}
	missing = blob_missing(blob_images, NULL, list, strlen("sha256:"));
	json_decref(body);
	return reply_json(conn, 200, json_pack("{s:o}", "missing", missing));
}

/* Reads a stored blob of at most max bytes. OUT: *data (caller frees). */
static int
read_blob(const char *digest, size_t max, char **data, size_t *len)
{
	return blob_read(blob_images, NULL, HEX(digest), max, data, len);
}

/* Checks that a descriptor's blob is stored with its size; 0 or err. */
static int
check_blob(const struct gp_oci_descriptor *d, const char *what, char *err,
    size_t errlen)
{
	int64_t size = blob_size(d->digest);

	if (size < 0) {
		snprintf(err, errlen, "%s %s is not stored: upload it first",
		    what, d->digest);
		return GP_ENOENT;
	}
	if (size != d->size) {
		snprintf(err, errlen,
		    "the manifest says %s %s holds %lld "
		    "bytes, the stored blob holds %lld",
		    what, d->digest, (long long)d->size, (long long)size);
		return GP_EINVAL;
	}
	return 0;
}

/* A manifest's blob, recorded once. */
static int
insert_manifest_blob(struct gp_meta *m, const char *manifest,
    const char *blob)
{
	return gp_meta_run(m, "INSERT INTO gp_image_manifest_blobs(manifest, "
	    "blob) VALUES(?, ?) ON CONFLICT DO NOTHING", "ss", manifest,
	    blob);
}

/* An image to name (record_name's IN). */
struct name_record {
	const char *digest, *name, *owner, *importer;
	const struct gp_oci_manifest *m;
};

/* The manifest, the blobs it needs and the name: one transaction. */
static int
record_name(struct gp_meta *meta, void *arg)
{
	const struct name_record *r = arg;
	int i;

	if (gp_meta_run(meta, "INSERT INTO gp_image_manifests(digest, config, "
	    "bytes, layers, importer, created_ms) VALUES(?, ?, ?, ?, ?, ?) "
	    "ON CONFLICT DO NOTHING", "ssIIsI", r->digest, r->m->config.digest,
	    gp_oci_manifest_bytes(r->m), (int64_t)r->m->nlayers, r->importer,
	    gp_now_ms()) != 0 ||
	    insert_manifest_blob(meta, r->digest, r->digest) != 0 ||
	    insert_manifest_blob(meta, r->digest, r->m->config.digest) != 0)
		return GP_EIO;
	for (i = 0; i < r->m->nlayers; i++)
		if (insert_manifest_blob(meta, r->digest,
		    r->m->layers[i].digest) != 0)
			return GP_EIO;
	if (gp_meta_run(meta, "INSERT INTO gp_image_names(name, digest, "
	    "\"user\", created_ms) VALUES(?, ?, ?, ?) ON CONFLICT(name) DO "
	    "UPDATE SET digest = excluded.digest, \"user\" = "
	    "excluded.\"user\", created_ms = excluded.created_ms", "sssI",
	    r->name, r->digest, r->owner, gp_now_ms()) != 0)
		return GP_EIO;
	return 0;
}

/* POST /v1/images {"name": ..., "digest": manifest}: names an image. */
static enum MHD_Result
handle_commit(struct MHD_Connection *conn, struct request *req)
{
	struct name_record rec;
	struct gp_oci_manifest m;
	struct gp_oci_image_config cfg;
	json_t *body = api_body_object(req), *out = NULL;
	const char *name, *digest;
	char norm[GP_IMAGE_NAME_MAX + 1], err[600], *text = NULL;
	char previous[GP_OCI_DIGEST_SIZE] = "", owner[GP_NAME_MAX + 1] = "";
	struct gp_meta_rows *st = NULL;
	size_t len = 0;
	int status = 400, i, ret;

	memset(&m, 0, sizeof(m));
	name = json_string_value(json_object_get(body, "name"));
	digest = json_string_value(json_object_get(body, "digest"));
	if (body == NULL || json_object_size(body) != 2 || name == NULL ||
	    digest == NULL) {
		json_decref(body);
		return reply_error(conn, 400,
		    "body: {\"name\": NAME, "
		    "\"digest\": the manifest's sha256:...}");
	}
	if (!gp_oci_digest_valid(digest)) {
		json_decref(body);
		return reply_error(conn, 400,
		    "digest: not sha256:<64 lowercase hex digits>");
	}
	if (gp_image_name_normalize(name, norm, sizeof(norm), err,
	        sizeof(err)) != 0) {
		json_decref(body);
		return reply_error(conn, 400, "%s", err);
	}
	/* No blob goes between the checks and the insert (blob.h). */
	blob_lock(blob_images);
	pthread_mutex_lock(&image_lock);
	ret = read_blob(digest, GP_OCI_JSON_MAX, &text, &len);
	if (ret != 0) {
		snprintf(err, sizeof(err),
		    ret == GP_ETOOBIG ? "manifest %s is "
		                        "larger than %d bytes"
		                      : "manifest blob %s is not stored: "
		                        "upload it first",
		    digest, GP_OCI_JSON_MAX);
		goto out;
	}
	if (gp_oci_detect(text, len, NULL) == GP_OCI_INDEX) {
		snprintf(err, sizeof(err),
		    "%s is an image index: name one "
		    "platform's manifest (gpupool image pull picks "
		    "linux/amd64)",
		    digest);
		goto out;
	}
	if (gp_oci_manifest_decode(text, len, &m, err, sizeof(err)) != 0)
		goto out;
	free(text);
	text = NULL;
	if (check_blob(&m.config, "config", err, sizeof(err)) != 0)
		goto out;
	for (i = 0; i < m.nlayers; i++) {
		char what[32];
		snprintf(what, sizeof(what), "layer %d", i);
		if (check_blob(&m.layers[i], what, err, sizeof(err)) != 0)
			goto out;
	}
	if (read_blob(m.config.digest, GP_OCI_JSON_MAX, &text, &len) != 0 ||
	    gp_oci_config_decode(text, len, &cfg, err, sizeof(err)) != 0) {
		if (text == NULL)
			snprintf(err, sizeof(err), "cannot read config %s",
			    m.config.digest);
		goto out;
	}
	if (cfg.ndiff_ids != 0 && cfg.ndiff_ids != m.nlayers) {
		snprintf(err, sizeof(err),
		    "the config lists %d layers "
		    "(rootfs.diff_ids), the manifest %d",
		    cfg.ndiff_ids, m.nlayers);
		gp_oci_config_fini(&cfg);
		goto out;
	}
	gp_oci_config_fini(&cfg);
	/* The name: new, or the caller's own (admins may take any). */
	if (gp_meta_query(db, &st, "SELECT digest, \"user\" FROM "
	    "gp_image_names WHERE name = ?", "s", norm) != 0)
		goto fail500;
	if (gp_meta_next(st) == 1) {
		gp_strlcpy(previous, gp_meta_text(st, 0), sizeof(previous));
		gp_strlcpy(owner, gp_meta_text(st, 1), sizeof(owner));
	}
	gp_meta_done(st);
	st = NULL;
	if (owner[0] != '\0' && strcmp(owner, req->auth->name) != 0 &&
	    req->auth->role != GP_ROLE_ADMIN) {
		status = 403;
		snprintf(err, sizeof(err),
		    "the name %s belongs to %s: choose "
		    "another name",
		    norm, owner);
		goto out;
	}
	rec = (struct name_record){digest, norm,
	    owner[0] ? owner : req->auth->name, req->auth->name, &m};
	if ((ret = gp_meta_transact(db, record_name, &rec)) != 0) {
		status = gp_meta_http_status(ret);
		snprintf(err, sizeof(err), "cannot record the image: %s",
		    gp_meta_error(db));
		goto out;
	}
	if (gp_meta_query(db, &st, IMAGE_SELECT "WHERE n.name = ?", "s",
	    norm) == 0) {
		json_t *sigs = signers_by_digest(digest);

		if (gp_meta_next(st) == 1)
			out = image_json(st, sigs);
		json_decref(sigs);
		gp_meta_done(st);
		st = NULL;
	}
	status = previous[0] == '\0' ? 201 : 200;
	if (out != NULL && previous[0] != '\0' && strcmp(previous, digest))
		json_object_set_new(out, "previous", json_string(previous));
	gp_info("image named name=%s digest=%s user=%s layers=%d bytes=%lld "
	        "previous=%s",
	    norm, digest, req->auth->name, m.nlayers,
	    (long long)gp_oci_manifest_bytes(&m), previous[0] ? previous : "-");
	goto out;
fail500:
	status = 500;
	snprintf(err, sizeof(err), "cannot record the image");
out:
	pthread_mutex_unlock(&image_lock);
	blob_unlock(blob_images);
	free(text);
	gp_oci_manifest_fini(&m);
	/* (digest points into body: done with it before body goes.) */
	if (status < 300 && previous[0] != '\0' && strcmp(previous, digest) != 0)
		blob_gc_kick(blob_images);
	json_decref(body);
	if (status >= 300) {
		gp_warn("image refused name=%s status=%d error=\"%s\"", norm,
		    status, err);
		return reply_error(conn, status, "%s", err);
	}
	return reply_json(conn, status, out);
}

static enum MHD_Result
handle_list(struct MHD_Connection *conn, const char *ref)
{
	char digest[GP_OCI_DIGEST_SIZE], name[GP_IMAGE_NAME_MAX + 1], err[400];
	json_t *list = json_array();
	struct gp_meta_rows *st;
	int ret;

	pthread_mutex_lock(&image_lock);
	if (ref != NULL) {
		ret = lookup(ref, digest, name, sizeof(name), err, sizeof(err));
		if (ret != 0) {
			pthread_mutex_unlock(&image_lock);
			json_decref(list);
			return reply_error(conn, ret == GP_EINVAL ? 400 : 404,
			    "%s", err);
		}
		ret = gp_meta_query(db, &st, IMAGE_SELECT "WHERE n.digest = ?1 "
		    "AND (?2 = '' OR n.name = ?2) ORDER BY n.name", "ss",
		    digest, name);
	} else
		ret = gp_meta_query(db, &st, IMAGE_SELECT "ORDER BY n.name",
		    "");
	if (ret == 0) {
		json_t *sigs = signers_by_digest(ref != NULL ? digest : NULL);

		while (gp_meta_next(st) == 1)
			json_array_append_new(list, image_json(st, sigs));
		gp_meta_done(st);
		json_decref(sigs);
	}
	pthread_mutex_unlock(&image_lock);
	if (ref != NULL && json_array_size(list) == 0) {
		/* Pinned by jobs but no longer named: show it by digest. */
		json_array_append_new(list,
		    json_pack("{s:n,s:s,s:o}", "name", "digest", digest,
		        "signatures", image_signers(digest)));
	}
	return reply_json(conn, 200, json_pack("{s:o}", "images", list));
}

static enum MHD_Result
handle_remove(struct MHD_Connection *conn, struct request *req, const char *ref)
{
	char digest[GP_OCI_DIGEST_SIZE], name[GP_IMAGE_NAME_MAX + 1], err[400];
	json_t *removed = json_array();
	struct gp_meta_rows *st;
	int ret, status = 200;

	if (!may_write(req->auth))
		return reply_error(conn, 403,
		    "only users and admins remove "
		    "images");
	if (ref == NULL) {
		json_decref(removed);
		return reply_error(conn, 400,
		    "name the image: ?ref=NAME or "
		    "?ref=sha256:...");
	}
	pthread_mutex_lock(&image_lock);
	ret = lookup(ref, digest, name, sizeof(name), err, sizeof(err));
	if (ret != 0) {
		pthread_mutex_unlock(&image_lock);
		json_decref(removed);
		return reply_error(conn, ret == GP_EINVAL ? 400 : 404, "%s",
		    err);
	}
	/* By name: that name; by digest: every name of the image. */
	if (gp_meta_query(db, &st, "SELECT name, \"user\" FROM gp_image_names "
	    "WHERE digest = ?1 AND (?2 = '' OR name = ?2)", "ss", digest,
	    name) != 0) {
		status = 500;
		snprintf(err, sizeof(err), "image database error");
		goto out;
	}
	while (gp_meta_next(st) == 1) {
		const char *n = gp_meta_text(st, 0);
		const char *u = gp_meta_text(st, 1);
		if (strcmp(u, req->auth->name) != 0 &&
		    req->auth->role != GP_ROLE_ADMIN) {
			status = 403;
			snprintf(err, sizeof(err),
			    "%s belongs to %s: only they "
			    "or an admin may remove it",
			    n, u);
			break;
		}
		json_array_append_new(removed, json_string(n));
	}
	gp_meta_done(st);
	if (status == 200 && json_array_size(removed) > 0 &&
	    gp_meta_run(db, "DELETE FROM gp_image_names WHERE digest = ?1 AND "
	    "(?2 = '' OR name = ?2)", "ss", digest, name) != 0) {
		status = 500;
		snprintf(err, sizeof(err), "cannot remove the image");
	}
out:
	pthread_mutex_unlock(&image_lock);
	if (status != 200) {
		json_decref(removed);
		return reply_error(conn, status, "%s", err);
	}
	gp_info("image removed digest=%s names=%zu user=%s", digest,
	    json_array_size(removed), req->auth->name);
	blob_gc_kick(blob_images);
	return reply_json(conn, 200,
	    json_pack("{s:o,s:s}", "removed", removed, "digest", digest));
}

/* POST /v1/images/signatures {"digest", "key", "signature"} (admin). */
static enum MHD_Result
handle_sign(struct MHD_Connection *conn, struct request *req)
{
	json_t *body = api_body_object(req);
	const char *digest, *key, *sig;
	enum MHD_Result rc;
	struct gp_meta_rows *st;
	int exists = 0, replaced = 0, ok = 0;

	if (req->auth->role != GP_ROLE_ADMIN) {
		json_decref(body);
		return reply_error(conn, 403, "only admins sign images");
	}
	digest = json_string_value(json_object_get(body, "digest"));
	key = json_string_value(json_object_get(body, "key"));
	sig = json_string_value(json_object_get(body, "signature"));
	if (body == NULL || json_object_size(body) != 3 || digest == NULL ||
	    key == NULL || sig == NULL) {
		json_decref(body);
		return reply_error(conn, 400,
		    "body: {\"digest\", \"key\", "
		    "\"signature\"}");
	}
	switch (gp_sign_verify(key, digest, sig)) {
	case 0:
		break;
	case GP_EPERM:
		rc = reply_error(conn, 400,
		    "the signature does not verify with key %.60s over %s", key,
		    digest);
		json_decref(body);
		return rc;
	default:
		json_decref(body);
		return reply_error(conn, 400,
		    "digest, key (ed25519:<base64>) "
		    "or signature (base64 of 64 bytes) is malformed");
	}
	pthread_mutex_lock(&image_lock);
	if (gp_meta_query(db, &st, "SELECT (SELECT COUNT(*) FROM "
	    "gp_image_manifests WHERE digest = ?1), (SELECT COUNT(*) FROM "
	    "gp_image_signatures WHERE digest = ?1 AND key = ?2)", "ss",
	    digest, key) == 0) {
		if (gp_meta_next(st) == 1) {
			exists = gp_meta_int(st, 0) > 0;
			replaced = gp_meta_int(st, 1) > 0;
		}
		gp_meta_done(st);
	}
	if (exists)
		ok = gp_meta_run(db, "INSERT INTO gp_image_signatures(digest, "
		    "key, signature, signer, created_ms) VALUES(?, ?, ?, ?, ?) "
		    "ON CONFLICT(digest, key) DO UPDATE SET signature = "
		    "excluded.signature, signer = excluded.signer, created_ms = "
		    "excluded.created_ms", "ssssI", digest, key, sig,
		    req->auth->name, gp_now_ms()) == 0;
	pthread_mutex_unlock(&image_lock);
	/* (digest and key point into body: used before it goes.) */
	if (!exists) {
		rc = reply_error(conn, 404, "no image %s in the store", digest);
		json_decref(body);
		return rc;
	}
	if (!ok) {
		json_decref(body);
		return reply_error(conn, 500, "cannot record the signature");
	}
	gp_info("image signed digest=%s key=%.20s... by=%s", digest, key,
	    req->auth->name);
	state_note_image_signed(digest, key);
	rc = reply_json(conn, replaced ? 200 : 201,
	    json_pack("{s:s,s:s,s:s}", "digest", digest, "key", key, "signer",
	        req->auth->name));
	json_decref(body);
	return rc;
}

/* The agent's calls for the image of a job it runs. */
static enum MHD_Result
handle_agent(struct MHD_Connection *conn, struct request *req, const char *url,
    const char *method)
{
	char digest[GP_OCI_DIGEST_SIZE], err[200];
	const char *rest, *blob;
	int64_t id, attempt, one = 0;
	int status, kill, listed = 0;
	json_t *sigs;

	if (!parse_agent_url(url, &id, &attempt, &rest) ||
	    strcmp(method, "GET") != 0)
		return reply_error(conn, 404, "no such endpoint: %s %.100s",
		    method, url);
	status =
	    agent_job(req->auth, id, attempt, digest, err, sizeof(err), &kill);
	if (status == 409 && kill)
		return reply_json(conn, 409,
		    json_pack("{s:s,s:b}", "error", err, "kill", 1));
	if (status != 0)
		return reply_error(conn, status, "%s", err);
	if (rest[0] == '\0') {
		pthread_mutex_lock(&image_lock);
		sigs = db != NULL ? signers_of(digest, 1) : json_array();
		pthread_mutex_unlock(&image_lock);
		return reply_json(conn, 200,
		    json_pack("{s:s,s:o}", "digest", digest, "signatures",
		        sigs));
	}
	if (strncmp(rest, "blobs/", 6) != 0 ||
	    !gp_oci_digest_valid(blob = rest + 6))
		return reply_error(conn, 404, "no such endpoint: %.100s", url);
	pthread_mutex_lock(&image_lock);
	listed = db != NULL && gp_meta_query_int(db, "SELECT 1 FROM "
	    "gp_image_manifest_blobs WHERE manifest = ? AND blob = ?", &one,
	    "ss", digest, blob) == 1;
	pthread_mutex_unlock(&image_lock);
	if (!listed)
		return reply_error(conn, 404,
		    "blob %s is not part of job "
		    "%lld's image",
		    blob, (long long)id);
	return reply_blob(conn, blob);
}

enum MHD_Result
image_handle(struct MHD_Connection *conn, struct request *req, const char *url,
    const char *method)
{
	const char *ref =
	    MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "ref");
	int get = strcmp(method, "GET") == 0,
	    post = strcmp(method, "POST") == 0;

	if (strncmp(url, AGENT_PREFIX, strlen(AGENT_PREFIX)) == 0)
		return handle_agent(conn, req, url, method);
	if (strcmp(url, "/v1/images") == 0) {
		if (get)
			return handle_list(conn, ref);
		if (post) {
			if (!may_write(req->auth))
				return reply_error(conn, 403,
				    "only users and "
				    "admins import images");
			return handle_commit(conn, req);
		}
		if (strcmp(method, "DELETE") == 0)
			return handle_remove(conn, req, ref);
		return reply_error(conn, 405, "method %.16s not allowed",
		    method);
	}
	if (strcmp(url, "/v1/images/blobs/missing") == 0 && post) {
		if (!may_write(req->auth))
			return reply_error(conn, 403,
			    "only users and admins "
			    "upload images");
		return handle_missing(conn, req);
	}
	if (strcmp(url, "/v1/images/signatures") == 0 && post)
		return handle_sign(conn, req);
	return reply_error(conn, 404, "no such endpoint: %s %.100s", method,
	    url);
}

static const struct api_stream blob_stream = {image_upload_begin,
    image_upload_data, image_upload_end, blob_upload_release};

/* Images: import, list, sign, remove; the agents' pulls. */
const struct api_route image_routes[] = {
    {"/v1/images/blobs/*/**", API_PUT, 0, NULL, 0, API_HELD, NULL,
        &blob_stream},
    {"/v1/images", API_ANY, 0, NULL, IMAGE_JSON_BODY_MAX, API_HELD,
        image_handle, NULL},
    {"/v1/images/blobs/missing", API_ANY, 0, NULL, IMAGE_JSON_BODY_MAX,
        API_HELD, image_handle, NULL},
    {"/v1/images/signatures", API_ANY, 0, NULL, IMAGE_JSON_BODY_MAX, API_HELD,
        image_handle, NULL},
    {"/v1/images/**", API_ANY, 0, NULL, 0, API_HELD, image_handle, NULL},
    {"/v1/agent/jobs/{id}/{attempt}/image/**", API_ANY, 0, NULL, 0, API_HELD,
        image_handle, NULL},
    {NULL, 0, 0, NULL, 0, 0, NULL, NULL},
};
