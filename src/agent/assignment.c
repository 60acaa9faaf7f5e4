/*
 * assignment.c: strict decoding of what the coordinator sends the agent:
 * poll answers (assignments, cancels, checkpoint and stop requests) and
 * kill lists.
 */
#include "agent/assignment.h"
#include "stream.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "gp.h"
#include "util.h"

#define ASSIGNMENTS_MAX 4096

static int
bad(char *err, size_t errlen, const char *fmt, const char *field)
{
	snprintf(err, errlen, fmt, field);
	return GP_EINVAL;
}

/* Reads an integer field in [min, max]; absent is def (or an error). */
static int
get_int(json_t *obj, const char *key, int64_t min, int64_t max,
    int required, int64_t def, int64_t *out, char *err, size_t errlen)
{
	json_t *v = json_object_get(obj, key);
	json_int_t i;

	if (v == NULL) {
		if (required)
			return bad(err, errlen, "missing field %s", key);
		*out = def;
		return 0;
	}
	if (!json_is_integer(v))
		return bad(err, errlen, "field %s: not an integer", key);
	i = json_integer_value(v);
	if (i < min || i > max)
		return bad(err, errlen, "field %s: out of range", key);
	*out = i;
	return 0;
}

static int
get_name(json_t *obj, const char *key, char *out, size_t outlen, char *err,
    size_t errlen)
{
	json_t *v = json_object_get(obj, key);

	out[0] = '\0';
	if (v == NULL || json_is_null(v))
		return 0;
	if (!json_is_string(v) || json_string_length(v) >= outlen ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return bad(err, errlen, "field %s: not a short string", key);
	gp_strlcpy(out, json_string_value(v), outlen);
	return 0;
}

static int
decode_id(json_t *obj, struct gp_attempt_id *id, char *err, size_t errlen)
{
	if (!json_is_object(obj))
		return bad(err, errlen, "%s: not an object", "attempt");
	if (get_int(obj, "job_id", 1, INT64_MAX, 1, 0, &id->job_id, err,
	    errlen) != 0 ||
	    get_int(obj, "attempt", 1, INT32_MAX, 1, 0, &id->attempt, err,
	    errlen) != 0)
		return GP_EINVAL;
	return 0;
}

static int
decode_command(json_t *cmd, struct gp_assignment *a, char *err,
    size_t errlen)
{
	size_t i, n;

	/* With an image the command may be empty (or absent). */
	if (a->image[0] != '\0' && (cmd == NULL || (json_is_array(cmd) &&
	    json_array_size(cmd) == 0))) {
		if ((a->argv = calloc(1, sizeof(char *))) == NULL)
			return GP_ENOMEM;
		return 0;
	}
	if (!json_is_array(cmd) || (n = json_array_size(cmd)) == 0 ||
	    n > GP_ARGC_MAX)
		return bad(err, errlen, "field %s: want 1..256 strings",
		    "command");
	if ((a->argv = calloc(n + 1, sizeof(char *))) == NULL)
		return GP_ENOMEM;
	for (i = 0; i < n; i++) {
		json_t *s = json_array_get(cmd, i);
		size_t len;

		if (!json_is_string(s))
			return bad(err, errlen, "field %s: not a string",
			    "command");
		len = json_string_length(s);
		if (len == 0 || len > GP_ARG_MAX ||
		    strlen(json_string_value(s)) != len)
			return bad(err, errlen, "field %s: bad argument",
			    "command");
		if ((a->argv[i] = strdup(json_string_value(s))) == NULL)
			return GP_ENOMEM;
		a->argc++;
	}
	return 0;
}

/* "sha256:<64 lowercase hex>", or absent/null for a plain command. */
static int
decode_image(json_t *v, struct gp_assignment *a, char *err, size_t errlen)
{
	const char *s;
	size_t i;

	a->image[0] = '\0';
	if (v == NULL || json_is_null(v))
		return 0;
	s = json_string_value(v);
	if (s == NULL || json_string_length(v) != 71 ||
	    strncmp(s, "sha256:", 7) != 0)
		return bad(err, errlen, "field %s: want sha256:<64 hex>",
		    "image");
	for (i = 7; i < 71; i++)
		if (!((s[i] >= '0' && s[i] <= '9') ||
		    (s[i] >= 'a' && s[i] <= 'f')))
			return bad(err, errlen, "field %s: want "
			    "sha256:<64 hex>", "image");
	memcpy(a->image, s, 72);
	return 0;
}

static int
env_key_valid(const char *k)
{
	size_t i;

	if (k[0] == '\0' || strlen(k) > GP_ENV_KEY_MAX ||
	    !(k[0] == '_' || (k[0] >= 'A' && k[0] <= 'Z') ||
	    (k[0] >= 'a' && k[0] <= 'z')))
		return 0;
	for (i = 1; k[i] != '\0'; i++)
		if (!(k[i] == '_' || (k[i] >= 'A' && k[i] <= 'Z') ||
		    (k[i] >= 'a' && k[i] <= 'z') ||
		    (k[i] >= '0' && k[i] <= '9')))
			return 0;
	return 1;
}

static int
decode_env(json_t *env, struct gp_assignment *a, char *err, size_t errlen)
{
	const char *key;
	json_t *v;
	size_t n;

	if (env == NULL || json_is_null(env))
		return 0;
	if (!json_is_object(env) || (n = json_object_size(env)) > GP_ENV_MAX)
		return bad(err, errlen, "field %s: want an object of strings",
		    "env");
	if ((a->env = calloc(n + 1, sizeof(char *))) == NULL)
		return GP_ENOMEM;
	json_object_foreach(env, key, v) {
		size_t klen, vlen;

		if (!env_key_valid(key))
			return bad(err, errlen, "field %s: bad key", "env");
		if (!json_is_string(v) ||
		    (vlen = json_string_length(v)) > GP_ARG_MAX ||
		    strlen(json_string_value(v)) != vlen)
			return bad(err, errlen, "field %s: bad value", "env");
		klen = strlen(key);
		if ((a->env[a->nenv] = malloc(klen + vlen + 2)) == NULL)
			return GP_ENOMEM;
		memcpy(a->env[a->nenv], key, klen);
		a->env[a->nenv][klen] = '=';
		memcpy(a->env[a->nenv] + klen + 1, json_string_value(v),
		    vlen + 1);
		a->nenv++;
	}
	return 0;
}

static int
decode_gpus(json_t *gpus, struct gp_assignment *a, char *err, size_t errlen)
{
	size_t i, j, n;

	if (gpus == NULL || json_is_null(gpus))
		return 0;
	if (!json_is_array(gpus) || (n = json_array_size(gpus)) > GP_GPUS_MAX)
		return bad(err, errlen, "field %s: want 0..64 indices", "gpus");
	for (i = 0; i < n; i++) {
		json_t *g = json_array_get(gpus, i);
		json_int_t v;

		if (!json_is_integer(g) || (v = json_integer_value(g)) < 0 ||
		    v >= GP_GPUS_MAX)
			return bad(err, errlen, "field %s: bad index", "gpus");
		for (j = 0; j < i; j++)
			if (a->gpus[j] == (int)v)
				return bad(err, errlen,
				    "field %s: repeated index", "gpus");
		a->gpus[i] = (int)v;
		a->ngpus++;
	}
	return 0;
}

static int decode_share_gang(json_t *obj, struct gp_assignment *a,
    char *err, size_t errlen);

static int
decode_data(json_t *data, struct gp_assignment *a, char *err, size_t errlen)
{
	char perr[256];
	json_t *d, *v;
	size_t i, j, n;

	if (data == NULL || json_is_null(data))
		return 0;
	if (!json_is_array(data) || (n = json_array_size(data)) >
	    GP_DATA_MOUNTS_MAX)
		return bad(err, errlen, "field %s: want at most 16 data sets",
		    "data");
	if (n > 0 && (a->data = calloc(n, sizeof(*a->data))) == NULL)
		return GP_ENOMEM;
	for (i = 0; i < n; i++) {
		struct gp_data_ref *r = &a->data[i];

		d = json_array_get(data, i);
		if (!json_is_object(d))
			return bad(err, errlen, "field %s: not an object",
			    "data");
		a->ndata++;
		if (get_name(d, "owner", r->owner, sizeof(r->owner), err,
		    errlen) != 0 ||
		    get_name(d, "name", r->name, sizeof(r->name), err,
		    errlen) != 0)
			return GP_EINVAL;
		if (!gp_name_valid(r->owner) || !gp_data_name_valid(r->name))
			return bad(err, errlen, "field %s: bad owner or name",
			    "data");
		if (get_int(d, "version", 1, INT64_MAX / 2, 1, 0, &r->version,
		    err, errlen) != 0)
			return GP_EINVAL;
		v = json_object_get(d, "path");
		if (!json_is_string(v) ||
		    strlen(json_string_value(v)) != json_string_length(v) ||
		    gp_mount_path_check(json_string_value(v), perr,
		    sizeof(perr)) != 0)
			return bad(err, errlen, "field %s: bad mount path",
			    "data");
		for (j = 0; j < i; j++)
			if (strcmp(a->data[j].path, json_string_value(v)) == 0)
				return bad(err, errlen, "field %s: a mount "
				    "path twice", "data");
		if ((r->path = strdup(json_string_value(v))) == NULL)
			return GP_ENOMEM;
	}
	return 0;
}

static int
decode_assignment(json_t *obj, struct gp_assignment *a, char *err,
    size_t errlen)
{
	int64_t v;
	int ret;

	if ((ret = decode_id(obj, &a->id, err, errlen)) != 0)
		return ret;
	if ((ret = get_name(obj, "name", a->name, sizeof(a->name), err,
	    errlen)) != 0 ||
	    (ret = get_name(obj, "user", a->user, sizeof(a->user), err,
	    errlen)) != 0)
		return ret;
	if ((ret = decode_image(json_object_get(obj, "image"), a, err,
	    errlen)) != 0)
		return ret;
	if ((ret = decode_command(json_object_get(obj, "command"), a, err,
	    errlen)) != 0)
		return ret;
	if ((ret = decode_env(json_object_get(obj, "env"), a, err,
	    errlen)) != 0)
		return ret;
	if ((ret = decode_gpus(json_object_get(obj, "gpus"), a, err,
	    errlen)) != 0)
		return ret;
	if ((ret = get_int(obj, "cpus", 0, GP_CPUS_MAX, 0, 1, &v, err,
	    errlen)) != 0)
		return ret;
	a->cpus = (int)v;
	if ((ret = get_int(obj, "mem_mib", 0, GP_MIB_MAX, 0, 0, &a->mem_mib,
	    err, errlen)) != 0)
		return ret;
	if ((ret = get_int(obj, "time_limit_s", 0, GP_TIME_LIMIT_MAX, 0, 0,
	    &a->time_limit_s, err, errlen)) != 0)
		return ret;
	if ((ret = get_int(obj, "disk_mib", 0, GP_MIB_MAX, 0, 0,
	    &a->disk_mib, err, errlen)) != 0)
		return ret;
	if ((ret = get_int(obj, "checkpoint_every_s", 1, GP_TIME_LIMIT_MAX, 0,
	    GP_CHECKPOINT_EVERY_DEFAULT, &a->checkpoint_every_s, err,
	    errlen)) != 0)
		return ret;
	if ((ret = get_int(obj, "checkpoint_signal", 1, 64, 0, SIGUSR1, &v,
	    err, errlen)) != 0)
		return ret;
	if (gp_signal_name((int)v)[0] == '?')
		return bad(err, errlen, "field %s: not an allowed signal",
		    "checkpoint_signal");
	a->checkpoint_signal = (int)v;
	if ((ret = get_int(obj, "restart_count", 0, INT32_MAX, 0, 0,
	         &a->restart_count, err, errlen)) != 0)
		return ret;
	if ((ret = decode_data(json_object_get(obj, "data"), a, err,
	         errlen)) != 0)
		return ret;
	if (json_object_get(obj, "network") != NULL &&
	    !json_is_null(json_object_get(obj, "network")) &&
	    (!json_is_string(json_object_get(obj, "network")) ||
	    gp_jobspec_network_parse(json_string_value(json_object_get(obj,
	    "network")), &a->network) != 0))
		return bad(err, errlen, "field %s: not none, internet or lan",
		    "network");
	if (json_object_get(obj, "interactive") != NULL &&
	    !json_is_boolean(json_object_get(obj, "interactive")))
		return bad(err, errlen, "field %s: not true or false",
		    "interactive");
	a->interactive = json_is_true(json_object_get(obj, "interactive"));
	return decode_share_gang(obj, a, err, errlen);
}

/* A host name or an address: letters, digits, '.', ':', '-', '_'. */
static int
host_valid(const char *s)
{
	size_t i;

	for (i = 0; s[i] != '\0'; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') ||
		        (s[i] >= 'A' && s[i] <= 'Z') ||
		        (s[i] >= '0' && s[i] <= '9') || s[i] == '.' ||
		        s[i] == ':' || s[i] == '-' || s[i] == '_'))
			return 0;
	return i > 0;
}

