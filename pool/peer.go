package pool

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
)

// PeerPath was the path of the old pool's peer endpoint.
//
// Deprecated: the coordinator-decided pool serves the workers' reports
// and its coordinator election's peer endpoint at paths of its own;
// PeerHandler routes both.
const PeerPath = "/s3lect/pool"

// PeerHandler serves the peer mode of the given pools (Config.PeerMode):
// the workers' reports to their coordinator and the coordinator
// election's peer endpoint, each pool by its Prefix. Mount it on this
// worker's HTTPS server at Config.ServerAddr (s3lect.ServePeers; with
// Config.PeerPinned, serve it with the pool's PeerServerTLS). Pools
// without PeerMode are not served (a request for one is answered 404);
// two pools with one Prefix cannot be told apart, and PeerHandler panics.
// Serve one pool in peer mode per address: the election's requests name
// no pool, so beside a second one they are answered 404 and those
// workers read the store instead (storage mode's cost).
func PeerHandler(pools ...*Pool) http.Handler {
	byPrefix := map[string]http.Handler{}
	for _, p := range pools {
		if p == nil {
			continue
		}
		if h := p.peerHandler(); h != nil {
			if byPrefix[p.cfg.Prefix] != nil {
				panic(fmt.Sprintf("pool: PeerHandler given two pools with Prefix %q; serve them from two handlers (two servers)", p.cfg.Prefix))
			}
			byPrefix[p.cfg.Prefix] = h
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h, why := route(byPrefix, r)
		if h == nil {
			http.Error(w, why, http.StatusNotFound)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// route finds the pool a peer request is for: a report names its pool's
// Prefix (?prefix=), the election's requests its lockfile (?lockfile=,
// the Prefix followed by coordinator.json); a request that names neither
// goes to the only pool served, if there is one.
func route(byPrefix map[string]http.Handler, r *http.Request) (http.Handler, string) {
	q := r.URL.Query()
	switch {
	case q.Has("prefix"):
		if h := byPrefix[q.Get("prefix")]; h != nil {
			return h, ""
		}
		return nil, fmt.Sprintf("no pool in peer mode with prefix %q is served here", q.Get("prefix"))
	case q.Has("lockfile"):
		prefix, ok := strings.CutSuffix(q.Get("lockfile"), coordinatorKey)
		if h := byPrefix[prefix]; ok && h != nil {
			return h, ""
		}
		return nil, fmt.Sprintf("no pool in peer mode coordinates with lockfile %q here", q.Get("lockfile"))
	case len(byPrefix) == 1:
		for _, h := range byPrefix {
			return h, ""
		}
	}
	return nil, "no pool in peer mode is served here, or the request names none (?prefix= or ?lockfile=)"
}

// coordinatorKey is the coordinator election's lockfile, under the Prefix.
const coordinatorKey = "coordinator.json"

// peerHandler is the engine's handler of this worker's peer mode, nil
// without it.
func (p *Pool) peerHandler() http.Handler {
	if !p.cfg.PeerMode {
		return nil
	}
	return p.eng.PeerHandler()
}

// PeerServerTLS is the TLS configuration to serve PeerHandler with when
// Config.PeerPinned is set: the certificate the coordinator's election
// record pins. Nil without PeerPinned.
func (p *Pool) PeerServerTLS() *tls.Config {
	if !p.cfg.PeerPinned {
		return nil
	}
	return p.eng.PeerServerTLS()
}
