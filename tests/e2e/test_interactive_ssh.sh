# OpenSSH's ssh through `gpupool connect` (ProxyCommand, as `gpupool
# ssh-config` writes it) into an sshd that the job itself runs as its
# non-root user on a high port of its own loopback: own host key, own
# authorized_keys. (The job's user, nobody, has nologin as its shell:
# nss_wrapper gives the job's sshd a passwd entry with /bin/sh.)
. "$(dirname "$0")/lib.sh"
require netns sshd

start_coordinator
start_agent alpha 1
wait_node_up alpha
mk_token user alice
export GPUPOOL_TOKEN=$TOKEN

ssh-keygen -q -t ed25519 -N '' -f "$T/id" || fail "ssh-keygen"
PUB=$(cat "$T/id.pub")
# The job: host key, config, passwd for nss_wrapper, then sshd -D.
read -r -d '' JOBCMD <<EOS
set -e
ssh-keygen -q -t ed25519 -N '' -f ./host_key
printf '%s\n' '$PUB' > ./authorized_keys
chmod 600 ./authorized_keys
echo "nobody:x:\$(id -u):\$(id -g):nobody:\$PWD:/bin/sh" > ./passwd
echo "nogroup:x:\$(id -g):" > ./group
cat > ./sshd_config <<CFG
Port 2222
ListenAddress 127.0.0.1
HostKey \$PWD/host_key
AuthorizedKeysFile \$PWD/authorized_keys
PidFile \$PWD/sshd.pid
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitUserEnvironment no
Subsystem sftp internal-sftp
CFG
ssh-keygen -l -f ./host_key.pub > ./fingerprint
export LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libnss_wrapper.so NSS_WRAPPER_PASSWD=\$PWD/passwd NSS_WRAPPER_GROUP=\$PWD/group
exec /usr/sbin/sshd -D -e -f \$PWD/sshd_config
EOS
submit --gpus 1 -e SSH_JOB_MARK=in-the-job -- sh -c "$JOBCMD"
j=$JOB
wait_state "$j" running
dir="$T/agents/alpha/jobs/$j-1"
deadline=$((SECONDS + WAIT_S))
until [ -s "$dir/sshd.pid" ]; do
	[ "$(job_state "$j")" = running ] || fail "the job's sshd did not start: $(job_log "$j"; echo "$LOG")"
	[ $SECONDS -ge $deadline ] && fail "no sshd in the job"
	sleep 0.1
done

cli ssh-config "$j" --port 2222 --user nobody
assert_eq 0 "$CLI_RC" "ssh-config ($CLI_ERR)"
assert_contains "$CLI_OUT" "Host gpupool-$j" "ssh-config's Host"
assert_contains "$CLI_OUT" "ProxyCommand $GP connect $j 2222" "ssh-config's ProxyCommand"
{ printf '%s\n' "$CLI_OUT"; echo "    IdentityFile $T/id"; echo "    IdentitiesOnly yes"
  echo "    UserKnownHostsFile $T/known_hosts"; echo "    StrictHostKeyChecking accept-new"
  echo "    BatchMode yes"; echo "    SetEnv TERM=dumb"; } >"$T/ssh_config"

out=$(timeout 60 ssh -F "$T/ssh_config" "gpupool-$j" 'echo who=$(id -un) mark=$SSH_JOB_MARK host=$(hostname); exit 5' 2>"$T/ssh.err")
rc=$?
assert_eq 5 "$rc" "ssh's exit status (the remote command's) ($(cat "$T/ssh.err"))"
assert_contains "$out" "who=nobody" "ssh as the job's user"
assert_contains "$out" "host=gpupool-job" "ssh into the job's namespaces"
# the host key it saw is the job's own
grep -q "$(awk '{print $2}' "$dir/host_key.pub")" "$T/known_hosts" ||
    fail "known_hosts does not hold the job's host key"
# a file both ways (scp over the same ProxyCommand)
head -c 2000000 /dev/urandom >"$T/blob"
timeout 60 scp -q -F "$T/ssh_config" "$T/blob" "gpupool-$j:blob" 2>"$T/scp.err" ||
    fail "scp up: $(cat "$T/scp.err")"
timeout 60 scp -q -F "$T/ssh_config" "gpupool-$j:blob" "$T/blob.back" 2>"$T/scp.err" ||
    fail "scp down: $(cat "$T/scp.err")"
cmp -s "$T/blob" "$T/blob.back" || fail "scp: the file came back different"
echo "ok $TEST_NAME"
