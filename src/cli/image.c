/*
 * image.c: the image commands (docs/images.md): `image import|ls|rm|pull|
 * sign` and `key create`. Import and pull end the same way: ask the
 * coordinator which blobs it lacks, send only those (each verified by
 * the coordinator against its digest), then name the image. Import
 * shows a progress line over the layers it sends (progress.c: on a
 * terminal only).
 *
 * Pull runs here, in the CLI, not in the coordinator: the registry's
 * credentials stay on the user's machine (never sent to or kept by the
 * coordinator), the coordinator needs no way out to the internet and
 * cannot be made to fetch arbitrary URLs by its users, and only the
 * layers the coordinator lacks are fetched from the registry at all.
 */
#include "cli/image.h"

#include <sys/stat.h>

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cmd.h"
#include "gp.h"
#include "oci.h"
#include "registry.h"
#include "sign.h"

#define PUT_TIMEOUT_MS 120000

static void
format_bytes(int64_t bytes, char *out, size_t len)
{
	if (bytes >= (1LL << 30))
		snprintf(out, len, "%.1fG", (double)bytes / (1 << 30));
	else if (bytes >= (1 << 20))
		snprintf(out, len, "%.1fM", (double)bytes / (1 << 20));
	else if (bytes >= (1 << 10))
		snprintf(out, len, "%.1fK", (double)bytes / (1 << 10));
	else
		snprintf(out, len, "%lldB", (long long)bytes);
}

/* ---- talking to the coordinator ---- */

/* What an upload did, for the summary line. */
struct sent {
	int blobs;
	int64_t bytes;
	int present;
	int64_t present_bytes;
};

/* The digests of blobs the coordinator lacks: {digest: true}. */
static int
ask_missing(struct gp_cli_conn *conn, struct gp_oci_descriptor **all, int n,
    json_t **missing)
{
	json_t *list = json_array(), *body, *reply, *m, *v;
	size_t i;
	int k, rc;

	*missing = NULL;
	for (k = 0; k < n; k++)
		json_array_append_new(list, json_string(all[k]->digest));
	body = json_pack("{s:o}", "digests", list);
	rc = gp_cli_call(conn, "POST", "/v1/images/blobs/missing", body, 0,
	    &reply, NULL);
	json_decref(body);
	if (rc != 0)
		return rc;
	m = json_object();
	json_array_foreach(json_object_get(reply, "missing"), i, v)
	{
		if (json_is_string(v))
			json_object_set_new(m, json_string_value(v),
			    json_true());
	}
	json_decref(reply);
	*missing = m;
	return 0;
}

/* Checks a PUT's answer; prints the error. */
static int
put_answered(struct gp_cli_conn *conn, int rc, struct gp_http_response *resp,
    const char *digest)
{
	char text[512];

	if (rc == 0 && (resp->status == 200 || resp->status == 201))
		return 0;
	if (rc != 0 || resp->status == 0) {
		gp_cli_report_http(conn, rc, resp);
		return GP_CLI_EXIT_FAIL;
	}
	gp_http_error_text(resp, text, sizeof(text));
	gp_cli_error("the coordinator refused blob %s: %s", digest, text);
	return GP_CLI_EXIT_FAIL;
}

static int
put_memory(struct gp_cli_conn *conn, const struct gp_oci_descriptor *d,
    const char *data, size_t len)
{
	struct gp_http_response resp;
	char path[128];
	int rc;

	snprintf(path, sizeof(path), "/v1/images/blobs/%s", d->digest);
	rc = gp_http_request(conn->http, "PUT", path, data, len,
	    "application/octet-stream", PUT_TIMEOUT_MS, &resp);
	rc = put_answered(conn, rc, &resp, d->digest);
	gp_http_response_fini(&resp);
	return rc;
}

static int
name_image(struct gp_cli_conn *conn, const char *name, const char *digest,
    json_t **image)
{
	json_t *body = json_pack("{s:s,s:s}", "name", name, "digest", digest);
	int rc = gp_cli_call(conn, "POST", "/v1/images", body, 0, image, NULL);

	json_decref(body);
	return rc;
}

