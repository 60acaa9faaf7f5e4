/*
 * gpupool-init.c: pid 1 of every container job (built statically as
 * gpupool-init, bind-mounted read-only into the container by the
 * container executor, src/agent/container.c). It does for a container
 * what the plain sandbox's init does after its setup (src/agent/sandbox.c):
 *
 *   - forks the job's command with stdin /dev/null and stdout and stderr
 *     on the output pipe (fd 4), and tells the agent on the status pipe
 *     (fd 3) whether exec worked (GP_SANDBOX_EXEC_OK / EXEC_FAILED), so a
 *     missing program is a start failure, not an exit status 127;
 *   - passes the signals a job may be asked to checkpoint with on to the
 *     command (the OCI runtime passes them to us), so the command is never
 *     pid 1 and keeps the default actions of its signals;
 *   - reaps every orphan until the command exits, then writes its exact
 *     wait status (GP_SANDBOX_EXITED) and exits, which ends the container.
 *
 * Usage (written by the executor, not by people):
 *   gpupool-init -- COMMAND [ARG...]
 * with fd 3 the status pipe and fd 4 the output pipe (runtime
 * --preserve-fds 2). The environment and the working directory are the
 * runtime's (process.env, process.cwd).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/sandbox.h"

#define STATUS_FD 3
#define OUTPUT_FD 4

static const int forwarded[] = {SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2,
    SIGALRM, SIGTERM};
static volatile sig_atomic_t command_pid, pending_signal;

static void
forward_signal(int sig)
{
	int saved = errno;

	if (command_pid > 0)
		kill((pid_t)command_pid, sig);
	else
		pending_signal = sig;
	errno = saved;
}

static void
report(int kind, int value)
{
	struct gp_sandbox_record rec = {kind, 0, value};
	ssize_t n;

	do
		n = write(STATUS_FD, &rec, sizeof(rec));
	while (n < 0 && errno == EINTR);
}

static void
run_command(char **argv, int exec_fd, int null_fd)
{
	sigset_t none;
	size_t i;
	int err;

	for (i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		signal(forwarded[i], SIG_DFL);
	signal(SIGPIPE, SIG_DFL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (dup2(null_fd, 0) < 0 || dup2(OUTPUT_FD, 1) < 0 ||
	    dup2(OUTPUT_FD, 2) < 0)
		goto fail;
	/* Keep only 0-2 and the exec pipe (close-on-exec) past exec. */
	if (exec_fd > 3)
		close_range(3, (unsigned int)exec_fd - 1, 0);
	close_range((unsigned int)exec_fd + 1, ~0U, 0);
	execvp(argv[0], argv);
fail:
	err = errno;
	(void)!write(exec_fd, &err, sizeof(err));
	_exit(127);
}

int
main(int argc, char **argv)
{
	int exec_pipe[2], null_fd, err = 0, status = 0;
	struct sigaction sa;
	sigset_t set;
	pid_t child, pid;
	ssize_t n;
	size_t i;

	if (argc < 3 || strcmp(argv[1], "--") != 0 ||
	    fcntl(STATUS_FD, F_GETFD) < 0 || fcntl(OUTPUT_FD, F_GETFD) < 0) {
		fprintf(stderr, "gpupool-init: usage: gpupool-init -- COMMAND "
		    "[ARG...], with fd 3 and 4 open (run by the gpupool "
		    "agent only)\n");
		return 127;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = forward_signal;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigemptyset(&set);
	for (i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++) {
		sigaddset(&sa.sa_mask, forwarded[i]);
		sigaddset(&set, forwarded[i]);
	}
	for (i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++)
		sigaction(forwarded[i], &sa, NULL);
	sigprocmask(SIG_UNBLOCK, &set, NULL);
	fcntl(STATUS_FD, F_SETFD, FD_CLOEXEC);
	fcntl(OUTPUT_FD, F_SETFD, FD_CLOEXEC);
	if ((null_fd = open("/dev/null", O_RDWR | O_CLOEXEC)) < 0 ||
	    pipe2(exec_pipe, O_CLOEXEC) != 0) {
		report(GP_SANDBOX_EXEC_FAILED, errno);
		return 127;
	}
	if ((child = fork()) < 0) {
		report(GP_SANDBOX_EXEC_FAILED, errno);
		return 127;
	}
	if (child == 0)
		run_command(argv + 2, exec_pipe[1], null_fd);
	command_pid = child;
	if (pending_signal != 0)
		kill(child, (int)pending_signal);
	close(exec_pipe[1]);
	close(null_fd);
	close(OUTPUT_FD);
	do
		n = read(exec_pipe[0], &err, sizeof(err));
	while (n < 0 && errno == EINTR);
	close(exec_pipe[0]);
	if (n == (ssize_t)sizeof(err))
		report(GP_SANDBOX_EXEC_FAILED, err);
	else
		report(GP_SANDBOX_EXEC_OK, 0);
	for (;;) {
		pid = waitpid(-1, &status, 0);
		if (pid == child)
			break;
		if (pid < 0 && errno != EINTR)
			return 127;
	}
	if (n != (ssize_t)sizeof(err))
		report(GP_SANDBOX_EXITED, status);
	return 0;
}
