#!/bin/bash
# The Linux kernel initiator against isertd serving the guest's NVMe namespace
# through the block backstore (O_DIRECT, io_uring): FUA, SYNCHRONIZE CACHE and
# UNMAP reach the namespace; ext4 with fstrim; data survives a re-login.
# APTPL (aptpl_restart): a registration and reservation made with sg_persist
# --param-aptpl survive isertd killed with SIGKILL and started again.
# Then the same namespace through the nvme backstore (suite_nvme_pt, its own
# isertd run: that backstore holds /dev/nvme0n1 exclusively): NVMe passthrough
# on /dev/ng0n1, checked as the block one is, plus its identity and COMPARE
# AND WRITE; fio verify over iSER on rxe and siw (suite_nvme_pt_iser); then
# libiscsi's conformance suite on it (suite_conformance_nvme).
VM_KNOWN=$(dirname "$VM_LIB")/known-failures.txt
source "$VM_LIB"
source "$(dirname "$VM_LIB")/initiator.sh"
PORTAL=127.0.0.1:3260
CONFIG=$(dirname "$VM_LIB")/isertd-nvme.json
# isertd's default global.state_dir (docs/reservations.md); the guest's root is a tmpfs overlay.
STATE_DIR=/var/lib/isert
APTPL_KEY=0xa1b2c3d4

# ---- APTPL: persistent reservations across a target restart -------------------
pr_keys_are() {   # pr_keys_are DEV KEY...: READ KEYS lists exactly these keys
	local got
	got=$(sg_persist --in --read-keys "$1" 2>/dev/null) || return 1
	shift
	[ "$(echo "$got" | grep -Eo '^ +0x[0-9a-f]+$' | tr -d ' ' | tr '\n' ' ')" = "$* " ]
}
pr_out() { sg_persist --out "$@" >/dev/null; }   # quiet: sg_persist prints the INQUIRY header
pr_reserved_by() {   # pr_reserved_by DEV KEY TYPE-TEXT: READ RESERVATION shows KEY and type
	local got
	got=$(sg_persist --in --read-reservation "$1" 2>/dev/null) || return 1
	echo "$got" | grep -q "Key=$2\$" && echo "$got" | grep -q "type: $3"
}
ptpl_active() { sg_persist --in --report-capabilities "$1" 2>/dev/null | grep -q 'PTPL_A): 1'; }
state_files() { ls $STATE_DIR/pr-*.json 2>/dev/null | wc -l; }
state_files_are() { [ "$(state_files)" -eq "$1" ]; }
isertd_kill9() { kill -9 $ISERTD_PID && wait $ISERTD_PID; ISERTD_PID=; return 0; }
aptpl_restart() {
	local p=$1 t=$VM_PREFIX:nvme lun dev
	must "$t: login for APTPL" login_wait $t "$p" 1
	read -r lun dev <<< "$(iscsi_disks $t)"
	ok "sg_persist: register $APTPL_KEY with --param-aptpl" \
		pr_out --register --param-sark=$APTPL_KEY --param-aptpl /dev/$dev
	ok "sg_persist: reserve Write Exclusive, registrants only" \
		pr_out --reserve --param-rk=$APTPL_KEY --prout-type=5 /dev/$dev
	ok "REPORT CAPABILITIES: PTPL_A=1" ptpl_active /dev/$dev
	ok "the state is in $STATE_DIR (one file)" state_files_are 1
	sed 's/^/    /' $STATE_DIR/pr-*.json
	ok "isertd killed with SIGKILL" isertd_kill9
	must "isertd starts again" isertd_start "$CONFIG"
	grep "restored" "$VM_WORK/isertd.log" | sed 's/^/    /'
	# The kernel initiator reconnects on its own (same initiator port: the same I_T nexus).
	ok "after the restart, sg_persist -k shows $APTPL_KEY" wait_for 60 pr_keys_are /dev/$dev $APTPL_KEY
	ok "after the restart, sg_persist -r shows $APTPL_KEY holding Write Exclusive, registrants only" \
		pr_reserved_by /dev/$dev $APTPL_KEY "Write Exclusive, registrants only"
	ok "after the restart, the registrant still writes" \
		sg_dd if=/dev/zero of=/dev/$dev bs=512 count=8 seek=81920 oflag=sgio
	ok "release" pr_out --release --param-rk=$APTPL_KEY --prout-type=5 /dev/$dev
	ok "unregister without APTPL: the state file goes" \
		pr_out --register --param-rk=$APTPL_KEY --param-sark=0 /dev/$dev
	ok "no state file left" state_files_are 0
	must "$t: logout" logout_gone $t "$p"
}

