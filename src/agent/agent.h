/*
 * agent.h: the provider agent's entry point.
 */
#ifndef GP_AGENT_H
#define GP_AGENT_H

/* argv[0] is "agent". Returns the process exit code. */
int gp_agent_main(int argc, char **argv);

#endif
