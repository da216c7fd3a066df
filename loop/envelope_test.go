package loop

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ReadEnvelope reads back what the engine wrote: the same boundary, fan-out
// lists, unmatched fields, result id and size-guard cut as the typed
// verdict the view was rendered from.
func TestReadEnvelopeOfTheEngine(t *testing.T) {
	up := newUpstream(t, 1900)
	e := newTestEngine(t, Options{Results: NewRetrieval(RetrievalOptions{})})
	ctx := context.Background()
	loops := Binding{LoopResponses: true}
	tests := []struct {
		name string
		call Call
		want func(t *testing.T, v *Verdict, env Envelope)
	}{
		{"walk cut by the size guard", Call{Tool: ordersTool(up.URL), Binding: loops, ViewChars: 4000,
			Args: map[string]any{"_all_pages": true, "_fields": []any{"id", "nope"}}},
			func(t *testing.T, v *Verdict, env Envelope) {
				if env.Completion != Complete || env.PagingComplete == nil || !*env.PagingComplete || !env.Looped() {
					t.Errorf("completion %q, _pagingComplete %v", env.Completion, env.PagingComplete)
				}
				if !env.Truncated || env.ShownItems == 0 || env.TotalItems != 1900 || env.ResultID == "" {
					t.Errorf("the cut: truncated %v, %d of %d shown, result %q", env.Truncated, env.ShownItems, env.TotalItems, env.ResultID)
				}
				if env.UnmatchedFields == nil || !cmp.Equal(env.UnmatchedFields.Paths, []string{"nope"}) || len(env.UnmatchedFields.AvailableKeys) == 0 {
					t.Errorf("_unmatchedFields: %+v", env.UnmatchedFields)
				}
				if !strings.HasPrefix(env.Note, v.Note) || env.StoppedBy != v.StopReason || env.LikelyMoreRows != v.LikelyMore {
					t.Errorf("note %q, stopped by %q", env.Note, env.StoppedBy)
				}
			}},
		{"fan-out with a failed value", Call{Tool: bookingsTool(up.URL), Binding: loops,
			Args: map[string]any{"_all_pages": true, "_for_each": map[string]any{"key": "property_id", "values": []any{"p_1", "p_bad"}}}},
			func(t *testing.T, v *Verdict, env Envelope) {
				if env.Completion != Partial || len(env.ForEachErrors) != 1 {
					t.Fatalf("completion %q, errors %+v", env.Completion, env.ForEachErrors)
				}
				if diff := cmp.Diff(v.ForEachErrors, env.ForEachErrors); diff != "" {
					t.Errorf("_forEachErrors (-verdict +read):\n%s", diff)
				}
			}},
		{"single response", Call{Tool: statsTool(up.URL), Binding: loops},
			func(t *testing.T, v *Verdict, env Envelope) {
				if env.Completion != SingleResponse || env.PagingComplete != nil || !env.Looped() {
					t.Errorf("completion %q, _pagingComplete %v", env.Completion, env.PagingComplete)
				}
			}},
		{"a binding that does not loop", Call{Tool: ordersTool(up.URL)},
			func(t *testing.T, v *Verdict, env Envelope) {
				if env.Looped() || env.Boundary != nil {
					t.Errorf("a plain call reads as looped: %+v", env)
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.call.Scope = scope
			out, err := e.Call(ctx, tt.call)
			if err != nil {
				t.Fatal(err)
			}
			env, err := ReadEnvelope(out.View)
			if err != nil {
				t.Fatal(err)
			}
			if v := out.Verdict; v != nil {
				if env.Boundary == nil {
					t.Fatal("no _boundary read")
				}
				if diff := cmp.Diff(v.Boundary(), *env.Boundary); diff != "" {
					t.Errorf("_boundary (-verdict +read):\n%s", diff)
				}
			}
			tt.want(t, out.Verdict, env)
		})
	}
}

// A result from before the boundary statement reads its completion from
// _pagingComplete; a result with no envelope reads as none; a malformed
// one is an error that keeps what could be read.
func TestReadEnvelope(t *testing.T) {
	tests := []struct {
		out        string
		completion Completion
		note       string
		err        bool
	}{
		{`{"items":[1],"_pagingComplete":true,"_note":"all"}`, Complete, "all", false},
		{`{"items":[1],"_pagingComplete":false}`, Partial, "", false},
		{`{"items":[1],"_pagingComplete":false,"_boundary":{"completion":"unstable"}}`, Unstable, "", false},
		{`{"orders":[{"_note":"a row's own key"}]}`, "", "", false},
		{`[{"_pagingComplete":true}]`, "", "", false},
		{`plain text`, "", "", false},
		{``, "", "", false},
		{`{"_boundary":"complete","_note":"kept"}`, "", "kept", true},
		{`{"_note":"cut off`, "", "", true},
	}
	for _, tt := range tests {
		env, err := ReadEnvelope([]byte(tt.out))
		if (err != nil) != tt.err || env.Completion != tt.completion || env.Note != tt.note {
			t.Errorf("ReadEnvelope(%s) = completion %q, note %q, %v; want %q, %q, error %v", tt.out, env.Completion, env.Note, err, tt.completion, tt.note, tt.err)
		}
	}
}

func FuzzReadEnvelope(f *testing.F) {
	for _, s := range []string{`{"_boundary":{"completion":"partial","records":3},"_forEachErrors":[{"value":1,"error":"x"}]}`,
		`{"_pagingComplete":true}`, `[1]`, `{"a":{"_note":1}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		env, err := ReadEnvelope(b)
		if err == nil && env.Boundary != nil && env.Boundary.Completion != "" && env.Completion != env.Boundary.Completion {
			t.Errorf("completion %q disagrees with the boundary's %q", env.Completion, env.Boundary.Completion)
		}
	})
}
