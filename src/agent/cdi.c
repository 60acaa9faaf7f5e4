/*
 * cdi.c: CDI specification files: read (YAML with libyaml, JSON with
 * jansson) into one JSON tree, then decoded strictly into struct
 * gp_cdi_spec. The files are the provider's own configuration, but a
 * broken or hostile one must never crash the agent: every length, count,
 * type and path is checked (tests/fuzz/fuzz_cdi.c).
 *
 * YAML scalars become JSON strings (a YAML "0" and "'0'" are both the
 * string "0"); the decoder reads a number from an integer or from a
 * string holding one (decimal, 0x hex, 0o or YAML 1.1 leading-0 octal).
 * Anchors and aliases are followed, within a depth and a node budget, so
 * a "billion laughs" document costs nothing.
 */
#include "agent/cdi.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "gp.h"
#include "log.h"
#include "util.h"

#define DEPTH_MAX   32
#define NODES_MAX   200000	/* JSON values made from one YAML file */
#define LIST_MAX    4096	/* entries of one list */
#define DEVICES_MAX 1024
#define STRING_MAX  4096

/* ---- YAML to JSON ---- */

struct conv {
	yaml_document_t *doc;
	long nodes;
};

static json_t *
convert(struct conv *c, yaml_node_t *node, int depth)
{
	json_t *out = NULL;

	if (node == NULL || depth > DEPTH_MAX || ++c->nodes > NODES_MAX)
		return NULL;
	switch (node->type) {
	case YAML_SCALAR_NODE: {
		const char *v = (const char *)node->data.scalar.value;
		size_t n = node->data.scalar.length;

		if (node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
		    (n == 0 || (n == 1 && v[0] == '~') ||
		    (n == 4 && memcmp(v, "null", 4) == 0)))
			return json_null();
		if (n > STRING_MAX)
			return NULL;
		return json_stringn(v, n);
	}
	case YAML_SEQUENCE_NODE:
		out = json_array();
		for (yaml_node_item_t *i = node->data.sequence.items.start;
		    out != NULL && i < node->data.sequence.items.top; i++) {
			json_t *v = convert(c, yaml_document_get_node(c->doc,
			    *i), depth + 1);
			if (v == NULL || json_array_append_new(out, v) != 0) {
				json_decref(out);
				out = NULL;
			}
		}
		return out;
	case YAML_MAPPING_NODE:
		out = json_object();
		for (yaml_node_pair_t *p = node->data.mapping.pairs.start;
		    out != NULL && p < node->data.mapping.pairs.top; p++) {
			yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
			json_t *v;

			if (k == NULL || k->type != YAML_SCALAR_NODE ||
			    k->data.scalar.length > 256 ||
			    memchr(k->data.scalar.value, '\0',
			    k->data.scalar.length) != NULL) {
				json_decref(out);
				return NULL;
			}
			v = convert(c, yaml_document_get_node(c->doc, p->value),
			    depth + 1);
			if (v == NULL || json_object_setn_new(out,
			    (const char *)k->data.scalar.value,
			    k->data.scalar.length, v) != 0) {
				json_decref(out);
				out = NULL;
			}
		}
		return out;
	default:
		return NULL;
	}
}

static json_t *
load_yaml(const char *text, size_t len, char *err, size_t errlen)
{
	yaml_parser_t parser;
	yaml_document_t doc;
	struct conv c;
	json_t *root;

	if (!yaml_parser_initialize(&parser)) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
	if (!yaml_parser_load(&parser, &doc)) {
		snprintf(err, errlen, "YAML: %s at line %zu",
		    parser.problem ? parser.problem : "parse error",
		    parser.problem_mark.line + 1);
		yaml_parser_delete(&parser);
		return NULL;
	}
	c.doc = &doc;
	c.nodes = 0;
	root = convert(&c, yaml_document_get_root_node(&doc), 0);
	if (root == NULL)
		snprintf(err, errlen, "%s", yaml_document_get_root_node(&doc) ==
		    NULL ? "empty document" : "YAML: too deep, too big or "
		    "not a tree of scalars, lists and maps with text keys");
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	return root;
}

/* ---- decoding ---- */

struct dec {
	char *err;
	size_t errlen;
	int bad;
};

static int
fail(struct dec *d, const char *fmt, const char *a, const char *b)
{
	if (!d->bad)
		snprintf(d->err, d->errlen, fmt, a, b);
	d->bad = 1;
	return GP_EINVAL;
}

