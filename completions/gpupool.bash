# bash completion for gpupool's commands: gpupool-stat, gpupool-replay, gpupool-run,
# gpupool-maxbatch, gpupool-plot. Installed once and linked under each command's name in
# bash-completion's directory (completions/meson.build; a wheel has a copy under each name),
# or sourced by hand:  . completions/gpupool.bash
# Uses bash builtins only; with the bash-completion package loaded, a command after
# gpupool-run or gpupool-maxbatch's -- is completed as that command would be.

# The knob keys of GPUPOOL_CONF (README's table), for --conf.
_gpupool_knobs="limit: group: group_limit: round: small_max: small_segment: medium_max: medium_segment: large_round: \
max_split_size: release_threshold: segments: decay_ms: reclaim: reclaim_wait_ms: reserve: fence: fence_interval_us: fence_marker: legacy_stream: report: report_format: log: strict: \
stats_page: trace: check:"

# The pids that have a statistics page.
_gpupool_pids()
{
	local f pids=()
	for f in "${GPUPOOL_SHM_DIR:-/dev/shm}"/gpupool.*; do
		[ -e "$f" ] && pids+=("${f##*.}")
	done
	printf '%s\n' "${pids[@]}"
}

# COMPREPLY from a word list (compgen -W), files (compgen -f) or directories.
_gpupool_words() { COMPREPLY=($(compgen -W "$1" -- "$2")); }
_gpupool_files()
{
	local IFS=$'\n'
	COMPREPLY=($(compgen -f -- "$1"))
	compopt -o filenames 2>/dev/null
}

# Directories, and files ending in one of the extensions $2..., for the word $1.
_gpupool_files_ext()
{
	local IFS=$'\n' cur=$1 ext
	shift
	COMPREPLY=($(compgen -d -- "$cur"))
	for ext; do
		COMPREPLY+=($(compgen -f -X "!*.$ext" -- "$cur"))
	done
	compopt -o filenames 2>/dev/null
}

# The command after position $1 (gpupool-run CMD, gpupool-maxbatch -- CMD).
_gpupool_command_at()
{
	if declare -F _command_offset >/dev/null; then
		_command_offset "$1"
	elif [ "$COMP_CWORD" -eq "$1" ]; then
		COMPREPLY=($(compgen -c -- "${COMP_WORDS[COMP_CWORD]}"))
	else
		_gpupool_files "${COMP_WORDS[COMP_CWORD]}"
	fi
}

_gpupool_stat()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	case $prev in
	--release) _gpupool_words "$(_gpupool_pids)" "$cur"; return ;;
	--watch | --count | --timeout | --listen) COMPREPLY=(); return ;;
	--group) COMPREPLY=($(compgen -f -- "$cur")); return ;;
	esac
	if [[ $cur == -* ]]; then
		_gpupool_words "--json --prometheus --openmetrics --listen --watch --count --release --timeout
			--clean --group --wide --no-color --help --version" "$cur"
	else
		_gpupool_words "$(_gpupool_pids)" "$cur"
	fi
}

_gpupool_replay()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	case $prev in
	--conf)
		_gpupool_words "$_gpupool_knobs" "${cur##*,}"
		local head=${cur%"${cur##*,}"} i
		for i in "${!COMPREPLY[@]}"; do COMPREPLY[i]=$head${COMPREPLY[i]}; done
		compopt -o nospace 2>/dev/null
		return ;;
	--sort-window | --fence-latency-us | --granularity | --vmm-cost-us | --limit-rows | --snapshot-max-entries | \
		--timeline-rows)
		COMPREPLY=(); return ;;
	--torch-snapshot | --timeline | --plot) _gpupool_files "$cur"; return ;;
	esac
	if [[ $cur == -* ]]; then
		_gpupool_words "--conf --check --sort-window --fence-latency-us --granularity --vmm-cost-us --limit-rows --torch-snapshot
			--snapshot-max-entries --timeline --timeline-rows --plot --json --knobs --help --version" "$cur"
	else
		_gpupool_files "$cur" # TRACE: .csv or .csv.gz
	fi
}

_gpupool_run()
{
	local i cur=${COMP_WORDS[COMP_CWORD]}
	for ((i = 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		--) _gpupool_command_at $((i + 1)); return ;;
		-*) ;;
		*) _gpupool_command_at "$i"; return ;;
		esac
	done
	if [[ $cur == -* ]]; then
		_gpupool_words "--torch --fake --print-lib --verbose --version --help --" "$cur"
	else
		_gpupool_command_at "$COMP_CWORD"
	fi
}

_gpupool_maxbatch()
{
	local i cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	for ((i = 1; i < COMP_CWORD; i++)); do
		if [ "${COMP_WORDS[i]}" = -- ]; then
			_gpupool_command_at $((i + 1))
			return
		fi
	done
	case $prev in
	--limit | --min | --max | --timeout) COMPREPLY=(); return ;;
	esac
	_gpupool_words "--limit --min --max --timeout --dry-run --show-output --quiet --no-preload --version
		--help --" "$cur"
}

_gpupool_plot()
{
	local i n=0 cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	[ "$prev" = --title ] && { COMPREPLY=(); return; }
	if [[ $cur == -* ]]; then
		_gpupool_words "--title --version --help" "$cur"
		return
	fi
	for ((i = 1; i < COMP_CWORD; i++)); do # the arguments before this one
		case ${COMP_WORDS[i]} in
		--title) i=$((i + 1)) ;;
		-*) ;;
		*) n=$((n + 1)) ;;
		esac
	done
	case $n in
	0) _gpupool_files_ext "$cur" csv ;;         # TIMELINE: gpupool-replay --timeline's CSV
	1) _gpupool_files_ext "$cur" png svg pdf ;; # OUT: the format follows the extension
	*) COMPREPLY=() ;;
	esac
}

complete -F _gpupool_stat gpupool-stat
complete -F _gpupool_replay gpupool-replay
complete -F _gpupool_run gpupool-run
complete -F _gpupool_maxbatch gpupool-maxbatch
complete -F _gpupool_plot gpupool-plot
