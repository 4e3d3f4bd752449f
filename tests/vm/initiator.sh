# The Linux kernel initiator sequences, run against any target that exposes
# the layout below (isertd from isertd-*.json, LIO from lio.sh).  Sourced by
# the t-*.sh scripts after lib.sh.
#
#   PREFIX:open    ACL for $ISCSI_INITIATOR, no CHAP, LUNs 0 and 1
#   PREFIX:chap    ACL with one-way CHAP vm-init1 / vm-init1-secret, LUN 0
#   PREFIX:mutual  the same plus mutual CHAP vm-target / vm-target-secret, LUN 0
#   PREFIX:nvme    LUN 0 on /dev/nvme0n1 (write cache, UNMAP), no CHAP
# Nothing admits $ISCSI_STRANGER.
VM_PREFIX=iqn.2026-11.org.isert.vm
CHAP_USER=vm-init1 CHAP_PASS=vm-init1-secret
CHAP_MUSER=vm-target CHAP_MPASS=vm-target-secret

has_line() { grep -qx -- "$1"; }
# login_refused IQN PORTAL [IFACE]: the login fails and leaves no session.
login_refused() {
	local out rc
	out=$(iscsi_login "$@" 2>&1); rc=$?
	echo "$out" | sed 's/^/    /'
	[ $rc -ne 0 ] && iscsi_no_session "$1"
}
login_wait() {   # login_wait IQN PORTAL NLUNS: log in and wait for the disks
	iscsi_login "$1" "$2" >/dev/null && iscsi_wait_disks "$1" "$3"
}
logout_gone() { iscsi_logout "$1" "$2" >/dev/null && iscsi_no_session "$1"; }

# fs_roundtrip IQN PORTAL NLUNS: ext4 on every LUN, files written, fsck -n
# clean; logout and a new login; the files read back identical.
fs_roundtrip() {
	local t=$1 p=$2 n=$3 lun dev disks
	must "$t: login, $n LUN(s) appear as block devices" login_wait "$t" "$p" "$n"
	disks=$(iscsi_disks "$t")
	echo "$disks" | sed 's/^/    LUN /'
	while read -r lun dev; do
		ok "$t LUN $lun ($dev): mkfs.ext4, mount, write, unmount, fsck -n clean" fs_write /dev/$dev /mnt/lun$lun
		cp "$VM_WORK/$dev.sums" "$VM_WORK/${t##*:}-lun$lun.sums"
	done <<< "$disks"
	must "$t: logout" logout_gone "$t" "$p"
	must "$t: second login" login_wait "$t" "$p" "$n"
	disks=$(iscsi_disks "$t")
	while read -r lun dev; do
		ok "$t LUN $lun ($dev): files read back identical after re-login" \
			fs_verify /dev/$dev /mnt/lun$lun "$VM_WORK/${t##*:}-lun$lun.sums"
	done <<< "$disks"
	must "$t: logout" logout_gone "$t" "$p"
}

# suite_tcp PORTAL: discovery, no CHAP, one-way and mutual CHAP, refusals.
suite_tcp() {
	local p=$1 found
	found=$(iscsi_discover "$p")
	echo "$found" | sed 's/^/    discovered /'
	ok "discovery lists $VM_PREFIX:open" has_line "$VM_PREFIX:open" <<< "$found"
	ok "discovery lists $VM_PREFIX:chap" has_line "$VM_PREFIX:chap" <<< "$found"
	ok "discovery lists $VM_PREFIX:mutual" has_line "$VM_PREFIX:mutual" <<< "$found"

	fs_roundtrip $VM_PREFIX:open "$p" 2

	local t=$VM_PREFIX:chap
	iscsi_node $t "$p"
	ok "$t: login without CHAP is refused" login_refused $t "$p"
	iscsi_chap $t "$p" $CHAP_USER wrong-secret-123
	ok "$t: login with a wrong CHAP secret is refused" login_refused $t "$p"
	iscsi_chap $t "$p" $CHAP_USER $CHAP_PASS
	fs_roundtrip $t "$p" 1

	t=$VM_PREFIX:mutual
	iscsi_node $t "$p"
	iscsi_chap $t "$p" $CHAP_USER $CHAP_PASS $CHAP_MUSER wrong-target-secret
	ok "$t: a target that fails mutual CHAP is refused by the initiator" login_refused $t "$p"
	iscsi_chap $t "$p" $CHAP_USER $CHAP_PASS $CHAP_MUSER $CHAP_MPASS
	fs_roundtrip $t "$p" 1

	# Another initiator name, no ACL: refused, whatever discovery showed it.
	must "iface for $ISCSI_STRANGER" iscsi_iface stranger $ISCSI_STRANGER
	iscsi_node $VM_PREFIX:open "$p" stranger
	ok "$ISCSI_STRANGER (no ACL): login to $VM_PREFIX:open refused" login_refused $VM_PREFIX:open "$p" stranger
	iscsiadm -m node -I stranger -o delete >/dev/null 2>&1
	iscsiadm -m iface -I stranger -o delete >/dev/null 2>&1
}

