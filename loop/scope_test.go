package loop

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/trawl-dev/trawl/tools"
)

func TestCredentialFingerprint(t *testing.T) {
	const a, b = "user-token-AAAA1111", "user-token-BBBB2222"
	fa, fb := CredentialFingerprint(a), CredentialFingerprint(b)
	if fa == fb || fa != CredentialFingerprint(a) || len(fa) != 32 {
		t.Fatalf("fingerprints %q %q", fa, fb)
	}
	if CredentialFingerprint("") != "" {
		t.Error("no credential should have no fingerprint")
	}
	for _, s := range []Scope{{Org: "o", User: "alice"}, {Org: "o", User: "alice", CacheScope: "tenant"}} {
		sa, _ := s.WithCredential(a).DatasetScope(true)
		sb, _ := s.WithCredential(b).DatasetScope(true)
		if sa == sb {
			t.Errorf("two credentials of %+v share the dataset scope %q", s, sa)
		}
		if strings.Contains(sa, a) || strings.Contains(sa, "AAAA") {
			t.Errorf("the scope %q holds the credential", sa)
		}
		org, _ := s.WithCredential(a).DatasetScope(false)
		if org != "o=o" {
			t.Errorf("organization scope = %q", org)
		}
	}
}

// TestCacheNotServedAcrossCredentials: after a user's token changes, a
// walk cached with the old one is not served.
func TestCacheNotServedAcrossCredentials(t *testing.T) {
	u := newUpstream(t, 30)
	cache, err := NewDatasetCache(CacheOptions{})
	if err != nil {
		t.Fatal(err)
	}
	inv := tools.NewInvoker(tools.InvokerOptions{})
	inv.SetAuth("acme", tools.ProviderAuth{Runtime: tools.AuthSpec{Type: tools.AuthBearer}})
	e := newTestEngine(t, Options{Cache: cache, Caller: inv})
	call := func(cred string) *Outcome {
		t.Helper()
		out, err := e.Call(context.Background(), Call{
			Tool: ordersTool(u.URL), Args: map[string]any{"_all_pages": true},
			Binding: Binding{LoopResponses: true}, Scope: Scope{Org: "o", User: "alice", Thread: "t"}, Credential: cred,
		})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	call("old-token-123456")
	n := len(u.requests())
	if !strings.Contains(string(call("old-token-123456").View), `"_cache"`) {
		t.Error("the same credential should hit the cache")
	}
	if len(u.requests()) != n {
		t.Error("a cache hit went upstream")
	}
	if strings.Contains(string(call("new-token-654321").View), `"_cache"`) {
		t.Error("a walk cached with the old credential was served for the new one")
	}
	if len(u.requests()) == n {
		t.Error("the new credential did not walk anew")
	}
	// Without any credential the provider is refused, before a request.
	before := len(u.requests())
	_, err = e.Call(context.Background(), Call{Tool: ordersTool(u.URL), Args: map[string]any{}, Scope: Scope{Org: "o"}, Binding: Binding{LoopResponses: true}})
	var te *ToolError
	if !errors.As(err, &te) || te.Code != tools.CodeNotConnected || !strings.Contains(te.Message, "this needs your acme account") {
		t.Errorf("no credential: %v", err)
	}
	if len(u.requests()) != before {
		t.Error("the refused call reached the upstream")
	}
}

// A deployment's key changes every fingerprint: one read from a store's
// keys cannot be matched against a guessed token without the key.
func TestCredentialFingerprintKeyed(t *testing.T) {
	const tok = "sk_live_guessable"
	plain := CredentialFingerprint(tok)
	k1 := CredentialFingerprintKeyed([]byte("deployment one"), tok)
	k2 := CredentialFingerprintKeyed([]byte("deployment two"), tok)
	if k1 == plain || k1 == k2 || len(k1) != 32 {
		t.Fatalf("keyed fingerprints: plain %s, one %s, two %s", plain, k1, k2)
	}
	if k1 != CredentialFingerprintKeyed([]byte("deployment one"), tok) {
		t.Fatal("a keyed fingerprint is not stable")
	}
	if CredentialFingerprintKeyed([]byte("k"), "") != "" {
		t.Fatal("the organization's credential has a fingerprint")
	}
	if s := (Scope{Org: "o", User: "u"}).WithCredentialKeyed([]byte("deployment one"), tok); s.Credential != k1 {
		t.Fatalf("scope fingerprint %s", s.Credential)
	}
}
