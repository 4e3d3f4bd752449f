#!/bin/bash
# libiscsi's conformance suite (iscsi-test-cu) against isertd over loopback,
# for each LUN kind (thick, thin, read-only) and each family (ALL, LINUX).
# A test that fails and is not in skip-list.txt fails the run; so does a
# listed test that passes again (the list only shrinks).
#
# usage: run-conformance.sh ISERTD [PORT]
set -u
isertd=${1:?usage: run-conformance.sh ISERTD [PORT]}
port=${2:-3261}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$work"' EXIT

command -v iscsi-test-cu >/dev/null || { echo "iscsi-test-cu not found: apt-get install libiscsi-bin"; exit 1; }

# APTPL state in the work folder, never in the host's /var/lib/isert.
"$isertd" --config "$here/conformance.json" --portal "127.0.0.1:$port" --state-dir "$work/state" >"$work/isertd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
	iscsi-ls "iscsi://127.0.0.1:$port" >/dev/null 2>&1 && break
	kill -0 $pid 2>/dev/null || { echo "isertd exited:"; cat "$work/isertd.log"; exit 1; }
	sleep 0.1
done

iqn=iqn.2026-11.org.isert:conformance
i1=iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test
i2=iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test-2
skip=$(grep -v '^#' "$here/skip-list.txt" 2>/dev/null | awk -F'\t' 'NF{print $1"\t"$2}')
bad=0 total=0 failed=0
# The read-only LUN runs without --dataloss (write tests would fail by design),
# except the ReadOnly suite, which checks that writes are refused.
for run in thick:0:ALL:-d thick:0:LINUX:-d thin:1:ALL:-d thin:1:LINUX:-d \
	   readonly:2:ALL: readonly:2:LINUX: readonly:2:ALL.ReadOnly:-d; do
	IFS=: read -r name lun family dl <<<"$run"
	{
		dir="$work/$family-$name"
		mkdir -p "$dir"
		out="$dir/output.txt"
		echo "== iscsi-test-cu -t $family ${dl:+--dataloss }on the $name LUN"
		# -x writes CUnitAutomated-Results.xml into the working directory.
		(cd "$dir" && timeout 1200 iscsi-test-cu -x $dl -t "$family" -i "$i1" -I "$i2" \
			"iscsi://127.0.0.1:$port/$iqn/$lun" >"$out" 2>&1)
		kill -0 $pid 2>/dev/null || { echo "isertd died during $family/$name"; tail -50 "$work/isertd.log"; exit 1; }
		if [ ! -s "$dir/CUnitAutomated-Results.xml" ]; then
			echo "   no results from iscsi-test-cu:"; tail -20 "$out"; bad=$((bad + 1)); continue
		fi
		results=$(python3 "$here/cu-results.py" "${family%%.*}" "$dir/CUnitAutomated-Results.xml")
		n=$(printf '%s\n' "$results" | grep -c .)
		nf=$(printf '%s\n' "$results" | grep -c 'FAILED$')
		total=$((total + n))
		echo "   $n tests, $nf failed"
		while IFS=$'\t' read -r t state; do
			[ -n "$t" ] || continue
			listed=$(printf '%s\n' "$skip" | awk -F'\t' -v t="$t" -v k="$name" '$1==t && ($2==k || $2=="all" || index($2, k))' | head -1)
			if [ "$state" = FAILED ]; then
				failed=$((failed + 1))
				if [ -z "$listed" ]; then
					echo "   UNEXPECTED FAILURE: $t ($name LUN)"
					grep -F "${t##*.}" "$out" | head -5 | sed 's/^/      /'
					bad=$((bad + 1))
				else
					echo "   known failure (skip-list): $t"
				fi
			elif [ -n "$listed" ]; then
				echo "   PASSES NOW, remove from skip-list.txt: $t ($name LUN)"
				bad=$((bad + 1))
			fi
		done <<<"$results"
	}
done
echo
echo "conformance: $total test runs over 3 LUN kinds x 2 families, $failed failed, $bad unexpected"
[ "$bad" -eq 0 ]
