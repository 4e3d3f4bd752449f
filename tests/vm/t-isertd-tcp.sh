#!/bin/bash
# The Linux kernel initiator (open-iscsi, iscsi_tcp) against isertd over TCP:
# discovery, login without CHAP, with one-way and with mutual CHAP, every
# mapped LUN as a block device with ext4 written, checked and read back, and
# refusals (no CHAP, wrong secret, bad mutual secret, initiator without ACL);
# EXTENDED COPY offloaded by sg_xcopy within a LUN and between two LUNs;
# then live changes through the admin socket (iserctl) in one session with
# ext4 mounted: a hot-added LUN after a rescan, a grown file LUN's new size.
VM_KNOWN=$(dirname "$VM_LIB")/known-failures.txt
source "$VM_LIB"
source "$(dirname "$VM_LIB")/initiator.sh"
PORTAL=127.0.0.1:3260
ISERTD_SOCK=/run/isertd-vm.sock
vm_cleanup_hook() {
	iscsiadm -m node --logoutall=all >/dev/null 2>&1
	ok "isertd stops cleanly on SIGTERM" isertd_stop
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
# sg_node DEV: the sg device of a disk (sg_xcopy looks for /dev/char/M:m, which needs udev: give it /dev/sgN).
sg_node() {
	local s
	s=$(ls /sys/block/$1/device/scsi_generic/ 2>/dev/null | head -1)
	[ -n "$s" ] || return 1
	[ -c /dev/$s ] || mknod /dev/$s c $(tr ':' ' ' < /sys/class/scsi_generic/$s/dev) || return 1
	echo /dev/$s
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
vm_done
