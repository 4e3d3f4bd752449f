#!/bin/bash
# Each program's --version against meson's project version (and, for the
# tools that link the initiator library, the library's): one line, exactly
# the expected one, exit 0, and --version listed in its --help.
#   test_version.sh PROGRAM EXPECTED-LINE [PROGRAM EXPECTED-LINE ...]
set -u
ok=0 bad=0
while [ $# -ge 2 ]; do
	prog=$1 want=$2
	name=$(basename "$prog")
	shift 2
	out=$("$prog" --version 2>&1)
	rc=$?
	if [ $rc -eq 0 ] && [ "$out" = "$want" ]; then
		ok=$((ok + 1))
	else
		echo "FAIL: $name --version: exit $rc, printed '$out', expected '$want'"
		bad=$((bad + 1))
	fi
	if "$prog" --help 2>&1 | grep -q -- '--version'; then
		ok=$((ok + 1))
	else
		echo "FAIL: $name --help does not list --version"
		bad=$((bad + 1))
	fi
done
echo "$ok ok, $bad failed"
[ $bad -eq 0 ]
