# LIO (the kernel's iSCSI target) driven through configfs, inside the guest:
# the reference target the harness is checked against.  targetcli is not used:
# it needs D-Bus and takes seconds a call.
LIO=/sys/kernel/config/target
lio_ram() {      # lio_ram NAME MIB
	local d=$LIO/core/rd_mcp_0/$1
	mkdir -p $d && echo rd_pages=$(($2 * 256)) > $d/control && echo 1 > $d/enable
}
lio_iblock() {   # lio_iblock NAME DEV: UNMAP and WRITE SAME/UNMAP on; iblock reports the device's write cache
	local d=$LIO/core/iblock_0/$1
	# udev_path as targetcli sets it too: saveconfig's "dev" (t-lio-tcp.sh imports it).
	mkdir -p $d && echo udev_path=$2 > $d/control && echo -n $2 > $d/udev_path && echo 1 > $d/enable &&
	echo 1 > $d/attrib/emulate_tpu && echo 1 > $d/attrib/emulate_tpws &&
	echo 65535 > $d/attrib/max_write_same_len   # the initiator trims with WRITE SAME(16) of 65535 blocks
}
lio_tpg() { echo $LIO/iscsi/$1/tpgt_1; }
lio_target() {   # lio_target IQN PORTAL AUTH(0|1) HBA/NAME...: LUNs numbered in order
	local iqn=$1 portal=$2 auth=$3 t n=0 so; shift 3
	t=$(lio_tpg $iqn)
	mkdir -p $t/np/$portal || return 1
	for so in "$@"; do
		mkdir -p $t/lun/lun_$n && ln -s $LIO/core/$so $t/lun/lun_$n/${so##*/} || return 1
		n=$((n + 1))
	done
	echo 0 > $t/attrib/generate_node_acls && echo 0 > $t/attrib/demo_mode_write_protect &&
	echo $auth > $t/attrib/authentication
}
lio_acl() {      # lio_acl IQN INITIATOR NLUNS [USER PASS [MUSER MPASS]]
	local t a i; t=$(lio_tpg $1); a=$t/acls/$2
	mkdir -p $a || return 1
	for ((i = 0; i < $3; i++)); do
		mkdir -p $a/lun_$i && ln -s $t/lun/lun_$i $a/lun_$i/lun_$i || return 1
	done
	if [ -n "${4:-}" ]; then printf %s "$4" > $a/auth/userid && printf %s "$5" > $a/auth/password || return 1; fi
	if [ -n "${6:-}" ]; then printf %s "$6" > $a/auth/userid_mutual && printf %s "$7" > $a/auth/password_mutual || return 1; fi
}
lio_enable() { echo 1 > $(lio_tpg $1)/enable; }

# lio_setup PORTAL: the layout initiator.sh expects.
lio_setup() {
	local p=$1 i=$ISCSI_INITIATOR
	lio_ram ram0 64 && lio_ram ram1 64 && lio_ram ram2 64 && lio_ram ram3 64 &&
	lio_iblock nvme0n1 $NVME_DEV || return 1
	lio_target $VM_PREFIX:open $p 0 rd_mcp_0/ram0 rd_mcp_0/ram1 && lio_acl $VM_PREFIX:open $i 2 &&
	lio_target $VM_PREFIX:chap $p 1 rd_mcp_0/ram2 && lio_acl $VM_PREFIX:chap $i 1 $CHAP_USER $CHAP_PASS &&
	lio_target $VM_PREFIX:mutual $p 1 rd_mcp_0/ram3 &&
	lio_acl $VM_PREFIX:mutual $i 1 $CHAP_USER $CHAP_PASS $CHAP_MUSER $CHAP_MPASS &&
	lio_target $VM_PREFIX:nvme $p 0 iblock_0/nvme0n1 && lio_acl $VM_PREFIX:nvme $i 1 || return 1
	local t; for t in open chap mutual nvme; do lio_enable $VM_PREFIX:$t || return 1; done
	wait_for 10 port_listening ${p##*:}
}