/* gang.addrs: one host or address (or "") per part; may be absent. */
static int
decode_part_addrs(json_t *v, struct gp_assignment *a, char *err,
    size_t errlen)
{
	json_t *e;
	size_t i;

	if (v == NULL || json_is_null(v))
		return 0;
	if (!json_is_array(v) || json_array_size(v) != (size_t)a->parts)
		return bad(err, errlen, "field %s: not one address per part",
		    "gang.addrs");
	json_array_foreach(v, i, e) {
		const char *s = json_string_value(e);

		if (s == NULL || strlen(s) >= sizeof(a->part_addrs[0]) ||
		    (s[0] != '\0' && !host_valid(s)))
			return bad(err, errlen, "field %s: not a host or "
			    "address", "gang.addrs");
		gp_strlcpy(a->part_addrs[i], s, sizeof(a->part_addrs[0]));
	}
	return 0;
}

/*
 * gang.overlay: one peer per part, {"key": base64 public key, "endpoint":
 * "host:port"}, or null for a part outside the overlay; may be absent.
 * With it, gang.overlay_private_key: this part's private key (of its
 * entry's public key).
 */
static int
decode_overlay(json_t *g, json_t *v, struct gp_assignment *a, char *err,
    size_t errlen)
{
	struct gp_overlay_peer *peers;
	json_t *e;
	size_t i;

	if (v == NULL || json_is_null(v))
		return 0;
	if (!json_is_array(v) || json_array_size(v) != (size_t)a->parts)
		return bad(err, errlen, "field %s: not one peer per part",
		    "gang.overlay");
	if ((peers = calloc((size_t)a->parts, sizeof(*peers))) == NULL)
		return GP_ENOMEM;
	/* kept before the checks: gp_assignment_fini frees it either way */
	a->overlay_peers = peers;
	json_array_foreach(v, i, e) {
		struct gp_overlay_peer *p = &peers[i];
		const char *key, *endpoint;

		if (json_is_null(e))
			continue;
		key = json_string_value(json_object_get(e, "key"));
		endpoint = json_string_value(json_object_get(e, "endpoint"));
		if (!json_is_object(e) || !gp_wg_key_valid(key))
			return bad(err, errlen, "field %s: not a WireGuard "
			    "public key", "gang.overlay.key");
		if (!gp_overlay_endpoint_valid(endpoint) ||
		    strlen(endpoint) >= sizeof(p->endpoint))
			return bad(err, errlen, "field %s: not host:port",
			    "gang.overlay.endpoint");
		gp_strlcpy(p->key, key, sizeof(p->key));
		gp_strlcpy(p->endpoint, endpoint, sizeof(p->endpoint));
	}
	/* This part's own key: its public half is its entry's. */
	{
		const char *priv = json_string_value(json_object_get(g,
		    "overlay_private_key"));
		char pub[GP_WG_KEY_LEN];

		if (priv == NULL || !gp_wg_key_valid(priv) ||
		    gp_wg_pubkey(priv, pub) != 0 ||
		    strcmp(pub, peers[a->part].key) != 0)
			return bad(err, errlen, "field %s: not the private "
			    "key of this part's gang.overlay key",
			    "gang.overlay_private_key");
		gp_strlcpy(a->overlay_priv, priv, sizeof(a->overlay_priv));
	}
	/* The relay (optional: a coordinator without one sends none). */
	{
		json_t *rl = json_object_get(g, "overlay_relay");
		json_t *port = json_object_get(rl, "port");

		if (rl == NULL || json_is_null(rl))
			return 0;
		if (!json_is_object(rl) || !json_is_integer(port) ||
		    json_integer_value(port) < 1 ||
		    json_integer_value(port) > 65535 ||
		    gp_relay_key_parse(json_string_value(json_object_get(rl,
		    "key")), a->overlay_relay.key) != 0)
			return bad(err, errlen, "field %s: not {\"port\": "
			    "1..65535, \"key\": a relay key}",
			    "gang.overlay_relay");
		a->overlay_relay.port = (int)json_integer_value(port);
		a->overlay_relay.attempt = (uint32_t)a->id.attempt;
	}
	return 0;
}

