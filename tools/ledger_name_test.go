package tools

import "testing"

// TestIsIdempotencyName: the header and parameter spellings of an
// idempotency key are recognised whatever their case and separators,
// and nothing else is — without allocating, since it runs for every
// parameter of every tool a step offers.
func TestIsIdempotencyName(t *testing.T) {
	for name, want := range map[string]bool{
		"Idempotency-Key": true, "idempotency_key": true, "IDEMPOTENCYKEY": true,
		"X-Idempotency-Key": true, "x_idempotency_key": true, "-Idempotency--Key_": true,
		"": false, "x": false, "key": false, "Idempotency": false, "Idempotency-Keys": false,
		"XX-Idempotency-Key": false, "Y-Idempotency-Key": false, "idempotency-key-x": false,
		"a-very-long-parameter-name-that-is-not-it": false,
	} {
		if got := isIdempotencyName(name); got != want {
			t.Errorf("isIdempotencyName(%q) = %v, want %v", name, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { isIdempotencyName("X-Idempotency-Key") }); n != 0 {
		t.Errorf("%v allocations a call", n)
	}
}