# ---- NVMe through the block backstore ---------------------------------------
sysfs_is() { [ "$(cat "$1" 2>/dev/null)" = "$2" ]; }
sysfs_gt0() { [ "$(cat "$1" 2>/dev/null || echo 0)" -gt 0 ]; }
count_ge1() {   # count_ge1 KIND: at least one such NVMe command since the last clear
	local n; n=$(nvmetrace_count "$1"); echo "    $n $1 command(s) on $NVME_DEV ($(nvmetrace_count zeroes) plain Write Zeroes)"
	[ "$n" -ge 1 ]
}
sectors_equal() {   # sectors_equal DEV LBA COUNT FILE: direct read matches FILE
	dd if="$1" iflag=direct bs=512 skip="$2" count="$3" status=none | cmp - "$4"
}
# fs_trim_roundtrip IQN PORTAL DEV: ext4, write, delete half, fstrim reaches
# the namespace as discards, fsck -n, re-login, the rest reads back.
fs_trim_cycle() {
	local dev=$1 mnt=/mnt/nvme out
	fs_write "$dev" $mnt || return 1
	mount "$dev" $mnt || return 1
	head -c $((24 << 20)) /dev/urandom > $mnt/big && sync -f $mnt/big && rm $mnt/big && sync -f $mnt || return 1
	nvmetrace_clear
	out=$(fstrim -v $mnt) || { umount $mnt; return 1; }
	echo "    $out"
	umount $mnt || return 1
	cp $TR/trace "$VM_WORK/trace-fstrim.txt"   # for a failure's post-mortem
	count_ge1 dealloc && e2fsck -f -n "$dev" >/dev/null
}

suite_nvme() {
	local p=$1 t=$VM_PREFIX:nvme lun dev hctl
	must "nvme: $NVME_DEV present with discard and a volatile write cache" nvme_ready
	must "discovery lists $t" has_line $t <<< "$(iscsi_discover "$p")"
	must "$t: login, 1 LUN" login_wait $t "$p" 1
	read -r lun dev <<< "$(iscsi_disks $t)"
	hctl=$(basename "$(readlink -f /sys/block/$dev/device)")
	ok "$t ($dev): initiator sees a volatile write cache" sysfs_is /sys/class/scsi_disk/$hctl/cache_type "write back"
	ok "$t ($dev): initiator sees FUA support" sysfs_is /sys/class/scsi_disk/$hctl/FUA 1
	ok "$t ($dev): initiator sees discard support" sysfs_gt0 /sys/block/$dev/queue/discard_max_bytes
	echo "    provisioning_mode $(cat /sys/class/scsi_disk/$hctl/provisioning_mode 2>/dev/null)"

	must "tracing NVMe commands" nvmetrace_start
	head -c 65536 /dev/urandom > /tmp/pat64k
	nvmetrace_clear
	ok "WRITE(10) FUA=1 via SG_IO succeeds" sg_dd if=/tmp/pat64k of=/dev/$dev bs=512 count=128 seek=40960 oflag=sgio,fua
	ok "WRITE with FUA reaches $NVME_DEV as a FUA write" count_ge1 fua
	ok "the FUA write's data reads back through the target" sectors_equal /dev/$dev 40960 128 /tmp/pat64k
	ok "the FUA write's data is on the namespace" sectors_equal $NVME_DEV 40960 128 /tmp/pat64k
	nvmetrace_clear
	ok "SYNCHRONIZE CACHE succeeds" sg_sync /dev/$dev
	ok "SYNCHRONIZE CACHE reaches $NVME_DEV as a flush" count_ge1 flush
	nvmetrace_clear
	ok "UNMAP succeeds" sg_unmap --force --lba=40960 --num=128 /dev/$dev
	ok "UNMAP reaches $NVME_DEV as a deallocation" count_ge1 dealloc
	ok "O_DIRECT writes through the block backstore (fio verify, io_uring)" \
		fio --name=verify --filename=/dev/$dev --ioengine=io_uring --direct=1 --rw=randwrite --bs=16k \
			--iodepth=8 --size=8m --offset=64m --verify=crc32c --do_verify=1 --output="$VM_WORK/fio.log"
	nvmetrace_clear
	ok "$t ($dev): ext4 written, fstrim reaches $NVME_DEV as deallocations, fsck -n clean" fs_trim_cycle /dev/$dev
	nvmetrace_stop
	cp "$VM_WORK/$dev.sums" "$VM_WORK/nvme.sums"
	must "$t: logout" logout_gone $t "$p"
	must "$t: second login" login_wait $t "$p" 1
	read -r lun dev <<< "$(iscsi_disks $t)"
	ok "$t ($dev): files read back identical after re-login" fs_verify /dev/$dev /mnt/nvme "$VM_WORK/nvme.sums"
	must "$t: logout" logout_gone $t "$p"
	ok "the file system is on the namespace itself (fsck -n on $NVME_DEV)" e2fsck -f -n $NVME_DEV
}
