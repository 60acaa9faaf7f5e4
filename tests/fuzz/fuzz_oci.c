/*
 * fuzz_oci.c: libFuzzer harness for the image document decoders
 * (common/oci.c): the first byte picks the image manifest, index (and the
 * linux/amd64 pick), config or content-type detection decoder; the rest
 * is the document. These bytes come from archives, registries and the
 * coordinator. What a decoder accepts must hold what its callers rely on;
 * a refusal must say why.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "oci.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gp_oci_manifest m;
	struct gp_oci_index idx;
	struct gp_oci_descriptor d;
	struct gp_oci_image_config c;
	const char *text = (const char *)data + 1;
	char err[600];
	size_t len;
	int i;

	if (size < 1)
		return 0;
	len = size - 1;
	err[0] = '\0';
	switch (data[0] % 4) {
	case 0:
		if (gp_oci_manifest_decode(text, len, &m, err, sizeof(err)) !=
		    0) {
			if (err[0] == '\0')
				abort();
			break;
		}
		if (m.nlayers < 1 || m.nlayers > GP_OCI_LAYERS_MAX ||
		    !gp_oci_digest_valid(m.config.digest) ||
		    m.config.size < 1 || m.config.size > GP_OCI_JSON_MAX)
			abort();
		for (i = 0; i < m.nlayers; i++)
			if (!gp_oci_digest_valid(m.layers[i].digest) ||
			    m.layers[i].size < 1 ||
			    m.layers[i].size > GP_OCI_LAYER_MAX)
				abort();
		gp_oci_manifest_fini(&m);
		break;
	case 1:
		if (gp_oci_index_decode(text, len, &idx, err, sizeof(err)) !=
		    0) {
			if (err[0] == '\0')
				abort();
			break;
		}
		if (idx.n < 1 || idx.n > GP_OCI_INDEX_MAX)
			abort();
		if (gp_oci_index_pick(&idx, "linux", "amd64", &d, err,
		        sizeof(err)) == 0 &&
		    !gp_oci_digest_valid(d.digest))
			abort();
		gp_oci_index_fini(&idx);
		break;
	case 2:
		if (gp_oci_config_decode(text, len, &c, err, sizeof(err)) !=
		    0) {
			if (err[0] == '\0')
				abort();
			break;
		}
		for (i = 0; c.env != NULL && c.env[i] != NULL; i++)
			if (strchr(c.env[i], '=') == NULL)
				abort();
		if (c.workdir != NULL && c.workdir[0] != '/')
			abort();
		gp_oci_config_fini(&c);
		break;
	default:
		(void)gp_oci_detect(text, len, NULL);
		(void)gp_oci_detect(text, len, GP_OCI_MT_INDEX);
		break;
	}
	return 0;
}
