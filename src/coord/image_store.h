/*
 * image_store.h: the image store (image.c): blobs, names, signatures.
 */
#ifndef GP_COORD_IMAGE_STORE_H
#define GP_COORD_IMAGE_STORE_H

#include "state.h"

/* image.c */
struct image_upload;
/* Opens the images' records (store_meta.h) and starts the GC thread. */
int image_init(const struct coord_config *cfg);
void image_stop(void);
/* The routes (image_routes, route.h) are answered by image_handle. */
enum MHD_Result image_handle(struct MHD_Connection *conn,
    struct request *req, const char *url, const char *method);
/* The streamed blob PUT, as ckpt_upload_* (see there). */
void image_upload_begin(struct request *req, const char *url);
void image_upload_data(struct request *req, const char *data, size_t len);
enum MHD_Result image_upload_end(struct MHD_Connection *conn,
    struct request *req);
/*
 * Resolves a submit's image reference (a name, NAME@sha256:..., or
 * sha256:...) and pins it. OUT: pinned ("NAME@sha256:..."), *signers (a
 * new array of the keys that signed it). Returns 0, or GP_ENOENT /
 * GP_EINVAL with err.
 */
int image_resolve(const char *ref, char *pinned, size_t len,
    json_t **signers, char *err, size_t errlen);
/* The signer keys of a stored image (a new array; empty when none). */
json_t *image_signers(const char *digest);
/* At start-up: fills the signers of every unfinished image job. */
void image_attach_jobs(void);

#endif
