# versitygw for the compatibility run: sourced by .ci/compat.sh.
# `go install` of a pinned version (several minutes the first time, then
# cached), its posix backend on a throw-away directory, on 127.0.0.1.

VERSITYGW_SPEC=github.com/versity/versitygw/cmd/versitygw@v1.8.0

versitygw_version() { echo "${VERSITYGW_SPEC##*@}"; }
versitygw_install() { versitygw_bin=$(go_install_cached versitygw "$VERSITYGW_SPEC"); }

# versitygw_start PORT: sets SERVER_ENDPOINT, SERVER_KEY, SERVER_SECRET.
versitygw_start() {
	versitygw_dir=$(mktemp -d)
	SERVER_KEY=s3lect-versity SERVER_SECRET=s3lect-versity-secret
	"$versitygw_bin" --access "$SERVER_KEY" --secret "$SERVER_SECRET" --port "127.0.0.1:$1" \
		posix "$versitygw_dir" >"$versitygw_dir.log" 2>&1 &
	versitygw_pid=$!
	SERVER_ENDPOINT="http://127.0.0.1:$1"
	wait_port "$1" 300 "$versitygw_pid" || { cat "$versitygw_dir.log" >&2; return 1; }
}

versitygw_stop() {
	kill "$versitygw_pid" 2>/dev/null || true
	wait "$versitygw_pid" 2>/dev/null || true
	rm -rf "$versitygw_dir" "$versitygw_dir.log"
}
