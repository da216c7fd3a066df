package tools

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// What a durable caller (a chat turn's outcome ledger) hangs on a
// write's request: a gate that records "sent" before the request leaves,
// and the base of the idempotency key an operation that declares one is
// sent.

type writeGateKey struct{}
type idempotencyKey struct{}

// WithWriteGate returns ctx carrying gate. The invoker (and an MCP
// source) calls it right before it sends each request of a write — once
// the request is built and its rate limit let it go, so a gate that
// passes is followed by the request. A gate that fails keeps the request
// unsent: the call fails with a RefusedError (CodeNotSent, or the
// gate's own when it returns one). A turn's
// outcome ledger records the write as sent in it, durably, so that a
// replica taking the turn over never sends it again.
func WithWriteGate(ctx context.Context, gate func(ctx context.Context) error) context.Context {
	return context.WithValue(ctx, writeGateKey{}, gate)
}

// CodeNotSent is the RefusedError code of a write whose gate failed: it
// was not sent.
const CodeNotSent = "write_not_sent"

// passWriteGate calls ctx's write gate for a request of a write.
func passWriteGate(ctx context.Context, req Request) error {
	if !req.EffectOf().Writes() {
		return nil
	}
	gate, _ := ctx.Value(writeGateKey{}).(func(context.Context) error)
	if gate == nil {
		return nil
	}
	if err := gate(ctx); err != nil {
		if refused, ok := errors.AsType[*RefusedError](err); ok {
			return refused // the gate's own refusal (an evaluation refusing writes), as it words it
		}
		return &RefusedError{Code: CodeNotSent, Msg: fmt.Sprintf(
			"%s: the write was not sent: the turn's record of it could not be saved (%s)", req.Tool.Name, safeCause(err))}
	}
	return nil
}

// WithIdempotencyKey returns ctx carrying base, from which the
// idempotency key of each write request whose operation declares one is
// derived (IdempotencyKeyFor): the same base and arguments give the same
// key, so a write sent again after its sender died is recognised by the
// upstream. Without one, each request gets a random key.
func WithIdempotencyKey(ctx context.Context, base string) context.Context {
	return context.WithValue(ctx, idempotencyKey{}, base)
}

// IdempotencyParam is the parameter through which t's operation takes an
// idempotency key, as Stripe and others document it: an Idempotency-Key
// (or X-Idempotency-Key) header, or a parameter named idempotency_key,
// idempotencyKey or Idempotency-Key. trawl fills it on every write: the
// model never sees it.
func (t *Tool) IdempotencyParam() (Param, bool) {
	for _, p := range t.Params {
		if isIdempotencyName(p.WireName()) || isIdempotencyName(p.Name) {
			return p, true
		}
	}
	return Param{}, false
}

func isIdempotencyName(name string) bool {
	// Without allocating: it runs for every parameter of every tool a
	// step offers. Hyphens and underscores are skipped, case folded.
	var buf [len("xidempotencykey")]byte
	n := 0
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c == '-' || c == '_' {
			continue
		}
		if n == len(buf) {
			return false
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf[n] = c
		n++
	}
	return string(buf[:n]) == "idempotencykey" || string(buf[:n]) == "xidempotencykey"
}

// IdempotencyKeyFor is the idempotency key of one request: derived from
// base and the request's own arguments (a bulk write's values each get
// their own key), or random when base is "".
func IdempotencyKeyFor(base string, args map[string]any) string {
	if base == "" {
		b := make([]byte, 16)
		_, _ = rand.Read(b)
		return "trawl-" + hex.EncodeToString(b)
	}
	canon, _ := json.Marshal(args) // map keys are sorted
	sum := sha256.Sum256(append([]byte(base+"\n"), canon...))
	return "trawl-" + hex.EncodeToString(sum[:16])
}

// withIdempotency returns args with t's idempotency parameter set, for a
// write whose operation declares one (args unchanged otherwise).
func withIdempotency(ctx context.Context, req Request) map[string]any {
	if !req.EffectOf().Writes() || req.Tool == nil {
		return req.Args
	}
	p, ok := req.Tool.IdempotencyParam()
	if !ok {
		return req.Args
	}
	own := make(map[string]any, len(req.Args)+1)
	for k, v := range req.Args {
		if k != p.Name {
			own[k] = v
		}
	}
	base, _ := ctx.Value(idempotencyKey{}).(string)
	key := IdempotencyKeyFor(base, own)
	own[p.Name] = key
	return own
}
