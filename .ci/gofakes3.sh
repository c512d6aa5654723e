# gofakes3 for the compatibility run: sourced by .ci/compat.sh. The
# pinned command, installed as a binary (it stays out of go.mod), with
# its in-memory backend on 127.0.0.1. It checks no credentials.

GOFAKES3_SPEC=github.com/johannesboyne/gofakes3/cmd/gofakes3@v1.2.0

gofakes3_version() { echo "${GOFAKES3_SPEC##*@}"; }
gofakes3_install() { gofakes3_bin=$(go_install_cached gofakes3 "$GOFAKES3_SPEC"); }

# gofakes3_start PORT: sets SERVER_ENDPOINT, SERVER_KEY, SERVER_SECRET.
gofakes3_start() {
	gofakes3_log=$(mktemp)
	SERVER_KEY=any SERVER_SECRET=any
	"$gofakes3_bin" -backend memory -host "127.0.0.1:$1" >"$gofakes3_log" 2>&1 &
	gofakes3_pid=$!
	SERVER_ENDPOINT="http://127.0.0.1:$1"
	wait_port "$1" 300 "$gofakes3_pid" || { cat "$gofakes3_log" >&2; return 1; }
}

gofakes3_stop() {
	kill "$gofakes3_pid" 2>/dev/null || true
	wait "$gofakes3_pid" 2>/dev/null || true
	rm -f "$gofakes3_log"
}
