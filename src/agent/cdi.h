/*
 * cdi.h: Container Device Interface specifications (the format NVIDIA's
 * container toolkit writes to /etc/cdi and /var/run/cdi: YAML or JSON),
 * their strict decoder (YAML through libyaml, JSON through jansson; see
 * tests/fuzz/fuzz_cdi.c) and the lookup of a GPU's device by name. The
 * container executor turns what they say into container edits
 * (struct gp_oci_edits) for config.json.
 */
#ifndef GP_AGENT_CDI_H
#define GP_AGENT_CDI_H

#include <stddef.h>

#include "agent/oci.h"

#define GP_CDI_FILE_MAX (4 << 20)	/* bytes of one spec file */
#define GP_CDI_KIND_GPU "nvidia.com/gpu"

struct gp_cdi_device {
	char *name;			/* "0", "GPU-<uuid>", "all" */
	struct gp_oci_edits edits;
};

struct gp_cdi_spec {
	char *path;			/* the file (for logs), or NULL */
	char *version;			/* cdiVersion */
	char *kind;			/* "vendor/class" */
	struct gp_cdi_device *devices;
	int ndevices;
	struct gp_oci_edits edits;	/* the spec's common edits */
};

/*
 * Decodes one spec. IN: json: 1 to read text as JSON, 0 as YAML (1.1,
 * anchors and aliases allowed but never expanded past the limits).
 * Unknown fields are ignored; a known field of the wrong type, a missing
 * required field, a relative path, a bad name or too many entries refuse
 * the whole spec. OUT: spec (zeroed first; release with
 * gp_cdi_spec_fini whatever the result), err. Returns 0 or GP_EINVAL.
 */
int gp_cdi_parse(const char *text, size_t len, int json,
    struct gp_cdi_spec *spec, char *err, size_t errlen);
void gp_cdi_spec_fini(struct gp_cdi_spec *spec);

/* Every spec found, in load order. */
struct gp_cdi_registry {
	struct gp_cdi_spec *specs;
	int nspecs;
};

/*
 * Loads each *.yaml, *.yml and *.json file of dirs (in order; files in
 * name order). A file that cannot be read or decoded is logged and
 * skipped. Returns the number of specs loaded (0 is fine) or GP_ENOMEM.
 */
int gp_cdi_load(const char *const *dirs, int ndirs,
    struct gp_cdi_registry *reg);
void gp_cdi_registry_fini(struct gp_cdi_registry *reg);

/*
 * The device kind/name; a spec loaded later (a later directory: /var/run
 * over /etc) wins. OUT: *spec (may be NULL). NULL when there is none.
 */
const struct gp_cdi_device *gp_cdi_find(const struct gp_cdi_registry *reg,
    const char *kind, const char *name, const struct gp_cdi_spec **spec);

/* 1 when some spec of the registry has devices of kind. */
int gp_cdi_has_kind(const struct gp_cdi_registry *reg, const char *kind);

#endif