/* The share of one GPU and a gang's part, when the assignment has them. */
static int
decode_share_gang(json_t *obj, struct gp_assignment *a, char *err,
    size_t errlen)
{
	json_t *g = json_object_get(obj, "gang");
	int64_t v;
	int ret;

	if ((ret = get_int(obj, "gpu_milli", 1, 999, 0, 0, &v, err,
	         errlen)) != 0)
		return ret;
	a->gpu_milli = (int)v;
	if ((ret = get_int(obj, "gpu_mem_mib", 0, GP_MIB_MAX, 0, 0,
	         &a->gpu_mem_mib, err, errlen)) != 0)
		return ret;
	if ((a->gpu_milli > 0 || a->gpu_mem_mib > 0) && a->ngpus != 1)
		return bad(err, errlen, "field %s: a share needs one GPU",
		    "gpu_milli");
	if (g == NULL || json_is_null(g))
		return 0;
	if (!json_is_object(g))
		return bad(err, errlen, "field %s: not an object", "gang");
	if ((ret = get_int(g, "parts", 2, GP_NODES_MAX, 1, 0, &v, err,
	         errlen)) != 0)
		return ret;
	a->parts = (int)v;
	if ((ret = get_int(g, "part", 0, a->parts - 1, 1, 0, &v, err,
	         errlen)) != 0)
		return ret;
	a->part = (int)v;
	if ((ret = get_int(g, "gpus_per_node", 0, GP_GPUS_MAX, 0, a->ngpus,
	         &v, err, errlen)) != 0)
		return ret;
	a->gpus_per_node = (int)v;
	if ((ret = get_int(g, "master_port", 1, 65535, 1, 0, &v, err,
	         errlen)) != 0)
		return ret;
	a->master_port = (int)v;
	if ((ret = get_name(g, "master_addr", a->master_addr,
	         sizeof(a->master_addr), err, errlen)) != 0)
		return ret;
	if (!host_valid(a->master_addr))
		return bad(err, errlen, "field %s: not a host or address",
		    "master_addr");
	if ((ret = decode_part_addrs(json_object_get(g, "addrs"), a, err,
	         errlen)) != 0)
		return ret;
	return decode_overlay(g, json_object_get(g, "overlay"), a, err,
	    errlen);
}

