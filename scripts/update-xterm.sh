#!/bin/sh
# scripts/update-xterm.sh [VERSION]: puts xterm.js (npm's @xterm/xterm,
# MIT) into web/vendor/, from which src/coord/web.c embeds it in the
# binary: the dashboard's terminal loads nothing from elsewhere. Run it to
# move to another version; commit what it changed.
set -eu
version=${1:-5.5.0}
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "@xterm/xterm@$version" >/dev/null && tar xzf ./*.tgz)
cp "$tmp/package/lib/xterm.js" web/vendor/xterm.js
cp "$tmp/package/css/xterm.css" web/vendor/xterm.css
cp "$tmp/package/LICENSE" web/vendor/xterm.LICENSE
echo "@xterm/xterm $version" >web/vendor/VERSION
