/*
 * coord.h: the coordinator's entry point (see coord/README in
 * docs/architecture.md for the files in reading order).
 */
#ifndef GP_COORD_H
#define GP_COORD_H

/* argv[0] is "coordinator". Returns the process exit code. */
int gp_coord_main(int argc, char **argv);
/* migrate_pg.c: `coordinator migrate --from DATA_DIR --to URL`. */
int gp_coord_migrate_main(int argc, char **argv);
struct gp_store;
/* migrate_pg.c: records left in SQLite files on a PostgreSQL pool? */
int gp_coord_records_stranded(struct gp_store *store, const char *data_dir,
    char *err, size_t errlen);

#endif
