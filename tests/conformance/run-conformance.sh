#!/bin/bash
# libiscsi's conformance suite (iscsi-test-cu) against isertd over loopback,
# family ALL (every test; LINUX is a subset of the same test functions, so it
# is not run again) on the thick LUN, family LU (below) on the thin and
# read-only ones, over two paths to the LUN (portals 127.0.0.1 and 127.0.0.2), so the
# MultipathIO tests run too.
#
# A test that fails and is not in skip-list.txt fails the run; so does a
# listed test that passes again.  A test that iscsi-test-cu skips (it logs
# "[SKIPPED]": a command not implemented, a feature the LUN does not have)
# and is not in expected-skips.txt fails the run; so does a listed test that
# no longer skips.  Both lists only shrink.
#
# usage: run-conformance.sh ISERTD [PORT]
# CONFORMANCE_CONFIG (default conformance.json) and CONFORMANCE_RUNS (the
# KIND:LUN:FAMILY:FLAG runs below) let another LUN kind use the same checks:
# tests/ceph/conformance-rbd.sh runs them on an RBD image, tests/vm/t-isertd-nvme.sh
# on an NVMe namespace.  CONFORMANCE_KEEP=DIR keeps isertd's log and each
# run's iscsi-test-cu output there (the VM tests keep their work folder).
# CONFORMANCE_PIDS="PID1 PID2": two isertd serving 127.0.0.1 and 127.0.0.2
# run already (a fleet's gateways, tests/ceph/conformance-rbd.sh), each
# another gateway of the same LUs; they are stopped at the end as the one
# started here would be.  A run KIND:LUN:FAMILY:FLAG:ba gives iscsi-test-cu
# the second path first, so its one-path tests go through the second.
set -u
isertd=${1:?usage: run-conformance.sh ISERTD [PORT]}
port=${2:-3261}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
pid= pid2=   # set once isertd runs; an early exit must still clean up under set -u
trap 'for p in $pid $pid2; do kill $p 2>/dev/null; wait $p 2>/dev/null; done; [ -z "${CONFORMANCE_KEEP:-}" ] || cp -r "$work/." "$CONFORMANCE_KEEP"; rm -rf "$work"' EXIT

command -v iscsi-test-cu >/dev/null || { echo "iscsi-test-cu not found: apt-get install libiscsi-bin"; exit 1; }

# APTPL state in the work folder, never in the host's /var/lib/isert.
if [ -n "${CONFORMANCE_PIDS:-}" ]; then
	read -r pid pid2 <<<"$CONFORMANCE_PIDS"   # started by the caller (a fleet's gateways); stopped here
else
	"$isertd" --config "${CONFORMANCE_CONFIG:-$here/conformance.json}" --portal "127.0.0.1:$port" \
		--portal "127.0.0.2:$port" --state-dir "$work/state" >"$work/isertd.log" 2>&1 &
	pid=$!
fi
for _ in $(seq 300); do
	iscsi-ls "iscsi://127.0.0.1:$port" >/dev/null 2>&1 && iscsi-ls "iscsi://127.0.0.2:$port" >/dev/null 2>&1 && break
	for p in $pid $pid2; do
		kill -0 $p 2>/dev/null || { echo "isertd exited:"; cat "$work"/isertd*.log; exit 1; }
	done
	sleep 0.1
done

