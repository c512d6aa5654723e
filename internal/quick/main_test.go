package main

import (
	"strings"
	"testing"
)

// TestSummaryNamesEachSkipWithItsReason: a passing package gets one line,
// and under it one line per reason its tests skipped, naming them; a
// failing test gets its output in full.
func TestSummaryNamesEachSkipWithItsReason(t *testing.T) {
	in := strings.Join([]string{
		`{"Action":"start","Package":"example.com/a"}`,
		`{"Action":"run","Package":"example.com/a","Test":"TestOnMinIO"}`,
		`{"Action":"output","Package":"example.com/a","Test":"TestOnMinIO","Output":"=== RUN   TestOnMinIO\n"}`,
		`{"Action":"output","Package":"example.com/a","Test":"TestOnMinIO","Output":"    s3_test.go:40: no S3 server: set S3LECT_TEST_S3_ENDPOINT (docs/testing.md)\n"}`,
		`{"Action":"output","Package":"example.com/a","Test":"TestOnMinIO","Output":"--- SKIP: TestOnMinIO (0.00s)\n"}`,
		`{"Action":"skip","Package":"example.com/a","Test":"TestOnMinIO","Elapsed":0}`,
		`{"Action":"output","Package":"example.com/a","Test":"TestFine","Output":"--- PASS: TestFine (0.00s)\n"}`,
		`{"Action":"output","Package":"example.com/a","Test":"TestOnMinIOToo","Output":"    s3_test.go:50: no S3 server: set S3LECT_TEST_S3_ENDPOINT (docs/testing.md)\n"}`,
		`{"Action":"skip","Package":"example.com/a","Test":"TestOnMinIOToo","Elapsed":0}`,
		`{"Action":"output","Package":"example.com/a","Test":"TestSub/List","Output":"    storetest.go:56: no Lister\n"}`,
		`{"Action":"skip","Package":"example.com/a","Test":"TestSub/List","Elapsed":0}`,
		`{"Action":"pass","Package":"example.com/a","Test":"TestFine","Elapsed":0}`,
		`{"Action":"pass","Package":"example.com/a","Elapsed":1.25}`,
		`{"Action":"output","Package":"example.com/b","Test":"TestBroken","Output":"    b_test.go:9: got 1, want 2\n"}`,
		`{"Action":"fail","Package":"example.com/b","Test":"TestBroken","Elapsed":0}`,
		`{"Action":"output","Package":"example.com/b","Output":"FAIL\n"}`,
		`{"Action":"fail","Package":"example.com/b","Elapsed":0.5}`,
		`{"Action":"skip","Package":"example.com/c"}`,
		`# example.com/d`,
	}, "\n")
	var out strings.Builder
	got := summarize(strings.NewReader(in), &out)
	if got != (tally{passed: 1, failed: 1, skipped: 3}) {
		t.Errorf("tally = %+v; want 1 passed, 1 failed, 3 skipped", got)
	}
	want := "ok    example.com/a (1.2s)\n" +
		"  skip 2: no S3 server: set S3LECT_TEST_S3_ENDPOINT (docs/testing.md) (TestOnMinIO, TestOnMinIOToo)\n" +
		"  skip 1: no Lister (TestSub/List)\n" +
		"    b_test.go:9: got 1, want 2\n" +
		"FAIL\n" +
		"FAIL  example.com/b (0.5s)\n" +
		"# example.com/d\n"
	if out.String() != want {
		t.Errorf("summary:\n%s\nwant:\n%s", out.String(), want)
	}
}

func TestPackagePatternIsAddedOnlyWhenNoneIsGiven(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"-race", "-run=TestX"}, false},
		{[]string{"-race", "./pool/..."}, true},
	} {
		if got := hasPackage(c.args); got != c.want {
			t.Errorf("hasPackage(%q) = %v; want %v", c.args, got, c.want)
		}
	}
}
