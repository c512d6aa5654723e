# The cloud stores' emulators for the GCS and Azure tests: sourced by
# .ci/run. Both are pinned and installed once into the cache; the tests
# start and kill their own servers on loopback (internal/emulator).
#
#   fake-gcs-server  with `go install`, as a binary: it stays out of go.mod
#   Azurite          with `npm ci` from .ci/azurite's lockfile (every
#                    package pinned), into its own folder; only azurite-blob
#                    runs, with --disableTelemetry (otherwise it reaches
#                    out to the internet)

FAKE_GCS_SPEC=github.com/fsouza/fake-gcs-server@v1.56.1
AZURITE_VERSION=3.35.0 # as in .ci/azurite/package.json

emulators_install() {
	S3LECT_TEST_FAKE_GCS=$(go_install_cached fake-gcs-server "$FAKE_GCS_SPEC")
	export S3LECT_TEST_FAKE_GCS
	local dir="$cache_root/azurite-$AZURITE_VERSION"
	if [ ! -x "$dir/node_modules/.bin/azurite-blob" ]; then
		command -v npm >/dev/null || { echo "Azurite needs Node.js and npm; install them (Debian: apt-get install nodejs npm)" >&2; return 1; }
		echo "installing azurite@$AZURITE_VERSION into $dir (once)" >&2
		mkdir -p "$dir"
		cp .ci/azurite/package.json .ci/azurite/package-lock.json "$dir/"
		(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
	fi
	export S3LECT_TEST_AZURITE="$dir/node_modules/.bin/azurite-blob"
}