/* The stop list: [{"job_id": 9, "attempt": 2, "reason": "preempted"}]. */
static int
decode_stops(json_t *list, struct gp_poll_answer *answer, char *err,
    size_t errlen)
{
	static const char *const reasons[] = {"preempted", "gang_stopped"};
	size_t i, k, n;

	if (list == NULL || json_is_null(list))
		return 0;
	if (!json_is_array(list) || (n = json_array_size(list)) > ASSIGNMENTS_MAX)
		return bad(err, errlen, "field %s: not a list", "stops");
	if (n > 0 && (answer->stops = calloc(n, sizeof(*answer->stops))) ==
	        NULL)
		return GP_ENOMEM;
	for (i = 0; i < n; i++) {
		json_t *o = json_array_get(list, i);
		const char *r = json_string_value(json_object_get(o, "reason"));
		if (decode_id(o, &answer->stops[i].id, err, errlen) != 0)
			return GP_EINVAL;
		for (k = 0; r != NULL && k < GP_ARRAY_LEN(reasons); k++)
			if (strcmp(r, reasons[k]) == 0)
				break;
		if (r == NULL || k == GP_ARRAY_LEN(reasons))
			return bad(err, errlen,
			    "field %s: preempted or gang_stopped", "reason");
		answer->stops[i].reason = reasons[k];
		answer->nstops++;
	}
	return 0;
}

