#!/bin/bash
# iserbench against isertd over loopback: max runs and their reports, the
# curve sequence, data validation catching a corrupted backing file, a bad
# parameter file, a local file SD, iser:// refused cleanly, Ctrl-C.
#
# usage: test_iserbench.sh ISERTD ISERBENCH [PORT]   (port 3290-3299)
set -euo pipefail
isertd=$(realpath "$1")
iserbench=$(realpath "$2")
port=${3:-3293}
iqn=iqn.2026-11.org.isert:iserbench
url=iscsi://127.0.0.1:$port/$iqn
work=$(mktemp -d /tmp/iserbench-test.XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT
cd "$work"

fails=0
ok() { echo "ok:   $*"; }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }

# The rates of the avg_ lines of an output, one per line (the field after the label).
avg_rates() { awk '{ for (i = 1; i < NF; i++) if ($i ~ /^avg_/) print $(i + 1) }' "$1"; }
# run NAME EXPECTED_CODE ARGS...: run iserbench, keep stdout+stderr in NAME.out
run() {
	local name=$1 want=$2 rc=0
	shift 2
	"$iserbench" "$@" >"$name.out" 2>&1 || rc=$?
	if [ "$rc" -eq "$want" ]; then ok "$name: exit $rc"; else bad "$name: exit $rc, expected $want"; sed 's/^/    | /' "$name.out" | tail -20; fi
}

truncate -s 16M "$work/lun1.img"
cat >isertd.json <<JSON
{ "backstores": [ { "name": "ram", "type": "ram", "size": "64M" },
                  { "name": "file", "type": "file", "path": "$work/lun1.img", "size": "16M" } ],
  "targets": [ { "iqn": "$iqn", "tpgs": [ { "tag": 1, "demo_mode": true,
    "portals": [ { "ip": "127.0.0.1", "port": $port } ],
    "luns": [ { "lun": 0, "backstore": "ram" }, { "lun": 1, "backstore": "file" } ] } ] } ] }
JSON
"$isertd" --config isertd.json >isertd.log 2>&1 &
pids+=($!)
for _ in $(seq 50); do
	grep -q "listening on 127.0.0.1:$port" isertd.log 2>/dev/null && break
	sleep 0.1
done
grep -q "listening on 127.0.0.1:$port" isertd.log || { echo "isertd did not start:"; cat isertd.log; exit 1; }

echo "== 1: 4 KiB random read max run and 64 KiB sequential write run, with the report"
cat >max.parm <<EOF
sd=sd1,lun=$url/0,threads=8
wd=rr,sd=sd1,xfersize=4k,rdpct=100,seekpct=100
wd=sw,sd=sd1,xfersize=64k,rdpct=0,seekpct=0
rd=rr,wd=rr,iorate=max,elapsed=3,interval=1
rd=sw,wd=sw,iorate=max,elapsed=3,interval=1
EOF
run max 0 -f max.parm -o out1
check "two 'Starting RD=' lines" [ "$(grep -c '^Starting RD=' max.out)" -eq 2 ]
check "interval lines 1-3 for both runs" [ "$(grep -cE '^[0-9:.]+ +[123] ' max.out)" -eq 6 ]
check "two avg_2-3 lines" [ "$(grep -c ' avg_2-3 ' max.out)" -eq 2 ]
rates=$(avg_rates max.out | tr '\n' ' ')
check "nonzero avg rates ($rates)" awk -v r="$rates" 'BEGIN { n = split(r, a, " "); exit !(n == 2 && a[1] > 0 && a[2] > 0) }'
check "the sequential write run moves 64 KiB per I/O" grep -qE ' avg_2-3 +[0-9.]+ +[0-9.]+ +65536 +0\.00 ' max.out
for f in summary.txt flatfile.txt results.json report.html parmfile.txt; do
	check "out1/$f written" [ -s "out1/$f" ]
done
check "the report is named on stdout" grep -q '^report: out1/report.html' max.out
check "no I/O errors reported" bash -c "! grep -qi 'error' max.out"

echo "== 2: iorate=curve with curve=(50,100)"
# Two threads: the max run is then bound by latency, not by CPUs that the
# target and iserbench share with each other, so 100% of it is repeatable.
cat >curve.parm <<EOF
sd=sd1,lun=$url/0,threads=2
wd=rr,sd=sd1,xfersize=4k,rdpct=100
rd=c,wd=rr,iorate=curve,curve=(50,100),elapsed=2,interval=1
EOF
run curve 0 -f curve.parm -o out2
check "three runs" [ "$(grep -c '^Starting RD=' curve.out)" -eq 3 ]
grep '^Starting RD=' curve.out >curve.starts || true
check "the first is the max run (no target rate)" bash -c "sed -n 1p curve.starts | grep -vq 'target'"
check "then the 50% and 100% points" bash -c "sed -n 2p curve.starts | grep -q '50%.*target [0-9]' &&
	sed -n 3p curve.starts | grep -q '100%.*target [0-9]'"
rates=$(avg_rates curve.out | tr '\n' ' ')
targets=$(sed -n 's/.*; target \([0-9]*\) I\/O per second.*/\1/p' curve.starts | tr '\n' ' ')
# The points are vdbench's: 50% and 100% of the max run's measured rate,
# rounded up to a multiple of 100. Only that is checked: how close a paced
# run gets to its target depends on what else the machine is doing (a run
# measured 13% above its target once, after a max run slowed by load).
check "curve targets are 50% and 100% of the max rate (rates $rates; targets $targets)" awk -v r="$rates" -v t="$targets" 'BEGIN {
	n = split(r, a, " "); m = split(t, b, " "); if (n != 3 || m != 2 || a[1] <= 0) exit 1
	exit !(b[1] >= int(a[1]) * 0.5 - 1 && b[1] <= int(a[1]) * 0.5 + 100 &&
	       b[2] >= int(a[1]) - 1 && b[2] <= int(a[1]) + 100) }'
