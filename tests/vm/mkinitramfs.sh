#!/bin/bash
# Build the guest's initramfs: static busybox, guest-init as /init, and the
# kernel modules the tests need with their dependencies, decompressed ahead of
# time and listed in load order (so the guest needs neither modprobe nor xz).
#
# usage: mkinitramfs.sh KROOT KVER OUT.cpio.gz [extra.ko ...]
#   KROOT  where the linux-image .deb was unpacked
#   extra  out-of-tree modules (siw.ko); they win over same-named ones
set -euo pipefail
KROOT=$1 KVER=$2 OUT=$3; shift 3
HERE=$(cd "$(dirname "$0")" && pwd)
MODDIR=$KROOT/lib/modules/$KVER
# Roots; their dependencies come from each module's own depends= list.
ROOTS="virtio_pci 9pnet_virtio 9p overlay dummy veth
 crc32c_generic crc32c_intel crc32_pclmul libcrc32c
 ib_core ib_uverbs ib_umad rdma_cm rdma_ucm rdma_rxe siw
 scsi_mod sd_mod sg scsi_transport_iscsi libiscsi libiscsi_tcp iscsi_tcp ib_iser
 configfs target_core_mod target_core_iblock target_core_file target_core_user
 iscsi_target_mod ib_isert
 nvme ublk_drv brd null_blk ext4
 dm_mod dm_multipath dm_round_robin dm_service_time scsi_dh_alua
 dm_log_writes loop xfs nvmet nvme_loop"

W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
R=$W/root
mkdir -p "$R"/{bin,dev,proc,sys,etc,host,newroot,ovl} "$R/lib/modules/$KVER"

# module name -> file (extras first so they take precedence)
: > "$W/index"
for f in "$@"; do n=$(basename "$f"); n=${n%%.ko*}; echo "${n//-/_} $(readlink -f "$f")" >> "$W/index"; done
find "$MODDIR/kernel" -name '*.ko*' |
	awk '{n=$0; sub(/.*\//,"",n); sub(/\.ko(\.xz|\.zst|\.gz)?$/,"",n); gsub(/-/,"_",n); print n" "$0}' >> "$W/index"
sed -E 's#.*/##; s/\.ko$//; s/-/_/g' "$MODDIR/modules.builtin" > "$W/builtin" 2>/dev/null || : > "$W/builtin"

modcat() { case $1 in *.xz) xz -dc "$1";; *.zst) zstd -qdc "$1";; *.gz) gzip -dc "$1";; *) cat "$1";; esac; }
declare -A seen
: > "$W/order"
resolve() {
	local n=${1//-/_} f d
	[ -n "${seen[$n]:-}" ] && return 0
	seen[$n]=1
	f=$(awk -v n="$n" '$1==n{print $2; exit}' "$W/index")
	if [ -z "$f" ]; then
		grep -qx "$n" "$W/builtin" && return 0
		echo "mkinitramfs: WARNING: module $n not found (not built in either)" >&2
		return 0
	fi
	modcat "$f" > "$R/lib/modules/$KVER/$n.ko"
	for d in $(tr '\0' '\n' < "$R/lib/modules/$KVER/$n.ko" | sed -n 's/^depends=//p' | tr ',' ' '); do
		resolve "$d"
	done
	echo "$n" >> "$W/order"
}
for m in $ROOTS; do resolve "$m"; done
cp "$W/order" "$R/etc/modules.load"

cp "$(command -v busybox)" "$R/bin/busybox"
ln -s busybox "$R/bin/sh"
install -m 0755 "$HERE/guest-init" "$R/init"
echo "$KVER" > "$R/etc/kver"
(cd "$R" && find . | cpio -o -H newc --quiet) | gzip -1 > "$OUT"
echo "initramfs: $OUT ($(du -h "$OUT" | cut -f1)), $(wc -l < "$W/order") modules"
