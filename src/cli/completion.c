/*
 * completion.c: `gpupool completion bash|zsh` prints a shell completion
 * script made from the CLI's command table (main.c), so that it knows
 * every command, option and operand the parser does and cannot drift
 * from it; the packages install what these print. The scripts complete
 * command names (with their summaries in zsh), options, the values of a
 * few options (--role, --checkpoint-signal, files), job ids (from
 * `gpupool ps`), token ids (from `gpupool token ls`), and the options of
 * `gpupool coordinator` and `gpupool agent` from their --help.
 */
#include <stdio.h>
#include <string.h>

#include "cli/cmd.h"
#include "gp.h"
#include "util.h"

/* Commands outside the table (their own flag parsers). */
static const char *const extra_words[] = {"coordinator", "agent", "version",
    "help"};

/* What a command's operands are, for completing them. */
static const char *
operand_kind(const struct gp_cli_command *c)
{
	const char *o = c->operands;

	if (strstr(o, "JOB") != NULL)
		return "job";
	if (strstr(o, "DIR") != NULL)
		return "dir";
	if (strstr(o, "FILE") != NULL)
		return "file";
	if (strstr(o, "COMMAND") != NULL)
		return "command";
	if (strstr(o, "ID") != NULL)
		return "token";
	if (strstr(o, "bash|zsh") != NULL)
		return "shell";
	return "none";
}

/* Appends s single-quoted for sh and zsh ('it'\''s'). */
static void
quote(struct gp_buf *out, const char *s)
{
	gp_buf_append(out, "'", 1);
	for (; *s != '\0'; s++) {
		if (*s == '\'')
			gp_buf_append(out, "'\\''", 4);
		else if (*s == '\n')
			gp_buf_append(out, " ", 1);
		else
			gp_buf_append(out, s, 1);
	}
	gp_buf_append(out, "'", 1);
}

/* "-g --gpus ..." of c; with_values: only those that take a value. */
static void
option_words(struct gp_buf *out, const struct gp_cli_command *c,
    int with_values)
{
	const struct gp_cli_option *o;
	int first = 1;

	for (o = c->options; o->name != NULL; o++) {
		if (with_values && o->metavar == NULL)
			continue;
		gp_buf_printf(out, "%s--%s", first ? "" : " ", o->name);
		first = 0;
		if (o->short_name != 0)
			gp_buf_printf(out, " -%c", o->short_name);
	}
}

