# A short run of bench/soak_migrate.sh: 8 departures (each of the 8 kinds
# once; the 6 of the ordinary kinds spread over the 3 ordinary jobs, so
# that some of them leave two or three times) of 5 step jobs (a
# slow-saving and a signal-ignoring one among them) across 6 providers;
# every departure's job must run again, every job must finish with its
# resume chain intact (graceful departures lost nothing), and no
# departure may redo more steps than it made since its last uploaded
# checkpoint (the bound; a correctness check, not a timing one). The
# bench prints the figures; this only checks the outcome.
set -u
here=$(dirname "$0")
SOAK_D=${SOAK_D:-8} SOAK_TOTAL=${SOAK_TOTAL:-600} SOAK_STEP_S=0.05 \
    E2E_WAIT_S=${E2E_WAIT_S:-30} bash "$here/../../bench/soak_migrate.sh" ||
    { echo "FAIL [test_migrate_soak_short]: the short migration soak did not pass (see above)" >&2; exit 1; }
echo ok
