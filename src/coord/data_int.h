/*
 * data_int.h: what the data set files share (data.c: the tables, access,
 * quotas, GC, routing; data_upload.c: uploads; data_sets.c: data sets,
 * quotas, outputs and the agents' reads) and nobody else sees.
 */
#ifndef GP_COORD_DATA_INT_H
#define GP_COORD_DATA_INT_H



#include "store_meta.h"
#include "state.h"

#define UPLOAD_BODY_MAX (32u << 20)
#define UPLOAD_TTL_MS   (24 * 3600 * 1000LL)
#define PARTS_MAX       10
#define PART_LEN        100

/* An upload in progress, as stored. */
struct data_upload {
	int64_t id;
	char user[GP_NAME_MAX + 1];
	char kind[8];
	char name[GP_NAME_MAX + 1];
	int64_t job_id, attempt, creator, bytes, files;
};

/*
 * data.c's own connection to its tables (store_meta.h) and the lock that guards it
 * (and the tables' meaning). Order: blob_lock, data_lock, state.lock.
 */
extern struct gp_meta *data_db;
extern pthread_mutex_t data_lock;
extern int64_t data_quota_default; /* bytes; 0: no limit */
extern int64_t data_max;           /* bytes in one version/output */
extern int64_t data_output_retain_ms;

/* data.c */
/* A JSON string's value, "" for anything else. */
const char *data_str(json_t *v);
/* One integer from a query with text/int parameters; def when no row. */
int64_t data_query_int(int64_t def, const char *sql, const char *fmt, ...);
int data_shared_with(const char *owner, const char *name, const char *who);
/* A user's call (data sets, quotas, outputs): users and admins only. */
int data_user_role(const struct token_entry *who);
/* Who may read a data set (list, manifests, chunks). */
int data_may_read(const struct token_entry *who, const char *owner,
    const char *name);
/* Whose jobs may mount a data set: its owner and those it is shared with. */
int data_may_mount(const char *job_user, const char *owner, const char *name);
/* Who may change a data set (remove, share): its owner and admins. */
int data_may_change(const struct token_entry *who, const char *owner);
/* Bytes of the distinct chunks of user's objects, but object skip. */
int64_t data_usage(const char *user, const char *kind, int64_t skip);
/* What upload adds to user's usage: its chunks no object of theirs has. */
int64_t data_upload_adds(int64_t upload, const char *user, int64_t skip);
/* The user's limit in bytes, 0 for none. OUT: *source. */
int64_t data_quota_of(const char *user, const char **source);
/* The 413 answer of a refused upload, with the figures. */
enum MHD_Result data_reply_quota(struct MHD_Connection *conn, const char *user,
    int64_t used, int64_t limit, int64_t needed);
/* Splits url into at most PARTS_MAX parts; returns the count or GP_EINVAL. */
int data_split_url(const char *url, char parts[][PART_LEN]);
int data_num(const char *text, int64_t *v);
/* The id of a data set version (0: the latest). OUT: *version. 0: none. */
int64_t data_object(const char *owner, const char *name, int64_t *version);
/* The manifest of object id with its metadata; NULL when gone. */
json_t *data_object_manifest(int64_t id);
int data_object_has_chunk(int64_t id, const char *chunk);
/* Deletes object id and its chunk list. */
int data_object_delete(int64_t id);
void data_upload_delete(int64_t id);
int data_upload_load(int64_t id, struct data_upload *u);
/*
 * May who continue upload u (PUT, commit)? A data set upload: the user
 * who began it. An output: the agent token that began it, while the
 * attempt is still the job's current one (data_lock held; takes
 * state.lock briefly). Returns 0 or the HTTP status with err.
 */
int data_upload_access(const struct token_entry *who,
    const struct data_upload *u, char *err, size_t errlen);

/* data_upload.c, data_sets.c: the handlers data_handle routes to. */
enum MHD_Result data_handle_upload_data(struct MHD_Connection *conn,
    struct request *req);
enum MHD_Result data_handle_upload_output(struct MHD_Connection *conn,
    struct request *req, int64_t id, int64_t attempt);
enum MHD_Result data_handle_commit(struct MHD_Connection *conn,
    struct request *req, int64_t id);
enum MHD_Result data_handle_list(struct MHD_Connection *conn,
    struct request *req);
enum MHD_Result data_handle_versions(struct MHD_Connection *conn,
    struct request *req, const char *owner, const char *name);
enum MHD_Result data_handle_read(struct MHD_Connection *conn,
    struct request *req, const char *owner, const char *name, const char *vtext,
    const char *chunk);
enum MHD_Result data_handle_remove(struct MHD_Connection *conn,
    struct request *req, const char *owner, const char *name,
    const char *vtext);
enum MHD_Result data_handle_share(struct MHD_Connection *conn,
    struct request *req, const char *owner, const char *name, int share);
enum MHD_Result data_handle_quota(struct MHD_Connection *conn,
    struct request *req, const char *user, const char *method);
enum MHD_Result data_handle_output(struct MHD_Connection *conn,
    struct request *req, int64_t job, const char *chunk, const char *method);
enum MHD_Result data_handle_agent_data(struct MHD_Connection *conn,
    struct request *req, int64_t job, int64_t attempt, int64_t k,
    const char *chunk);

#endif