# ---- the nvme backstore: passthrough on the generic char device --------------
NG_DEV=/dev/ng0n1
CONFIG_PT=$(dirname "$VM_LIB")/isertd-nvme-pt.json
ng_ready() { wait_for 30 test -c $NG_DEV; }
# isertd_refuses_held: with $NVME_DEV held open with O_EXCL (as a mount or a
# block backstore holds it), the nvme backstore is refused at start, naming it.
isertd_refuses_held() {
	local rc line
	coproc HOLD { exec python3 -c 'import os, sys, time
os.open(sys.argv[1], os.O_RDONLY | os.O_EXCL)
print("held", flush=True)
time.sleep(120)' "$NVME_DEV"; }
	read -r -t 20 -u "${HOLD[0]}" line && [ "$line" = held ] || { kill $HOLD_PID 2>/dev/null; return 1; }
	timeout 20 "$ISERT_BUILD/target/isertd" --config "$CONFIG_PT" > "$VM_WORK/isertd-busy.log" 2>&1; rc=$?
	kill $HOLD_PID; wait $HOLD_PID 2>/dev/null
	sed 's/^/    /' "$VM_WORK/isertd-busy.log" | tail -3
	[ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "$NVME_DEV is in use" "$VM_WORK/isertd-busy.log"
}
# The LU's serial as the nvme backstore derives it (NGUID, else EUI-64, else
# the controller's serial and the namespace ID), from Identify itself: the
# kernel hides QEMU's EUI-64 (NVME_QUIRK_BOGUS_NID), so sysfs cannot say it
# here; isertd logs it, and where sysfs shows an NGUID or EUI-64 it must be
# that one.
ns_serial() {
	local b=/sys/block/${NVME_DEV#/dev/} v id
	id=$(grep -o "backstore 'ng0n1': .*identity [^)]*" "$VM_WORK/isertd.log" | tail -1 | sed 's/.*identity //')
	v=$(tr -d ' :-' < $b/nguid 2>/dev/null)
	[ -n "$v" ] && [ -n "${v//0/}" ] || v=$(tr -d ' :-' < $b/eui 2>/dev/null)
	if [ -n "$v" ] && [ -n "${v//0/}" ] && [ "$v" != "$id" ]; then
		echo "sysfs-$v-isertd-$id"   # not the namespace's: fails below
		return
	fi
	echo "$id"
}
readcap_is_ns() {   # readcap_is_ns DEV: READ CAPACITY(16) gives the namespace's size and block size
	local out; out=$(sg_readcap --16 "$1") || return 1
	echo "$out" | grep -E "Logical block length|Device size|lbprz" | sed 's/^/    /'
	echo "$out" | grep -q "Device size: $(blockdev --getsize64 $NVME_DEV) bytes" &&
		echo "$out" | grep -q "Logical block length=$(blockdev --getss $NVME_DEV) bytes"
}
lbprz() { sg_readcap --16 "$1" 2>/dev/null | grep -q "lbprz=1"; }
vpd83_has() {   # vpd83_has DEV STRING: the Unit Serial Number is STRING, the Device Identification page carries it
	local out sn; out=$(sg_inq -p 0x83 "$1") || return 1
	sn=$(sg_inq -p 0x80 "$1" | sed -n 's/^ *Unit serial number: *//p')
	echo "    VPD 0x80: $sn"
	[ -n "$2" ] && [ "$sn" = "$2" ] && echo "$out" | grep -qi -- "$2" || { echo "$out" | sed 's/^/    /'; return 1; }
}
discard_reaches() {   # discard_reaches DEV: blkdiscard becomes a deallocation; zeroes read back if LBPRZ=1
	nvmetrace_clear
	blkdiscard -o $((64 << 20)) -l $((8 << 20)) "$1" || return 1
	count_ge1 dealloc || return 1
	lbprz "$1" || { echo "    LBPRZ=0 (DSM deallocate): contents after it not checked"; return 0; }
	dd if="$1" iflag=direct bs=1M skip=64 count=8 status=none | cmp - <(head -c $((8 << 20)) /dev/zero)
}
# caw DEV: COMPARE AND WRITE that matches writes; one that does not is
# refused with MISCOMPARE (sg_compare_and_write status 14) and writes nothing.
caw() {
	local dev=$1 bs lba rc
	bs=$(blockdev --getss "$dev") lba=$(((80 << 20) / $(blockdev --getss "$dev")))
	head -c $bs /dev/urandom > /tmp/caw-old && head -c $bs /dev/urandom > /tmp/caw-new &&
		head -c $bs /dev/urandom > /tmp/caw-other || return 1
	dd if=/tmp/caw-old of="$dev" bs=$bs seek=$lba oflag=direct status=none || return 1
	cat /tmp/caw-old /tmp/caw-new > /tmp/caw-match
	sg_compare_and_write --in=/tmp/caw-match --lba=$lba --num=1 --xferlen=$((2 * bs)) "$dev" || return 1
	dd if="$dev" iflag=direct bs=$bs skip=$lba count=1 status=none | cmp - /tmp/caw-new || return 1
	echo "    matching COMPARE AND WRITE wrote the new block"
	cat /tmp/caw-old /tmp/caw-other > /tmp/caw-miss
	sg_compare_and_write --quiet --in=/tmp/caw-miss --lba=$lba --num=1 --xferlen=$((2 * bs)) "$dev"; rc=$?
	echo "    mismatching COMPARE AND WRITE: status $rc (14 is MISCOMPARE)"
	[ $rc -eq 14 ] && dd if="$dev" iflag=direct bs=$bs skip=$lba count=1 status=none | cmp - /tmp/caw-new
}
suite_nvme_pt() {
	local p=$1 t=$VM_PREFIX:nvmept lun dev hctl want
	must "nvme: $NG_DEV present" ng_ready
	ok "the nvme backstore is refused while $NVME_DEV is held exclusively" isertd_refuses_held
	must "isertd starts (isertd-nvme-pt.json: type nvme on $NG_DEV)" isertd_start "$CONFIG_PT"
	grep "backstore 'ng0n1'" "$VM_WORK/isertd.log" | tail -1 | sed 's/^/    /'
	must "discovery lists $t" has_line $t <<< "$(iscsi_discover "$p")"
	must "$t: login, 1 LUN" login_wait $t "$p" 1
	read -r lun dev <<< "$(iscsi_disks $t)"
	hctl=$(basename "$(readlink -f /sys/block/$dev/device)")
	ok "$t ($dev): sg_readcap gives the namespace's size and block size" readcap_is_ns /dev/$dev
	want=$(ns_serial)
	ok "$t ($dev): VPD 0x83 carries the namespace's identity ($want)" vpd83_has /dev/$dev "$want"
	ok "$t ($dev): initiator sees a volatile write cache" sysfs_is /sys/class/scsi_disk/$hctl/cache_type "write back"
	ok "$t ($dev): initiator sees discard support" sysfs_gt0 /sys/block/$dev/queue/discard_max_bytes

	must "tracing NVMe commands" nvmetrace_start
	head -c 65536 /dev/urandom > /tmp/pat64k
	nvmetrace_clear
	ok "nvme: WRITE(10) FUA=1 via SG_IO succeeds" sg_dd if=/tmp/pat64k of=/dev/$dev bs=512 count=128 seek=40960 oflag=sgio,fua
	ok "nvme: WRITE with FUA reaches $NVME_DEV as a FUA write" count_ge1 fua
	ok "nvme: the FUA write's data is on the namespace" sectors_equal $NVME_DEV 40960 128 /tmp/pat64k
	nvmetrace_clear
	ok "nvme: SYNCHRONIZE CACHE succeeds" sg_sync /dev/$dev
	ok "nvme: SYNCHRONIZE CACHE reaches $NVME_DEV as a flush" count_ge1 flush
	ok "nvme: fio verify, 16 KiB random writes (io_uring, O_DIRECT)" \
		fio --name=verify --filename=/dev/$dev --ioengine=io_uring --direct=1 --rw=randwrite --bs=16k \
			--iodepth=8 --size=8m --offset=64m --verify=crc32c --do_verify=1 --output="$VM_WORK/fio-pt.log"
	ok "nvme: fio verify, 4 KiB to 2 MiB writes (split at MDTS)" \
		fio --name=verify --filename=/dev/$dev --ioengine=io_uring --direct=1 --rw=randwrite --bsrange=4k-2m \
			--iodepth=4 --size=32m --offset=96m --verify=crc32c --do_verify=1 --output="$VM_WORK/fio-pt2.log"
	ok "nvme: blkdiscard reaches $NVME_DEV as a deallocation" discard_reaches /dev/$dev
	nvmetrace_stop
	ok "nvme: COMPARE AND WRITE matches and writes, mismatches with MISCOMPARE" caw /dev/$dev
	must "$t: logout" logout_gone $t "$p"
	ok "isertd (nvme backstore) stops cleanly" isertd_stop
}

# ---- the nvme backstore over iSER --------------------------------------------
# fio crc32c verify through the kernel's iSER initiator (ib_iser) on rxe and
# on siw: isertd-nvme-pt.json with an iSER portal on each device (both up at
# once) and a TCP one for isertd_start to wait on.  isertd runs under
# isertd.service's capabilities and system call filter (UNIT_CONFINE): RDMA
# and io_uring passthrough as the packaged unit has them.
iser_login_1() { iscsi_login $1 $2 iser >/dev/null && iscsi_wait_disks $1 1; }
iser_logout() { iscsi_logout $1 $2 iser >/dev/null && iscsi_no_session $1; }
nvme_pt_iser_one() {   # nvme_pt_iser_one PROVIDER IP
	local p=$1 portal=$2:3260 t=$VM_PREFIX:nvmept dev off
	off=$([ $p = rxe ] && echo 160 || echo 224)   # MiB: apart from each other and from the TCP checks
	ok "$p: discovery over iSER lists $t" has_line $t <<< "$(iscsi_discover $portal iser)" || return 1
	ok "$p: login over iSER, 1 LUN" iser_login_1 $t $portal || return 1
	ok "$p: the session runs over iSER" bash -c "iscsiadm -m session -P 1 | grep -q 'Iface Transport: iser'"
	read -r _ dev <<< "$(iscsi_disks $t)"
	ok "$p nvme: fio verify over iSER, 16 KiB random writes" \
		fio --name=verify --filename=/dev/$dev --ioengine=io_uring --direct=1 --rw=randwrite --bs=16k \
			--iodepth=8 --size=8m --offset=${off}m --verify=crc32c --do_verify=1 --eta=never --output="$VM_WORK/fio-pt-$p.log"
	ok "$p nvme: fio verify over iSER, 4 KiB to 2 MiB writes (split at MDTS)" \
		fio --name=verify --filename=/dev/$dev --ioengine=io_uring --direct=1 --rw=randwrite --bsrange=4k-2m \
			--iodepth=4 --size=32m --offset=$((off + 16))m --verify=crc32c --do_verify=1 --eta=never --output="$VM_WORK/fio-pt2-$p.log"
	ok "$p: logout" iser_logout $t $portal
}
suite_nvme_pt_iser() {
	local rxe siw
	rxe=$(rdma_up rxe) && siw=$(rdma_up siw) || { ok "rxe and siw come up" false; return 1; }
	python3 - "$ISERT_SRC/tests/vm/isertd-nvme-pt.json" "$rxe" "$siw" > "$VM_WORK/isertd-nvme-pt-iser.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["targets"][0]["tpgs"][0]["portals"] = [{"ip": sys.argv[2], "port": 3260, "iser": True},
    {"ip": sys.argv[3], "port": 3260, "iser": True}, {"ip": "127.0.0.1", "port": 3262}]
print(json.dumps(c))
PY
	ISERTD_WRAP=$UNIT_CONFINE
	must "isertd starts (the nvme backstore, iSER portals on rxe and siw; as isertd.service confines it)" \
		isertd_start "$VM_WORK/isertd-nvme-pt-iser.json" 3262
	ISERTD_WRAP=
	nvme_pt_iser_one rxe $rxe
	nvme_pt_iser_one siw $siw
	ok "isertd (nvme backstore, iSER) stops cleanly" isertd_stop
	rdma_down siw; rdma_down rxe
}

# ---- libiscsi's conformance suite on the nvme backstore ----------------------
# iscsi-test-cu LU (ALL but the suites no LU changes: iSCSI protocol and
# reservations, which the host's runs cover) with --dataloss over TCP on the guest's loopback
# (two portals, so the MultipathIO tests run), with the host run's checks and
# lists (tests/conformance/run-conformance.sh, LUN kind "nvme" in
# expected-skips.txt and skip-list.txt).  LINUX is not run: its tests are a
# subset of ALL's, the same functions.  The LUN is thin so that UNMAP, GET LBA STATUS and WRITE SAME
# with UNMAP reach the namespace.  The block backstore on the same namespace
# does not run it: under TCG the family takes minutes, and both backstores'
# runs would put this test past its time budget (tests/vm/README.md).
conformance_run() {   # conformance_run FAMILY: the run's summary indented; fails on a failure or an unlisted skip
	local cfg=$VM_WORK/isertd-nvme-conformance.json keep=$VM_WORK/conformance-$1 rc
	mkdir -p "$keep"
	CONFORMANCE_CONFIG=$cfg CONFORMANCE_RUNS="nvme:0:$1:-d" CONFORMANCE_KEEP=$keep \
		"$ISERT_SRC/tests/conformance/run-conformance.sh" "$ISERT_BUILD/target/isertd" 3260 \
		> "$keep/run.log" 2>&1; rc=$?
	grep -E "tests,|UNEXPECTED|^      |PASSES NOW|RUNS NOW|known failure|isertd (died|exited)|^conformance:" "$keep/run.log" |
		sed 's/^ */    /'
	return $rc
}
suite_conformance_nvme() {
	cat > "$VM_WORK/isertd-nvme-conformance.json" <<JSON
{ "backstores": [ { "name": "ng0n1", "type": "nvme", "path": "$NG_DEV", "thin": true, "write_cache": true } ],
  "targets": [ { "iqn": "iqn.2026-11.org.isert:conformance",
    "tpgs": [ { "tag": 1, "demo_mode": true, "demo_target_reset": true,
      "portals": [ { "ip": "127.0.0.1", "port": 3260 } ], "luns": [ { "lun": 0, "backstore": "ng0n1" } ] } ] } ] }
JSON
	ok "nvme backstore: iscsi-test-cu LU --dataloss over TCP, no failure, only listed skips" conformance_run LU
}

vm_cleanup_hook() {
	iscsiadm -m node --logoutall=all >/dev/null 2>&1
	ok "isertd stops cleanly on SIGTERM" isertd_stop
}
must "nvme: $NVME_DEV present" nvme_ready
must "isertd starts (isertd-nvme.json)" isertd_start "$CONFIG"
must "iscsid starts" iscsi_start
suite_nvme $PORTAL
aptpl_restart $PORTAL
ok "isertd (block backstore) stops cleanly" isertd_stop
source "$(dirname "$VM_LIB")/odx.sh"   # ODX: ddpt token copies through the kernel's sg devices (suite_odx)
suite_nvme_pt $PORTAL
source "$(dirname "$VM_LIB")/sanitize-nvme.sh"   # SANITIZE on the nvme backstore (suite_sanitize_nvme)
suite_nvme_pt_iser
suite_conformance_nvme
vm_done
