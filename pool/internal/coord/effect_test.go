package coord

import "fmt"

// String is an effect as the simulation's ledger writes it (only the
// tests print effects).
func (e Effect) String() string {
	s := e.Op.String()
	if e.Key != "" {
		s += " " + e.Key
	}
	if e.Shard != "" {
		s += fmt.Sprintf(" %s@%d", e.Shard, e.Term)
	}
	if e.Op == OpPutPage {
		s += fmt.Sprintf(" v%d.%d %s", e.Ver.Era, e.Ver.N, e.Data)
	}
	if e.Op == OpPutSession || e.Op == OpPutRoster {
		s += " " + string(e.Data)
	}
	if e.Err != nil {
		s += " err=" + e.Err.Error()
	}
	return s
}
