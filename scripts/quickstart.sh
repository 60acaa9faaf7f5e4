#!/usr/bin/env bash
# scripts/quickstart.sh: from a fresh Debian checkout to a running local
# pool in one command: installs what is missing (scripts/install-deps.sh),
# builds build/gpupool, then runs `build/gpupool up` in the foreground
# (Ctrl-C stops the pool). Extra arguments go to `gpupool up`, e.g.
#   scripts/quickstart.sh --listen 127.0.0.1:7071 --fake-gpus 4
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
make -j"$(nproc 2>/dev/null || echo 2)"
echo
echo "quickstart: built $PWD/build/gpupool; put it on your PATH with:"
echo "  export PATH=\"$PWD/build:\$PATH\""
echo
exec build/gpupool up "$@"