/* OUT: *out (strdup'd) or NULL when absent/null. */
static int
get_str(struct dec *d, json_t *obj, const char *key, int required,
    char **out)
{
	json_t *v = json_object_get(obj, key);

	*out = NULL;
	if (v == NULL || json_is_null(v))
		return required ? fail(d, "missing \"%s\"%s", key, "") : 0;
	if (!json_is_string(v) || json_string_length(v) > STRING_MAX ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return fail(d, "\"%s\" must be text%s", key, "");
	if ((*out = strdup(json_string_value(v))) == NULL)
		return fail(d, "out of memory%s%s", "", "");
	return 0;
}

static int
int_of(json_t *v, int64_t min, int64_t max, int64_t *out)
{
	const char *s, *digits;
	char *end;
	long long n;
	int base = 10;

	if (json_is_integer(v))
		n = json_integer_value(v);
	else if (json_is_string(v)) {
		s = json_string_value(v);
		digits = s;
		if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
			base = 16;
			digits = s + 2;
		} else if (s[0] == '0' && s[1] == 'o') {
			base = 8;
			digits = s + 2;
		} else if (s[0] == '0' && s[1] != '\0')
			base = 8;
		if (digits[0] < '0' || digits[0] > 'f')
			return -1;
		errno = 0;
		n = strtoll(digits, &end, base);
		if (errno != 0 || *end != '\0' || end == digits)
			return -1;
	} else
		return -1;
	if (n < min || n > max)
		return -1;
	*out = n;
	return 0;
}

static int
get_int(struct dec *d, json_t *obj, const char *key, int64_t min, int64_t max,
    int64_t *out)
{
	json_t *v = json_object_get(obj, key);

	if (v == NULL || json_is_null(v))
		return 0;
	if (int_of(v, min, max, out) != 0)
		return fail(d, "\"%s\" must be a number in range%s", key, "");
	return 0;
}

/* A list field: OUT: *arr (borrowed) or NULL when absent. */
static int
get_list(struct dec *d, json_t *obj, const char *key, json_t **arr)
{
	json_t *v = json_object_get(obj, key);

	*arr = NULL;
	if (v == NULL || json_is_null(v))
		return 0;
	if (!json_is_array(v))
		return fail(d, "\"%s\" must be a list%s", key, "");
	if (json_array_size(v) > LIST_MAX)
		return fail(d, "\"%s\" has too many entries%s", key, "");
	*arr = v;
	return 0;
}

static int
absolute(struct dec *d, const char *what, const char *p)
{
	if (p == NULL || p[0] != '/')
		return fail(d, "%s must be an absolute path: %s", what,
		    p ? p : "(none)");
	return 0;
}

/* A NULL-ended copy of a list of strings; the list may be NULL. */
static int
get_strv(struct dec *d, json_t *obj, const char *key, char ***out)
{
	json_t *arr, *v;
	size_t i;

	*out = NULL;
	if (get_list(d, obj, key, &arr) != 0 || arr == NULL)
		return d->bad ? GP_EINVAL : 0;
	if ((*out = calloc(json_array_size(arr) + 1, sizeof(char *))) == NULL)
		return fail(d, "out of memory%s%s", "", "");
	json_array_foreach(arr, i, v) {
		if (!json_is_string(v) || json_string_length(v) > STRING_MAX ||
		    strlen(json_string_value(v)) != json_string_length(v))
			return fail(d, "\"%s\" must be a list of text%s", key,
			    "");
		if (((*out)[i] = strdup(json_string_value(v))) == NULL)
			return fail(d, "out of memory%s%s", "", "");
	}
	return 0;
}

static int
env_ok(const char *kv)
{
	const char *eq = strchr(kv, '=');

	return eq != NULL && eq != kv;
}

