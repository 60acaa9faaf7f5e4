# Proves shell completion (issue 7): `gpupool completion bash|zsh` print
# scripts that the shells accept; in bash, the completion function offers
# the command names, every option `gpupool CMD --help` lists for every
# command of the table (so the script cannot drift from the parser), the
# values of --role, job ids from `gpupool ps`, token ids from `gpupool
# token ls`, and the coordinator's and agent's options from their --help;
# in a real zsh on a terminal (tmux), Tab completes commands, subcommands
# and options.
. "$(dirname "$0")/lib.sh"

command -v zsh >/dev/null || fail "zsh is missing (scripts/install-deps.sh)"
command -v tmux >/dev/null || fail "tmux is missing (scripts/install-deps.sh)"
BIN="$T/bin"
mkdir -p "$BIN" "$T/zfunc"
ln -s "$GP" "$BIN/gpupool"
export PATH="$BIN:$PATH"

gpupool completion bash >"$T/gpupool.bash" || fail "completion bash failed"
gpupool completion zsh >"$T/zfunc/_gpupool" || fail "completion zsh failed"
bash -n "$T/gpupool.bash" || fail "the bash script does not parse"
zsh -n "$T/zfunc/_gpupool" || fail "the zsh script does not parse"
cli completion fish
assert_eq 2 "$CLI_RC" "completion fish"

start_coordinator
start_agent c1 1
wait_node_up c1
submit -- sleep 600
J=$JOB

# comp WORD...: what bash's completion offers for the line "WORD... "
# where the last WORD is the one being completed; sets COMP.
# shellcheck disable=SC1090
source "$T/gpupool.bash"
comp() {
	COMP_WORDS=("$@")
	COMP_CWORD=$(($# - 1))
	COMPREPLY=()
	_gpupool
	COMP=" ${COMPREPLY[*]} "
}
has() { # WHAT WORD...
	local what=$1 w
	shift
	for w in "$@"; do
		[[ $COMP == *" $w "* ]] || fail "$what: '$w' not offered (offered:$COMP)"
	done
}

comp gpupool ""
has "first word" submit ps top token provider completion coordinator agent version
comp gpupool to
has "to<Tab>" token top
[[ $COMP == *" submit "* ]] && fail "to<Tab> offers submit"
comp gpupool token ""
has "token <Tab>" create ls revoke
comp gpupool provider policy ""
has "provider policy <Tab>" show check
comp gpupool token create --role ""
has "--role <Tab>" user provider admin metrics
comp gpupool completion ""
has "completion <Tab>" bash zsh
comp gpupool show ""
has "show <Tab> (job ids)" "$J"
comp gpupool token revoke ""
has "token revoke <Tab> (token ids)" 1 2
comp gpupool agent --metrics
has "agent --metrics<Tab>" --metrics-listen --metrics-token-file
comp gpupool coordinator --checkpoint-k
has "coordinator --checkpoint-k<Tab>" --checkpoint-keep

# Every option of every command, as its --help lists it.
ncmds=0
while IFS= read -r name; do
	read -r -a words <<<"$name"
	help=$(gpupool "${words[@]}" --help) || fail "gpupool $name --help failed"
	opts=$(printf '%s\n' "$help" | grep -E '^  (-[a-zA-Z], )?--|^      --' |
	    grep -oE -- '--[a-z][a-z-]*' | sort -u)
	comp gpupool "${words[@]}" -
	for o in $opts; do
		has "gpupool $name -<Tab>" "$o"
	done
	ncmds=$((ncmds + 1))
done < <(printf '%s\n' "${_gpupool_names[@]}")
[ "$ncmds" -ge 25 ] || fail "only $ncmds commands in the script"
# ... and every command the global help lists is in the script
for c in $(gpupool help | sed -n '/^Commands:/,/^$/p' | awk 'NR > 1 && NF {print $1}'); do
	comp gpupool ""
	has "gpupool help's $c" "$c"
done

# --- zsh on a terminal
tm() { tmux -S "$T/tmux.sock" "$@"; }
screen() { tm capture-pane -p -t z; }
wait_line() { # TEXT: the prompt line shows TEXT
	local deadline=$((SECONDS + WAIT_S))
	until screen | grep -qF -- "$1"; do
		[ $SECONDS -ge $deadline ] && fail "zsh: '$1' not on screen after ${WAIT_S}s: $(screen)"
		sleep 0.2
	done
}
cat >"$T/zshrc" <<EOF
fpath=($T/zfunc \$fpath)
autoload -Uz compinit && compinit -u -d $T/zcompdump
PS1='Z> '
EOF
tm new-session -d -s z -x 150 -y 40 \
    "env -i HOME=$T/home TERM=xterm-256color PATH=$PATH GPUPOOL_URL=$GPUPOOL_URL GPUPOOL_TOKEN=$GPUPOOL_TOKEN zsh -f -i"
tm send-keys -t z "source $T/zshrc" Enter
wait_line "Z>"
# (A pane's trailing blanks are not captured: an X after each Tab shows
# that the completed word was followed by a space.)
tm send-keys -t z "gpupool tok" Tab X
wait_line "Z> gpupool token X"
tm send-keys -t z BSpace "rev" Tab X
wait_line "Z> gpupool token revoke X"
tm send-keys -t z C-u "gpupool submit --checkpoint-ev" Tab X
wait_line "Z> gpupool submit --checkpoint-every X"
tm send-keys -t z C-u "gpupool token create --role met" Tab X
wait_line "Z> gpupool token create --role metrics X"
tm send-keys -t z C-u "gpupool agent --metrics-l" Tab X
wait_line "Z> gpupool agent --metrics-listen X"
tm send-keys -t z C-u "gpupool show " Tab X
wait_line "Z> gpupool show $J X"
tm kill-server 2>/dev/null
echo "ok"
