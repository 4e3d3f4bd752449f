#!/bin/bash
# The Linux kernel initiator (open-iscsi, iscsi_tcp) against isertd over TCP:
# discovery, login without CHAP, with one-way and with mutual CHAP, every
# mapped LUN as a block device with ext4 written, checked and read back, and
# refusals (no CHAP, wrong secret, bad mutual secret, initiator without ACL);
# EXTENDED COPY offloaded by sg_xcopy within a LUN and between two LUNs;
# then live changes through the admin socket (iserctl) in one session with
# ext4 mounted: a hot-added LUN after a rescan, a grown file LUN's new size;
# then ALUA (alua_checks below): sg_rtpg, sg_stpg, sg_vpd, sg_inq, sg_turs on
# the disk of a target with two target port groups; then a gateway drained by
# login redirection (redirect.sh).
VM_KNOWN=$(dirname "$VM_LIB")/known-failures.txt
source "$VM_LIB"
source "$(dirname "$VM_LIB")/initiator.sh"
source "$(dirname "$VM_LIB")/redirect.sh"
PORTAL=127.0.0.1:3260
ISERTD_SOCK=/run/isertd-vm.sock
vm_cleanup_hook() {
	iscsiadm -m node --logoutall=all >/dev/null 2>&1
	ok "isertd stops cleanly on SIGTERM" isertd_stop
}
# ---- ALUA -----------------------------------------------------------------------
# $VM_PREFIX:alua: portal group 1 (127.0.0.1:3260) in target port group 1
# (active/optimized, preferred), portal group 2 (127.0.0.1:3262) in group 2
# (active/non-optimized, with relative port 3 of another gateway); mode both,
# implicit transition time 5 s.  The session goes through portal group 1.
# rtpg_groups DEV [ARGS]: sg_rtpg's answer, one line per group (id, Pref,
# format, state, status code, relative ports), for an exact comparison.
rtpg_groups() {
	local dev=$1; shift
	sg_rtpg "$@" "$dev" | awk '
		/target port group id/ { if (g) print g; gsub(/,/, ""); g = "group " $6 " " $7 " " $8 }
		/asymmetric access state/ { g = g " state " $NF }
		/status code/ { g = g " status " $4 }
		/^ +0x/ { g = g " port " $1 }
		END { if (g) print g }'
}
rtpg_is() {   # rtpg_is DEV EXPECTED [ARGS]
	local got; got=$(rtpg_groups "$1" "${@:3}")
	echo "$got" | sed 's/^/    /'
	[ "$got" = "$2" ]
}
G1="group 0x1 Pref=1 Rtpg_fmt=0" G2="group 0x2 Pref=0 Rtpg_fmt=0"
P1="port 0x01" P2="port 0x02 port 0x03"
turs_rc_is() { sg_turs "$1" >/dev/null 2>&1; [ $? -eq "$2" ]; }   # turs_rc_is DEV STATUS
stpg_quiet() {   # stpg_quiet ARGS...: sg_stpg reports no error (its exit status does not say)
	local err; err=$(sg_stpg "$@" 2>&1 >/dev/null)
	[ -z "$err" ] || { echo "    $err"; return 1; }
}
stpg_refused() {   # stpg_refused PATTERN ARGS...: sg_stpg -vv says SET TARGET PORT GROUPS failed, with PATTERN
	local want=$1 err; shift
	err=$(sg_stpg -vv "$@" 2>&1 >/dev/null)
	echo "$err" | grep -iE "set target port groups|sense" | sed 's/^/    /'
	grep -qi "set target port groups" <<< "$err" && grep -qiE -- "$want" <<< "$err"
}
alua_checks() {
	local t=$VM_PREFIX:alua p=127.0.0.1:3260 dev out mark="alua"
	iscsi_node $t $p
	ok "alua: login to $t through portal group 1, 1 LUN" login_wait $t $p 1 || return 1
	dev=/dev/$(lun_dev $t 0)
	out=$(sg_inq $dev)
	ok "alua: sg_inq: TPGS=3 (implicit and explicit)" grep -q "TPGS=3" <<< "$out"
	out=$(sg_vpd -p di $dev)
	ok "alua: sg_vpd -p di: relative target port 0x1" grep -qi "Relative target port: 0x1\b" <<< "$out"
	ok "alua: sg_vpd -p di: target port group 0x1" grep -qi "Target port group: 0x1\b" <<< "$out"
	ok "alua: sg_rtpg: group 1 active/optimized, preferred, port 1; group 2 active/non-optimized, ports 2 and 3" \
		rtpg_is $dev "$G1 state 0x00 status 0x00 $P1"$'\n'"$G2 state 0x01 status 0x00 $P2"
	out=$(sg_rtpg -e $dev)
	ok "alua: sg_rtpg -e: implicit transition time 5, extended format" \
		grep -q "Implicit transition time: 5" <<< "$out"
	# RTPG_FMT (descriptor byte 0, bits 6-4) is the descriptor's format, 000b in both header formats.
	ok "alua: sg_rtpg -e: the same groups" rtpg_is $dev "$G1 state 0x00 status 0x00 $P1"$'\n'"$G2 state 0x01 status 0x00 $P2" -e

	# The admin puts this path's group in standby, and back.
	kmsg_mark "$mark"
	ok "alua: iserctl alua set $t 1 standby" iserctl alua set $t 1 standby
	ok "alua: TEST UNIT READY: NOT READY (sg_turs status 2) once the unit attention is taken" \
		wait_for 10 turs_rc_is $dev 2
	ok "alua: the kernel got ASYMMETRIC ACCESS STATE CHANGED" \
		wait_for 10 dmesg_has "$mark" "Asymmetric access state changed"
	out=$(sg_turs -v $dev 2>&1)
	ok "alua: sg_turs -v: target port in standby state" grep -qi "standby" <<< "$out"
	ok "alua: a direct read fails in standby" \
		bash -c "! timeout 60 dd if=$dev of=/dev/null iflag=direct bs=4096 count=1 status=none 2>/dev/null"
	ok "alua: sg_rtpg in standby: served, group 1 standby (status 02h: implicit)" \
		rtpg_is $dev "$G1 state 0x02 status 0x02 $P1"$'\n'"$G2 state 0x01 status 0x00 $P2"
	ok "alua: iserctl alua set $t 1 active_optimized" iserctl alua set $t 1 active_optimized
	ok "alua: TEST UNIT READY passes again" wait_for 10 turs_rc_is $dev 0
	ok "alua: a direct read works again" dd if=$dev of=/dev/null iflag=direct bs=4096 count=1 status=none

	# SET TARGET PORT GROUPS from the initiator.
	ok "alua: sg_stpg --tp=2 --standby: no error" stpg_quiet --tp=2 --standby $dev
	sg_turs $dev >/dev/null 2>&1   # this nexus sent it: no unit attention; the command runs
	ok "alua: sg_rtpg: group 2 standby, status 01h (set by SET TARGET PORT GROUPS)" \
		rtpg_is $dev "$G1 state 0x00 status 0x02 $P1"$'\n'"$G2 state 0x02 status 0x01 $P2"
	out=$(iserctl alua $t)
	echo "$out" | sed 's/^/    /'
	ok "alua: iserctl alua shows group 2 standby, set_by_initiator" \
		grep -qE "^ +2 +standby +set_by_initiator" <<< "$out"
	out=$(sg_stpg --active $dev 2>&1)
	echo "$out" | grep -i "port group 0x" | sed 's/^/    /'
	ok "alua: sg_stpg (own group): finds port group 0x01, relative port 0x01 in VPD 83h" \
		grep -q "Device is at port Group 0x01, relative port 0x01" <<< "$out"
	ok "alua: ... and group 1 is active/non-optimized" \
		rtpg_is $dev "$G1 state 0x01 status 0x01 $P1"$'\n'"$G2 state 0x02 status 0x01 $P2"
	ok "alua: sg_stpg --tp=9 (no such group): INVALID FIELD IN PARAMETER LIST" \
		stpg_refused "invalid field in parameter list" --tp=9 --standby $dev
	ok "alua: iserctl alua set $t mode=implicit" iserctl alua set $t mode=implicit
	out=$(sg_inq $dev)
	ok "alua: sg_inq: TPGS=1 (implicit only)" grep -q "TPGS=1" <<< "$out"
	ok "alua: sg_stpg with explicit mode off: INVALID COMMAND OPERATION CODE" \
		stpg_refused "invalid (command )?op(eration )?code" --tp=2 --optimized $dev
	ok "alua: ... group 2 stays in standby" \
		rtpg_is $dev "$G1 state 0x01 status 0x01 $P1"$'\n'"$G2 state 0x02 status 0x01 $P2"
	iserctl alua set $t mode=both >/dev/null
	ok "alua: logout" logout_gone $t $p
}