static void
summary(const char *verb, json_t *image, const char *name, const char *digest,
    int nlayers, const struct sent *s)
{
	char a[32], b[32];

	format_bytes(s->bytes, a, sizeof(a));
	format_bytes(s->present_bytes, b, sizeof(b));
	printf("%s %s@%s: %d layer%s, %d blob%s sent (%s), %d already stored "
	       "(%s)%s%s\n",
	    verb, name, digest, nlayers, nlayers == 1 ? "" : "s", s->blobs,
	    s->blobs == 1 ? "" : "s", a, s->present, b,
	    gp_cli_json_str(image, "previous") ? "; the name pointed at " : "",
	    gp_cli_json_str(image, "previous")
	        ? gp_cli_json_str(image, "previous")
	        : "");
}

/* ---- import ---- */

struct import_ctx {
	struct gp_cli_conn *conn;
	struct sent *sent;
	struct gp_progress progress; /* over one round's layers */
	int progress_on;
	int64_t done; /* bytes of this round's layers read so far */
	void *reader; /* the layer being sent */
};

/* Ends the progress line (erasing it), before anything else is printed. */
static void
progress_stop(struct import_ctx *c)
{
	if (c->progress_on)
		gp_progress_end(&c->progress);
	c->progress_on = 0;
}

/* Reads the layer being sent, counting what went for the progress line. */
static long
import_read(void *arg, char *buf, size_t len)
{
	struct import_ctx *c = arg;
	long n = gp_archive_reader_read(c->reader, buf, len);

	if (n > 0) {
		c->done += n;
		gp_progress_update(&c->progress, c->done, 0);
	}
	return n;
}

static int
upload_entry(void *arg, struct gp_archive_blob *b, void *reader)
{
	struct import_ctx *c = arg;
	struct gp_http_response resp;
	char path[128];
	int rc;

	snprintf(path, sizeof(path), "/v1/images/blobs/%s", b->d.digest);
	c->reader = reader;
	rc = gp_http_upload(c->conn->http, "PUT", path, NULL, b->d.size,
	    import_read, c, &resp);
	if (rc != 0 || (resp.status != 200 && resp.status != 201))
		progress_stop(c);
	rc = put_answered(c->conn, rc, &resp, b->d.digest);
	gp_http_response_fini(&resp);
	if (rc == 0) {
		c->sent->blobs++;
		c->sent->bytes += b->d.size;
	}
	return rc;
}

