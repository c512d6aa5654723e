# nats-server for the natskv tests: sourced by .ci/run. The pinned binary,
# installed once with `go install` and cached; the tests start and kill
# their own servers on loopback (store/natskv), so nats-server stays out of
# the library's go.mod.

NATS_SERVER_SPEC=github.com/nats-io/nats-server/v2@v2.14.5

nats_install() {
	local dir="$cache_root/nats-server-${NATS_SERVER_SPEC##*@}"
	if [ ! -x "$dir/nats-server" ]; then
		echo "installing $NATS_SERVER_SPEC into $dir (once)" >&2
		mkdir -p "$dir"
		GOBIN="$dir" GOFLAGS=-mod=mod go install "$NATS_SERVER_SPEC" >&2
	fi
	export S3LECT_TEST_NATS_SERVER="$dir/nats-server"
}
