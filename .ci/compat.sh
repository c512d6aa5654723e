#!/usr/bin/env bash
# The compatibility run: the store conformance suite (store/storetest) and
# a real election (crash by cut-off, resign, takeover with term + 1) on
# each S3-compatible server, then a table of the results. .ci/run calls it
# with MinIO already running (S3LECT_TEST_S3_ENDPOINT and the AWS_*
# variables set); it installs, starts and stops the others itself, on
# 127.0.0.1, each stopped by its PID. README.md's table of tested stores
# is this script's output.
#
#   bash .ci/compat.sh [server...]     servers: minio versitygw gofakes3 ceph
#
# Columns: the conformance suite, the election, and whether an unknown
# access key and a missing bucket reach Campaign as permanent errors.
set -euo pipefail
cd "$(dirname "$0")/.."
. .ci/lib.sh
. .ci/versitygw.sh
. .ci/gofakes3.sh
. .ci/ceph.sh

servers=("$@")
[ ${#servers[@]} -gt 0 ] || servers=(minio versitygw gofakes3 ceph)

# Ports: the range 19100-19199 is MinIO's (.ci/run); the others use
# S3LECT_CI_PORTS (first and last, default 19200 19299).
read -r port_lo port_hi <<<"${S3LECT_CI_PORTS:-19200 19299}"
rows=()
failed=0
notes_file=$(mktemp)
running="" # the server started and not yet stopped, stopped on any exit
trap 'rm -f "$notes_file"; [ -z "$running" ] || "${running}_stop"' EXIT

# run_tests NAME VERSION AUTH: runs the tests against SERVER_ENDPOINT and
# adds a row. AUTH=no for a server that checks no credentials: the test of
# permanent errors (unknown key, missing bucket) is then not run.
run_tests() {
	local name=$1 version=$2 auth=$3 out conf=FAIL elect=FAIL perm=FAIL notes tests
	tests='TestConformanceOnS3|TestElectionOnS3'
	if [ "$auth" = yes ]; then tests="$tests|TestCampaignReportsPermanentErrors"; else perm="n/a (no auth)"; fi
	: >"$notes_file"
	out=$(S3LECT_TEST_S3_ENDPOINT="$SERVER_ENDPOINT" S3LECT_TEST_S3_BUCKET="s3lect-$name" \
		AWS_ACCESS_KEY_ID="$SERVER_KEY" AWS_SECRET_ACCESS_KEY="$SERVER_SECRET" AWS_REGION=us-east-1 \
		S3LECT_TEST_NOTES="$notes_file" \
		go test -race -count=1 -v -run "^($tests)\$" ./store/s3store 2>&1) || true
	grep -q '^--- PASS: TestConformanceOnS3' <<<"$out" && conf=pass
	grep -q '^--- PASS: TestElectionOnS3' <<<"$out" && elect=pass
	grep -q '^--- PASS: TestCampaignReportsPermanentErrors' <<<"$out" && perm=pass
	if [ "$conf" != pass ] || [ "$elect" != pass ] || [ "$perm" = FAIL ]; then
		failed=1
		echo "$out" | grep -v '^=== ' | tail -40 >&2
	fi
	notes=$(sort -u "$notes_file" | paste -sd ';' - | sed 's/;/; /g')
	rows+=("| $name | $version | $conf | $elect | $perm | ${notes:--} |")
}

timed() { # timed WHAT COMMAND...: runs it, says how long it took, returns its status
	local s=$SECONDS rc=0
	"${@:2}" || rc=$?
	echo "$1: $((SECONDS - s))s" >&2
	return $rc
}

for server in "${servers[@]}"; do
	case $server in
	minio)
		[ -n "${S3LECT_TEST_S3_ENDPOINT:-}" ] || { echo "minio: start it first (bash .ci/run does)" >&2; exit 1; }
		SERVER_ENDPOINT=$S3LECT_TEST_S3_ENDPOINT SERVER_KEY=$AWS_ACCESS_KEY_ID SERVER_SECRET=$AWS_SECRET_ACCESS_KEY
		run_tests minio "$(basename "$(dirname "${S3LECT_TEST_MINIO:-minio-unknown/minio}")" | sed 's/^minio-//')" yes
		;;
	versitygw | gofakes3)
		timed "$server install" "${server}_install"
		port=$(free_port "$port_lo" "$port_hi")
		running=$server
		timed "$server start" "${server}_start" "$port"
		auth=yes
		[ "$server" = gofakes3 ] && auth=no
		run_tests "$server" "$("${server}_version")" "$auth"
		"${server}_stop"
		running=""
		;;
	ceph)
		timed "ceph install" ceph_install
		mon=$(free_port "$port_lo" "$port_hi")
		rgw=$(free_port $((mon + 1)) "$port_hi")
		osd=$(free_port $((rgw + 1)) "$port_hi")
		running=ceph
		# A start can still go wrong (seen before ceph.sh placed the OSD in
		# the CRUSH map itself: the monitor refusing the OSD, 'wrong
		# fsid', in 2 starts of 5; with that fixed, 8 of 8 started): start
		# the cluster afresh, on other ports, up to four times more, saying
		# why each time, before failing.
		attempt=1
		until timed "ceph start" ceph_start "$mon" "$rgw" "$osd"; do
			ceph_stop
			[ "$attempt" -lt 5 ] || { echo "ceph: did not start in 5 attempts" >&2; exit 1; }
			attempt=$((attempt + 1))
			echo "ceph: starting again on other ports (attempt $attempt)" >&2
			mon=$(free_port $((osd + 10)) "$port_hi")
			rgw=$(free_port $((mon + 1)) "$port_hi")
			osd=$(free_port $((rgw + 1)) "$port_hi")
		done
		run_tests "ceph-rgw" "$(ceph_version)" yes
		ceph_stop
		running=""
		;;
	*)
		echo "unknown server $server (known: minio versitygw gofakes3 ceph)" >&2
		exit 2
		;;
	esac
done

echo
echo "| server | version | conformance | election | permanent errors | notes |"
echo "|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
exit $failed
