/*
 * fuzz_docker_save.c: libFuzzer harness for `docker save`'s manifest.json
 * decoder (common/oci.c), with the image reference and store name parsers
 * and the signing key file parser, all fed text a user hands the CLI. The
 * first byte picks the parser. Accepted paths must be clean and relative;
 * accepted references must parse the same way again.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gp.h"
#include "oci.h"
#include "sign.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
check_path(const char *p)
{
	if (p == NULL || p[0] == '\0' || p[0] == '/' || strcmp(p, "..") == 0 ||
	    strncmp(p, "../", 3) == 0 || strstr(p, "/../") != NULL ||
	    strstr(p, "//") != NULL)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gp_docker_save ds;
	struct gp_image_ref r, r2;
	struct gp_sign_key k;
	char err[600], *text, name[GP_IMAGE_NAME_MAX + 1];
	char name2[GP_IMAGE_NAME_MAX + 1];
	int i, j;

	if (size < 1)
		return 0;
	switch (data[0] % 3) {
	case 0:
		if (gp_docker_save_decode((const char *)data + 1, size - 1, &ds,
		        err, sizeof(err)) != 0)
			break;
		for (i = 0; i < ds.n; i++) {
			check_path(ds.images[i].config);
			if (ds.images[i].nlayers < 1)
				abort();
			for (j = 0; j < ds.images[i].nlayers; j++)
				check_path(ds.images[i].layers[j]);
		}
		gp_docker_save_fini(&ds);
		break;
	case 1:
		if ((text = malloc(size)) == NULL)
			return 0;
		memcpy(text, data + 1, size - 1);
		text[size - 1] = '\0';
		if (gp_image_ref_parse(text, &r, err, sizeof(err)) == 0 &&
		    (r.repository[0] == '\0' || r.registry[0] == '\0' ||
		        (r.digest[0] != '\0' &&
		            !gp_oci_digest_valid(r.digest))))
			abort();
		if (gp_image_name_normalize(text, name, sizeof(name), err,
		        sizeof(err)) == 0) {
			/* A normalized name normalizes to itself. */
			if (gp_image_name_normalize(name, name2, sizeof(name2),
			        err, sizeof(err)) != 0 ||
			    strcmp(name, name2) != 0)
				abort();
			/* (Docker Hub's "library/" may make it too long.) */
			if (strlen(name) < 240 &&
			    gp_image_ref_parse(name, &r2, err, sizeof(err)) !=
			        0)
				abort();
		}
		free(text);
		break;
	default:
		if (gp_sign_key_parse((const char *)data + 1, size - 1, &k, err,
		        sizeof(err)) == 0 &&
		    k.public_text[0] == '\0')
			abort();
		gp_sign_key_wipe(&k);
		break;
	}
	return 0;
}
