package pool

import (
	"fmt"
	"net/http"
)

// PeerPath is the HTTP path at which PeerHandler answers.
const PeerPath = "/s3lect/pool"

// PeerHandler serves the peer mode of the given pools (Config.PeerMode)
// at PeerPath, each under its Prefix: mount it on this worker's HTTPS
// server at Config.ServerAddr. Pools without PeerMode are not served (a
// request for one is answered 404); two pools with one Prefix cannot be
// told apart, and PeerHandler panics.
//
// Peer mode is not yet available in the coordinator-decided pool (New
// refuses Config.PeerMode), so for now every request is answered 404.
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
		if r.URL.Path != PeerPath {
			http.NotFound(w, r)
			return
		}
		prefix := r.URL.Query().Get("prefix")
		h := byPrefix[prefix]
		if h == nil {
			http.Error(w, fmt.Sprintf("no pool in peer mode with prefix %q is served here", prefix), http.StatusNotFound)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// peerHandler is the engine's handler of this worker's peer mode, nil
// without it. This is where peer mode is wired: once the engine has it
// (next.Config's peer fields, set in engineConfig, and next's
// PeerHandler), return p.eng.PeerHandler() when p.cfg.PeerMode, and
// drop New's refusal of PeerMode.
func (p *Pool) peerHandler() http.Handler { return nil }
