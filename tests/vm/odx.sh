# Token-based copy (ODX) through the kernel initiator (sourced by
# t-isertd-nvme.sh once the block backstore's isertd has stopped;
# docs/admin.md "Offloaded copies"): its own isertd with two LUNs, the
# guest's NVMe namespace (block backstore) and a RAM LU, logged in by
# open-iscsi; ddpt drives POPULATE TOKEN, RECEIVE ROD TOKEN INFORMATION and
# WRITE USING TOKEN through the sg devices: a copy within the NVMe LUN, one
# across to the RAM LUN, both compared with cmp; a token written to a file
# (ddpt's read-to-tokens) is refused (TOKEN CANCELLED) after a write over
# one of its blocks.
#
# ddpt 0.97 (Debian 12's, and its source to this day) writes every block
# device range descriptor one byte early (src/ddpt_xcopy.c: the loops of
# do_pop_tok and do_wut start at byte 15 and 535, SBC-3 puts them at 16 and
# 536), so a target that reads them where SBC-3 has them sees LBA << 8 and
# NUM << 8.  odx_sgl gives ddpt the LBA,NUM pair whose misplaced bytes say
# the range wanted (NUM a multiple of 256); ddpt then warns that the
# transfer count (the blocks isertd really moved) differs from the number it
# asked for, and its own write-from-tokens loop cannot follow, which is why
# only the refusal is asked of it here (test_odx.py covers tokens kept and
# used later).
ODX_T=$VM_PREFIX:odx
ODX_PORTAL=127.0.0.1:3610
ODX_MB=8                 # each copy: 8 MiB, 16384 blocks
odx_config() {
	cat > "$VM_WORK/isertd-odx.json" <<JSON
{ "backstores": [ { "name": "nvme0n1", "type": "block", "path": "$NVME_DEV", "thin": true, "write_cache": true },
                  { "name": "ram1", "type": "ram", "size": "64M" } ],
  "targets": [ { "iqn": "$ODX_T", "tpgs": [ { "tag": 1, "portals": [ { "ip": "127.0.0.1", "port": 3610 } ],
      "luns": [ { "lun": 0, "backstore": "nvme0n1" }, { "lun": 1, "backstore": "ram1" } ],
      "acls": [ { "initiator": "$VM_PREFIX:init1",
                  "mapped_luns": [ { "mapped_lun": 0, "tpg_lun": 0 }, { "mapped_lun": 1, "tpg_lun": 1 } ] } ] } ] } ] }
JSON
}
# odx_same DEV_A MIB_A DEV_B MIB_B: ODX_MB MiB at MIB_A of A equal those at MIB_B of B (read past the page cache)
odx_same() {
	cmp <(dd if=/dev/$1 iflag=direct bs=1M skip=$2 count=$ODX_MB status=none) \
	    <(dd if=/dev/$3 iflag=direct bs=1M skip=$4 count=$ODX_MB status=none)
}
# odx_sgl LBA NUM: the skip=/seek= list (ddpt 0.97 takes LBA,NUM; a bare LBA is NUM 0) that makes ddpt send LBA, NUM.
odx_sgl() { echo $(($1 >> 8)),$(((($1 & 255) << 24) | ($2 >> 8))); }
odx_ddpt() {   # odx_ddpt ARGS...: ddpt with bs=512, its output indented into the log
	local out rc
	out=$(ddpt bs=512 "$@" 2>&1); rc=$?
	echo "$out" | sed 's/^/    /' | tail -6
	return $rc
}
odx_refused() {   # odx_refused PATTERN ARGS...: ddpt fails and says PATTERN
	local pat=$1 out rc
	shift
	out=$(ddpt bs=512 "$@" 2>&1); rc=$?
	echo "$out" | grep -i -m3 -E "sense|token|rod" | sed 's/^/    /'
	[ $rc -ne 0 ] && echo "$out" | grep -qi -- "$pat"
}
odx_run() {
	local a b sga sgb n=$((ODX_MB * 2048))
	odx_config
	ok "isertd starts (ODX: the NVMe namespace and a RAM LU)" isertd_start "$VM_WORK/isertd-odx.json" 3610 || return 1
	ok "discovery lists $ODX_T" has_line $ODX_T <<< "$(iscsi_discover $ODX_PORTAL)" || return 1
	ok "$ODX_T: login, 2 LUNs" login_wait $ODX_T $ODX_PORTAL 2 || return 1
	a=$(lun_dev $ODX_T 0) b=$(lun_dev $ODX_T 1)
	ok "odx: the sg devices of both LUNs" eval 'sga=$(sg_node $a) && sgb=$(sg_node $b)' || return 1
	vm_log "ODX: LUN 0 $a ($sga, NVMe), LUN 1 $b ($sgb, RAM)"
	ok "odx: VPD 8Fh has the Block Device ROD Token Limits" \
		bash -c "sg_vpd -p 0x8f $sga | grep -A5 -i 'ROD Token Limits' | sed 's/^/    /' | grep -qi 'range descriptors'"
	ok "odx: $ODX_MB MiB of random data on LUN 0" \
		dd if=/dev/urandom of=/dev/$a oflag=direct bs=1M count=$ODX_MB status=none
	ok "odx: ddpt within LUN 0 (NVMe): POPULATE TOKEN + WRITE USING TOKEN to 16 MiB" \
		odx_ddpt if=$sga of=$sga skip=$(odx_sgl 0 $n) seek=$(odx_sgl 32768 $n) iflag=odx oflag=odx
	ok "odx: within LUN 0, the copy is byte for byte (cmp)" odx_same $a 0 $a 16
	ok "odx: ddpt from LUN 0 (NVMe) to LUN 1 (RAM)" \
		odx_ddpt if=$sga of=$sgb skip=$(odx_sgl 0 $n) seek=$(odx_sgl 0 $n) iflag=odx oflag=odx
	ok "odx: LUN 0 -> LUN 1, byte for byte (cmp)" odx_same $a 0 $b 0
	rm -f "$VM_WORK/odx.rt"
	ok "odx: ddpt read-to-tokens: a token of LUN 0's first $ODX_MB MiB into a file" \
		odx_ddpt if=$sga skip=$(odx_sgl 0 $n) rtf="$VM_WORK/odx.rt"
	ok "odx: a write over one of its blocks (LUN 0, block 1000)" \
		dd if=/dev/urandom of=/dev/$a oflag=direct bs=512 seek=1000 count=1 status=none
	ok "odx: ddpt write-from-tokens is refused now: TOKEN CANCELLED" \
		odx_refused "token cancelled" rtf="$VM_WORK/odx.rt" of=$sgb seek=$(odx_sgl 49152 $n) oflag=odx
	ok "odx: nothing reached LUN 1 at 24 MiB" bash -c "dd if=/dev/$b iflag=direct bs=1M skip=24 count=$ODX_MB status=none | cmp -s - <(head -c $((ODX_MB << 20)) /dev/zero)"
	ok "$ODX_T: logout" logout_gone $ODX_T $ODX_PORTAL
}
# A failed check here does not stop the script: whatever happened, nothing of ODX's is left for the checks after it.
suite_odx() {
	odx_run
	iscsi_no_session $ODX_T || iscsi_logout $ODX_T $ODX_PORTAL >/dev/null 2>&1
	[ -z "$ISERTD_PID" ] || ok "isertd (ODX) stops cleanly" isertd_stop
}
suite_odx