int
gp_cli_cmd_image_import(const struct gp_cli_args *args)
{
	struct gp_image_archive ia;
	struct gp_cli_conn conn;
	struct gp_oci_descriptor **all = NULL;
	struct gp_archive_blob **want = NULL;
	struct import_ctx ctx;
	struct sent sent = {0, 0, 0, 0};
	const char *opt_name = gp_cli_value(args, "name");
	char name[GP_IMAGE_NAME_MAX + 1], err[1024];
	json_t *missing = NULL, *image = NULL;
	int64_t want_bytes;
	int rc, i, n = 0, nwant = 0, round;

	if (gp_image_archive_read(args->operands[0], opt_name, &ia, err,
	        sizeof(err)) != 0) {
		gp_cli_error("%s: %s", args->operands[0], err);
		gp_image_archive_fini(&ia);
		return GP_CLI_EXIT_FAIL;
	}
	if (opt_name == NULL && ia.name[0] == '\0') {
		gp_cli_error("%s names no image: give --name NAME[:TAG]",
		    args->operands[0]);
		gp_image_archive_fini(&ia);
		return GP_CLI_EXIT_USAGE;
	}
	if (gp_image_name_normalize(opt_name != NULL ? opt_name : ia.name, name,
	        sizeof(name), err, sizeof(err)) != 0) {
		gp_cli_error("--name: %s", err);
		gp_image_archive_fini(&ia);
		return GP_CLI_EXIT_USAGE;
	}
	if ((rc = gp_cli_connect(&conn, NULL)) != 0) {
		gp_image_archive_fini(&ia);
		return rc;
	}
	all = calloc((size_t)ia.nlayers + 3, sizeof(*all));
	want = calloc((size_t)ia.nlayers + 1, sizeof(*want));
	if (all == NULL || want == NULL) {
		gp_cli_error("out of memory");
		rc = GP_CLI_EXIT_FAIL;
		goto out;
	}
	all[n++] = &ia.manifest.d;
	all[n++] = &ia.config.d;
	for (i = 0; i < ia.nlayers; i++)
		all[n++] = &ia.layers[i].d;
	/*
	 * Round 2 asks again right before naming the image: that refreshes
	 * every blob for the GC's grace period, and sends again any that the
	 * GC took meanwhile (a slow import of a big image).
	 */
	for (round = 0; round < 2; round++) {
		json_decref(missing);
		if ((rc = ask_missing(&conn, all, n, &missing)) != 0)
			goto out;
		if (round == 1 && json_object_size(missing) == 0)
			break;
		nwant = 0;
		want_bytes = 0;
		for (i = 0; i < ia.nlayers; i++) {
			int k, dup = 0;
			for (k = 0; k < i; k++)
				dup |= strcmp(ia.layers[k].d.digest,
				           ia.layers[i].d.digest) == 0;
			if (dup)
				continue;
			if (json_object_get(missing, ia.layers[i].d.digest) ==
			    NULL) {
				if (round == 0) {
					sent.present++;
					sent.present_bytes +=
					    ia.layers[i].d.size;
				}
				continue;
			}
			want[nwant++] = &ia.layers[i];
			want_bytes += ia.layers[i].d.size;
		}
		want[nwant] = NULL;
		ctx.conn = &conn;
		ctx.sent = &sent;
		ctx.done = 0;
		ctx.progress_on = 1;
		gp_progress_begin(&ctx.progress, "importing", want_bytes);
		rc = gp_image_archive_each(&ia, want, upload_entry, &ctx, err,
		    sizeof(err));
		progress_stop(&ctx);
		if (rc != 0) {
			if (rc != GP_CLI_EXIT_FAIL)
				gp_cli_error("%s: %s", args->operands[0], err);
			rc = GP_CLI_EXIT_FAIL;
			goto out;
		}
		if (json_object_get(missing, ia.config.d.digest) != NULL) {
			if ((rc = put_memory(&conn, &ia.config.d,
			         ia.config.data, ia.config.len)) != 0)
				goto out;
			sent.blobs++;
			sent.bytes += ia.config.d.size;
		}
		if (json_object_get(missing, ia.manifest.d.digest) != NULL) {
			if ((rc = put_memory(&conn, &ia.manifest.d,
			         ia.manifest.data, ia.manifest.len)) != 0)
				goto out;
			sent.blobs++;
			sent.bytes += ia.manifest.d.size;
		}
	}
	if ((rc = name_image(&conn, name, ia.manifest.d.digest, &image)) != 0)
		goto out;
	summary("imported", image, name, ia.manifest.d.digest, ia.nlayers,
	    &sent);
	if (ia.arch[0] != '\0' && strcmp(ia.arch, "amd64") != 0)
		fprintf(stderr,
		    "gpupool: note: the image is for %s/%s; "
		    "providers run linux/amd64 images\n",
		    ia.os, ia.arch);
out:
	json_decref(missing);
	json_decref(image);
	free(all);
	free(want);
	gp_image_archive_fini(&ia);
	gp_cli_disconnect(&conn);
	return rc;
}

/* ---- pull ---- */

struct file_sink {
	int fd;
};

static int
to_file(void *arg, const char *data, size_t len)
{
	struct file_sink *f = arg;

	return gp_write_all(f->fd, data, len) == 0 ? 0 : GP_EIO;
}

static int
to_buf(void *arg, const char *data, size_t len)
{
	return gp_buf_append(arg, data, len);
}

static long
from_fd(void *arg, char *buf, size_t len)
{
	int fd = *(int *)arg;
	ssize_t n;

	do
		n = read(fd, buf, len);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -1 : (long)n;
}

/* Fetches one blob from the registry into a temporary file, then sends
 * it to the coordinator. */
