/*
 * cli.h: the user commands (submit, ps, show, logs, cancel, wait, nodes,
 * token) and `up`, the whole local pool in one command.
 */
#ifndef GP_CLI_H
#define GP_CLI_H

/* argv[0] is the program, argv[1] the command. Returns the exit code. */
int gp_cli_main(int argc, char **argv);

/*
 * full.c: the whole program (coordinator, agent, every command), as
 * main() would run it; libgpupool.so's one exported symbol.
 */
int gp_main_full(int argc, char **argv);

#endif