static const char bash_body[] =
    "_gpupool_value() { # OPTION: what its value is\n"
    "\tcase $1 in\n"
    "\t--role) echo 'words user provider admin metrics' ;;\n"
    "\t--checkpoint-signal) echo 'words USR1 USR2 TERM INT HUP QUIT' ;;\n"
    "\t--token-file | --policy | --ca) echo file ;;\n"
    "\t--data | --socket) echo dir ;;\n"
    "\t*) echo none ;;\n"
    "\tesac\n"
    "}\n"
    "\n"
    "_gpupool() {\n"
    "\tlocal cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}\n"
    "\tlocal -a typed parts\n"
    "\tlocal name cmd='' best=0 i ok cands='' opts valopts kind what\n"
    "\ttyped=(\"${COMP_WORDS[@]:1:COMP_CWORD-1}\")\n"
    "\tCOMPREPLY=()\n"
    "\t# The longest command whose words open the line.\n"
    "\tfor name in \"${_gpupool_names[@]}\"; do\n"
    "\t\tread -r -a parts <<<\"$name\"\n"
    "\t\t(( ${#parts[@]} <= ${#typed[@]} && ${#parts[@]} > best )) || continue\n"
    "\t\tok=1\n"
    "\t\tfor ((i = 0; i < ${#parts[@]}; i++)); do\n"
    "\t\t\t[ \"${typed[i]}\" = \"${parts[i]}\" ] || ok=0\n"
    "\t\tdone\n"
    "\t\t[ $ok = 1 ] && cmd=$name && best=${#parts[@]}\n"
    "\tdone\n"
    "\tif [ -z \"$cmd\" ]; then\n"
    "\t\tcase ${typed[0]:-} in\n"
    "\t\tcoordinator | agent)\n"
    "\t\t\tif [[ $cur == -* ]]; then\n"
    "\t\t\t\tCOMPREPLY=($(compgen -W \"$(${COMP_WORDS[0]} \"${typed[0]}\" --help 2>&1 | grep -oE -- '--[a-z][a-z-]*' | sort -u)\" -- \"$cur\"))\n"
    "\t\t\telse\n"
    "\t\t\t\tCOMPREPLY=($(compgen -f -- \"$cur\"))\n"
    "\t\t\tfi\n"
    "\t\t\treturn ;;\n"
    "\t\tesac\n"
    "\t\t# The next word of the commands the typed words open.\n"
    "\t\tfor name in \"${_gpupool_names[@]}\"; do\n"
    "\t\t\tread -r -a parts <<<\"$name\"\n"
    "\t\t\t(( ${#parts[@]} > ${#typed[@]} )) || continue\n"
    "\t\t\tok=1\n"
    "\t\t\tfor ((i = 0; i < ${#typed[@]}; i++)); do\n"
    "\t\t\t\t[ \"${typed[i]}\" = \"${parts[i]}\" ] || ok=0\n"
    "\t\t\tdone\n"
    "\t\t\t[ $ok = 1 ] && cands+=\" ${parts[${#typed[@]}]}\"\n"
    "\t\tdone\n"
    "\t\t[ ${#typed[@]} = 0 ] && cands+=\" $_gpupool_extra\"\n"
    "\t\tCOMPREPLY=($(compgen -W \"$cands\" -- \"$cur\"))\n"
    "\t\treturn\n"
    "\tfi\n"
    "\t_gpupool_spec \"$cmd\"\n"
    "\tif [[ \" $valopts \" == *\" $prev \"* ]]; then\n"
    "\t\twhat=$(_gpupool_value \"$prev\")\n"
    "\t\tcase $what in\n"
    "\t\twords\\ *) COMPREPLY=($(compgen -W \"${what#words }\" -- \"$cur\")) ;;\n"
    "\t\tfile) COMPREPLY=($(compgen -f -- \"$cur\")) ;;\n"
    "\t\tdir) COMPREPLY=($(compgen -d -- \"$cur\")) ;;\n"
    "\t\tesac\n"
    "\t\treturn\n"
    "\tfi\n"
    "\tif [[ $cur == -* ]]; then\n"
    "\t\tCOMPREPLY=($(compgen -W \"$opts --help\" -- \"$cur\"))\n"
    "\t\treturn\n"
    "\tfi\n"
    "\tcase $kind in\n"
    "\tjob) COMPREPLY=($(compgen -W \"$(${COMP_WORDS[0]} ps 2>/dev/null | awk 'NR > 1 {print $1}')\" -- \"$cur\")) ;;\n"
    "\ttoken) COMPREPLY=($(compgen -W \"$(${COMP_WORDS[0]} token ls 2>/dev/null | awk 'NR > 1 {print $1}')\" -- \"$cur\")) ;;\n"
    "\tfile) COMPREPLY=($(compgen -f -- \"$cur\")) ;;\n"
    "\tdir) COMPREPLY=($(compgen -d -- \"$cur\")) ;;\n"
    "\tcommand) COMPREPLY=($(compgen -c -- \"$cur\")) ;;\n"
    "\tshell) COMPREPLY=($(compgen -W 'bash zsh' -- \"$cur\")) ;;\n"
    "\tesac\n"
    "}\n"
    "complete -o default -F _gpupool gpupool\n";

static int
write_bash(struct gp_buf *out)
{
	const struct gp_cli_command *cmds = NULL;
	size_t n, i;

	cmds = gp_cli_commands(&n);
	gp_buf_printf(out,
	    "# bash completion for gpupool %s: made by `gpupool completion "
	    "bash`\n# from the CLI's command table; do not edit. Install "
	    "as\n# /usr/share/bash-completion/completions/gpupool or "
	    "source it.\n\n",
	    GP_VERSION);
	gp_buf_printf(out, "_gpupool_names=(");
	for (i = 0; i < n; i++) {
		gp_buf_append(out, i ? " " : "", i ? 1 : 0);
		quote(out, cmds[i].name);
	}
	gp_buf_printf(out, ")\n_gpupool_extra='");
	for (i = 0; i < GP_ARRAY_LEN(extra_words); i++)
		gp_buf_printf(out, "%s%s", i ? " " : "", extra_words[i]);
	gp_buf_printf(out,
	    "'\n\n_gpupool_spec() { # COMMAND: sets opts, "
	    "valopts, kind\n\tcase $1 in\n");
	for (i = 0; i < n; i++) {
		gp_buf_printf(out, "\t");
		quote(out, cmds[i].name);
		gp_buf_printf(out, ")\n\t\topts='");
		option_words(out, &cmds[i], 0);
		gp_buf_printf(out, "'\n\t\tvalopts='");
		option_words(out, &cmds[i], 1);
		gp_buf_printf(out, "'\n\t\tkind=%s ;;\n",
		    operand_kind(&cmds[i]));
	}
	gp_buf_printf(out,
	    "\t*) opts='' valopts='' kind=none ;;\n\tesac\n}\n\n");
	return gp_buf_append(out, bash_body, strlen(bash_body));
}