# ---- EXTENDED COPY (sg_xcopy) on :live: LUN 0 (RAM) and LUN 1 (file), 512-byte blocks ----
# xcopy_run IF SKIP OF SEEK COUNT: sg_xcopy copies COUNT blocks in XCOPY(LID1)
# commands of 4 MiB (bpt), which the target moves itself.
xcopy_run() {
	local out rc
	out=$(sg_xcopy if="$1" skip="$2" of="$3" seek="$4" count="$5" bs=512 bpt=8192 2>&1); rc=$?
	[ -z "$out" ] || echo "$out" | sed 's/^/    /'
	return $rc
}
# xcopy_same DEV1 SKIP DEV2 SEEK COUNT: the two ranges of 512-byte blocks are the same (read O_DIRECT from the target).
xcopy_same() {
	cmp <(dd if="$1" bs=1M skip=$(($2 * 512)) count=$(($5 * 512)) iflag=direct,skip_bytes,count_bytes status=none) \
		<(dd if="$3" bs=1M skip=$(($4 * 512)) count=$(($5 * 512)) iflag=direct,skip_bytes,count_bytes status=none)
}
xcopy_3pc() { sg_inq "$1" | grep -q "3PC=1"; }
xcopy_vpd() { sg_vpd -p 0x8f "$1" >/dev/null; }
xcopy_section() {
	local t=$VM_PREFIX:live p=$1 d0 d1 s0 s1
	ok "xcopy: login to $t, LUN 0 (RAM) and LUN 1 (file) appear" live_login $t $p default || return 1
	d0=$(lun_dev $t 0) d1=$(lun_dev $t 1)
	s0=$(sg_node $d0) s1=$(sg_node $d1)
	ok "xcopy: the sg devices of LUN 0 ($d0: $s0) and LUN 1 ($d1: $s1)" test -n "$s0" -a -n "$s1" || return 1
	ok "xcopy: 8 MiB of random data written to LUN 0" \
		dd if=<(head -c $((8 << 20)) /dev/urandom) of=/dev/$d0 bs=1M oflag=direct status=none
	ok "xcopy: sg_inq reports 3PC=1, sg_vpd reads the third-party copy page" eval "xcopy_3pc /dev/$d0 && xcopy_vpd /dev/$d0"
	ok "xcopy: sg_xcopy within LUN 0: 4 MiB from block 0 to block 40960" xcopy_run $s0 0 $s0 40960 8192
	ok "xcopy: the copy within LUN 0 is identical (cmp)" xcopy_same /dev/$d0 0 /dev/$d0 40960 8192
	ok "xcopy: sg_xcopy LUN 0 -> LUN 1 (RAM to file): 8 MiB to block 20480" xcopy_run $s0 0 $s1 20480 16384
	ok "xcopy: LUN 1 holds LUN 0's 8 MiB (cmp)" xcopy_same /dev/$d0 0 /dev/$d1 20480 16384
	ok "xcopy: sg_xcopy past the end of LUN 1 fails" eval "! xcopy_run $s0 0 $s1 131060 16"
	ok "xcopy: logout" live_end $t $p default
}

must "isertd starts (isertd-tcp.json)" isertd_start "$(dirname "$VM_LIB")/isertd-tcp.json"
must "iscsid starts" iscsi_start
suite_tcp $PORTAL
xcopy_section $PORTAL
live_changes tcp $VM_PREFIX:live $PORTAL default
ok "tcp: live: logout" live_end $VM_PREFIX:live $PORTAL default
alua_checks
redirect_section
vm_done
