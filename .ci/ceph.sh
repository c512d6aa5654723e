# Ceph RGW for the compatibility run: sourced by .ci/compat.sh.
#
# Debian's radosgw, ceph-mon and ceph-osd (apt-get, --no-install-recommends;
# about 2 minutes the first time). One monitor, one OSD on memstore (RAM
# only), radosgw on 127.0.0.1, no cephx. Everything lives in a throw-away
# directory and each daemon is stopped by its PID.

ceph_version() { dpkg-query -W -f='${Version}' radosgw 2>/dev/null || echo none; }

ceph_install() {
	command -v radosgw >/dev/null && command -v ceph-mon >/dev/null && command -v ceph-osd >/dev/null && return 0
	echo "installing Ceph (radosgw, ceph-mon, ceph-osd) with apt-get"
	local sudo=""
	[ "$(id -u)" = 0 ] || sudo=sudo
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends radosgw ceph-mon ceph-osd >/dev/null
}

# ceph_start MON_PORT RGW_PORT OSD_PORT: starts the cluster; sets
# SERVER_ENDPOINT, SERVER_KEY, SERVER_SECRET and ceph_pids. The OSD binds
# from OSD_PORT up (at most 10 ports), not Ceph's default 6800-7300.
ceph_start() {
	local monport=$1 rgwport=$2 osdport=$3
	ceph_dir=$(mktemp -d)
	local d=$ceph_dir fsid
	fsid=$(uuidgen)
	mkdir -p "$d/mon" "$d/osd0" "$d/run" "$d/log" "$d/rgw"
	cat >"$d/ceph.conf" <<CONF
[global]
fsid = $fsid
mon host = v1:127.0.0.1:$monport
auth cluster required = none
auth service required = none
auth client required = none
auth allow insecure global id reclaim = true
ms bind ipv6 = false
ms bind msgr2 = false
ms bind port min = $osdport
ms bind port max = $((osdport + 9))
osd objectstore = memstore
memstore device bytes = 1073741824
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd crush chooseleaf type = 0
osd crush update on start = false
osd class update on start = false
mon allow pool size one = true
mon warn on pool no redundancy = false
run dir = $d/run
log file = $d/log/\$name.log
admin socket = $d/run/\$name.asok
keyring = $d/keyring
[mon.a]
mon data = $d/mon
public addr = 127.0.0.1:$monport
[osd.0]
osd data = $d/osd0
[client.rgw.a]
rgw frontends = beast endpoint=127.0.0.1:$rgwport
rgw data = $d/rgw
CONF
	local c="-c $d/ceph.conf"
	ceph-authtool --create-keyring "$d/keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
	monmaptool --create --addv a "[v1:127.0.0.1:$monport]" --fsid "$fsid" "$d/monmap" >/dev/null
	ceph-mon $c --mkfs -i a --monmap "$d/monmap" --keyring "$d/keyring"
	ceph-mon $c -i a -f >"$d/log/mon.out" 2>&1 &
	ceph_pids="$!"
	wait_port "$monport" 300 "$ceph_pids" || { ceph_logs; return 1; }
	timeout 90 ceph $c --connect-timeout 30 osd create >/dev/null || { echo "ceph: the monitor did not answer osd create" >&2; ceph_logs; return 1; }
	# The OSD places itself in the CRUSH map at start with a command to
	# the monitor that it sometimes sends before it knows the cluster's
	# fsid: the monitor refuses it ('wrong fsid', 2 starts in 5 here) and
	# the OSD exits. So the conf above turns that off, and the map gets
	# the OSD from here, where the command line knows the fsid.
	timeout 60 ceph $c --connect-timeout 30 osd crush add osd.0 1.0 root=default >/dev/null 2>&1 || { echo "ceph: the monitor did not answer osd crush add" >&2; ceph_logs; return 1; }
	ceph-osd $c -i 0 --mkfs >"$d/log/osd-mkfs.out" 2>&1 || { echo "ceph: ceph-osd --mkfs failed" >&2; ceph_logs; return 1; }
	ceph-osd $c -i 0 -f >"$d/log/osd.out" 2>&1 &
	ceph_pids="$ceph_pids $!"
	radosgw $c -n client.rgw.a -f >"$d/log/rgw.out" 2>&1 &
	ceph_pids="$ceph_pids $!"
	# Should the monitor still refuse the OSD ('wrong fsid'), radosgw-admin
	# would wait its whole 45 s: give up on this start at once instead
	# (compat.sh starts a fresh cluster).
	local i
	for i in $(seq 1 20); do
		if grep -q "wrong fsid" "$d/log/osd.0.log" 2>/dev/null; then
			echo "ceph: the monitor refused the OSD (wrong fsid)" >&2
			return 1
		fi
		grep -q "state: booting -> active" "$d/log/osd.0.log" 2>/dev/null && break
		sleep 0.5
	done
	SERVER_KEY=s3lect-ceph SERVER_SECRET=s3lect-ceph-secret
	timeout 45 radosgw-admin $c user create --uid=s3lect --display-name=s3lect \
		--access-key="$SERVER_KEY" --secret-key="$SERVER_SECRET" >/dev/null || { echo "ceph: radosgw-admin user create failed" >&2; ceph_logs; return 1; }
	SERVER_ENDPOINT="http://127.0.0.1:$rgwport"
	wait_port "$rgwport" 600 "${ceph_pids##* }" || { ceph_logs; return 1; }
}

ceph_logs() { tail -n 20 "$ceph_dir"/log/* >&2 || true; }

ceph_stop() {
	local p
	for p in ${ceph_pids:-}; do kill "$p" 2>/dev/null || true; done
	for p in ${ceph_pids:-}; do wait "$p" 2>/dev/null || true; done
	rm -rf "${ceph_dir:-}"
}
