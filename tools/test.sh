#!/bin/bash
# Install, build and run the whole test suite: a normal build, then an
# ASan+UBSan build that runs the same suites (unit, integration, conformance);
# the vm, rbd-long, package, bench and docs suites run in the normal build only.
# --quick: the day-to-day loop, the normal build only: unit, fuzz (the corpus
# replayed), initiator and integration; no guest, Ceph, package or sanitizer
# build (a few minutes where the whole run takes about half an hour).
set -euo pipefail
cd "$(dirname "$0")/.."
quick=
case "${1:-}" in
--quick) quick=1 ;;
"") ;;
*) echo "usage: tools/test.sh [--quick]" >&2; exit 2 ;;
esac
tools/deps.sh
# The test guest (tests/vm/prepare.sh: Debian's kernel fetched, siw.ko built)
# is made while the builds and the first suites run; the VM suite's own call
# waits for it and finds it ready (or tries again, and says why it cannot).
prep= asan=
[ -n "$quick" ] || { tests/vm/prepare.sh "${ISERT_VM_CACHE:-tests/vm/cache}" >/dev/null 2>&1 & prep=$!; }
trap '[ -z "$prep" ] || wait $prep 2>/dev/null || :; [ -z "$asan" ] || kill $asan 2>/dev/null || :' EXIT
ok=0 fail=0

# run_tests DIR LOGBASE MESON-TEST-ARGS...: one meson test run (its log
# DIR/meson-logs/LOGBASE.txt), its counts added; stops at a failure.
# Two at a time where a test allows it (is_parallel: the unit and fuzz tests
# but the reactor's, the docs checks, two rbd ones, the integration tests but
# hostile, sanitize, chaos and iserbench-loopback: tests/integration/meson.build
# says when a test may run beside another); a test that boots a guest, or
# whose checks need the machine to itself, runs alone.
run_tests() {
	local dir=$1 base=$2 log rc=0
	shift 2
	log=$(mktemp)
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		meson test -C "$dir" --logbase "$base" "$@" --print-errorlogs --num-processes 2 2>&1 | tee "$log" || rc=1
	ok=$((ok + $(awk '/^Ok:/{print $2}' "$log")))
	fail=$((fail + $(awk '/^(Fail|Unexpected Pass|Timeout):/{s+=$NF} END{print s+0}' "$log")))
	rm -f "$log"
	[ "$rc" -eq 0 ] || { echo "$ok passed, $fail failed"; exit 1; }
}

[ -d build ] || meson setup build
echo "== building build"
ninja -C build
if [ -n "$quick" ]; then
	echo "== testing build: unit, fuzz, initiator, integration (--quick)"
	run_tests build testlog-quick --suite unit --suite fuzz --suite initiator --suite integration
	echo "$ok passed, $fail failed (quick: the whole run is tools/test.sh)"
	exit 0
fi
# The sanitizer build compiles, at the lowest priority, while the normal
# build's tests but the VM suite run: they leave the cores about half idle
# (sockets, sleeps).  It is done before the VM suite starts, whose TCG
# guests need both cores (a compile beside them slowed the guests far more
# than it saved: 3deefe4).
echo "== compiling build-asan in the background (build/asan-compile.log)"
{ [ -d build-asan ] || meson setup build-asan -Db_sanitize=address,undefined -Db_lundef=false
  nice -n 19 ninja -C build-asan; } > build/asan-compile.log 2>&1 &
asan=$!
echo "== testing build (all but the VM suite)"
run_tests build testlog --no-suite vm
echo "== waiting for build-asan's compile"
if ! wait $asan; then
	asan=
	tail -40 build/asan-compile.log
	echo "building build-asan failed ($ok passed, $fail failed so far)"
	exit 1
fi
asan=
echo "== testing build: the VM suite"
run_tests build testlog-vm --suite vm
# The VM suite boots a guest (tests/vm/): once, in the normal build; so do the
# longest rbd tests (rbd-long: the conformance run, the flood and the bench smoke on an RBD LUN),
# the package test, which builds its own binaries, the bench smoke (it checks
# the bench's output; the integration suite loads isertd under the sanitizers)
# and the docs checks (--help against the man pages).
echo "== testing build-asan"
run_tests build-asan testlog --no-suite vm --no-suite rbd-long --no-suite package --no-suite bench --no-suite docs
echo "$ok passed, $fail failed"
[ "$fail" -eq 0 ]
