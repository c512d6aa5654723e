package natskv_test

// The Go block of docs/stores.md about NATS, compiled here; internal/mdcheck
// checks that the Markdown shows it exactly. Not run: it needs a server.

import (
	"context"
	"log"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/s3lect/s3lect"
	"github.com/s3lect/s3lect/store/natskv"
)

func ExampleNew() {
	var (
		ctx context.Context
		nc  *nats.Conn
		id  string
	)
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "ELECTIONS"})
	if err != nil {
		log.Fatal(err)
	}
	e, err := s3lect.New(s3lect.ElectorConfig{Store: natskv.New(kv), LockfilePath: "leader/x.json", ServerID: id})
	if err != nil {
		log.Fatal(err)
	}
	_ = e
}
