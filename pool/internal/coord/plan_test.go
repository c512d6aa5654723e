package coord

// The tests check the planner's index against a plan from scratch at
// every event; the measurements at scale (measure_test.go) turn it off.
func init() { planCheck = true }
