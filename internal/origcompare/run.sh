#!/usr/bin/env bash
# Graceful handovers of this module and of the original s3lect side by
# side on one S3 server (a manual measurement; docs/measurements.md).
#
#   bash internal/origcompare/run.sh ORIGINAL BUCKET [HANDOVERS]
#
# ORIGINAL is a checkout (or bare git directory) of
# github.com/nadrama-com/s3lect; BUCKET an existing bucket on the server
# that AWS_ENDPOINT_URL_S3 and the AWS_* credentials name (MinIO:
# path-style). main.go is built in a temporary module that requires both.
set -euo pipefail
if [ $# -lt 2 ]; then
	echo "usage: bash internal/origcompare/run.sh ORIGINAL BUCKET [HANDOVERS]" >&2
	exit 2
fi
orig=$1 bucket=$2 n=${3:-20}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/original"
if [ -f "$orig/go.mod" ]; then
	cp -r "$orig/." "$tmp/original"
else
	git --git-dir="$orig" archive HEAD | tar -x -C "$tmp/original"
fi
sed '/^\/\/go:build ignore$/d' "$here/main.go" >"$tmp/main.go"
cat >"$tmp/go.mod" <<MOD
module origcompare

go 1.25.0

require (
	github.com/nadrama-com/s3lect v0.0.0
	github.com/s3lect/s3lect v0.0.0
)

replace (
	github.com/nadrama-com/s3lect => ./original
	github.com/s3lect/s3lect => $root
)
MOD
cp "$root/go.sum" "$tmp/go.sum"
cd "$tmp"
GOFLAGS=-mod=mod go mod tidy >/dev/null 2>&1 || GOFLAGS=-mod=mod go mod tidy
go run . -bucket "$bucket" -n "$n"
