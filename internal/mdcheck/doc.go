// Package mdcheck checks the Markdown of README.md and docs/*.md: every
// relative link names a file that exists, and its #fragment a heading of
// that page (links_test.go); and every ```go block is copied from a Go
// file that the build compiles. The line
// right before each block names that file, relative to the repository
// root:
//
//	<!-- snippet: store/s3store/example_test.go -->
//
// The block must equal a run of consecutive lines of that file, with the
// same indentation added to every non-blank line (a block is usually a
// function body shown without its tabs). Blocks of other languages (json,
// sh) are not checked.
//
// And every README paragraph that quotes a measurement names the pages
// its figures come from, in a line <!-- figures: docs/PAGE.md#section -->
// before it, and each of its decimal figures stands on one of them
// (claims_test.go).
package mdcheck
