#!/usr/bin/env bash
# Builds a container image of the s3lect command, static and non-root,
# without a Docker daemon, with crane (go-containerregistry):
#
#   go install github.com/google/go-containerregistry/cmd/crane@v0.22.1
#   bash deploy/image/build.sh s3lect.tar [your-job-binary ...]
#   docker load -i s3lect.tar    # or podman load; or crane push s3lect.tar REGISTRY/s3lect:TAG
#
# The tarball names the image after crane's throw-away registry
# (127.0.0.1:PORT/s3lect:build): tag it after loading.
#
# The image is one layer on an empty base: /usr/local/bin/s3lect built
# with CGO_ENABLED=0 (no libc needed), the CA bundle of the machine that
# builds it (/etc/ssl/certs/ca-certificates.crt, for HTTPS to the store),
# and any job binaries named on the command line, in /usr/local/bin too
# (they must be static as well: there is no shell or libc in the image).
# The platform is linux/$GOARCH (default: go env GOARCH). It runs as
# user 65532:65532 with s3lect as its entrypoint, so that a
# Kubernetes pod gives only the arguments: run -store ... -- /usr/local/bin/JOB.
#
# crane needs a registry to set the entrypoint and user: the script runs
# crane's own in-memory one on 127.0.0.1 for the build, and writes the
# result as a tarball. It then checks what it built: the configuration,
# and `s3lect version` run from the image's layer as user 65532.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
out=$(realpath -m "${1:-s3lect.tar}")
shift || true
crane=${CRANE:-crane}
command -v "$crane" >/dev/null || { echo "build.sh: no crane: go install github.com/google/go-containerregistry/cmd/crane@v0.22.1 (or set CRANE)" >&2; exit 1; }

tmp=$(mktemp -d)
registry=""
cleanup() {
	[ -z "$registry" ] || { kill "$registry" 2>/dev/null; wait "$registry" 2>/dev/null || true; }
	rm -rf "$tmp"
}
trap cleanup EXIT

root="$tmp/root"
mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs"
arch=${GOARCH:-$(go env GOARCH)}
(cd "$repo" && CGO_ENABLED=0 GOOS=linux GOARCH="$arch" go build -trimpath -ldflags='-s -w' -o "$root/usr/local/bin/s3lect" ./cmd/s3lect)
cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
for job in "$@"; do
	install -m 0755 "$job" "$root/usr/local/bin/"
done
# Owned by root, readable by all, reproducible: the same inputs give the
# same layer.
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -C "$root" -cf "$tmp/layer.tar" .

# crane's registry, on a free loopback port.
port=""
for p in $(seq 19370 19379) $(seq 5100 5199); do
	if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
		port=$p
		break
	fi
done
[ -n "$port" ] || { echo "build.sh: no free loopback port for crane's registry" >&2; exit 1; }
"$crane" registry serve --address "127.0.0.1:$port" >"$tmp/registry.log" 2>&1 &
registry=$!
for _ in $(seq 1 100); do
	(exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break
	sleep 0.1
done
ref="127.0.0.1:$port/s3lect:build"
"$crane" append --insecure --oci-empty-base -f "$tmp/layer.tar" -t "$ref" 2>/dev/null
"$crane" mutate --insecure "$ref" --set-platform "linux/$arch" --entrypoint /usr/local/bin/s3lect --user 65532:65532 --workdir / -t "$ref" 2>/dev/null
"$crane" pull --insecure "$ref" "$out"

# What was built.
config=$("$crane" config --insecure "$ref")
echo "image: $out ($(du -h "$out" | cut -f1)), config: $config"
grep -q "\"architecture\":\"$arch\",.*\"os\":\"linux\"" <<<"$config" || { echo "build.sh: the image's platform is not linux/$arch" >&2; exit 1; }
grep -q '"User":"65532:65532"' <<<"$config" || { echo "build.sh: the image's user is not 65532:65532" >&2; exit 1; }
grep -q '"Entrypoint":\["/usr/local/bin/s3lect"\]' <<<"$config" || { echo "build.sh: the image's entrypoint is not s3lect" >&2; exit 1; }
mkdir "$tmp/check"
tar -xf "$tmp/layer.tar" -C "$tmp/check" ./usr/local/bin/s3lect
chmod 0755 "$tmp" "$tmp/check"
if file "$tmp/check/usr/local/bin/s3lect" 2>/dev/null | grep -q dynamically; then
	echo "build.sh: s3lect is dynamically linked; the image has no libc" >&2
	exit 1
fi
if command -v setpriv >/dev/null && [ "$(id -u)" = 0 ]; then
	echo "s3lect version, run from the layer as user 65532: $(setpriv --reuid=65532 --regid=65532 --clear-groups "$tmp/check/usr/local/bin/s3lect" version)"
fi