iqn=iqn.2026-11.org.isert:conformance
i1=iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test
i2=iqn.2007-10.com.github:sahlberg:libiscsi:iscsi-test-2
# "TEST<TAB>LUN kinds" of each list (kinds: thick, thin, readonly, rbd, nvme, all, or several joined by commas)
fails=$(grep -v '^#' "$here/skip-list.txt" 2>/dev/null | awk -F'\t' 'NF{print $1"\t"$2}')
skips=$(grep -v '^#' "$here/expected-skips.txt" 2>/dev/null | awk -F'\t' 'NF{print $1"\t"$2}')
listed() {   # listed LIST TEST KIND
	printf '%s\n' "$1" | awk -F'\t' -v t="$2" -v k="$3" \
		'$1==t { n = split($2, a, ","); for (i = 1; i <= n; i++) if (a[i]==k || a[i]=="all") { print; exit } }'
}
bad=0 total=0 failed=0 skipped=0 nodataloss=0
# FLAG is iscsi-test-cu's short options: d (--dataloss), S (--allow-sanitize:
# the Sanitize family rewrites the whole LU several times: the 256 MiB RAM
# LUNs take it in seconds; the read-only LUN and the rbd and nvme kinds
# leave it out, expected-skips.txt says why).
# The read-only LUN runs without --dataloss (write tests would fail by design;
# what iscsi-test-cu skips for want of it is counted, not listed), except the
# ReadOnly suite, which checks that writes are refused.  That one runs first
# on the LUN: iscsi-test-cu opens the same I_T nexus each time (its ISID comes
# from an unseeded rand()), so the target resets of a previous run leave a
# unit attention that fails the MODE SENSE it reads WP from, and it would
# skip the suite ("not write-protected").
# FAMILY LU is ALL without the suites the LU's kind does not change: the iSCSI
# protocol suites, and the reservation ones (PRIN, PROUT, RESERVE(6): state
# the SCSI layer keeps, never the backstore; Reserve6 alone sleeps 9 s).  On
# the read-only LUN those only ever repeated listed failures: libiscsi's PR
# helpers want --dataloss, and a read-only mapping refuses reservations by
# design, which tests/unit/test_scsi.c (write_protected_mapping) checks.
# ALL runs once, on the thick LUN; the other kinds run LU.
runs=${CONFORMANCE_RUNS:-thick:0:ALL:-dS thin:1:LU:-dS readonly:2:ALL.ReadOnly:-d readonly:2:LU:}
lu_suites=$(iscsi-test-cu -l 2>/dev/null | awk -F. 'NF == 2 && $1 == "ALL" && $2 !~ /^(iSCSI|Prin|Prout|Reserve6$)/' | paste -sd,)
[ -n "$lu_suites" ] || { echo "iscsi-test-cu -l lists no suite of ALL"; exit 1; }
kinds=$(printf '%s\n' $runs | cut -d: -f1 | sort -u | wc -l)
for run in $runs; do
	IFS=: read -r name lun family flags order <<<"$run"
	dl=; [[ "$flags" != *d* ]] || dl=-d   # dl: this run has --dataloss
	{
		dir="$work/$family-$name${order:+-$order}"
		mkdir -p "$dir"
		out="$dir/output.txt"
		url1="iscsi://127.0.0.1:$port/$iqn/$lun" url2="iscsi://127.0.0.2:$port/$iqn/$lun"
		[ "$order" != ba ] || { url1="iscsi://127.0.0.2:$port/$iqn/$lun" url2="iscsi://127.0.0.1:$port/$iqn/$lun"; }
		echo "== iscsi-test-cu -t $family ${dl:+--dataloss }$([[ "$flags" != *S* ]] || echo "--allow-sanitize ")on the $name LUN${order:+, through ${url1%%/$iqn*} first}"
		# Console (CUnit basic) output: cu-results.py reads results and skips from it.
		tests=$family fam=${family%%.*}   # fam: the prefix of the test names in its output
		[ "$family" != LU ] || tests=$lu_suites fam=ALL
		(cd "$dir" && timeout 1200 iscsi-test-cu $flags -t "$tests" -i "$i1" -I "$i2" "$url1" "$url2" >"$out" 2>&1)
		for p in $pid $pid2; do
			kill -0 $p 2>/dev/null || { echo "isertd died during $family/$name"; tail -50 "$work"/isertd*.log; exit 1; }
		done
		if ! results=$(python3 "$here/cu-results.py" "$fam" "$out"); then
			echo "   no usable results from iscsi-test-cu:"; tail -20 "$out"; bad=$((bad + 1)); continue
		fi
		n=$(printf '%s\n' "$results" | grep -c .)
		nf=$(printf '%s\n' "$results" | grep -c $'\tFAILED\t')
		ns=$(printf '%s\n' "$results" | grep -c $'\tskipped\t')
		nd=0
		[ -n "$dl" ] || nd=$(printf '%s\n' "$results" | grep -c $'\tskipped\t--dataloss flag is not set')
		total=$((total + n)) failed=$((failed + nf)) skipped=$((skipped + ns - nd)) nodataloss=$((nodataloss + nd))
		echo "   $n tests, $nf failed, $((ns - nd)) skipped$([ -n "$dl" ] || echo ", $nd skipped for want of --dataloss")"
		while IFS=$'\t' read -r t state why; do
			[ -n "$t" ] || continue
			[ -z "$dl" ] && [ "$state" = skipped ] && [[ "$why" == "--dataloss flag is not set"* ]] && continue
			lf=$(listed "$fails" "$t" "$name")
			ls=$(listed "$skips" "$t" "$name")
			if [ "$state" = FAILED ]; then
				if [ -z "$lf" ]; then
					echo "   UNEXPECTED FAILURE: $t ($name LUN)"
					grep -F "${t##*.}" "$out" | head -5 | sed 's/^/      /'
					bad=$((bad + 1))
				else
					echo "   known failure (skip-list.txt): $t"
				fi
			elif [ -n "$lf" ]; then
				echo "   PASSES NOW, remove from skip-list.txt: $t ($name LUN)"
				bad=$((bad + 1))
			fi
			if [ "$state" = skipped ] && [ -z "$ls" ]; then
				echo "   UNEXPECTED SKIP: $t ($name LUN): $why"
				bad=$((bad + 1))
			elif [ "$state" != skipped ] && [ -n "$ls" ]; then
				echo "   RUNS NOW, remove from expected-skips.txt: $t ($name LUN)"
				bad=$((bad + 1))
			fi
		done <<<"$results"
	}
done
echo
echo "conformance: $total test runs over $kinds LUN kind(s), $failed failed, $skipped skipped" \
	"(+ $nodataloss without --dataloss on the read-only LUN), $bad unexpected"
[ "$bad" -eq 0 ]
