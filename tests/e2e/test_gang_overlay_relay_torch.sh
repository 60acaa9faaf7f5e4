#!/usr/bin/env bash
# Issue 14: test_gang_overlay.sh (a real torch.distributed rendezvous and
# all-reduce, an intruder gang, keys, the end and the sweep after kill -9)
# with both machines behind NATs that change ports per destination
# (GPOV_NAT=symmetric, tests/e2e/nat_lib.sh): hole punching cannot work
# there, so the gang's overlay goes through the coordinator's gang relay
# (the test checks that both agents went through it). With GPOV_RELAY=off
# it fails (torch's rendezvous times out). Needs what that test needs.
here=$(cd "$(dirname "$0")" && pwd)
GPOV_NAT=symmetric exec bash "$here/test_gang_overlay.sh"
