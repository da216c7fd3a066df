package tools

import (
	"strings"
	"testing"
)

// The provider's words on the callback keep no format character (a
// bidi override such as U+202E would turn the page's text around, a
// zero-width space hide a word), no control character or quote, and are
// masked before they are cut.
func TestOAuthCallbackFailureText(t *testing.T) {
	secret := "sec-0123456789abcdef0123456789"
	got := OAuthCallbackFailure("access_denied", "use \u202eTNUOCCA KROW\u202c or \u200bthis\x00 \"x\" "+secret, NewScrubber(secret))
	for _, bad := range []string{"\u202e", "\u202c", "\u200b", "\x00", `"x"`, secret} {
		if strings.Contains(got, bad) {
			t.Errorf("%q kept %q", got, bad)
		}
	}
	if !strings.Contains(got, "access was denied") || !strings.Contains(got, "TNUOCCA KROW") || !strings.Contains(got, "[redacted]") {
		t.Errorf("the words: %q", got)
	}
}