void
gp_container_image_free(struct gp_container_image *img)
{
	if (img == NULL)
		return;
	free(img->digest);
	gp_strv_free(img->layers);
	gp_strv_free(img->env);
	gp_strv_free(img->entrypoint);
	gp_strv_free(img->cmd);
	free(img->workdir);
	free(img->user);
	free(img);
}

void
gp_assignment_fini(struct gp_assignment *a)
{
	int i;

	if (a->argv != NULL)
		for (i = 0; a->argv[i] != NULL; i++)
			free(a->argv[i]);
	if (a->env != NULL)
		for (i = 0; a->env[i] != NULL; i++)
			free(a->env[i]);
	free(a->argv);
	free(a->env);
	free(a->restore_dir);
	a->restore_dir = NULL;
	gp_container_image_free(a->container);
	a->container = NULL;
	for (i = 0; i < a->nmounts; i++) {
		free(a->mounts[i].source);
		free(a->mounts[i].target);
	}
	free(a->mounts);
	a->mounts = NULL;
	a->nmounts = 0;
	for (i = 0; i < a->nexpose; i++)
		free(a->expose[i].source);	/* target: the same string */
	free(a->expose);
	a->expose = NULL;
	a->nexpose = 0;
	for (i = 0; i < a->ndata; i++)
		free(a->data[i].path);
	free(a->data);
	a->data = NULL;
	free(a->overlay_peers);
	a->overlay_peers = NULL;
	sodium_memzero(a->overlay_priv, sizeof(a->overlay_priv));
	sodium_memzero(&a->overlay_relay, sizeof(a->overlay_relay));
	a->ndata = 0;
	a->argv = a->env = NULL;
	a->argc = a->nenv = 0;
}