static const char zsh_body[] =
    "_gpupool() {\n"
    "\tlocal -a typed parts cands opts valopts\n"
    "\tlocal name cmd='' best=0 i k ok kind prev=${words[CURRENT-1]}\n"
    "\ttyped=(\"${(@)words[2,CURRENT-1]}\")\n"
    "\tfor name in \"${_gpupool_names[@]}\"; do\n"
    "\t\tparts=(${(s: :)name})\n"
    "\t\t(( ${#parts} <= ${#typed} && ${#parts} > best )) || continue\n"
    "\t\tok=1\n"
    "\t\tfor ((i = 1; i <= ${#parts}; i++)); do\n"
    "\t\t\t[[ ${typed[i]} == ${parts[i]} ]] || ok=0\n"
    "\t\tdone\n"
    "\t\t(( ok )) && cmd=$name && best=${#parts}\n"
    "\tdone\n"
    "\tif [[ -z $cmd ]]; then\n"
    "\t\tcase ${typed[1]} in\n"
    "\t\tcoordinator | agent)\n"
    "\t\t\tif [[ $PREFIX == -* ]]; then\n"
    "\t\t\t\tcompadd -- ${(f)\"$(${words[1]} ${typed[1]} --help 2>&1 | grep -oE -- '--[a-z][a-z-]*' | sort -u)\"}\n"
    "\t\t\telse\n"
    "\t\t\t\t_files\n"
    "\t\t\tfi\n"
    "\t\t\treturn ;;\n"
    "\t\tesac\n"
    "\t\tcands=()\n"
    "\t\tfor ((i = 1; i <= ${#_gpupool_names}; i++)); do\n"
    "\t\t\tparts=(${(s: :)_gpupool_names[i]})\n"
    "\t\t\t(( ${#parts} > ${#typed} )) || continue\n"
    "\t\t\tok=1\n"
    "\t\t\tfor ((k = 1; k <= ${#typed}; k++)); do\n"
    "\t\t\t\t[[ ${typed[k]} == ${parts[k]} ]] || ok=0\n"
    "\t\t\tdone\n"
    "\t\t\t(( ok )) || continue\n"
    "\t\t\tname=${parts[${#typed}+1]}\n"
    "\t\t\tif (( ${#parts} == ${#typed} + 1 )); then\n"
    "\t\t\t\tcands+=(\"$name:${_gpupool_summaries[i]}\")\n"
    "\t\t\telif (( ! ${cands[(I)$name:*]} )); then\n"
    "\t\t\t\tcands+=(\"$name:${_gpupool_groups[$name]:-more commands}\")\n"
    "\t\t\tfi\n"
    "\t\tdone\n"
    "\t\t(( ${#typed} == 0 )) && cands+=(\"${_gpupool_extra[@]}\")\n"
    "\t\t_describe -t commands 'gpupool command' cands\n"
    "\t\treturn\n"
    "\tfi\n"
    "\t_gpupool_spec \"$cmd\"\n"
    "\tif (( ${valopts[(Ie)$prev]} )); then\n"
    "\t\tcase $prev in\n"
    "\t\t--role) compadd user provider admin metrics ;;\n"
    "\t\t--checkpoint-signal) compadd USR1 USR2 TERM INT HUP QUIT ;;\n"
    "\t\t--token-file | --policy | --ca) _files ;;\n"
    "\t\t--data | --socket) _files -/ ;;\n"
    "\t\tesac\n"
    "\t\treturn\n"
    "\tfi\n"
    "\tif [[ $PREFIX == -* ]]; then\n"
    "\t\t_describe -t options 'option' opts\n"
    "\t\treturn\n"
    "\tfi\n"
    "\tcase $kind in\n"
    "\tjob) compadd -- ${(f)\"$(${words[1]} ps 2>/dev/null | awk 'NR > 1 {print $1}')\"} ;;\n"
    "\ttoken) compadd -- ${(f)\"$(${words[1]} token ls 2>/dev/null | awk 'NR > 1 {print $1}')\"} ;;\n"
    "\tfile) _files ;;\n"
    "\tdir) _files -/ ;;\n"
    "\tcommand) _command_names -e ;;\n"
    "\tshell) compadd bash zsh ;;\n"
    "\tesac\n"
    "}\n"
    "\n"
    "if [[ ${zsh_eval_context[-1]} == loadautofunc ]]; then\n"
    "\t_gpupool \"$@\"\n"
    "else\n"
    "\tcompdef _gpupool gpupool\n"
    "fi\n";

