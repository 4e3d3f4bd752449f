# bash completion for iserctl: commands, options, and object paths read from
# the running isertd (iserctl paths); after call, the methods and their
# parameters from its method table (iserctl call rpc.methods).

# The method names of rpc.methods, or with METHOD its parameters as "NAME TYPE" lines. Its answer is
# printed one member a line, a method's members indented 4 spaces, a parameter's 8.
_iserctl_methods()
{
	iserctl "${sock[@]}" call rpc.methods 2>/dev/null | awk -F '"' -v m="$1" '
		/^    "name": / { cur = $4; if (m == "") print cur }
		m != "" && cur == m && /^        "name": / { name = $4 }
		m != "" && cur == m && /^        "type": / { print name, $4 }'
}

_iserctl()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	local sock=() i cmd=
	for ((i = 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		-s|--socket) sock+=(-s "${COMP_WORDS[i+1]}"); ((i++)) ;;
		# The listener and credentials, so that paths and methods are asked where the command goes.
		--url|--cacert|--cert|--key|--token-file) sock+=("${COMP_WORDS[i]}" "${COMP_WORDS[i+1]}"); ((i++)) ;;
		-g|--generation) ((i++)) ;;
		-*) ;;
		*) cmd=${COMP_WORDS[i]}; break ;;
		esac
	done
	case $prev in
	-s|--socket|--cacert|--cert|--key|--token-file) COMPREPLY=($(compgen -f -- "$cur")); return ;;
	--url) COMPREPLY=($(compgen -W "https://" -- "$cur")); compopt -o nospace 2>/dev/null; return ;;
	-g|--generation|--backups) return ;;
	--target|--backstore|--initiator|--lun|--tsih|-d) return ;;
	--by) COMPREPLY=($(compgen -W "lun initiator" -- "$cur")); return ;;
	esac
	if [ -z "$cmd" ]; then
		COMPREPLY=($(compgen -W "ls paths sessions create delete set apply restore save config call stats top alua cluster gateway import token
			-s --socket --url --cacert --cert --key --token-file -j --json -g --generation -n --dry-run -h --help --version" -- "$cur"))
		return
	fi
	case $cmd in
	create|delete|set)
		if [ "$prev" = "$cmd" ]; then
			compopt -o nospace 2>/dev/null
			COMPREPLY=($(compgen -W "$(iserctl "${sock[@]}" paths 2>/dev/null)" -- "$cur"))
		fi ;;
	apply|restore|save)
		COMPREPLY=($(compgen -f -- "$cur") $(compgen -W "--dry-run --target --backstore --backups" -- "$cur")) ;;
	import)
		if [ "$prev" = import ]; then
			COMPREPLY=($(compgen -W "lio tgt" -- "$cur"))
		else
			COMPREPLY=($(compgen -f -- "$cur") $(compgen -W "-o --apply --dry-run" -- "$cur"))
		fi ;;
	cluster)
		if [ "$prev" = cluster ]; then
			COMPREPLY=($(compgen -W "status import export" -- "$cur"))
		else
			COMPREPLY=($(compgen -f -- "$cur") $(compgen -W "--gateway -o --json" -- "$cur"))
		fi ;;
	gateway)
		[ "$prev" = gateway ] && COMPREPLY=($(compgen -W "add remove list" -- "$cur")) ;;
	sessions)
		COMPREPLY=($(compgen -W "close" -- "$cur")) ;;
	token)
		if [ "$prev" = token ]; then
			COMPREPLY=($(compgen -W "create hash" -- "$cur"))
		else
			COMPREPLY=($(compgen -f -- "$cur"))
		fi ;;
	stats)
		COMPREPLY=($(compgen -W "reset --target --initiator --lun --tsih --json" -- "$cur")) ;;
	top)
		COMPREPLY=($(compgen -W "-d -n -b --by" -- "$cur")) ;;
	alua)
		COMPREPLY=($(compgen -W "set active_optimized active_nonoptimized standby unavailable transitioning
			preferred= mode= transition_time=" -- "$cur")) ;;
	call)
		if [ "$prev" = call ]; then
			COMPREPLY=($(compgen -W "$(_iserctl_methods)" -- "$cur"))
			return
		fi
		((COMP_CWORD > i + 1)) || return
		local params name='' on=' ' w j
		params=$(_iserctl_methods "${COMP_WORDS[i+1]}")
		# NAME=VALUE: bash splits it at = (COMP_WORDBREAKS) into NAME, =, VALUE; else it is one word.
		if [ "$cur" = = ]; then
			name=$prev cur=
		elif [ "$prev" = = ]; then
			name=${COMP_WORDS[COMP_CWORD-2]}
		elif [[ $cur == ?*=* ]]; then
			name=${cur%%=*}
		fi
		if [ -n "$name" ]; then
			# A boolean's value; the whole word when bash did not split it.
			[[ $'\n'$params$'\n' == *$'\n'"$name boolean"$'\n'* ]] &&
				COMPREPLY=($(compgen -W "true false" -P "${cur%"${cur#*=}"}" -- "${cur#*=}"))
			return
		fi
		# NAME= for each parameter not on the line yet.
		for ((j = i + 2; j < COMP_CWORD; j++)); do
			w=${COMP_WORDS[j]}
			[ "${COMP_WORDS[j+1]}" = = ] && on+="$w "
			[[ $w == ?*=* ]] && on+="${w%%=*} "
		done
		compopt -o nospace 2>/dev/null
		COMPREPLY=($(compgen -W "$(while read -r w _; do
			[[ -n $w && $on != *" $w "* ]] && echo "$w="; done <<<"$params")" -- "$cur")) ;;
	esac
}
complete -F _iserctl iserctl