static int
pull_layer(struct gp_registry *reg, struct gp_cli_conn *conn,
    const struct gp_oci_descriptor *d, struct sent *sent)
{
	struct gp_http_response resp;
	struct file_sink f;
	char tmp[PATH_MAX], path[128], err[1024];
	const char *dir = getenv("TMPDIR");
	int64_t got = 0;
	int rc;

	snprintf(tmp, sizeof(tmp), "%s/gpupool-pull.XXXXXX",
	    dir != NULL && dir[0] != '\0' ? dir : "/var/tmp");
	if ((f.fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
		gp_cli_error("cannot create a temporary file in %s: %s",
		    dir != NULL ? dir : "/var/tmp", strerror(errno));
		return GP_CLI_EXIT_FAIL;
	}
	unlink(tmp);
	if (gp_registry_blob(reg, d, to_file, &f, &got, err, sizeof(err)) !=
	    0) {
		gp_cli_error("%s", err);
		close(f.fd);
		return GP_CLI_EXIT_FAIL;
	}
	if (lseek(f.fd, 0, SEEK_SET) != 0) {
		close(f.fd);
		gp_cli_error("cannot read back the layer: %s", strerror(errno));
		return GP_CLI_EXIT_FAIL;
	}
	snprintf(path, sizeof(path), "/v1/images/blobs/%s", d->digest);
	rc = gp_http_upload(conn->http, "PUT", path, NULL, d->size, from_fd,
	    &f.fd, &resp);
	rc = put_answered(conn, rc, &resp, d->digest);
	gp_http_response_fini(&resp);
	close(f.fd);
	if (rc == 0) {
		sent->blobs++;
		sent->bytes += d->size;
	}
	return rc;
}

/* The store name a pulled reference gets by default. */
static int
pull_name(const char *text, const struct gp_image_ref *ref, char *out,
    size_t outlen, char *err, size_t errlen)
{
	char base[600];
	const char *at = strchr(text, '@');

	snprintf(base, sizeof(base), "%.*s",
	    at != NULL ? (int)(at - text) : (int)strlen(text), text);
	if (ref->tag[0] == '\0' && ref->digest[0] != '\0') {
		/* By digest only: a tag of its own, never "latest". */
		char tagged[700];
		snprintf(tagged, sizeof(tagged), "%s:sha256-%.12s", base,
		    ref->digest + 7);
		return gp_image_name_normalize(tagged, out, outlen, err,
		    errlen);
	}
	return gp_image_name_normalize(base, out, outlen, err, errlen);
}

int
gp_cli_cmd_image_pull(const struct gp_cli_args *args)
{
	const char *text = args->operands[0];
	struct gp_registry_opts opts;
	struct gp_registry *reg = NULL;
	struct gp_image_ref ref;
	struct gp_oci_manifest m;
	struct gp_oci_descriptor manifest_d, pick, *all[GP_OCI_LAYERS_MAX + 2];
	struct gp_cli_conn conn;
	struct gp_buf body = {0}, config = {0};
	struct sent sent = {0, 0, 0, 0};
	char name[GP_IMAGE_NAME_MAX + 1], err[1024], ctype[128];
	char digest[GP_OCI_DIGEST_SIZE];
	json_t *missing = NULL, *image = NULL;
	int rc = GP_CLI_EXIT_FAIL, i, n = 0, connected = 0, round;

	memset(&m, 0, sizeof(m));
	memset(&manifest_d, 0, sizeof(manifest_d));
	if (gp_image_ref_parse(text, &ref, err, sizeof(err)) != 0)
		return gp_cli_usage_error(args, "%s", err);
	if (gp_cli_value(args, "name") != NULL) {
		if (gp_image_name_normalize(gp_cli_value(args, "name"), name,
		        sizeof(name), err, sizeof(err)) != 0)
			return gp_cli_usage_error(args, "--name: %s", err);
	} else if (pull_name(text, &ref, name, sizeof(name), err,
	               sizeof(err)) != 0)
		return gp_cli_usage_error(args, "%s", err);
	memset(&opts, 0, sizeof(opts));
	opts.plain_http = gp_cli_flag(args, "plain-http");
	opts.ca_file = gp_cli_value(args, "registry-ca");
	opts.username = gp_cli_value(args, "username");
	opts.password = getenv("GPUPOOL_REGISTRY_PASSWORD");
	if (opts.username == NULL && opts.password != NULL)
		return gp_cli_usage_error(args,
		    "GPUPOOL_REGISTRY_PASSWORD is "
		    "set: give --username too");
	if ((reg = gp_registry_new(&ref, &opts)) == NULL) {
		gp_cli_error("out of memory");
		return GP_CLI_EXIT_FAIL;
	}
	/* The tag (or digest) to a manifest; an index to linux/amd64's. */
	if (gp_registry_manifest(reg,
	        ref.digest[0]    ? ref.digest
	            : ref.tag[0] ? ref.tag
	                         : "latest",
	        &body, ctype, sizeof(ctype), digest, err, sizeof(err)) != 0) {
		gp_cli_error("%s", err);
		goto out;
	}
	if (gp_oci_detect(body.data, body.len, ctype) == GP_OCI_INDEX) {
		struct gp_oci_index idx;
		if (gp_oci_index_decode(body.data, body.len, &idx, err,
		        sizeof(err)) != 0 ||
		    gp_oci_index_pick(&idx, "linux", "amd64", &pick, err,
		        sizeof(err)) != 0) {
			gp_oci_index_fini(&idx);
			gp_cli_error("%s: %s", text, err);
			goto out;
		}
		gp_oci_index_fini(&idx);
		if (gp_registry_manifest(reg, pick.digest, &body, ctype,
		        sizeof(ctype), digest, err, sizeof(err)) != 0) {
			gp_cli_error("%s", err);
			goto out;
		}
		if ((int64_t)body.len != pick.size) {
			gp_cli_error("%s: the index says manifest %s has %lld "
			             "bytes, the registry sent %zu",
			    text, pick.digest, (long long)pick.size, body.len);
			goto out;
		}
	}
	if (gp_oci_manifest_decode(body.data, body.len, &m, err, sizeof(err)) !=
	    0) {
		gp_cli_error("%s: %s", text, err);
		goto out;
	}
	gp_strlcpy(manifest_d.digest, digest, sizeof(manifest_d.digest));
	manifest_d.size = (int64_t)body.len;
	/* The config: small, fetched into memory, checked by digest. */
	{
		int64_t got;
		if (gp_registry_blob(reg, &m.config, to_buf, &config, &got, err,
		        sizeof(err)) != 0) {
			gp_cli_error("%s", err);
			goto out;
		}
	}
	{
		struct gp_oci_image_config cfg;
		if (gp_oci_config_decode(config.data, config.len, &cfg, err,
		        sizeof(err)) != 0) {
			gp_cli_error("%s: %s", text, err);
			goto out;
		}
		if (cfg.arch[0] != '\0' && strcmp(cfg.arch, "amd64") != 0)
			fprintf(stderr,
			    "gpupool: note: the image is for "
			    "%s/%s; providers run linux/amd64 images\n",
			    cfg.os, cfg.arch);
		gp_oci_config_fini(&cfg);
	}
	if ((rc = gp_cli_connect(&conn, NULL)) != 0)
		goto out;
	connected = 1;
	rc = GP_CLI_EXIT_FAIL;
	all[n++] = &manifest_d;
	all[n++] = &m.config;
	for (i = 0; i < m.nlayers; i++)
		all[n++] = &m.layers[i];
	/* Round 2: as in import (the GC's grace, refreshed). */
	for (round = 0; round < 2; round++) {
		json_decref(missing);
		if ((rc = ask_missing(&conn, all, n, &missing)) != 0)
			goto out;
		if (round == 1 && json_object_size(missing) == 0)
			break;
		for (i = 0; i < m.nlayers; i++) {
			int k, dup = 0;
			for (k = 0; k < i; k++)
				dup |= strcmp(m.layers[k].digest,
				           m.layers[i].digest) == 0;
			if (dup)
				continue;
			if (json_object_get(missing, m.layers[i].digest) ==
			    NULL) {
				if (round == 0) {
					sent.present++;
					sent.present_bytes += m.layers[i].size;
				}
				continue;
			}
			if ((rc = pull_layer(reg, &conn, &m.layers[i],
			         &sent)) != 0)
				goto out;
		}
		if (json_object_get(missing, m.config.digest) != NULL) {
			if ((rc = put_memory(&conn, &m.config, config.data,
			         config.len)) != 0)
				goto out;
			sent.blobs++;
			sent.bytes += m.config.size;
		}
		if (json_object_get(missing, digest) != NULL) {
			if ((rc = put_memory(&conn, &manifest_d, body.data,
			         body.len)) != 0)
				goto out;
			sent.blobs++;
			sent.bytes += manifest_d.size;
		}
	}
	if ((rc = name_image(&conn, name, digest, &image)) != 0)
		goto out;
	summary("pulled", image, name, digest, m.nlayers, &sent);
	rc = 0;
out:
	json_decref(missing);
	json_decref(image);
	gp_oci_manifest_fini(&m);
	gp_buf_free(&body);
	gp_buf_free(&config);
	gp_registry_free(reg);
	if (connected)
		gp_cli_disconnect(&conn);
	return rc;
}

/* ---- ls, rm ---- */

int
gp_cli_render_images(json_t *reply, struct gp_buf *out)
{
	static const char *const header[] = {"NAME", "DIGEST", "SIZE", "LAYERS",
	    "SIGNED", "USER", "CREATED"};
	char digest[32], size[32], layers[16], signed_by[16];
	const char *row[7], *d;
	struct gp_table t;
	json_t *list, *v;
	size_t i;
	int rc;

	list = json_object_get(reply, "images");
	if (!json_is_array(list))
		return GP_EPROTO;
	if ((rc = gp_table_init(&t, 7, header)) != 0)
		return rc;
	t.right[2] = t.right[3] = t.right[4] = 1;
	json_array_foreach(list, i, v)
	{
		d = gp_cli_json_str(v, "digest");
		snprintf(digest, sizeof(digest), "%.19s", d != NULL ? d : "-");
		format_bytes(json_integer_value(json_object_get(v, "bytes")),
		    size, sizeof(size));
		snprintf(layers, sizeof(layers), "%lld",
		    (long long)json_integer_value(
		        json_object_get(v, "layers")));
		snprintf(signed_by, sizeof(signed_by), "%zu",
		    json_array_size(json_object_get(v, "signatures")));
		row[0] = gp_cli_json_str(v, "name");
		row[1] = digest;
		row[2] = size;
		row[3] = layers;
		row[4] = json_array_size(json_object_get(v, "signatures"))
		    ? signed_by
		    : NULL;
		row[5] = gp_cli_json_str(v, "user");
		row[6] = gp_cli_json_str(v, "created_at");
		if ((rc = gp_table_add(&t, row)) != 0)
			break;
	}
	if (rc == 0)
		rc = gp_table_render(&t, out);
	gp_table_fini(&t);
	return rc;
}

int
gp_cli_cmd_image_ls(const struct gp_cli_args *args)
{
	return gp_cli_get_list(args, "/v1/images", gp_cli_render_images);
}

/* "/v1/images?ref=<escaped>" into out. */
static int
ref_path(const char *ref, char *out, size_t len)
{
	char *e = curl_easy_escape(NULL, ref, 0);
	int n;

	if (e == NULL)
		return GP_ENOMEM;
	n = snprintf(out, len, "/v1/images?ref=%s", e);
	curl_free(e);
	return n < 0 || (size_t)n >= len ? GP_EINVAL : 0;
}

int
gp_cli_cmd_image_rm(const struct gp_cli_args *args)
{
	struct gp_cli_conn conn;
	char path[1200];
	json_t *reply, *v;
	size_t i;
	int rc;

	if (ref_path(args->operands[0], path, sizeof(path)) != 0)
		return gp_cli_usage_error(args, "image reference too long");
	if ((rc = gp_cli_connect(&conn, NULL)) != 0)
		return rc;
	rc = gp_cli_call(&conn, "DELETE", path, NULL, 0, &reply, NULL);
	gp_cli_disconnect(&conn);
	if (rc != 0)
		return rc;
	json_array_foreach(json_object_get(reply, "removed"), i, v)
	{
		printf("removed %s (%s)\n", json_string_value(v),
		    gp_cli_json_str(reply, "digest"));
	}
	json_decref(reply);
	return 0;
}

/* ---- keys and signatures ---- */

int
gp_cli_cmd_key_create(const struct gp_cli_args *args)
{
	const char *name = args->operands[0], *out = gp_cli_value(args, "out");
	struct gp_sign_key key;
	char path[PATH_MAX], *text = NULL;
	int fd;

	if (!gp_name_valid(name))
		return gp_cli_usage_error(args,
		    "NAME: 1 to 64 of A-Z a-z 0-9 "
		    ". _ -");
	if (out == NULL) {
		snprintf(path, sizeof(path), "%s.key", name);
		out = path;
	}
	if (gp_sign_key_generate(name, &key, &text) != 0) {
		gp_cli_error("cannot create a key");
		return GP_CLI_EXIT_FAIL;
	}
	fd = open(out, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW,
	    0600);
	if (fd < 0 || fchmod(fd, 0600) != 0 ||
	    gp_write_all(fd, text, strlen(text)) != 0 || fsync(fd) != 0) {
		gp_cli_error("cannot write %s: %s%s", out, strerror(errno),
		    errno == EEXIST ? " (a key is never overwritten)" : "");
		if (fd >= 0) {
			close(fd);
			unlink(out);
		}
		memset(text, 0, strlen(text));
		free(text);
		gp_sign_key_wipe(&key);
		return GP_CLI_EXIT_FAIL;
	}
	close(fd);
	memset(text, 0, strlen(text));
	free(text);
	printf("%s\n", key.public_text);
	fprintf(stderr,
	    "gpupool: the secret key is in %s (mode 0600); "
	    "providers that trust it add to their policy:\n    trust-key = %s "
	    "%s\n",
	    out, key.public_text, name);
	gp_sign_key_wipe(&key);
	return 0;
}

int
gp_cli_cmd_image_sign(const struct gp_cli_args *args)
{
	const char *keyfile = gp_cli_value(args, "key");
	struct gp_sign_key key;
	struct gp_cli_conn conn;
	struct stat st;
	char path[1200], err[512], sig[GP_SIGN_SIG_TEXT], *text = NULL;
	char digest[GP_OCI_DIGEST_SIZE];
	const char *d;
	json_t *reply = NULL, *img, *body;
	size_t len;
	int rc;

	if (keyfile == NULL)
		return gp_cli_usage_error(args, "--key KEYFILE is required");
	if (stat(keyfile, &st) != 0 ||
	    gp_read_file(keyfile, GP_SIGN_KEYFILE_MAX, &text, &len) != 0) {
		gp_cli_error("cannot read %s: %s", keyfile, strerror(errno));
		return GP_CLI_EXIT_FAIL;
	}
	if (st.st_mode & 077) {
		memset(text, 0, len);
		free(text);
		gp_cli_error("%s is readable by others (mode %03o): chmod 600 "
		             "it first",
		    keyfile, (unsigned)(st.st_mode & 0777));
		return GP_CLI_EXIT_FAIL;
	}
	rc = gp_sign_key_parse(text, len, &key, err, sizeof(err));
	memset(text, 0, len);
	free(text);
	if (rc != 0) {
		gp_cli_error("%s: %s", keyfile, err);
		return GP_CLI_EXIT_FAIL;
	}
	if (ref_path(args->operands[0], path, sizeof(path)) != 0) {
		gp_sign_key_wipe(&key);
		return gp_cli_usage_error(args, "image reference too long");
	}
	if ((rc = gp_cli_connect(&conn, NULL)) != 0) {
		gp_sign_key_wipe(&key);
		return rc;
	}
	/* The digest the reference names now: that is what is signed. */
	rc = gp_cli_call(&conn, "GET", path, NULL, 0, &reply, NULL);
	img = json_array_get(json_object_get(reply, "images"), 0);
	d = gp_cli_json_str(img, "digest");
	if (rc == 0 && (d == NULL || !gp_oci_digest_valid(d))) {
		gp_cli_error("the coordinator's answer names no image digest");
		rc = GP_CLI_EXIT_FAIL;
	}
	if (rc == 0) {
		gp_strlcpy(digest, d, sizeof(digest));
		gp_sign_digest(&key, digest, sig, sizeof(sig));
		json_decref(reply);
		reply = NULL;
		body = json_pack("{s:s,s:s,s:s}", "digest", digest, "key",
		    key.public_text, "signature", sig);
		rc = gp_cli_call(&conn, "POST", "/v1/images/signatures", body,
		    0, &reply, NULL);
		json_decref(body);
		if (rc == 0)
			printf("signed %s (%s) with key %s (%s)\n",
			    args->operands[0], digest, key.name,
			    key.public_text);
	}
	json_decref(reply);
	gp_cli_disconnect(&conn);
	gp_sign_key_wipe(&key);
	return rc;
}
