/*
 * forward.c: the commands the `gpupool` executable does not run itself.
 * Each hands the command line, unchanged, to the whole program in
 * libgpupool.so (load.c): they need libcurl's streaming and https, the
 * agent's control socket, SQLite, libarchive or the coordinator's code.
 * A new command whose file needs such a library goes on this list (the
 * executable then fails to link until it does).
 */
#include "cli/cmd.h"
#include "lite/lite.h"

#define FORWARD(name)                                                          \
	int name(const struct gp_cli_args *args)                               \
	{                                                                      \
		(void)args;                                                    \
		return gp_lite_run_full();                                     \
	}

/* checkpoint.c: chunked downloads (transfer.c) */
FORWARD(gp_cli_cmd_checkpoints)
FORWARD(gp_cli_cmd_checkpoint_get)
/* data.c: chunked uploads and downloads */
FORWARD(gp_cli_cmd_data_put)
FORWARD(gp_cli_cmd_data_ls)
FORWARD(gp_cli_cmd_data_rm)
FORWARD(gp_cli_cmd_data_share)
FORWARD(gp_cli_cmd_data_unshare)
FORWARD(gp_cli_cmd_fetch)
FORWARD(gp_cli_cmd_output_rm)
FORWARD(gp_cli_cmd_quota_show)
FORWARD(gp_cli_cmd_quota_set)
/* image.c, image_archive.c: archives, registries, signatures */
FORWARD(gp_cli_cmd_image_import)
FORWARD(gp_cli_cmd_image_ls)
FORWARD(gp_cli_cmd_image_rm)
FORWARD(gp_cli_cmd_image_pull)
FORWARD(gp_cli_cmd_image_sign)
FORWARD(gp_cli_cmd_key_create)
/* provider.c: the agent's control socket and policy files */
FORWARD(gp_cli_cmd_provider_status)
FORWARD(gp_cli_cmd_provider_pause)
FORWARD(gp_cli_cmd_provider_resume)
FORWARD(gp_cli_cmd_provider_reclaim)
FORWARD(gp_cli_cmd_provider_leave)
FORWARD(gp_cli_cmd_provider_policy_show)
FORWARD(gp_cli_cmd_provider_policy_check)
/* up.c: starts the coordinator and agents */
FORWARD(gp_cli_cmd_up)
FORWARD(gp_cli_cmd_down)
/* interactive.c: Upgrade streams over libcurl (https included) */
FORWARD(gp_cli_cmd_shell)
FORWARD(gp_cli_cmd_exec)
FORWARD(gp_cli_cmd_port_forward)
FORWARD(gp_cli_cmd_jupyter) /* jupyter.c: forks port-forward */
FORWARD(gp_cli_cmd_connect)
FORWARD(gp_cli_cmd_ssh_config)
/* sim.c: the scheduler simulator (the coordinator's scheduler) */
FORWARD(gp_cli_cmd_sim)
