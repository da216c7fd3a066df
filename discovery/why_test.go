package discovery

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCandidates(t *testing.T) {
	got := candidates("lists the user's emails; re-send an email (resend)", []string{"email", "send", "use", "zzz"})
	want := []string{"emails", "email", "send", "user"} // "resend" is not a word beginning with send
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("candidates (-want +got):\n%s", diff)
	}
}

// The why line names the words that matched where, and the shared
// action, so near-duplicates read apart.
func TestWhy(t *testing.T) {
	ix := demoIndex(t)
	hits, err := ix.Search(t.Context(), "send an email", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	why := map[string]string{}
	for _, h := range hits {
		why[h.Tool.Name] = h.Why
	}
	if got := why["MAIL_SEND_EMAIL"]; got != "matched name: send, email; action: send" {
		t.Errorf("MAIL_SEND_EMAIL why = %q", got)
	}
	if got, ok := why["MAIL_LIST_SEND_AS_ALIASES"]; ok && strings.Contains(got, "action: send") {
		t.Errorf("MAIL_LIST_SEND_AS_ALIASES why = %q: it does not send", got)
	}
	hits, _ = ix.Search(t.Context(), "cancel the meeting", "", 1)
	if len(hits) == 0 || hits[0].Why != "matched name: delete (for cancel), event (for meeting); action: delete" {
		t.Errorf("Search(cancel the meeting) = %v", hits)
	}
	hits, _ = ix.Search(t.Context(), "vacaton", "", 1) // the typo fallback
	if len(hits) == 0 || hits[0].Why != "matched a word within one edit" {
		t.Errorf("Search(vacaton) = %v", hits)
	}
}

// candidates are words of the text that begin with one of the prefixes.
func FuzzCandidates(f *testing.F) {
	f.Add("lists the user's emails; re-send", "email send")
	f.Add("ünïcode wörds, ß", "wö ß")
	f.Fuzz(func(t *testing.T, text, prefixes string) {
		lower := strings.ToLower(text)
		ps := strings.Fields(strings.ToLower(prefixes))
		for _, w := range candidates(lower, ps) {
			if !strings.Contains(lower, w) || !slices.ContainsFunc(ps, func(p string) bool { return strings.HasPrefix(w, p) }) {
				t.Errorf("candidate %q: not a word of %q beginning with one of %q", w, lower, ps)
			}
		}
	})
}