static int
decode_devices(struct dec *d, json_t *list, struct gp_oci_edits *e)
{
	json_t *o;
	size_t i;

	if ((e->devices = calloc(json_array_size(list) + 1,
	    sizeof(*e->devices))) == NULL)
		return fail(d, "out of memory%s%s", "", "");
	json_array_foreach(list, i, o) {
		struct gp_oci_device *dev = &e->devices[e->ndevices++];
		char *type = NULL;

		dev->major = dev->minor = -1;
		if (!json_is_object(o))
			return fail(d, "a deviceNodes entry must be a map%s%s",
			    "", "");
		if (get_str(d, o, "path", 1, &dev->path) != 0 ||
		    get_str(d, o, "hostPath", 0, &dev->host_path) != 0 ||
		    get_str(d, o, "permissions", 0, &dev->permissions) != 0 ||
		    get_int(d, o, "major", 0, 0xfff, &dev->major) != 0 ||
		    get_int(d, o, "minor", 0, 0xfffff, &dev->minor) != 0)
			return GP_EINVAL;
		if (absolute(d, "a device's path", dev->path) != 0 ||
		    (dev->host_path != NULL &&
		    absolute(d, "a device's hostPath", dev->host_path) != 0))
			return GP_EINVAL;
		if (get_str(d, o, "type", 0, &type) != 0)
			return GP_EINVAL;
		if (type != NULL) {
			if (strcmp(type, "c") == 0 || strcmp(type, "u") == 0)
				dev->type = 'c';
			else if (strcmp(type, "b") == 0)
				dev->type = 'b';
			else {
				free(type);
				return fail(d, "device %s: type must be c, u "
				    "or b%s", dev->path, "");
			}
			free(type);
		}
		if (dev->permissions != NULL &&
		    (dev->permissions[0] == '\0' ||
		    strspn(dev->permissions, "rwm") !=
		    strlen(dev->permissions)))
			return fail(d, "device %s: permissions must be made "
			    "of r, w and m%s", dev->path, "");
	}
	return 0;
}

static int
decode_mounts(struct dec *d, json_t *list, struct gp_oci_edits *e)
{
	json_t *o;
	size_t i;

	if ((e->mounts = calloc(json_array_size(list) + 1,
	    sizeof(*e->mounts))) == NULL)
		return fail(d, "out of memory%s%s", "", "");
	json_array_foreach(list, i, o) {
		struct gp_oci_mount *m = &e->mounts[e->nmounts++];

		if (!json_is_object(o))
			return fail(d, "a mounts entry must be a map%s%s", "",
			    "");
		if (get_str(d, o, "hostPath", 1, &m->host_path) != 0 ||
		    get_str(d, o, "containerPath", 1, &m->container_path) !=
		    0 || get_str(d, o, "type", 0, &m->type) != 0 ||
		    get_strv(d, o, "options", &m->options) != 0)
			return GP_EINVAL;
		if (absolute(d, "a mount's hostPath", m->host_path) != 0 ||
		    absolute(d, "a mount's containerPath",
		    m->container_path) != 0)
			return GP_EINVAL;
	}
	return 0;
}

static int
decode_hooks(struct dec *d, json_t *list, struct gp_oci_edits *e)
{
	static const char *names[] = {"prestart", "createRuntime",
	    "createContainer", "startContainer", "poststart", "poststop"};
	json_t *o;
	size_t i, k;

	if ((e->hooks = calloc(json_array_size(list) + 1,
	    sizeof(*e->hooks))) == NULL)
		return fail(d, "out of memory%s%s", "", "");
	json_array_foreach(list, i, o) {
		struct gp_oci_hook *h = &e->hooks[e->nhooks++];
		int64_t timeout = 0;

		if (!json_is_object(o))
			return fail(d, "a hooks entry must be a map%s%s", "",
			    "");
		if (get_str(d, o, "hookName", 1, &h->hook_name) != 0 ||
		    get_str(d, o, "path", 1, &h->path) != 0 ||
		    get_strv(d, o, "args", &h->args) != 0 ||
		    get_strv(d, o, "env", &h->env) != 0 ||
		    get_int(d, o, "timeout", 0, 3600, &timeout) != 0)
			return GP_EINVAL;
		h->timeout = (int)timeout;
		for (k = 0; k < GP_ARRAY_LEN(names); k++)
			if (strcmp(h->hook_name, names[k]) == 0)
				break;
		if (k == GP_ARRAY_LEN(names))
			return fail(d, "unknown hookName %s%s", h->hook_name,
			    "");
		if (absolute(d, "a hook's path", h->path) != 0)
			return GP_EINVAL;
		for (char **p = h->env; p != NULL && *p != NULL; p++)
			if (!env_ok(*p))
				return fail(d, "hook env entry %s is not "
				    "KEY=VALUE%s", *p, "");
	}
	return 0;
}