void
gp_poll_answer_fini(struct gp_poll_answer *answer)
{
	int i;

	for (i = 0; i < answer->nassignments; i++)
		gp_assignment_fini(&answer->assignments[i]);
	free(answer->assignments);
	free(answer->cancels);
	free(answer->checkpoints);
	free(answer->stops);
	free(answer->streams);
	memset(answer, 0, sizeof(*answer));
}

int
gp_attempt_list_decode(json_t *list, struct gp_attempt_id **ids, int *n,
    char *err, size_t errlen)
{
	struct gp_attempt_id *out = NULL;
	size_t i, count;

	*ids = NULL;
	*n = 0;
	if (list == NULL || json_is_null(list))
		return 0;
	if (!json_is_array(list) ||
	    (count = json_array_size(list)) > ASSIGNMENTS_MAX)
		return bad(err, errlen, "%s: not a list of attempts", "list");
	if (count > 0 && (out = calloc(count, sizeof(*out))) == NULL)
		return GP_ENOMEM;
	for (i = 0; i < count; i++) {
		if (decode_id(json_array_get(list, i), &out[i], err,
		    errlen) != 0) {
			free(out);
			return GP_EINVAL;
		}
	}
	*ids = out;
	*n = (int)count;
	return 0;
}

/* "streams": [{"id", "secret", "job_id", "attempt", "kind"}]. */
static int
decode_streams(json_t *list, struct gp_poll_answer *answer, char *err,
    size_t errlen)
{
	size_t i, n;

	if (list == NULL || json_is_null(list))
		return 0;
	if (!json_is_array(list) || (n = json_array_size(list)) >
	    ASSIGNMENTS_MAX)
		return bad(err, errlen, "%s: not a list of streams", "streams");
	if (n == 0)
		return 0;
	if ((answer->streams = calloc(n, sizeof(*answer->streams))) == NULL)
		return GP_ENOMEM;
	for (i = 0; i < n; i++) {
		struct gp_stream_request *r = &answer->streams[i];
		json_t *o = json_array_get(list, i);
		const char *secret = json_string_value(json_object_get(o,
		    "secret"));
		json_t *id = json_object_get(o, "id");

		if (!json_is_object(o) || !json_is_integer(id) ||
		    json_integer_value(id) < 1 || secret == NULL ||
		    strlen(secret) != 32 ||
		    strspn(secret, "0123456789abcdef") != 32 ||
		    (r->kind = gp_stream_kind_parse(json_string_value(
		    json_object_get(o, "kind")))) == 0 ||
		    decode_id(o, &r->job, err, errlen) != 0)
			return bad(err, errlen, "%s: a bad stream", "streams");
		r->id = json_integer_value(id);
		memcpy(r->secret, secret, 33);
		answer->nstreams++;
	}
	return 0;
}

