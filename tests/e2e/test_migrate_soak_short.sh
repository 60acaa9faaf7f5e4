# A short run of bench/soak_migrate.sh: 12 departures (each kind twice) of 3
# step jobs across 4 providers; every departure's job must run again and
# every job must finish with its resume chain intact (graceful departures
# lost nothing). The bench prints the figures; this only checks the outcome.
set -u
here=$(dirname "$0")
SOAK_D=${SOAK_D:-12} SOAK_TOTAL=${SOAK_TOTAL:-300} SOAK_STEP_S=0.05 \
    E2E_WAIT_S=${E2E_WAIT_S:-30} bash "$here/../../bench/soak_migrate.sh" ||
    { echo "FAIL [test_migrate_soak_short]: the short migration soak did not pass (see above)" >&2; exit 1; }
echo ok
