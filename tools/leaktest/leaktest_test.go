package leaktest

import (
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

const secret = "ORGBEARER/Zq+7781aa"

func allEscaped(s, format string) string {
	var b strings.Builder
	for _, r := range s {
		fmt.Fprintf(&b, format, r)
	}
	return b.String()
}

// The hunter finds a planted secret in every form it hunts.
func TestFindPlantedLeaks(t *testing.T) {
	dump, _ := json.Marshal(map[string][]string{"Authorization": {"Bearer " + secret}, "X-Other": {"x"}})
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	planted := map[string]string{
		"raw":                          "key " + secret,
		"JSON \\/":                     `{"k":"` + strings.ReplaceAll(secret, "/", `\/`) + `"}`,
		"every character \\u, lower":   allEscaped(secret, `\u%04x`),
		"every character \\u, upper":   allEscaped(secret, `\u%04X`),
		"some characters \\u":          "ORGB\\u0045ARER\\/Zq+7781aa",
		"percent, mixed":               "?key=ORGBEARER/Zq%2B7781aa",
		"percent, mixed, lower":        "?key=ORGBEARER%2fZq%2b7781aa",
		"percent, every character":     "?key=" + allEscaped(secret, "%%%02X"),
		"base64 alone":                 b64(secret),
		"base64 alone, unpadded":       strings.TrimRight(b64(secret), "="),
		"base64url alone":              base64.URLEncoding.EncodeToString([]byte(secret)),
		"base64 at offset 1":           b64("x" + secret + "tail"),
		"base64 at offset 2":           b64("xy" + secret + "tail"),
		"base64 of the whole header":   b64("Bearer " + secret),
		"base64url of the header":      base64.RawURLEncoding.EncodeToString([]byte("Bearer " + secret)),
		"base64 of a JSON dump":        string(b64(string(dump))),
		"base64 of a query, escaped":   b64("/v1/items?api_key=" + url.QueryEscape(secret) + "&page=2"),
		"base64 of a PHP JSON dump":    b64(`{"k":"` + strings.ReplaceAll(secret, "/", `\/`) + `"}`),
		"base64 inside JSON, PHP-like": `{"e":"` + strings.ReplaceAll(b64("Bearer "+secret), "/", `\/`) + `"}`,
		"base64 inside a URL, escaped": "?h=" + url.QueryEscape(b64("Bearer "+secret)),
	}
	for name, text := range planted {
		if got := Find([]byte(text), secret); len(got) == 0 {
			t.Errorf("%s: %q not found in %q", name, secret, text)
		}
	}
}

// FindAnyCase finds the secret lower-, upper- and mixed-cased in the
// escaped readings too; Find does not.
func TestFindAnyCase(t *testing.T) {
	lower, upper := strings.ToLower(secret), strings.ToUpper(secret)
	planted := map[string]string{
		"lower":               "key " + lower,
		"upper":               "key " + upper,
		"mixed":               "key oRgBeArEr/zQ+7781AA",
		"upper, percent":      "?key=" + url.QueryEscape(upper),
		"lower, \\u":          allEscaped(lower, `\u%04x`),
		"upper, base64":       base64.StdEncoding.EncodeToString([]byte(upper)),
		"mixed, JSON \\/":     `{"k":"orgbearer\/ZQ+7781aa"}`,
		"the secret as it is": "key " + secret,
	}
	for name, text := range planted {
		h := New([]byte(text))
		if got := h.FindAnyCase(secret); len(got) == 0 {
			t.Errorf("%s: %q not found in %q", name, secret, text)
		}
		if got := h.Find(secret); len(got) > 0 && name != "the secret as it is" {
			t.Errorf("%s: Find found a case-changed spelling: %v", name, got)
		}
	}
	if got := New([]byte("key ORGBEARER/Zq+7781ab")).FindAnyCase(secret); len(got) > 0 {
		t.Errorf("another string found: %v", got)
	}
}

// It finds nothing where the secret is not, nor in the forms trawl does
// not mask (and README says so).
func TestFindNothing(t *testing.T) {
	for name, text := range map[string]string{
		"unrelated":    `{"items":[{"id":"ord_1","note":"Bearer of good news"}]}`,
		"one changed":  "ORGBEARER/Zq+7781ab",
		"masked":       "Bearer [redacted] and QmVhcmVyI[redacted]==",
		"reversed":     reverse(secret),
		"hex":          hex.EncodeToString([]byte(secret)),
		"a prefix":     secret[:len(secret)-1],
		"base64 of it": base64.StdEncoding.EncodeToString([]byte(secret[1:])),
	} {
		if got := Find([]byte(text), secret); len(got) > 0 {
			t.Errorf("%s: found %v in %q", name, got, text)
		}
	}
}

// FindTransformed finds the spellings trawl does not mask — and only
// them: a secret raw or in a masked form is Find's.
func TestFindTransformed(t *testing.T) {
	h := hex.EncodeToString([]byte(secret))
	for name, text := range map[string]string{
		"reversed":                      "x " + reverse(secret) + " y",
		"hex":                           "k=" + h,
		"upper-case hex":                strings.ToUpper(h),
		"hex inside longer hex":         hex.EncodeToString([]byte("Bearer " + secret)),
		"base32":                        base32.StdEncoding.EncodeToString([]byte(secret)),
		"base32 of a longer string":     base32.StdEncoding.EncodeToString([]byte(secret + " and more")),
		"base32, extended hex alphabet": base32.HexEncoding.EncodeToString([]byte(secret)),
		"hex, percent-escaped":          allEscaped(h, "%%%02X"),
		"reversed, inside base64":       base64.StdEncoding.EncodeToString([]byte("x" + reverse(secret))),
	} {
		if got := New([]byte(text)).FindTransformed(secret); len(got) == 0 {
			t.Errorf("%s: not found in %q", name, text)
		}
	}
	for name, text := range map[string]string{
		"raw":    "key " + secret,
		"base64": base64.StdEncoding.EncodeToString([]byte(secret)),
		"other":  hex.EncodeToString([]byte(secret[1:])) + reverse(secret[1:]),
	} {
		if got := New([]byte(text)).FindTransformed(secret); len(got) > 0 {
			t.Errorf("%s: found %v in %q", name, got, text)
		}
	}
}

func reverse(s string) string {
	b := []byte(s)
	for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
		b[i], b[j] = b[j], b[i]
	}
	return string(b)
}