int
gp_assignment_decode(const char *text, size_t len,
    struct gp_poll_answer *answer, char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *root, *list;
	size_t i, n;
	int ret = GP_EINVAL;

	memset(answer, 0, sizeof(*answer));
	root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
	if (root == NULL) {
		snprintf(err, errlen, "not JSON: %s", jerr.text);
		return GP_EINVAL;
	}
	if (!json_is_object(root)) {
		snprintf(err, errlen, "not a JSON object");
		goto fail;
	}
	list = json_object_get(root, "assignments");
	if (list != NULL && !json_is_null(list)) {
		if (!json_is_array(list) ||
		    (n = json_array_size(list)) > ASSIGNMENTS_MAX) {
			snprintf(err, errlen, "field assignments: not a list");
			goto fail;
		}
		if (n > 0 && (answer->assignments = calloc(n,
		    sizeof(*answer->assignments))) == NULL) {
			ret = GP_ENOMEM;
			snprintf(err, errlen, "out of memory");
			goto fail;
		}
		for (i = 0; i < n; i++) {
			/* Count it first so that fini releases a half one. */
			answer->nassignments++;
			ret = decode_assignment(json_array_get(list, i),
			    &answer->assignments[i], err, errlen);
			if (ret != 0)
				goto fail;
		}
	}
	ret = gp_attempt_list_decode(json_object_get(root, "cancels"),
	    &answer->cancels, &answer->ncancels, err, errlen);
	if (ret != 0)
		goto fail;
	ret = gp_attempt_list_decode(json_object_get(root, "checkpoints"),
	    &answer->checkpoints, &answer->ncheckpoints, err, errlen);
	if (ret != 0)
		goto fail;
	ret = decode_stops(json_object_get(root, "stops"), answer, err, errlen);
	if (ret != 0)
		goto fail;
	ret = decode_streams(json_object_get(root, "streams"), answer, err,
	    errlen);
	if (ret != 0)
		goto fail;
	json_decref(root);
	return 0;
fail:
	json_decref(root);
	gp_poll_answer_fini(answer);
	return ret == GP_ENOMEM ? GP_ENOMEM : GP_EINVAL;
}
