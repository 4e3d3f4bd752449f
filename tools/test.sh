#!/bin/bash
# Install, build and run the whole test suite: a normal build, then an
# ASan+UBSan build that runs the same suites (unit, integration, conformance);
# the vm, rbd-long, package, bench and docs suites run in the normal build only.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/deps.sh
# The test guest (tests/vm/prepare.sh: Debian's kernel fetched, siw.ko built)
# is made while the builds and the first suites run; the VM suite's own call
# waits for it and finds it ready (or tries again, and says why it cannot).
tests/vm/prepare.sh "${ISERT_VM_CACHE:-tests/vm/cache}" >/dev/null 2>&1 &
prep=$!
side=
trap 'wait $prep $side 2>/dev/null || :' EXIT
ok=0 fail=0
asan_opts="-Db_sanitize=address,undefined -Db_lundef=false"
export ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# run DIR NAME ARGS...: meson test in DIR, its log as meson-logs/NAME.txt; adds to ok/fail.
run() {
	local dir=$1 name=$2 log rc=0; shift 2
	log=$(mktemp)
	meson test -C "$dir" --logbase "$name" --print-errorlogs --num-processes 1 "$@" 2>&1 | tee "$log" || rc=1
	ok=$((ok + $(awk '/^Ok:/{print $2}' "$log")))
	fail=$((fail + $(awk '/^(Fail|Unexpected Pass|Timeout):/{s+=$NF} END{print s+0}' "$log")))
	rm -f "$log"
	[ "$rc" -eq 0 ] || { echo "$ok passed, $fail failed"; exit 1; }
}
[ -d build ] || meson setup build
echo "== building build"
ninja -C build
echo "== testing build"
run build testlog --no-suite vm --no-suite package
# The VM suite keeps the 2 cores about two-thirds busy (QEMU's TCG and the
# guest's waits): the sanitizer build compiles, then the package test (which
# builds its own binaries) runs, beside it at a lower priority, instead of
# after it (about 4 minutes).  Neither has a time limit the VM can starve.
bg=build/meson-logs/background.txt
(
	set -e
	[ -d build-asan ] || meson setup build-asan $asan_opts
	echo "== building build-asan (beside the VM suite)"
	nice -n 19 ninja -C build-asan
	echo "== testing build: package (beside the VM suite)"
	nice -n 10 meson test -C build --no-rebuild --logbase testlog-package --print-errorlogs --suite package
) > "$bg" 2>&1 &
side=$!   # a failure of the VM suite exits at once: the EXIT trap waits for it
echo "== testing build: vm (the sanitizer build and the package test beside it: $bg)"
run build testlog-vm --no-rebuild --suite vm
side_rc=0; wait $side || side_rc=$?
cat "$bg"
ok=$((ok + $(awk '/^Ok:/{print $2}' "$bg")))
fail=$((fail + $(awk '/^(Fail|Unexpected Pass|Timeout):/{s+=$NF} END{print s+0}' "$bg")))
[ "$side_rc" -eq 0 ] || { echo "the sanitizer build or the package test failed (above)"; echo "$ok passed, $((fail + 1)) failed"; exit 1; }
# The sanitizer build: the same suites but for vm, rbd-long (the conformance
# run and bench smoke on an RBD LUN), package, bench (its smoke checks the
# bench's output; the integration suite loads isertd under the sanitizers)
# and docs (--help against the man pages).
echo "== testing build-asan"
ninja -C build-asan
run build-asan testlog --no-suite vm --no-suite rbd-long --no-suite package --no-suite bench --no-suite docs
echo "$ok passed, $fail failed"
[ "$fail" -eq 0 ]