check "both paced runs moved I/O ($rates)" awk -v r="$rates" 'BEGIN { split(r, a, " "); exit !(a[2] > 0 && a[3] > 0) }'
# vdbench's definitions: response time from the start, so the queue depth
# (Little's law on it) is what is in flight, never above threads=2; the
# arrivals' wait for a thread is reported apart, for the paced runs only.
depths=$(awk '{ for (i = 1; i < NF; i++) if ($i ~ /^avg_/) print $(i + 10) }' curve.out | tr '\n' ' ')
check "every run's queue depth is at most threads=2 ($depths)" awk -v d="$depths" 'BEGIN {
	n = split(d, a, " "); if (n != 3) exit 1; for (i = 1; i <= n; i++) if (a[i] > 2.05) exit 1 }'
check "a queue wait line for each paced run, none for the max run" [ "$(grep -c '^queue wait (arrival to start): avg [0-9.]* ms, max [0-9.]* ms$' curve.out)" -eq 2 ]
check "results.json has each interval's queue wait" python3 -c '
import json, sys
r = json.load(open("out2/results.json"))["runs"]
ivs = [iv for run in r for iv in run["intervals"]]
sys.exit(not (ivs and all("queue_wait_ms" in iv and "queue_wait_max_ms" in iv for iv in ivs)))'

echo "== 3: data validation catches a corrupted region of the backing file"
cat >val.parm <<EOF
sd=sd1,lun=$url/1,threads=8
wd=wv,sd=sd1,xfersize=4k,rdpct=50,seekpct=100
rd=v,wd=wv,iorate=max,elapsed=3,interval=1
EOF
# bytes 4 MiB - 5 MiB of the file: LBAs 8192-10239 of the 512-byte-block LUN
( while :; do dd if=/dev/urandom of="$work/lun1.img" bs=64k seek=64 count=16 conv=notrunc status=none; sleep 0.05; done ) &
corrupter=$!
pids+=($corrupter)
run val-corrupt 2 -v -f val.parm -o out3
kill "$corrupter" 2>/dev/null || true
wait "$corrupter" 2>/dev/null || true
lba=$(grep -m1 -oE "validation error: sd=sd1 lun=$url/1 lba=[0-9]+" val-corrupt.out | grep -oE '[0-9]+$' || true)
check "a validation error names the LUN and an LBA (${lba:-none})" [ -n "$lba" ]
check "the LBA is in the corrupted region" [ "${lba:-0}" -ge 8192 -a "${lba:-0}" -lt 10240 ]
check "the mismatch shows expected and found bytes" grep -q 'first difference at byte' val-corrupt.out
run val-clean 0 -v -f val.parm -o out3b
check "no validation error without corruption" bash -c "! grep -q 'validation error' val-clean.out"
check "the clean run did read and write" grep -qE ' avg_2-3 +[1-9]' val-clean.out

echo "== 4: a bad parameter file"
cat >bad.parm <<EOF
sd=sd1,lun=$url/0
wd=wd1,sd=sd1
rd=rd1,wd=wd1,iorate=max,elapsed=2,bogus=3
EOF
run bad 1 -f bad.parm -o out4
check "the error names the file and line 3" grep -q 'bad.parm:3' bad.out
check "the error names the keyword" grep -q 'bogus' bad.out
run usage 1 -f
run help 0 -h

echo "== 5: a local file SD, created with size="
cat >file.parm <<EOF
sd=sd1,lun=$work/local.img,size=8m,threads=4
wd=wd1,sd=sd1,xfersize=4k,rdpct=50
rd=rd1,wd=wd1,iorate=max,elapsed=2,interval=1
EOF
run file 0 -f file.parm -o out5
check "the file was created with 8 MiB" [ "$(stat -c %s local.img 2>/dev/null || echo 0)" -eq 8388608 ]
check "avg_2-2 with a nonzero rate" grep -qE ' avg_2-2 +[1-9]' file.out

echo "== 6: iser:// is refused with a clear message"
sed "s#lun=$url/0#lun=iser://127.0.0.1:$port/$iqn/0#" curve.parm >iser.parm
run iser 3 -f iser.parm -o out6
check "the message says iSER" grep -qi 'iser' iser.out

echo "== 7: Ctrl-C ends the run and still writes the report"
cat >long.parm <<EOF
sd=sd1,lun=$url/0,threads=4
wd=wd1,sd=sd1,xfersize=4k
rd=rd1,wd=wd1,iorate=max,elapsed=60,interval=1
rd=rd2,wd=wd1,iorate=max,elapsed=60,interval=1
EOF
rc=0
"$iserbench" -f long.parm -o out7 >long.out 2>&1 &
ib=$!
sleep 2.5
kill -INT "$ib"
wait "$ib" || rc=$?
check "interrupted: exit 130 (got $rc)" [ "$rc" -eq 130 ]
check "only the first run started" [ "$(grep -c '^Starting RD=' long.out)" -eq 1 ]
check "its intervals are kept (avg line)" grep -q ' avg_' long.out
check "the report was written" [ -s out7/report.html ]

if [ "$fails" -ne 0 ]; then
	echo "$fails check(s) failed"
	exit 1
fi
echo "all checks passed"
