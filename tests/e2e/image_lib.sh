# tests/e2e/image_lib.sh: what the image tests share (source after lib.sh).
# Test images are built by images.py from Debian's busybox-static; every
# archive goes to $IMG.
#
#   images_build          layers l1 (marker one), l2 (marker two, with a
#                         whiteout of /etc/passwd), and the archives
#                         oci.tar (busybox:oci, l1+l2) and docker.tar
#                         (busybox:docker, l1); sets OCI_DIGEST
#   image_layer NAME ARGS...   another layer $IMG/NAME.tgz (images.py layer)
#   image_oci NAME IMAGE LAYER...   an OCI archive $IMG/NAME.tar; sets DIGEST
#   as_user TOKEN CMD...  runs CMD with GPUPOOL_TOKEN=TOKEN
#   agent_log_wait AGENT TEXT   bounded wait for TEXT in the agent's log
#   expect_image_ran JOB AGENT [OUTPUT]  the job got past every image
#                         check (its agent logged "image ready") and ran in
#                         its image, printing OUTPUT; or, on an agent with no
#                         working OCI runtime, failed to start for want of one

IMG_PY="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/images.py"
IMG="$T/img"
mkdir -p "$IMG"

image_layer() { # NAME ARGS...
	local name=$1
	shift
	"$PY" "$IMG_PY" layer "$IMG/$name.tgz" "$@" ||
	    fail "images.py layer $name failed"
}

image_oci() { # NAME IMAGE LAYER... [--evil KIND]
	local name=$1 image=$2
	shift 2
	DIGEST=$("$PY" "$IMG_PY" oci "$IMG/$name.tar" --name "$image" "$@") ||
	    fail "images.py oci $name failed"
}

images_build() {
	image_layer l1 --marker one
	image_layer l2 --marker two --whiteout etc/passwd
	image_oci oci busybox:oci "$IMG/l1.tgz" "$IMG/l2.tgz"
	OCI_DIGEST=$DIGEST
	"$PY" "$IMG_PY" docker "$IMG/docker.tar" --name busybox:docker \
	    "$IMG/l1.tgz" || fail "images.py docker failed"
}

as_user() { # TOKEN CMD...
	local tok=$1
	shift
	GPUPOOL_TOKEN=$tok "$@"
}

agent_log_wait() { # AGENT TEXT [SECONDS]
	local deadline=$((SECONDS + ${3:-$WAIT_S}))
	until grep -qF -- "$2" "$T/agent-$1.log" 2>/dev/null; do
		[ $SECONDS -ge $deadline ] &&
		    fail "agent $1 did not log '$2' within ${3:-$WAIT_S}s"
		sleep 0.2
	done
}

expect_image_ran() { # JOB AGENT [OUTPUT]
	local job=$1 agent=$2 want=${3:-} msg
	wait_final "$job"
	grep -q "image ready job=$job " "$T/agent-$agent.log" ||
	    fail "agent $agent did not make job $job's image ready"
	msg=$(job_get "$job" 'd["message"] or ""')
	case $FINAL_STATE:$msg in
	succeeded:*)
		if [ -n "$want" ]; then
			job_log "$job"
			assert_contains "$LOG" "$want" "job $job's output"
		fi ;;
	failed:*"runs no container jobs"*)
		# An agent without a working OCI runtime (crun, runc).
		log "job $job: image ready; this agent runs no containers: $msg" ;;
	*) fail "job $job ended $FINAL_STATE: $msg $(job_log "$job"; printf '%s' "$LOG" | tail -c 500)" ;;
	esac
}
