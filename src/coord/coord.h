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

#endif
