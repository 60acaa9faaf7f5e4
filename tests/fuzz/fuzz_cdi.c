/*
 * fuzz_cdi.c: libFuzzer harness for the CDI spec decoder
 * (src/agent/cdi.c), through both readers: the first byte picks JSON
 * ("J") or YAML (anything else), the rest is the file. Whatever the bytes,
 * decoding must not crash, leak, loop or read out of bounds, and an
 * accepted spec holds what cdi.h promises: a vendor/class kind, named
 * devices, absolute paths, known hook names, device types and
 * permissions it can use, and edits that copy and build a config.json.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/cdi.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_edits(const struct gp_oci_edits *e)
{
	struct gp_oci_edits copy;
	int i;

	for (i = 0; i < e->nenv; i++)
		if (strchr(e->env[i], '=') == NULL || e->env[i][0] == '=')
			abort();
	for (i = 0; i < e->ndevices; i++) {
		const struct gp_oci_device *d = &e->devices[i];
		if (d->path == NULL || d->path[0] != '/' ||
		    (d->host_path != NULL && d->host_path[0] != '/') ||
		    (d->type != 0 && d->type != 'c' && d->type != 'b') ||
		    (d->permissions != NULL && (d->permissions[0] == '\0' ||
		    strspn(d->permissions, "rwm") != strlen(d->permissions))))
			abort();
	}
	for (i = 0; i < e->nmounts; i++)
		if (e->mounts[i].host_path == NULL ||
		    e->mounts[i].host_path[0] != '/' ||
		    e->mounts[i].container_path == NULL ||
		    e->mounts[i].container_path[0] != '/')
			abort();
	for (i = 0; i < e->nhooks; i++)
		if (e->hooks[i].path == NULL || e->hooks[i].path[0] != '/' ||
		    e->hooks[i].hook_name == NULL)
			abort();
	for (i = 0; i < e->ngids; i++)
		if (e->gids[i] <= 0)
			abort();
	memset(&copy, 0, sizeof(copy));
	if (gp_oci_edits_append(&copy, e) == 0 &&
	    (copy.nenv != e->nenv || copy.ndevices != e->ndevices ||
	    copy.nmounts != e->nmounts || copy.nhooks != e->nhooks))
		abort();
	gp_oci_edits_fini(&copy);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gp_cdi_spec spec;
	char err[512];
	int json;

	if (size < 1)
		return 0;
	json = data[0] == 'J';
	err[0] = '\0';
	if (gp_cdi_parse((const char *)data + 1, size - 1, json, &spec, err,
	    sizeof(err)) == 0) {
		if (spec.kind == NULL || strchr(spec.kind, '/') == NULL ||
		    spec.version == NULL)
			abort();
		for (int i = 0; i < spec.ndevices; i++) {
			if (spec.devices[i].name == NULL ||
			    spec.devices[i].name[0] == '\0')
				abort();
			check_edits(&spec.devices[i].edits);
		}
		check_edits(&spec.edits);
	} else if (err[0] == '\0')
		abort();	/* a refusal always says why */
	gp_cdi_spec_fini(&spec);
	return 0;
}