static int
decode_edits(struct dec *d, json_t *obj, struct gp_oci_edits *e)
{
	json_t *list, *v;
	char **env = NULL;
	size_t i;

	if (obj == NULL || json_is_null(obj))
		return 0;
	if (!json_is_object(obj))
		return fail(d, "containerEdits must be a map%s%s", "", "");
	if (get_strv(d, obj, "env", &env) != 0) {
		for (char **p = env; p != NULL && *p != NULL; p++)
			free(*p);
		free(env);
		return GP_EINVAL;
	}
	if (env != NULL) {
		e->env = env;
		while (env[e->nenv] != NULL)
			e->nenv++;
		for (i = 0; i < (size_t)e->nenv; i++)
			if (!env_ok(env[i]))
				return fail(d, "env entry %s is not KEY=VALUE%s",
				    env[i], "");
	}
	if (get_list(d, obj, "deviceNodes", &list) != 0 ||
	    (list != NULL && decode_devices(d, list, e) != 0))
		return GP_EINVAL;
	if (get_list(d, obj, "mounts", &list) != 0 ||
	    (list != NULL && decode_mounts(d, list, e) != 0))
		return GP_EINVAL;
	if (get_list(d, obj, "hooks", &list) != 0 ||
	    (list != NULL && decode_hooks(d, list, e) != 0))
		return GP_EINVAL;
	if (get_list(d, obj, "additionalGIDs", &list) != 0)
		return GP_EINVAL;
	if (list != NULL) {
		if ((e->gids = calloc(json_array_size(list) + 1,
		    sizeof(int64_t))) == NULL)
			return fail(d, "out of memory%s%s", "", "");
		json_array_foreach(list, i, v) {
			if (int_of(v, 1, 4294967294LL, &e->gids[e->ngids]) != 0)
				return fail(d, "additionalGIDs must be group "
				    "ids above 0%s%s", "", "");
			e->ngids++;
		}
	}
	return 0;
}

/* CDI device names: [A-Za-z0-9][A-Za-z0-9_.:-]* */
static int
name_ok(const char *n)
{
	if (n == NULL || n[0] == '\0' || strlen(n) > 256 ||
	    !((n[0] >= 'a' && n[0] <= 'z') || (n[0] >= 'A' && n[0] <= 'Z') ||
	    (n[0] >= '0' && n[0] <= '9')))
		return 0;
	return strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789_.:-") == strlen(n);
}

/* vendor/class: vendor a domain-like name, class a name. */
static int
kind_ok(const char *k)
{
	const char *slash = k != NULL ? strchr(k, '/') : NULL;

	return slash != NULL && slash != k && slash[1] != '\0' &&
	    strchr(slash + 1, '/') == NULL && strlen(k) <= 256 &&
	    strspn(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	    "0123456789_.-/") == strlen(k);
}

int
gp_cdi_parse(const char *text, size_t len, int json, struct gp_cdi_spec *spec,
    char *err, size_t errlen)
{
	struct dec d = {err, errlen, 0};
	json_t *root, *list, *o;
	json_error_t jerr;
	size_t i;

	memset(spec, 0, sizeof(*spec));
	if (len > GP_CDI_FILE_MAX) {
		snprintf(err, errlen, "larger than %d bytes", GP_CDI_FILE_MAX);
		return GP_EINVAL;
	}
	if (json) {
		root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
		if (root == NULL) {
			snprintf(err, errlen, "JSON: %s at line %d", jerr.text,
			    jerr.line);
			return GP_EINVAL;
		}
	} else if ((root = load_yaml(text, len, err, errlen)) == NULL)
		return GP_EINVAL;
	if (!json_is_object(root)) {
		fail(&d, "a spec must be a map%s%s", "", "");
		goto out;
	}
	if (get_str(&d, root, "cdiVersion", 1, &spec->version) != 0 ||
	    get_str(&d, root, "kind", 1, &spec->kind) != 0)
		goto out;
	if (!kind_ok(spec->kind)) {
		fail(&d, "kind %s is not vendor/class%s", spec->kind, "");
		goto out;
	}
	if (decode_edits(&d, json_object_get(root, "containerEdits"),
	    &spec->edits) != 0)
		goto out;
	if (get_list(&d, root, "devices", &list) != 0)
		goto out;
	if (list == NULL) {
		fail(&d, "missing \"devices\"%s%s", "", "");
		goto out;
	}
	if (json_array_size(list) > DEVICES_MAX) {
		fail(&d, "more than 1024 devices%s%s", "", "");
		goto out;
	}
	if ((spec->devices = calloc(json_array_size(list) + 1,
	    sizeof(*spec->devices))) == NULL) {
		fail(&d, "out of memory%s%s", "", "");
		goto out;
	}
	json_array_foreach(list, i, o) {
		struct gp_cdi_device *dev = &spec->devices[spec->ndevices++];

		if (!json_is_object(o)) {
			fail(&d, "a device must be a map%s%s", "", "");
			goto out;
		}
		if (get_str(&d, o, "name", 1, &dev->name) != 0)
			goto out;
		if (!name_ok(dev->name)) {
			fail(&d, "bad device name %s%s", dev->name, "");
			goto out;
		}
		if (decode_edits(&d, json_object_get(o, "containerEdits"),
		    &dev->edits) != 0)
			goto out;
	}
out:
	json_decref(root);
	return d.bad ? GP_EINVAL : 0;
}

