package prom_test

// The Go block of docs/operations.md about metrics, compiled here;
// internal/mdcheck checks that the Markdown shows it exactly. Not run: it
// serves HTTP.

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/prom"
)

func ExampleNewCollector() {
	var electors []*s3lect.Elector
	reg := prometheus.NewRegistry()
	reg.MustRegister(prom.NewCollector(electors...)) // one or many electors
	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	http.Handle("/healthz", s3lect.HealthHandler(electors...)) // liveness: 503 for a stuck leader
}
