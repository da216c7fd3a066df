// Package scaleout_test holds the scale-out benchmarks of issue 12 (see
// bench/README.md, "Scale out on Redis"): what running on Redis, and on
// two replicas, costs against the embedded default. Every benchmark
// starts its own redis-server (stream/redistest) and skips when there is
// none.
package scaleout_test