/* "name:help" with the colons of name escaped (zsh _describe). */
static void
zsh_spec(struct gp_buf *out, const char *name, const char *help)
{
	struct gp_buf t = {0};

	gp_buf_printf(&t, "%s:%s", name, help);
	gp_buf_append(&t, "", 1);
	quote(out, t.data);
	gp_buf_free(&t);
}

static int
write_zsh(struct gp_buf *out)
{
	const struct gp_cli_command *cmds;
	const struct gp_cli_option *o;
	char name[80];
	size_t n, i;

	cmds = gp_cli_commands(&n);
	gp_buf_printf(out,
	    "#compdef gpupool\n# zsh completion for gpupool %s: made by "
	    "`gpupool completion zsh`\n# from the CLI's command table; do "
	    "not edit. Install as _gpupool in a\n# directory of $fpath "
	    "(/usr/share/zsh/vendor-completions), or\n# source it after "
	    "compinit.\n\n",
	    GP_VERSION);
	gp_buf_printf(out, "_gpupool_names=(");
	for (i = 0; i < n; i++) {
		gp_buf_append(out, i ? " " : "", i ? 1 : 0);
		quote(out, cmds[i].name);
	}
	gp_buf_printf(out, ")\n_gpupool_summaries=(");
	for (i = 0; i < n; i++) {
		gp_buf_append(out, i ? " " : "", i ? 1 : 0);
		quote(out, cmds[i].summary);
	}
	gp_buf_printf(out,
	    ")\ntypeset -gA _gpupool_groups\n"
	    "_gpupool_groups=(provider 'lend this machine: "
	    "status, pause, reclaim, leave, policy' token "
	    "'API tokens (admin): create, ls, revoke' "
	    "checkpoint 'checkpoints: now, get' policy "
	    "'the lending policy: show, check')\n"
	    "_gpupool_extra=("
	    "'coordinator:run the coordinator' "
	    "'agent:run a provider agent' "
	    "'version:print the version' "
	    "'help:show the commands')\n\n");
	gp_buf_printf(out,
	    "_gpupool_spec() { # COMMAND: sets opts, valopts, "
	    "kind\n\tcase $1 in\n");
	for (i = 0; i < n; i++) {
		gp_buf_printf(out, "\t");
		quote(out, cmds[i].name);
		gp_buf_printf(out, ")\n\t\topts=(");
		for (o = cmds[i].options; o->name != NULL; o++) {
			snprintf(name, sizeof(name), "--%s", o->name);
			zsh_spec(out, name, o->help);
			gp_buf_append(out, " ", 1);
			if (o->short_name != 0) {
				snprintf(name, sizeof(name), "-%c",
				    o->short_name);
				zsh_spec(out, name, o->help);
				gp_buf_append(out, " ", 1);
			}
		}
		gp_buf_printf(out, "'--help:show this help')\n\t\tvalopts=(");
		option_words(out, &cmds[i], 1);
		gp_buf_printf(out, ")\n\t\tkind=%s ;;\n",
		    operand_kind(&cmds[i]));
	}
	gp_buf_printf(out,
	    "\t*) opts=() valopts=() kind=none ;;\n\tesac\n}\n\n");
	return gp_buf_append(out, zsh_body, strlen(zsh_body));
}

int
gp_cli_completion_script(const char *shell, struct gp_buf *out)
{
	if (strcmp(shell, "bash") == 0)
		return write_bash(out);
	if (strcmp(shell, "zsh") == 0)
		return write_zsh(out);
	return GP_EINVAL;
}

int
gp_cli_cmd_completion(const struct gp_cli_args *args)
{
	struct gp_buf out = {0};
	int rc;

	rc = gp_cli_completion_script(args->operands[0], &out);
	if (rc == GP_EINVAL)
		return gp_cli_usage_error(args,
		    "completion: bash or zsh, not "
		    "'%s'",
		    args->operands[0]);
	if (rc != 0 || out.data == NULL) {
		gp_buf_free(&out);
		gp_cli_error("out of memory");
		return GP_CLI_EXIT_FAIL;
	}
	fwrite(out.data, 1, out.len, stdout);
	gp_buf_free(&out);
	return 0;
}
