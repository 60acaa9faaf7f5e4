# shellcheck shell=bash
# tests/e2e/gpushare_lib.sh: what the tests of libgpupool-cuda.so share:
# the fake driver (tests/fakecuda, built into $GPUPOOL_BUILD/fakecuda) and
# `prog MODE OP...`, which runs cudaprog under the library and leaves its
# output in PROG_OUT (its exit status in PROG_RC). GPUSHARE_NO_SHIM=1 runs
# without the library (to see the tests fail without enforcement).
. "$(dirname "$0")/lib.sh"

FAKE="$GPUPOOL_BUILD/fakecuda"
SHIM="$GPUPOOL_BUILD/libgpupool-cuda.so"
[ -f "$SHIM" ] || fail "no $SHIM: the build makes it"
[ -x "$FAKE/cudaprog" ] || skip cuda-headers "no fake CUDA driver in $FAKE (built where the CUDA headers are: make CUDA_INC=...)"
# Jobs run as nobody: a copy they can reach, whatever the build's place.
cp -r "$FAKE" "$T/fakecuda" && chmod -R a+rX "$T/fakecuda" ||
    fail "cannot copy $FAKE"
FAKE="$T/fakecuda"
PRELOAD=$SHIM
[ "${GPUSHARE_NO_SHIM:-0}" = 1 ] && PRELOAD=
export FAKECUDA_STATE="$T/fakecuda.state"
: >"$FAKECUDA_STATE"
# A plain job sees only the provider's system files (the minimal root):
# the owner exposes this test's directory (the fake driver, the files the
# jobs wait for), read-only, as the whole host was before. An agent of
# these tests takes --policy "$GPUSHARE_POLICY", or adds the line to its own.
GPUSHARE_EXPOSE="expose = $(realpath "$T") ro"
GPUSHARE_POLICY="$T/gpushare.policy"
printf '%s\n' "$GPUSHARE_EXPOSE" >"$GPUSHARE_POLICY"

prog() { # MODE OP...
	local bin="$FAKE/cudaprog"
	[ "$1" = direct ] && bin="$FAKE/cudaprog-linked"
	PROG_OUT=$(LD_PRELOAD=$PRELOAD LD_LIBRARY_PATH="$FAKE" "$bin" "$@" \
	    2>&1)
	PROG_RC=$?
	log "cudaprog $*: rc=$PROG_RC"
	printf '%s\n' "$PROG_OUT" | sed 's/^/    | /' >&2
}

# expect_lines TEXT: each line of TEXT must be a line of PROG_OUT (which
# prog sets, or the caller).
# shellcheck disable=SC2034 # PROG_OUT is read by expect_lines
expect_lines() {
	local line
	while IFS= read -r line; do
		[ -n "$line" ] || continue
		grep -qxF -- "$line" <<<"$PROG_OUT" ||
		    fail "expected the line '$line' from cudaprog"
	done <<<"$1"
}
