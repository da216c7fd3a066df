package tools

import (
	"net/url"
	"testing"
)

func TestRedactURL(t *testing.T) {
	tests := map[string]string{
		"/a?limit=5":                             "/a?limit=5",
		"/a?api_key=s1&limit=5":                  "/a?api_key=REDACTED&limit=5",
		"/a?access_token=s1":                     "/a?access_token=REDACTED",
		"/a?X-Amz-Signature=abc":                 "/a?X-Amz-Signature=REDACTED",
		"/a?custom=s1":                           "/a?custom=REDACTED", // named in extra
		"/a?next=https%3A%2F%2Fx%2F%3Fk%3DPLANT": "/a?next=REDACTED",   // holds a secret value
	}
	for in, want := range tests {
		u, _ := url.Parse(in)
		if got := RedactURL(u, []string{"custom"}, "PLANT"); got != want {
			t.Errorf("RedactURL(%s) = %s; want %s", in, got, want)
		}
	}
}

// The ActivityStore contract is tested in tools/activitytest, against
// the bolt store and the Redis one.
