#!/usr/bin/env bash
# Issue 14: test_gang_overlay_restart.sh (the coordinator killed -9 and
# started again while a gang runs) with both machines behind NATs that
# change ports per destination (GPOV_NAT=symmetric): the gang goes through
# the coordinator's gang relay (checked), whose flows must come back by
# themselves after the restart (the relay's secret is in its data
# directory; the agents' next datagrams open the flows again) for the
# gang to talk again and end succeeded. Needs what that test needs.
here=$(cd "$(dirname "$0")" && pwd)
GPOV_NAT=symmetric exec bash "$here/test_gang_overlay_restart.sh"
