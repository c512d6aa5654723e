# Helpers for the server scripts under .ci/: sourced, never run.

cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/s3lect"

# go_install_cached NAME MODULE@VERSION: installs a Go binary once into
# $cache_root/NAME-VERSION and prints the binary's path.
go_install_cached() {
	local name=$1 spec=$2 dir
	dir="$cache_root/$name-${spec##*@}"
	if [ ! -x "$dir/$name" ]; then
		echo "installing $spec into $dir (once)" >&2
		mkdir -p "$dir"
		GOBIN="$dir" GOFLAGS=-mod=mod go install "$spec" >&2
	fi
	echo "$dir/$name"
}

# free_port FIRST LAST: prints the first port of the range nothing answers on.
free_port() {
	local p
	for p in $(seq "$1" "$2"); do
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	echo "no free port in $1-$2" >&2
	return 1
}

# wait_port PORT TENTHS [PID]: waits until something answers on PORT, for
# at most TENTHS tenths of a second, failing early if PID has exited.
wait_port() {
	local i
	for i in $(seq 1 "$2"); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		if [ -n "${3:-}" ] && ! kill -0 "$3" 2>/dev/null; then
			return 1
		fi
		sleep 0.1
	done
	echo "nothing answered on 127.0.0.1:$1 after $(($2 / 10))s" >&2
	return 1
}