void
gp_cdi_spec_fini(struct gp_cdi_spec *spec)
{
	int i;

	if (spec == NULL)
		return;
	free(spec->path);
	free(spec->version);
	free(spec->kind);
	for (i = 0; i < spec->ndevices; i++) {
		free(spec->devices[i].name);
		gp_oci_edits_fini(&spec->devices[i].edits);
	}
	free(spec->devices);
	gp_oci_edits_fini(&spec->edits);
	memset(spec, 0, sizeof(*spec));
}

/* ---- the registry ---- */

static int
spec_file(const char *name, int *json)
{
	size_t n = strlen(name);

	if (name[0] == '.')
		return 0;
	*json = n > 5 && strcmp(name + n - 5, ".json") == 0;
	return *json || (n > 5 && strcmp(name + n - 5, ".yaml") == 0) ||
	    (n > 4 && strcmp(name + n - 4, ".yml") == 0);
}

static int
by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int
gp_cdi_load(const char *const *dirs, int ndirs, struct gp_cdi_registry *reg)
{
	int d, i, n, json, loaded = 0;

	memset(reg, 0, sizeof(*reg));
	for (d = 0; d < ndirs; d++) {
		struct dirent **names = NULL;

		n = scandir(dirs[d], &names, NULL, by_name);
		for (i = 0; i < n; i++) {
			char path[4096], err[512];
			struct gp_cdi_spec spec, *grown;
			char *text = NULL;
			size_t len;

			if (!spec_file(names[i]->d_name, &json))
				goto next;
			snprintf(path, sizeof(path), "%s/%s", dirs[d],
			    names[i]->d_name);
			if (gp_read_file(path, GP_CDI_FILE_MAX, &text,
			    &len) != 0) {
				gp_warn("CDI spec skipped path=%s why=\"cannot "
				    "read it or it is too big\"", path);
				goto next;
			}
			if (gp_cdi_parse(text, len, json, &spec, err,
			    sizeof(err)) != 0) {
				gp_warn("CDI spec skipped path=%s why=\"%s\"",
				    path, err);
				gp_cdi_spec_fini(&spec);
				goto next;
			}
			grown = realloc(reg->specs, (size_t)(reg->nspecs + 1) *
			    sizeof(*reg->specs));
			if (grown == NULL || (spec.path = strdup(path)) ==
			    NULL) {
				if (grown != NULL)
					reg->specs = grown;
				gp_cdi_spec_fini(&spec);
				free(text);
				for (; i < n; i++)
					free(names[i]);
				free(names);
				return GP_ENOMEM;
			}
			reg->specs = grown;
			reg->specs[reg->nspecs++] = spec;
			loaded++;
			gp_info("CDI spec loaded path=%s kind=%s devices=%d",
			    path, spec.kind, spec.ndevices);
next:
			free(text);
			free(names[i]);
		}
		free(names);
	}
	return loaded;
}

void
gp_cdi_registry_fini(struct gp_cdi_registry *reg)
{
	for (int i = 0; i < reg->nspecs; i++)
		gp_cdi_spec_fini(&reg->specs[i]);
	free(reg->specs);
	memset(reg, 0, sizeof(*reg));
}

const struct gp_cdi_device *
gp_cdi_find(const struct gp_cdi_registry *reg, const char *kind,
    const char *name, const struct gp_cdi_spec **spec)
{
	for (int i = reg->nspecs - 1; i >= 0; i--) {
		const struct gp_cdi_spec *s = &reg->specs[i];

		if (strcmp(s->kind, kind) != 0)
			continue;
		for (int k = 0; k < s->ndevices; k++)
			if (strcmp(s->devices[k].name, name) == 0) {
				if (spec != NULL)
					*spec = s;
				return &s->devices[k];
			}
	}
	return NULL;
}

int
gp_cdi_has_kind(const struct gp_cdi_registry *reg, const char *kind)
{
	for (int i = 0; i < reg->nspecs; i++)
		if (strcmp(reg->specs[i].kind, kind) == 0 &&
		    reg->specs[i].ndevices > 0)
			return 1;
	return 0;
}
