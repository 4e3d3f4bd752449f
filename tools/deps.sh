#!/bin/bash
# Install from Debian 12's packages what building and testing need, or with
# --demo only what tools/demo.sh needs: the build dependencies and libiscsi's
# client tools.
set -euo pipefail
build=(build-essential meson ninja-build pkg-config
       liburing-dev libjson-c-dev libssl-dev libibverbs-dev librdmacm-dev libsystemd-dev
       libmicrohttpd-dev libgnutls28-dev)
if [ "${1:-}" = --demo ]; then
	pkgs=("${build[@]}" libiscsi-bin)
else
	pkgs=("${build[@]}" python3 libcunit1-dev scdoc tmux
	      libiscsi-dev libiscsi-bin tgt sg3-utils fio iperf3
	      prometheus curl sslscan
	      clang libclang-rt-14-dev
	      qemu-system-x86 busybox-static cpio kmod xz-utils open-iscsi e2fsprogs util-linux iproute2
	      multipath-tools udev fence-agents targetcli-fb ibverbs-utils perftest
	      ceph-mon ceph-osd ceph-common librbd-dev tgt-rbd
	      debhelper lintian debootstrap ddpt open-isns-server open-isns-utils linux-perf strace gdb)
fi
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
	echo "== installing: ${missing[*]}"
	SUDO=; [ "$(id -u)" -eq 0 ] || SUDO=sudo
	$SUDO apt-get update -q
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi
