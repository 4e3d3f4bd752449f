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
trap 'wait $prep 2>/dev/null || :' EXIT
ok=0 fail=0
for b in build:"" build-asan:"-Db_sanitize=address,undefined -Db_lundef=false"; do
	dir=${b%%:*} opts=${b#*:}
	# The VM suite boots a guest (tests/vm/): once, in the normal build; so do the
	# longest rbd tests (rbd-long: the conformance run and bench smoke on an RBD LUN),
	# the package test, which builds its own binaries, the bench smoke (it checks
	# the bench's output; the integration suite loads isertd under the sanitizers)
	# and the docs checks (--help against the man pages).
	suites=(); [ "$dir" = build ] ||
		suites=(--no-suite vm --no-suite rbd-long --no-suite package --no-suite bench --no-suite docs)
	[ -d "$dir" ] || meson setup "$dir" $opts
	echo "== building $dir"
	ninja -C "$dir"
	echo "== testing $dir"
	log=$(mktemp)
	rc=0
	# Two at a time where a test allows it (is_parallel: the unit and fuzz tests
	# but the reactor's, the docs checks, two rbd ones); every test that listens
	# on a fixed port, boots a guest or times something runs alone.
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		meson test -C "$dir" "${suites[@]}" --print-errorlogs --num-processes 2 2>&1 | tee "$log" || rc=1
	ok=$((ok + $(awk '/^Ok:/{print $2}' "$log"))) 
	fail=$((fail + $(awk '/^(Fail|Unexpected Pass|Timeout):/{s+=$NF} END{print s+0}' "$log")))
	rm -f "$log"
	[ "$rc" -eq 0 ] || { echo "$ok passed, $fail failed"; exit 1; }
done
echo "$ok passed, $fail failed"
[ "$fail" -eq 0 ]
