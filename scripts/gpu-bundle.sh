#!/usr/bin/env bash
# scripts/gpu-bundle.sh DIR: a build that scripts/gpu-check.sh can run on a
# GPU machine that has none of this project's packages and reaches no
# registry (a rented or lent machine, a fresh image with a driver): the
# program, the CUDA library and the check's cudaprog from BUILD (default
# build/, made with `make`), the shared libraries they need beyond glibc,
# and runc (with its libseccomp) and busybox-static for the container
# check. DIR/gpupool is a wrapper that puts DIR/lib on the library path of
# the program alone; the check's other tools (python3, nvidia-smi) keep the
# machine's own libraries. Use it as BUILD=DIR scripts/gpu-check.sh, with
# DIR inside the repository. The machine's glibc must be as new as the one
# it was built with (Debian 12: 2.36).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
out=${1:?usage: scripts/gpu-bundle.sh DIR}
for f in gpupool gpupool-init libgpupool.so libgpupool-cuda.so fakecuda/cudaprog; do
	[ -e "$BUILD/$f" ] || { echo "gpu-bundle: no $BUILD/$f: run make first" >&2; exit 1; }
done
rm -rf "$out"
mkdir -p "$out/fakecuda" "$out/lib" "$out/bin"
cp "$BUILD/gpupool" "$out/gpupool.bin"
cp "$BUILD/gpupool-init" "$BUILD/libgpupool.so" "$BUILD/libgpupool-cuda.so" "$out/"
cp -a "$BUILD/fakecuda/." "$out/fakecuda/"
tools=()
for t in runc busybox; do
	if p=$(command -v "$t"); then
		cp -L "$p" "$out/bin/"
		tools+=("$p")
	else
		echo "gpu-bundle: no $t here: the container check will SKIP" >&2
	fi
done
# Every library the program and the tools load, but glibc's own.
# (ldd fails on busybox-static, which needs none.)
{ ldd "$out/gpupool.bin" "$out/libgpupool.so" "${tools[@]}" 2>/dev/null || :; } |
    awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
    grep -vE '/(libc|libm|libdl|libpthread|librt|libresolv|libutil)\.so|/ld-linux' |
    while read -r lib; do cp -L "$lib" "$out/lib/"; done
cat >"$out/gpupool" <<'WRAP'
#!/bin/sh
# gpupool with this bundle's libraries (scripts/gpu-bundle.sh).
d=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "$d/gpupool.bin" "$@"
WRAP
chmod 755 "$out/gpupool"
if [ -n "$(ls "$out/bin")" ]; then
	cat >"$out/bin/README" <<'TXT'
runc and busybox for gpu-check's container check: put this folder on PATH
and busybox at /bin/busybox where the machine has neither.
TXT
fi
strip --strip-unneeded "$out/gpupool.bin" "$out/libgpupool.so" "$out"/lib/*.so* 2>/dev/null || :
du -sh "$out" | sed 's/^/gpu-bundle: /'
